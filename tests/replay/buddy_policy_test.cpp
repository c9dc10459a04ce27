// Binary buddy (allocators.md §6): power-of-two rounding, splitting the smallest larger block into
// buddies, merging only with the buddy, per-2^k segment growth.
#include "replay/policies/buddy_policy.h"
#include "core/error.h"
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
std::vector<std::pair<Bytes, BlockState>> layout(const SegmentInfo& seg, Address base)
{
    std::vector<std::pair<Bytes, BlockState>> out;
    for (const auto& b : seg.blocks) {
        EXPECT_EQ(b.address - base, [&] {
            Bytes o = 0;
            for (const auto& [size, state] : out)
                o += size;
            return o;
        }());
        out.push_back({ b.size, b.state });
    }
    return out;
}
constexpr auto F = BlockState::Free;
constexpr auto A = BlockState::Allocated;
} // namespace

TEST(BuddyPolicy, SplitsTheSmallestLargerBlockIntoBuddiesKeepingTheLowerHalf)
{
    Rig r("buddy:min_segment:16KiB");
    Address a = r.alloc(1000); // 1 KiB: 16K → 8+8 → 4+4 → 2+2 → 1+1
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 16384 }));
    using V = std::vector<std::pair<Bytes, BlockState>>;
    EXPECT_EQ(layout(r.segmentOf(a), a), V({ { 1024, A }, { 1024, F }, { 2048, F }, { 4096, F }, { 8192, F } }));
    Address b = r.alloc(3000); // 4 KiB: the free 4 KiB block at 4K
    EXPECT_EQ(b - a, 4096u);
    Address c = r.alloc(600); // 1 KiB: the free buddy of a
    EXPECT_EQ(c - a, 1024u);
    EXPECT_EQ(r.policy->stats().allocated, 1024u + 4096u + 1024u);
    EXPECT_EQ(r.policy->stats().requested, 1000u + 3000u + 600u);
    EXPECT_EQ(layout(r.segmentOf(a), a), V({ { 1024, A }, { 1024, A }, { 2048, F }, { 4096, A }, { 8192, F } }));
}

TEST(BuddyPolicy, MergesOnlyWithItsBuddy)
{
    Rig r("buddy:min_segment:4KiB");
    Address a0 = r.alloc(1024);
    Address a1 = r.alloc(1024);
    Address a2 = r.alloc(1024);
    Address a3 = r.alloc(1024);
    r.free(a1);
    r.free(a2); // adjacent to a1 but not its buddy: no merge
    using V = std::vector<std::pair<Bytes, BlockState>>;
    EXPECT_EQ(layout(r.segmentOf(a0), a0), V({ { 1024, A }, { 1024, F }, { 1024, F }, { 1024, A } }));
    r.free(a0); // a0 + a1 → 2K; its buddy [2K, 4K) is still split
    EXPECT_EQ(layout(r.segmentOf(a0), a0), V({ { 2048, F }, { 1024, F }, { 1024, A } }));
    r.free(a3); // a3 + a2 → 2K, + [0, 2K) → the whole 4K segment
    EXPECT_EQ(layout(r.segmentOf(a0), a0), V({ { 4096, F } }));
    EXPECT_EQ(r.policy->fragmentation().largestFree, 4096u);
    EXPECT_EQ(r.policy->fragmentation().inactiveSplit, 0u);
}

TEST(BuddyPolicy, GrowsByPowerOfTwoSegmentsAndReleasesWholeFreeOnes)
{
    Rig r("buddy");
    Address a = r.alloc(3 * MiB); // 4 MiB block in a new 4 MiB segment
    Address b = r.alloc(100); // 512 B in a new 2 MiB segment (min_segment)
    Address c = r.alloc(5 * MiB + 1); // 8 MiB
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 4 * MiB, 2 * MiB, 8 * MiB }));
    EXPECT_EQ(r.block(c).size, 8 * MiB);
    EXPECT_EQ(r.policy->stats().allocated, 4 * MiB + 512 + 8 * MiB);
    r.free(a);
    r.free(c);
    // Freed blocks stay cached: a 2 MiB request splits the free 4 MiB segment.
    Address d = r.alloc(2 * MiB);
    EXPECT_EQ(d, a);
    EXPECT_EQ(r.device.counters().mallocCalls, 3u);
    r.policy->releaseCached(); // only the 8 MiB segment is wholly free
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 8 * MiB }));
    r.free(b);
    r.free(d);
    r.policy->releaseCached();
    EXPECT_EQ(r.device.counters().reserved, 0u);
}

TEST(BuddyPolicy, AnOutOfMemoryRetryGivesBackCachedSegmentsFirst)
{
    Rig r("buddy", 8 * MiB);
    Address a = r.alloc(4 * MiB);
    r.free(a); // cached 4 MiB segment
    Address b = r.alloc(8 * MiB); // 4 + 8 > 8: release the cached segment, then allocate
    EXPECT_NE(b, 0u);
    EXPECT_EQ(r.policy->stats().allocRetries, 1u);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 4 * MiB }));
    EXPECT_FALSE(r.policy->allocate(1, 0).has_value());
    EXPECT_EQ(r.policy->stats().ooms, 1u);
}

TEST(BuddyPolicy, RoundsToPowersOfTwoAboveMinOrder)
{
    Rig r("buddy:min_order:4KiB");
    auto& buddy = dynamic_cast<BuddyPolicy&>(*r.policy);
    EXPECT_EQ(buddy.roundSize(1), 4096u);
    EXPECT_EQ(buddy.roundSize(4097), 8192u);
    EXPECT_EQ(buddy.roundSize(3 * MiB), 4 * MiB);
    EXPECT_EQ(r.policy->name(), "buddy:min_order:4096");
    EXPECT_THROW(validatePolicySpec(parsePolicySpec("buddy:min_order:256")), UsageError);
    EXPECT_THROW(validatePolicySpec(parsePolicySpec("buddy:min_order:3000")), UsageError);
    EXPECT_THROW(validatePolicySpec(parsePolicySpec("buddy:min_segment:1KiB,min_order:2KiB")), UsageError);
}
