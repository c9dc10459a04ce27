#pragma once
// Offline offset planning for the Dynamic Storage Allocation problem (allocators.md §6.1): given
// blocks with sizes and lifetimes, give each an offset in one arena so that blocks live at the same
// time never overlap in address, keeping the arena (max offset + size) small. The heuristic is
// greedy-by-size (allocators.md §6.2; Pisarchyk & Lee, arXiv:2001.03288; TFLite
// delegates/gpu/common/memory_management/greedy_by_size_assignment.cc): blocks in descending size
// (ties: earlier start, then input order), each put at the start of the smallest gap between the
// time-overlapping blocks already placed that is large enough, else right after the highest of them.
// The same placement in a second order (size × lifetime) sometimes packs tighter; planOffsetsBest
// keeps the better of the two.
// Blocks marked `first` (live before a trace window) are placed before all others, in the same order.
//
// TFLite scans every placed block for each new one (O(n²)). Here the placed blocks are kept in a
// segment tree over the (compressed) time axis whose nodes hold coalesced address-range unions, so a
// placement reads O(log n) range sets instead of every time-overlapping block. Same result as the
// scan. Stateless function; thread-safe.
#include "core/types.h"

#include <cstdint>
#include <span>
#include <vector>

namespace gpumem::replay {

struct PlanBlock {
    Bytes size = 0; // bytes, already rounded to the wanted alignment (offsets are sums of sizes)
    std::uint64_t start = 0; // live on [start, end) in any integer time (e.g. event index)
    std::uint64_t end = ~std::uint64_t(0); // all ones: live to the end; must be > start
    bool first = false; // placed before every block that is not `first`
};

struct OffsetPlan {
    std::vector<Bytes> offsets; // one per input block, in input order
    Bytes arena = 0; // max(offset + size): the planned peak
};

// The order blocks are placed in. Size: greedy by size (§6.2; TFLite sorts by size only, unstably).
// Area: by size × lifetime, descending (a variant [choice]: long-lived blocks settle low first).
enum class PlanOrder : std::uint8_t { Size = 0, Area = 1 };
// `first` blocks, then by the order's key descending, then descending size, earlier start, input order.
std::vector<std::uint32_t> placementOrder(std::span<const PlanBlock> blocks, PlanOrder by);

// Places the blocks in `by` order, each at the smallest gap that fits (see above). O(n log n) to sort
// plus, per block, a merge of the O(log n) range sets of its lifetime: linear in the (coalesced)
// ranges of the blocks overlapping it in time, never in the blocks that do not (measured in
// bench/offset_plan_bench, docs/policies.md).
OffsetPlan planOffsets(std::span<const PlanBlock> blocks, PlanOrder by = PlanOrder::Size);
inline OffsetPlan planOffsetsGreedyBySize(std::span<const PlanBlock> blocks)
{
    return planOffsets(blocks, PlanOrder::Size);
}
// The smaller arena of the two orders (ties: Size) — what the `optimal` policy uses.
OffsetPlan planOffsetsBest(std::span<const PlanBlock> blocks);

// The same plan by TFLite's own procedure (greedy_by_size_assignment.cc, §6.2 step by step): for each
// block, walk every placed block in offset order, skipping those whose lifetime does not intersect.
// O(n²); the reference the tests and bench/offset_plan_bench compare the tree with.
OffsetPlan planOffsetsByScan(std::span<const PlanBlock> blocks, PlanOrder by = PlanOrder::Size);

// max over t of the bytes live at t (allocators.md §6.1 lower bound): every valid plan's arena is
// at least this.
Bytes maxLiveBytes(std::span<const PlanBlock> blocks);

} // namespace gpumem::replay
