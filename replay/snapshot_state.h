#pragma once
// Bridges the snapshot importer's view of the allocator state (importers/snapshot_state.h:
// a PyTorch snapshot's `segments`) and the replay engine's (PolicyState), so that a fidelity check
// can compare the simulated final state with the recorded one. Pure functions; thread-safe.
#include "importers/snapshot_state.h"
#include "replay/allocator_policy.h"

namespace gpumem::replay {

// One SegmentInfo per snapshot segment, blocks in address order with PyTorch's states mapped to
// BlockState (active_allocated → Allocated, active_pending_free → PendingFree, inactive → Free).
std::vector<SegmentInfo> fromSnapshotSegments(const std::vector<SnapshotSegment>& segments);

} // namespace gpumem::replay
