#pragma once
// The offline planner (allocators.md §6.1–6.2): before the replay the Replayer hands it the whole
// request sequence (needsPlan()/plan()); it rounds every request to `alignment` (default 512 B, like
// `ideal`), plans one arena with greedy-by-size (replay/offset_planner.h; blocks live before the
// window are placed first) and then serves the k-th allocate() at its planned offset. It is what an
// allocator that knew the future could reach without moving blocks, to set beside `ideal` (the lower
// bound, max live bytes) and the online policies.
//
// Reserved [choice]: the high-water mark of planned offset + size over the blocks allocated so far —
// an arena that only grows, so its peak is the planned arena once every block has been handed out.
// releaseCached() trims it to the highest live block. No device calls (like `ideal`). With a capacity,
// a request whose planned block ends beyond it fails (OOM); the plan is not redone, later requests keep
// their planned offsets.
//
// It cannot run online: an allocate() beyond its plan, or one whose size differs from the plan, throws
// gpumem::Error (a caller bug, not a trace problem). Not thread-safe.
#include "replay/policies/simple_block_policy.h"

#include <set>
#include <vector>

namespace gpumem::replay {

class OptimalPolicy final : public SimpleBlockPolicy {
public:
    explicit OptimalPolicy(SimulatedDevice& device, Bytes alignment = 512);
    // The planned arena (bytes).
    Bytes plannedArena() const { return m_arena; }
    // Base of the simulated addresses: the k-th request's block sits at base() + its planned offset.
    static constexpr Address base() { return Address(1) << 56; }

private:
    bool doNeedsPlan() const override { return true; }
    void doPlan(const RequestPlan& requests) override;
    std::optional<Address> obtain(Bytes size, StreamKey stream) override;
    void release(Address address, Bytes size, StreamKey stream) override;
    Bytes reservedNow() const override { return m_high; }
    void doReleaseCached() override;
    Bytes m_alignment;
    std::vector<Bytes> m_offsets, m_sizes;
    Bytes m_arena = 0;
    std::size_t m_next = 0; // the next allocate() is request m_next of the plan
    bool m_planned = false;
    Bytes m_high = 0;
    std::multiset<Bytes> m_liveEnds; // planned offset + size of the live blocks
};

} // namespace gpumem::replay
