// rmm-pool on small hand-made request sequences: alignment, best fit from the front, growth and
// try_to_expand, head blocks, and the cross-stream get_block order (allocators.md §3.1–3.2).
#include "replay_test_support.h"

#include "core/error.h"
#include "replay/policies/rmm_pool_policy.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
RmmPoolPolicy& pool(Rig& r) { return dynamic_cast<RmmPoolPolicy&>(*r.policy); }
using Blocks = std::vector<std::pair<Address, Bytes>>;
constexpr Bytes GiB = Bytes(1) << 30;
}

TEST(RmmPoolPolicy, GrowsByTheRequestOrThePoolSizeWhicheverIsLarger)
{
    Rig r("rmm-pool");
    r.alloc(1 * MiB); // pool 0: grows by 1 MiB
    r.alloc(1 * MiB); // max(1, 1)
    r.alloc(1 * MiB); // max(1, 2): 2 MiB, 1 MiB left free
    r.alloc(3 * MiB); // max(3, 4)
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 1 * MiB, 1 * MiB, 2 * MiB, 4 * MiB }));
    EXPECT_EQ(pool(r).poolSize(), 8 * MiB);
    EXPECT_EQ(r.policy->stats().allocated, 6 * MiB);
    Address small = r.alloc(1000); // aligned to 1024, from the 1 MiB left (best fit)
    EXPECT_EQ(r.block(small).size, 1024u);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 4u);
}

TEST(RmmPoolPolicy, BestFitCarvesFromTheFrontOfTheSmallestLowestBlock)
{
    Rig r("rmm-pool:initial_pool_size:16MiB");
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 16 * MiB })); // at construction
    Address a = r.alloc(1 * MiB);
    r.alloc(1 * MiB);
    Address b = r.alloc(2 * MiB);
    r.alloc(1 * MiB);
    Address c = r.alloc(1 * MiB);
    r.alloc(1 * MiB);
    r.free(a);
    r.free(b);
    r.free(c);
    EXPECT_EQ(
        pool(r).freeBlocks(0), Blocks({ { a, 1 * MiB }, { b, 2 * MiB }, { c, 1 * MiB }, { c + 2 * MiB, 9 * MiB } }));
    EXPECT_EQ(r.alloc(1 * MiB), a);
    EXPECT_EQ(r.alloc(1 * MiB), c);
    EXPECT_EQ(r.alloc(3 * MiB / 2), b); // the front of the 2 MiB block
    EXPECT_EQ(pool(r).freeBlocks(0), Blocks({ { b + 3 * MiB / 2, MiB / 2 }, { c + 2 * MiB, 9 * MiB } }));
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(RmmPoolPolicy, AHeadBlockIsNeverMergedOntoItsPredecessor)
{
    // Two upstream allocations that the device places back to back.
    Rig r("rmm-pool");
    const Address base = Address(1) << 40;
    r.device.addAddressHint(base, 1 * MiB);
    r.device.addAddressHint(base + 1 * MiB, 1 * MiB);
    Address a = r.alloc(1 * MiB);
    Address b = r.alloc(1 * MiB);
    ASSERT_EQ(a, base);
    ASSERT_EQ(b, base + 1 * MiB);
    r.free(a);
    r.free(b); // contiguous with a, but b starts an upstream allocation
    EXPECT_EQ(pool(r).freeBlocks(0), Blocks({ { a, 1 * MiB }, { b, 1 * MiB } }));
    r.alloc(2 * MiB); // cannot use them: the pool grows by max(2, 2) MiB
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 1 * MiB, 1 * MiB, 2 * MiB }));
    // A non-head block does merge onto its predecessor: carve b into two and free them.
    Address b1 = r.alloc(MiB / 2); // best fit: a (lowest of the two 1 MiB blocks)
    Address b2 = r.alloc(MiB / 2);
    EXPECT_EQ(b1, a);
    EXPECT_EQ(b2, a + MiB / 2);
    r.free(b1);
    r.free(b2);
    EXPECT_EQ(pool(r).freeBlocks(0), Blocks({ { a, 1 * MiB }, { b, 1 * MiB } }));
}

TEST(RmmPoolPolicy, AnotherStreamsBlockIsTakenAloneAndItsRemainderStaysThere)
{
    Rig r("rmm-pool");
    Address a = r.alloc(4 * MiB, 1);
    r.free(a, 1); // stream 1's list: [a, 4 MiB)
    Address b = r.alloc(1 * MiB, 2); // stream 2 has no list: takes from stream 1's
    EXPECT_EQ(b, a);
    EXPECT_EQ(pool(r).freeBlocks(1), Blocks({ { a + 1 * MiB, 3 * MiB } }));
    EXPECT_TRUE(pool(r).freeBlocks(2).empty());
    r.free(b, 2); // the deallocating stream's list
    EXPECT_EQ(pool(r).freeBlocks(2), Blocks({ { a, 1 * MiB } }));
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(RmmPoolPolicy, OtherStreamsAreSearchedInTheOrderTheyAppearedNotByBestFit)
{
    Rig r("rmm-pool:initial_pool_size:8MiB");
    Address big = r.alloc(4 * MiB, 1);
    Address small = r.alloc(1 * MiB, 3);
    r.alloc(3 * MiB, 3);
    r.free(big, 1); // stream 1: 4 MiB
    r.free(small, 3); // stream 3: 1 MiB (the better fit)
    EXPECT_EQ(r.alloc(1 * MiB, 2), big); // stream 1 appeared first (after stream 0's empty list)
}

TEST(RmmPoolPolicy, WhenNoSingleListFitsOtherListsAreMergedInOneAtATime)
{
    Rig r("rmm-pool:initial_pool_size:2MiB");
    Address x = r.alloc(1 * MiB, 1); // from stream 0's list
    Address y = r.alloc(1 * MiB, 3);
    r.free(x, 1);
    r.free(y, 3);
    // 2 MiB on stream 2: neither 1 MiB block fits alone; merging stream 1's list gives 1 MiB, then
    // stream 3's coalesces with it (y is not a head) into 2 MiB.
    EXPECT_EQ(r.alloc(2 * MiB, 2), x);
    EXPECT_TRUE(pool(r).freeBlocks(1).empty());
    EXPECT_TRUE(pool(r).freeBlocks(3).empty());
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
    r.free(x, 2);
    EXPECT_EQ(pool(r).freeBlocks(2), Blocks({ { x, 2 * MiB } }));
}

TEST(RmmPoolPolicy, MaximumPoolSizeGrowsHalfwayToTheLimitAndRefusesBeyondIt)
{
    Rig r("rmm-pool:maximum_pool_size:10MiB");
    EXPECT_EQ(pool(r).sizeToGrow(1 * MiB), 5 * MiB); // max(1, 10 / 2)
    r.alloc(1 * MiB);
    r.alloc(5 * MiB); // 4 MiB free does not fit: remaining 5 MiB, max(5, 2.5)
    r.alloc(1 * MiB); // from the first allocation, 3 MiB left there
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 5 * MiB, 5 * MiB }));
    EXPECT_EQ(pool(r).sizeToGrow(256), 0u);
    EXPECT_FALSE(r.policy->allocate(4 * MiB, 0).has_value());
    EXPECT_EQ(r.device.counters().failedCalls, 0u); // refused without asking the device
}

TEST(RmmPoolPolicy, TryToExpandHalvesTheAttemptDownToTheRequest)
{
    Rig r("rmm-pool", 14 * MiB);
    r.alloc(4 * MiB); // 4
    r.alloc(1 * MiB); // max(1, 4) = 4; 6 MiB left on the device
    r.alloc(4 * MiB); // max(4, 8) = 8 refused, then 4
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 4 * MiB, 4 * MiB, 4 * MiB }));
    EXPECT_EQ(r.device.counters().failedCalls, 1u);
    // 4 MiB with 3 MiB free and 2 MiB left on the device: max(4, 12) = 12, 6, then 4 are refused.
    EXPECT_FALSE(r.policy->allocate(4 * MiB, 0).has_value());
    EXPECT_EQ(r.device.counters().failedCalls, 4u);
}

TEST(RmmPoolPolicy, NeverReleasesUntilReleaseCachedAndThenOnlyUnusedUpstreamAllocations)
{
    Rig r("rmm-pool");
    Address a = r.alloc(1 * MiB);
    Address b = r.alloc(1 * MiB);
    r.free(a);
    EXPECT_EQ(r.policy->stats().reserved, 2 * MiB);
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 1 * MiB }));
    EXPECT_EQ(pool(r).upstreamAllocations(), Blocks({ { b, 1 * MiB } }));
    EXPECT_TRUE(pool(r).freeBlocks(0).empty());
}

TEST(RmmPoolPolicy, Version2302StartsWithHalfTheDevice)
{
    Rig r("rmm-pool@23.02", 0, 80 * GiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 40 * GiB }));
    Rig capped("rmm-pool@23.02", 30 * GiB, 80 * GiB); // min(free 30, total/2 40)
    EXPECT_EQ(capped.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 30 * GiB }));
    EXPECT_EQ(capped.policy->name(), "rmm-pool@23.02");
}

TEST(RmmPoolPolicy, RefusesBadOptions)
{
    SimulatedDevice d;
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-pool:initial_pool_size:1000"), d), UsageError); // not ×256
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-pool:initial_pool_size:2MiB,maximum_pool_size:1MiB"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-pool@22.10"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-pool:release_threshold:0"), d), UsageError);
    // Found by policy_fuzzer: an initial pool the device cannot hold is a usage error, not a crash.
    SimulatedDevice small(1 * MiB);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-pool:initial_pool_size:2MiB"), small), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:initial_pool_size:2MiB"), small), UsageError);
}
