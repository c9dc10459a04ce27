#include "replay/snapshot_state.h"

namespace gpumem::replay {

std::vector<SegmentInfo> fromSnapshotSegments(const std::vector<SnapshotSegment>& segments)
{
    std::vector<SegmentInfo> out;
    out.reserve(segments.size());
    for (const auto& s : segments) {
        SegmentInfo seg { s.address, s.totalSize, s.stream, s.small, s.expandable, {} };
        for (const auto& b : s.blocks) {
            BlockState st = b.state == SnapshotBlockState::ActiveAllocated ? BlockState::Allocated
                : b.state == SnapshotBlockState::ActivePendingFree         ? BlockState::PendingFree
                                                                           : BlockState::Free;
            seg.blocks.push_back(BlockInfo { b.address, b.size, st == BlockState::Free ? 0 : b.requestedSize, st });
        }
        out.push_back(std::move(seg));
    }
    return out;
}

} // namespace gpumem::replay
