// first-fit, next-fit, best-fit and worst-fit on the common substrate (allocators.md §6): the rules
// pick different blocks from the same free list; coalescing, heap growth, trimming, min_block and
// segment mode give exact addresses and reserved bytes.
#include "replay/policies/fit_policy.h"
#include "core/error.h"
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

constexpr Bytes KiB = 1024;

// One 28 KiB heap with free holes A 4K@0, B 8K@5K, C 3K@14K, D 2K@18K, E 6K@21K (1 KiB allocated
// separators between them) and the next-fit rover right after D. Returns the heap's base.
Address buildHoles(Rig& r)
{
    const Bytes sizes[] = { 4 * KiB, KiB, 8 * KiB, KiB, 3 * KiB, KiB, 2 * KiB, KiB, 6 * KiB, KiB };
    std::vector<Address> a;
    for (Bytes n : sizes)
        a.push_back(r.alloc(n));
    Address base = a[0];
    Bytes offset = 0;
    for (std::size_t i = 0; i < a.size(); offset += sizes[i++])
        EXPECT_EQ(a[i] - base, offset); // first fit from the growing top: address order
    EXPECT_EQ(r.device.counters().reserved, 28 * KiB); // one extension: max(4 KiB, growth_chunk 28 KiB)
    // D alone is free: whatever the rule, the next 2 KiB request takes it (next fit wraps around to
    // it), which leaves the rover right after D.
    r.free(a[6]);
    EXPECT_EQ(r.alloc(2 * KiB), a[6]);
    for (int i : { 0, 2, 4, 6, 8 })
        r.free(a[std::size_t(i)]);
    return base;
}

Address placeOf(const std::string& policy)
{
    Rig r(policy + ":growth_chunk:28KiB");
    Address base = buildHoles(r);
    Address a = r.alloc(3 * KiB);
    EXPECT_EQ(r.device.counters().reserved, 28 * KiB) << policy << " grew the heap";
    return a - base;
}

} // namespace

TEST(FitPolicy, TheFourRulesChooseDifferentBlocksFromTheSameFreeList)
{
    EXPECT_EQ(placeOf("first-fit"), 0u); // A: the lowest address that fits
    EXPECT_EQ(placeOf("best-fit"), 14 * KiB); // C: exactly 3 KiB
    EXPECT_EQ(placeOf("worst-fit"), 5 * KiB); // B: the largest
    EXPECT_EQ(placeOf("next-fit"), 21 * KiB); // E: the first fit after the rover (after D)
}

TEST(FitPolicy, NextFitWrapsAroundOnceWhenNothingFitsAfterTheRover)
{
    Rig r("next-fit:growth_chunk:28KiB");
    Address base = buildHoles(r);
    // 7 KiB fits only B (8K at 5K), which lies before the rover.
    EXPECT_EQ(r.alloc(7 * KiB) - base, 5 * KiB);
    // The rover is now at 12K: a 1 KiB request takes B's remainder there, not A at 0.
    EXPECT_EQ(r.alloc(KiB) - base, 12 * KiB);
}

TEST(FitPolicy, WorstFitTiesGoToTheLowestAddress)
{
    Rig r("worst-fit:growth_chunk:12KiB");
    Address a = r.alloc(4 * KiB);
    r.alloc(2 * KiB);
    Address c = r.alloc(4 * KiB);
    r.alloc(2 * KiB);
    r.free(c);
    r.free(a);
    EXPECT_EQ(r.alloc(KiB), a);
}

TEST(FitPolicy, FreeBlocksCoalesceWithBothNeighbours)
{
    Rig r("best-fit:growth_chunk_mb:4");
    Address a = r.alloc(MiB);
    Address b = r.alloc(MiB);
    Address c = r.alloc(MiB);
    r.free(a);
    r.free(c); // merges with the free tail [3, 4) MiB
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 3u);
    r.free(b);
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 1u);
    EXPECT_EQ(seg.blocks[0].size, 4 * MiB);
    EXPECT_EQ(seg.blocks[0].state, BlockState::Free);
    // The whole heap serves one 4 MiB request without growing.
    EXPECT_EQ(r.alloc(4 * MiB), a);
    EXPECT_EQ(r.device.counters().reserved, 4 * MiB);
    EXPECT_EQ(r.device.counters().mapCalls, 1u);
}

TEST(FitPolicy, TheHeapGrowsAtTheTopByTheLargerOfTheShortfallAndTheChunk)
{
    Rig r("first-fit");
    Address a = r.alloc(100); // 512 B block; the heap takes one 2 MiB chunk
    EXPECT_EQ(r.device.counters().reserved, 2 * MiB);
    // 3 MiB: the free top has 2 MiB − 512 B, so the heap grows by max(1 MiB + 512 B, 2 MiB) = 2 MiB
    // and the block spans both extensions.
    Address b = r.alloc(3 * MiB);
    EXPECT_EQ(b, a + 512);
    EXPECT_EQ(r.device.counters().reserved, 4 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 2 * MiB, 2 * MiB }));
    // 10 MiB: the shortfall (10 MiB − (1 MiB − 512 B)) is above the chunk.
    r.alloc(10 * MiB);
    EXPECT_EQ(r.device.counters().reserved, 4 * MiB + 9 * MiB + 512);
    EXPECT_EQ(r.segmentOf(a).size, r.device.counters().reserved); // one contiguous heap
}

TEST(FitPolicy, StreamsHaveTheirOwnHeaps)
{
    Rig r("best-fit");
    Address a = r.alloc(MiB, 1);
    r.free(a, 1);
    Address b = r.alloc(MiB, 2); // stream 1's free memory is not reused
    EXPECT_NE(r.segmentOf(b).address, r.segmentOf(a).address);
    EXPECT_EQ(r.device.counters().reserved, 4 * MiB);
}

TEST(FitPolicy, ReleaseCachedTrimsOnlyTheFreeTopOfEachHeap)
{
    Rig r("best-fit");
    Address a = r.alloc(MiB);
    Address b = r.alloc(MiB / 2);
    r.free(a); // a hole at the bottom stays mapped
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentUnmap), std::vector<Bytes>({ MiB / 2 }));
    EXPECT_EQ(r.device.counters().reserved, MiB + MiB / 2);
    r.free(b);
    r.policy->releaseCached();
    EXPECT_EQ(r.device.counters().reserved, 0u);
    EXPECT_TRUE(r.policy->describeState().segments.empty());
}

TEST(FitPolicy, ARemainderBelowMinBlockStaysInTheBlock)
{
    Rig r("best-fit:growth_chunk:8KiB,min_block:4KiB");
    Address a = r.alloc(5 * KiB); // remainder 3 KiB < 4 KiB: the whole 8 KiB heap is handed out
    EXPECT_EQ(r.block(a).size, 8 * KiB);
    EXPECT_EQ(r.policy->stats().allocated, 8 * KiB);
    EXPECT_EQ(r.policy->stats().requested, 5 * KiB);
    Rig split("best-fit:growth_chunk:8KiB");
    Address b = split.alloc(5 * KiB); // min_block defaults to the alignment (512 B)
    EXPECT_EQ(split.block(b).size, 5 * KiB);
}

TEST(FitPolicy, AlignmentRoundsEveryBlock)
{
    Rig r("first-fit:alignment:4096");
    Address a = r.alloc(1);
    Address b = r.alloc(4097);
    EXPECT_EQ(b - a, 4096u);
    EXPECT_EQ(r.block(b).size, 8192u);
}

TEST(FitPolicy, SegmentModeUsesPyTorchSegmentSizesAndFreesWholeSegments)
{
    Rig r("best-fit:segments:true");
    Address small = r.alloc(100);
    Address mid = r.alloc(5 * MiB);
    Address big = r.alloc(30 * MiB + 1);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 20 * MiB, 32 * MiB }));
    // A second 5 MiB request fits in the 20 MiB segment's remainder.
    Address mid2 = r.alloc(5 * MiB);
    EXPECT_EQ(mid2, mid + 5 * MiB);
    r.free(mid);
    r.free(big);
    r.policy->releaseCached(); // the 32 MiB segment is wholly free; the 20 MiB one is not
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 32 * MiB }));
    r.free(mid2);
    r.free(small);
    r.policy->releaseCached();
    EXPECT_EQ(r.device.counters().reserved, 0u);
    EXPECT_EQ(r.device.liveRanges(), 0u);
}

TEST(FitPolicy, UnderACapacityTheHeapTakesOnlyWhatTheRequestNeedsThenReportsOom)
{
    Rig r("first-fit", 3 * MiB);
    r.alloc(2 * MiB + 512); // a 2 MiB chunk would not cover it: the extension is the request
    EXPECT_EQ(r.device.counters().reserved, 2 * MiB + 512);
    // The next chunk (2 MiB) does not fit under 3 MiB, the request itself does.
    r.alloc(MiB / 2);
    EXPECT_EQ(r.device.counters().reserved, 2 * MiB + 512 + MiB / 2);
    EXPECT_FALSE(r.policy->allocate(MiB, 0).has_value());
    EXPECT_EQ(r.policy->stats().ooms, 1u);
    EXPECT_EQ(r.log.count(EventKind::Oom), 1u);
}

TEST(FitPolicy, BestFitServesExactHolesAmongAHundredThousandLiveBlocks)
{
    // 10^5 live blocks with 5 * 10^4 holes of 512 B to 3.5 KiB between them. Every request of one to
    // five 512 B units finds an exact hole in the size-ordered tree (the search is O(log n), so this
    // runs in a fraction of a second; bench/replay_throughput measures the rate): nothing grows and
    // no block is larger than asked.
    Rig r("best-fit");
    std::vector<Address> a;
    for (int i = 0; i < 150000; ++i)
        a.push_back(r.alloc(512 * Bytes(1 + i % 7)));
    for (std::size_t i = 0; i < a.size(); i += 3)
        r.free(a[i]);
    const Bytes reserved = r.device.counters().reserved;
    const Bytes allocated = r.policy->stats().allocated;
    for (int i = 0; i < 100000; ++i) {
        Bytes n = 512 * Bytes(1 + i % 5);
        Address x = r.alloc(n);
        ASSERT_EQ(r.policy->stats().allocated, allocated + n) << "request " << i;
        r.policy->deallocate(x, 0, 0);
    }
    EXPECT_EQ(r.device.counters().reserved, reserved);
    EXPECT_GT(r.policy->describeState().segments.front().blocks.size(), 100000u);
}

TEST(FitPolicy, OptionsAreValidatedAndNamed)
{
    for (const char* bad : { "best-fit:alignment:300", "first-fit:segments:maybe", "next-fit:colour:red",
             "worst-fit:growth_chunk:0", "best-fit@2.0" })
        EXPECT_THROW(validatePolicySpec(parsePolicySpec(bad)), UsageError) << bad;
    Rig r("best-fit:segments:true,growth_chunk_mb:4");
    EXPECT_EQ(r.policy->name(), "best-fit:growth_chunk:4194304,segments:true");
    EXPECT_EQ(Rig("worst-fit").policy->name(), "worst-fit");
}
