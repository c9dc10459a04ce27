// tf-bfc on small hand-made request sequences: bins, the split rule and its limit, Extend's region
// sizes and back-off, garbage collection and coalescing (allocators.md §2).
#include "replay_test_support.h"

#include "core/error.h"
#include "replay/policies/tf_bfc_policy.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
TfBfcPolicy& bfc(Rig& r) { return dynamic_cast<TfBfcPolicy&>(*r.policy); }
constexpr Bytes GiB = Bytes(1) << 30;
}

TEST(TfBfcPolicy, BinsHoldChunksOfSize256TimesAPowerOfTwoAndTheLastIsOpenEnded)
{
    EXPECT_EQ(TfBfcPolicy::binFor(1), 0);
    EXPECT_EQ(TfBfcPolicy::binFor(511), 0);
    EXPECT_EQ(TfBfcPolicy::binFor(512), 1);
    EXPECT_EQ(TfBfcPolicy::binFor(1023), 1);
    EXPECT_EQ(TfBfcPolicy::binFor(1024), 2);
    EXPECT_EQ(TfBfcPolicy::binFor(2 * MiB), 13);
    EXPECT_EQ(TfBfcPolicy::binFor(256 * MiB - 256), 19);
    EXPECT_EQ(TfBfcPolicy::binFor(256 * MiB), 20);
    EXPECT_EQ(TfBfcPolicy::binFor(64 * GiB), 20);
    EXPECT_EQ(TfBfcPolicy::roundedBytes(1), 256u);
    EXPECT_EQ(TfBfcPolicy::roundedBytes(257), 512u);
}

TEST(TfBfcPolicy, AllowGrowthExtendsByRegionsOf2Then4Then8MiB)
{
    Rig r("tf-bfc");
    EXPECT_EQ(bfc(r).nextRegionSize(), 2 * MiB);
    Address a = r.alloc(1 * MiB); // region 2 MiB, split: 1 MiB free left
    r.alloc(3 * MiB / 2); // the 1 MiB chunk is too small: region 4 MiB
    r.alloc(3 * MiB); // free chunks of 1 and 2.5 MiB: region 8 MiB
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 4 * MiB, 8 * MiB }));
    EXPECT_EQ(bfc(r).nextRegionSize(), 16 * MiB);
    EXPECT_EQ(r.policy->stats().reserved, 14 * MiB);
    EXPECT_EQ(r.policy->stats().allocated, 11 * MiB / 2);
    EXPECT_EQ(bfc(r).binOf(a + 1 * MiB), 12); // the 1 MiB leftover of the first region
    EXPECT_EQ(r.policy->describeState().segments.size(), 3u); // regions never merge
}

TEST(TfBfcPolicy, ALargeRequestDoublesTheRegionSizeUntilItFitsWithoutDoublingAgain)
{
    Rig r("tf-bfc");
    r.alloc(5 * MiB); // 2 → 4 → 8 MiB; increased, so no extra doubling
    EXPECT_EQ(bfc(r).nextRegionSize(), 8 * MiB);
    r.alloc(5 * MiB); // 3 MiB left does not fit: another 8 MiB region, then 16
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 8 * MiB, 8 * MiB }));
    EXPECT_EQ(bfc(r).nextRegionSize(), 16 * MiB);
}

TEST(TfBfcPolicy, WithoutAllowGrowthTheFirstExtendTakesTheWholeMemoryLimit)
{
    Rig r("tf-bfc:allow_growth:false", 0, 1 * GiB);
    r.alloc(1000);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 1 * GiB }));
    EXPECT_EQ(r.policy->stats().allocated, 1024u);
    Rig capped("tf-bfc:allow_growth:false", 100 * MiB, 1 * GiB); // the limit is the capacity
    capped.alloc(1000);
    EXPECT_EQ(capped.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 100 * MiB }));
}

TEST(TfBfcPolicy, ExtendClampsTheRegionToTheMemoryLeftUnderTheLimit)
{
    Rig r("tf-bfc", 10 * MiB);
    r.alloc(1 * MiB);
    r.alloc(3 * MiB / 2);
    r.alloc(3 * MiB); // wants 8 MiB, 4 MiB left under the limit
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 4 * MiB, 4 * MiB }));
    // Free chunks of 1, 2.5 and 1 MiB; 0 B left under the limit: Extend fails without a device call.
    EXPECT_FALSE(r.policy->allocate(3 * MiB, 0));
    EXPECT_EQ(r.device.counters().failedCalls, 0u);
}

TEST(TfBfcPolicy, ARefusedExtendBackpedalsBy0Point9UntilTheDeviceAccepts)
{
    // memory_limit 1 GiB on a device of 100 MiB: 1 GiB, 0.9 GiB, … (0.9f, rounded up to 256 B) until
    // 95166208 B (90.76 MiB) fits, after 23 smaller sizes.
    Rig r("tf-bfc:allow_growth:false,memory_limit:1GiB", 100 * MiB, 1 * GiB);
    Address a = r.alloc(1 * MiB);
    EXPECT_EQ(r.segmentOf(a).size, 95166208u);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 95166464 })); // the device's 512 B
    EXPECT_EQ(bfc(r).counters().backoffs, 23u);
    EXPECT_EQ(r.device.counters().failedCalls, 23u); // 1 GiB and 22 smaller sizes
}

TEST(TfBfcPolicy, BackpedalHappensOnlyOncePerAllocator)
{
    Rig r("tf-bfc:allow_growth:false,memory_limit:1GiB", 100 * MiB, 1 * GiB);
    r.alloc(90 * MiB); // the first Extend backpedals to 95166208 B
    // 9.2 MiB are left on the device, but the next Extend tries min(2 GiB, limit − pool) once, is
    // refused and does not backpedal again (started_backpedal_): out of memory.
    EXPECT_FALSE(r.policy->allocate(2 * MiB, 0).has_value());
    EXPECT_EQ(r.device.counters().failedCalls, 24u);
    EXPECT_EQ(r.policy->stats().ooms, 1u);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(TfBfcPolicy, SplitsOnlyAChunkAtLeastTwiceTheRequest)
{
    Rig split("tf-bfc");
    Address a = split.alloc(1 * MiB); // 2 MiB region = 2 × 1 MiB: split
    EXPECT_EQ(split.block(a).size, 1 * MiB);
    EXPECT_EQ(split.policy->stats().allocated, 1 * MiB);
    Rig whole("tf-bfc");
    Address b = whole.alloc(1 * MiB + 1); // rounded 1 MiB + 256: 2 MiB < twice, 1 MiB − 256 left < 128 MiB
    EXPECT_EQ(whole.block(b).size, 2 * MiB);
    EXPECT_EQ(whole.block(b).requested, 1 * MiB + 1);
    EXPECT_EQ(whole.policy->stats().allocated, 2 * MiB); // bytes_in_use counts the whole chunk
}

TEST(TfBfcPolicy, SplitsWhenTheLeftoverReachesMaxInternalFragmentation)
{
    // A 1 GiB chunk and a 600 MiB request: less than twice, 424 MiB would be left over.
    auto sizeOf600MiB = [](const std::string& spec) {
        Rig r(spec, 0, 1 * GiB);
        return r.block(r.alloc(600 * MiB)).size;
    };
    EXPECT_EQ(sizeOf600MiB("tf-bfc:allow_growth:false"), 600 * MiB); // default 128 MiB
    EXPECT_EQ(sizeOf600MiB("tf-bfc:allow_growth:false,max_internal_fragmentation_bytes:424MiB"), 600 * MiB);
    EXPECT_EQ(sizeOf600MiB("tf-bfc:allow_growth:false,max_internal_fragmentation_bytes:425MiB"), 1 * GiB);
    // fragmentation_fraction × memory limit replaces it: 0.5 × 1 GiB = 512 MiB > 424 MiB.
    EXPECT_EQ(sizeOf600MiB("tf-bfc:allow_growth:false,fragmentation_fraction:0.5"), 1 * GiB);
}

TEST(TfBfcPolicy, BestFitTakesTheSmallestChunkThenTheLowestAddress)
{
    Rig r("tf-bfc:allow_growth:false", 0, 64 * MiB);
    Address a = r.alloc(1 * MiB);
    r.alloc(1 * MiB);
    Address b = r.alloc(2 * MiB);
    r.alloc(1 * MiB);
    Address c = r.alloc(1 * MiB);
    r.alloc(1 * MiB);
    r.free(b); // free chunks: a 1 MiB, b 2 MiB, c 1 MiB, the tail 57 MiB
    r.free(c);
    r.free(a);
    EXPECT_EQ(r.alloc(1 * MiB), a); // 1 MiB chunks at a and c: the lower one
    EXPECT_EQ(r.alloc(1 * MiB), c);
    EXPECT_EQ(r.alloc(1 * MiB), b); // then the 2 MiB chunk, split
    EXPECT_EQ(r.block(b + 1 * MiB).state, BlockState::Free);
}

TEST(TfBfcPolicy, FreeCoalescesWithTheNextThenThePreviousChunk)
{
    Rig r("tf-bfc:allow_growth:false", 0, 64 * MiB);
    Address a = r.alloc(1 * MiB);
    Address b = r.alloc(1 * MiB);
    Address c = r.alloc(1 * MiB);
    r.free(b);
    auto f = r.policy->fragmentation(); // free: b (1 MiB) and the tail (61 MiB)
    EXPECT_EQ(f.freeBytes, 62 * MiB);
    EXPECT_EQ(f.largestFree, 61 * MiB);
    EXPECT_DOUBLE_EQ(f.external(), 1.0 / 62.0); // BFC's (free − largest) / free
    r.free(a); // a absorbs b
    EXPECT_EQ(r.block(a).size, 2 * MiB);
    EXPECT_EQ(bfc(r).binOf(a), 13);
    EXPECT_EQ(bfc(r).binOf(b), -1);
    r.free(c); // c absorbs the tail, then a absorbs c
    auto segs = r.policy->describeState().segments;
    ASSERT_EQ(segs.size(), 1u);
    ASSERT_EQ(segs[0].blocks.size(), 1u);
    EXPECT_EQ(segs[0].blocks[0].size, 64 * MiB);
    EXPECT_EQ(bfc(r).binOf(a), 18);
}

TEST(TfBfcPolicy, GarbageCollectionFreesEmptyRegionsAfterAFailedExtend)
{
    auto run = [](const std::string& spec) {
        auto r = std::make_unique<Rig>(spec, 10 * MiB);
        Address a = r->alloc(1 * MiB); // region 2 MiB
        Address b = r->alloc(3 * MiB / 2); // region 4 MiB
        r->free(a);
        r->free(b);
        return r;
    };
    auto gc = run("tf-bfc");
    // 6 MiB: no chunk, 4 MiB left under the limit; GC frees both empty regions (6 MiB), Extend
    // takes an 8 MiB region (the region size has reached 8 MiB).
    EXPECT_TRUE(gc->policy->allocate(6 * MiB, 0).has_value());
    EXPECT_EQ(gc->log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB, 4 * MiB }));
    EXPECT_EQ(gc->log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 4 * MiB, 8 * MiB }));
    EXPECT_EQ(dynamic_cast<TfBfcPolicy&>(*gc->policy).counters().gcRegionsFreed, 2u);
    auto noGc = run("tf-bfc:garbage_collection:false");
    EXPECT_FALSE(noGc->policy->allocate(6 * MiB, 0).has_value());
    EXPECT_EQ(noGc->log.count(EventKind::SegmentFree), 0u);
    EXPECT_EQ(noGc->policy->stats().ooms, 1u);
}

TEST(TfBfcPolicy, GarbageCollectionKeepsRegionsInUseAndGivesUpWhenFreeingCannotHelp)
{
    Rig r("tf-bfc", 10 * MiB);
    Address a = r.alloc(1 * MiB); // region 2 MiB
    r.alloc(3 * MiB / 2); // region 4 MiB, stays in use
    r.free(a);
    // 7 MiB: 4 MiB left + 2 MiB of empty regions < 7 MiB: nothing is freed.
    EXPECT_FALSE(r.policy->allocate(7 * MiB, 0).has_value());
    EXPECT_EQ(r.log.count(EventKind::SegmentFree), 0u);
    // 5 MiB: 4 + 2 ≥ 5: the empty 2 MiB region goes, an 6 MiB region (the limit) comes.
    EXPECT_TRUE(r.policy->allocate(5 * MiB, 0).has_value());
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB }));
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 4 * MiB, 6 * MiB }));
}

TEST(TfBfcPolicy, ReleaseCachedFreesOnlyRegionsWithoutAChunkInUse)
{
    Rig r("tf-bfc");
    Address a = r.alloc(1 * MiB);
    r.alloc(3 * MiB / 2);
    r.free(a);
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB }));
    EXPECT_EQ(r.policy->stats().reserved, 4 * MiB);
}

TEST(TfBfcPolicy, RefusesBadOptions)
{
    SimulatedDevice d;
    EXPECT_THROW(makePolicy(parsePolicySpec("tf-bfc:allow_growth:maybe"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("tf-bfc:fragmentation_fraction:2"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("tf-bfc:coalesce:true"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("tf-bfc@2.0"), d), UsageError);
    EXPECT_EQ(makePolicy(parsePolicySpec("tf-bfc:allow_growth:False,memory_limit:2GiB"), d)->name(),
        "tf-bfc:allow_growth:false,memory_limit:2147483648");
}
