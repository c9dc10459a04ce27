// The 23 fidelity checks of allocators.md §7 (PyTorch native, default config, one stream, empty
// cache unless stated), one test each, named Check01… after the list.
#include "replay_test_support.h"

#include "core/trace_builder.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <random>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
const std::vector<Bytes> kNone;
}

TEST(PyTorchFidelity, Check01_OneByteRoundsTo512InANewSplitSmallSegment)
{
    Rig r;
    Address a = r.alloc(1);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB }));
    auto seg = r.segmentOf(a);
    EXPECT_TRUE(seg.smallPool);
    ASSERT_EQ(seg.blocks.size(), 2u); // split: 512 + (2 MiB - 512)
    EXPECT_EQ(seg.blocks[0].size, 512u);
    EXPECT_EQ(seg.blocks[1].size, 2 * MiB - 512);
    EXPECT_EQ(r.policy->stats().allocated, 512u);
    EXPECT_EQ(r.policy->stats().requested, 1u);
    EXPECT_EQ(r.block(a).requested, 1u); // what the trace's alloc entry records
}

TEST(PyTorchFidelity, Check02_SecondOneByteRequestFollowsTheFirstInTheSameSegment)
{
    Rig r;
    Address a = r.alloc(1);
    Address b = r.alloc(1);
    EXPECT_EQ(b, a + 512);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(PyTorchFidelity, Check03_OneMiBIsSmallAndSplitsItsSegmentInHalves)
{
    Rig r;
    Address a = r.alloc(MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB }));
    auto seg = r.segmentOf(a);
    EXPECT_TRUE(seg.smallPool);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[0].size, MiB);
    EXPECT_EQ(seg.blocks[1].size, MiB);
}

TEST(PyTorchFidelity, Check04_OneMiBPlusOneIsLargeAndReserves20MiB)
{
    Rig r;
    Address a = r.alloc(MiB + 1);
    EXPECT_EQ(r.pytorch().roundSize(MiB + 1), MiB + 512);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB }));
    auto seg = r.segmentOf(a);
    EXPECT_FALSE(seg.smallPool);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[0].size, MiB + 512);
    EXPECT_EQ(seg.blocks[1].size, 20 * MiB - MiB - 512);
}

TEST(PyTorchFidelity, Check05_FiveMiBReserves20MiBAndLeaves15Free)
{
    Rig r;
    Address a = r.alloc(5 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB }));
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[0].size, 5 * MiB);
    EXPECT_EQ(seg.blocks[1].size, 15 * MiB);
    EXPECT_EQ(seg.blocks[1].state, BlockState::Free);
}

TEST(PyTorchFidelity, Check06_BestFitReusesTheRemainderThenTakesTheExactBlockWhole)
{
    Rig r;
    Address a = r.alloc(5 * MiB);
    Address b = r.alloc(9 * MiB);
    EXPECT_EQ(b, a + 5 * MiB);
    EXPECT_EQ(r.device.counters().reserved, 20 * MiB);
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 3u); // 5 + 9 + 6
    Address c = r.alloc(6 * MiB);
    EXPECT_EQ(c, b + 9 * MiB);
    EXPECT_EQ(r.block(c).size, 6 * MiB);
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 3u);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(PyTorchFidelity, Check07_FifteenMiBReserves16MiBAndIsNotSplit)
{
    Rig r;
    Address a = r.alloc(15 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 16 * MiB }));
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 1u);
    EXPECT_EQ(r.policy->stats().allocated, 16 * MiB);
}

TEST(PyTorchFidelity, Check08_TenMiBReservesExactlyTenMiB)
{
    Rig r;
    r.alloc(10 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 10 * MiB }));
}

TEST(PyTorchFidelity, Check09_NineAndAHalfMiBReserves20MiBAndSplits)
{
    Rig r;
    Address a = r.alloc(9961472);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB }));
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[1].size, 20 * MiB - 9961472); // 10.5 MiB
}

TEST(PyTorchFidelity, Check10_NineteenAndAHalfMiBTakesAWhole20MiBSegment)
{
    Rig r;
    Address a = r.alloc(19 * MiB + MiB / 2);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB }));
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 1u);
    EXPECT_EQ(r.policy->stats().allocated, 20 * MiB);
}

TEST(PyTorchFidelity, Check11_CachedUnsplitSegmentIsReusedAndSplit)
{
    Rig r;
    Address a = r.alloc(19 * MiB + MiB / 2); // a whole 20 MiB segment
    r.free(a);
    Address b = r.alloc(12 * MiB);
    EXPECT_EQ(b, a);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
    auto seg = r.segmentOf(b);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[0].size, 12 * MiB);
    EXPECT_EQ(seg.blocks[1].size, 8 * MiB);
}

TEST(PyTorchFidelity, Check12_FreedBlocksMergeAndEmptyCacheReleasesOnlyWholeSegments)
{
    Rig r;
    Address a = r.alloc(4 * MiB);
    r.free(a);
    Address again = r.alloc(4 * MiB);
    EXPECT_EQ(again, a);
    Address b = r.alloc(3 * MiB);
    r.free(again);
    r.free(b);
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 1u); // merged back into one free block
    EXPECT_EQ(seg.blocks[0].size, 20 * MiB);
    EXPECT_EQ(seg.blocks[0].state, BlockState::Free);
    // A second, partially used segment (small pool) stays.
    Address keep = r.alloc(1000);
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 20 * MiB }));
    EXPECT_EQ(r.device.counters().reserved, 2 * MiB);
    EXPECT_EQ(r.segmentOf(keep).blocks.size(), 2u);
}

TEST(PyTorchFidelity, Check13_StreamsDoNotShareCachedBlocks)
{
    Rig r;
    Address a = r.alloc(1, /*stream*/ 7);
    r.free(a, 7);
    Address b = r.alloc(1, /*stream*/ 9);
    EXPECT_NE(r.segmentOf(a).address, r.segmentOf(b).address);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 2 * MiB }));
    EXPECT_EQ(r.segmentOf(b).stream, 9u);
}

TEST(PyTorchFidelity, Check14_LargeSegmentsNeverServeSmallRequests)
{
    Rig r;
    Address big = r.alloc(19 * MiB + MiB / 2);
    r.free(big);
    Address small = r.alloc(512);
    EXPECT_TRUE(r.segmentOf(small).smallPool);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB, 2 * MiB }));
}

TEST(PyTorchFidelity, Check15_RecordStreamBlockIsPendingUntilFreeCompleted)
{
    // Through the replayer: alloc, free_requested, another alloc of the same size, free_completed,
    // a third alloc. The second alloc must not reuse the pending block; the third does.
    TraceBuilder tb;
    DeviceId d = tb.device(DeviceType::Cuda, 0);
    StreamId s = tb.stream(d, 0);
    auto ev = [&](TimeNs t, EventKind k, Address addr, Bytes size) {
        MemoryEvent e;
        e.time = t;
        e.kind = k;
        e.device = d;
        e.stream = s;
        e.address = addr;
        e.size = size;
        e.requestedSize = size;
        tb.add(e);
    };
    ev(1, EventKind::Alloc, 0x1000, 4 * MiB);
    ev(2, EventKind::Free, 0x1000, 4 * MiB);
    ev(3, EventKind::Alloc, 0x9000, 4 * MiB);
    ev(4, EventKind::FreeCompleted, 0x1000, 4 * MiB);
    ev(5, EventKind::Alloc, 0x1000, 4 * MiB);
    Trace trace = tb.build();
    ReplayOptions opt;
    opt.recordAllocAddresses = true;
    ReplayResult res = Replayer(opt).run(trace, parsePolicySpec("pytorch"));
    ASSERT_EQ(res.allocAddresses.size(), 3u);
    EXPECT_EQ(res.allocAddresses[1].second, res.allocAddresses[0].second + 4 * MiB); // not the pending block
    EXPECT_EQ(res.allocAddresses[2].second, res.allocAddresses[0].second); // reusable after free_completed

    // The snapshot in between shows the block as active_pending_free.
    Rig r;
    Address a = r.alloc(4 * MiB);
    r.policy->requestFree(a);
    EXPECT_EQ(r.block(a).state, BlockState::PendingFree);
    EXPECT_EQ(toString(r.block(a).state), "active_pending_free");
    EXPECT_EQ(r.policy->stats().allocated, 0u);
    r.free(a);
    EXPECT_EQ(r.segmentOf(a).blocks.size(), 1u);
}

TEST(PyTorchFidelity, Check16_MaxSplitSizeKeepsOversizeBlocksWhole)
{
    const std::string spec = "pytorch:max_split_size_mb:200";
    { // (a) a cached 250 MiB segment is not used for 50 MiB
        Rig r(spec);
        r.free(r.alloc(250 * MiB));
        r.alloc(50 * MiB);
        EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 250 * MiB, 50 * MiB }));
    }
    { // (b) 330 >= 300 + 20: not reused
        Rig r(spec);
        r.free(r.alloc(330 * MiB));
        r.alloc(300 * MiB);
        EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 330 * MiB, 300 * MiB }));
    }
    { // (c) 310 < 300 + 20: reused whole, not split
        Rig r(spec);
        Address a = r.alloc(310 * MiB);
        r.free(a);
        EXPECT_EQ(r.alloc(300 * MiB), a);
        EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
        EXPECT_EQ(r.policy->stats().allocated, 310 * MiB);
        EXPECT_EQ(r.segmentOf(a).blocks.size(), 1u);
    }
    { // (d) a 250 MiB request is never split off a bigger block
        Rig r(spec);
        Address a = r.alloc(260 * MiB);
        r.free(a);
        EXPECT_EQ(r.alloc(250 * MiB), a);
        EXPECT_EQ(r.segmentOf(a).blocks.size(), 1u);
        EXPECT_EQ(r.block(a).size, 260 * MiB);
    }
}

TEST(PyTorchFidelity, Check17_MaxNonSplitRoundingWidensTheOversizeTolerance)
{
    Rig r("pytorch:max_split_size_mb:200,max_non_split_rounding_mb:1024");
    Address a = r.alloc(1024 * MiB);
    r.free(a);
    EXPECT_EQ(r.alloc(512 * MiB), a);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
    EXPECT_EQ(r.policy->stats().allocated, 1024 * MiB);
    // Without the option the same request gets its own segment.
    Rig d("pytorch:max_split_size_mb:200");
    d.free(d.alloc(1024 * MiB));
    d.alloc(512 * MiB);
    EXPECT_EQ(d.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 1024 * MiB, 512 * MiB }));
}

TEST(PyTorchFidelity, Check18_RoundupPower2DivisionsFour)
{
    Rig r("pytorch:roundup_power2_divisions:4");
    Address a = r.alloc(1200);
    EXPECT_EQ(r.block(a).size, 1536u);
    Address b = r.alloc(9000);
    EXPECT_EQ(r.block(b).size, 10240u);
    Address c = r.alloc(100 * MiB);
    EXPECT_EQ(r.block(c).size, 112 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 112 * MiB }));
    EXPECT_EQ(r.pytorch().roundSize(5000), 5120u);
    EXPECT_EQ(r.pytorch().roundSize(65 * MiB), 80 * MiB);
}

TEST(PyTorchFidelity, Check19_ExpandableSegmentsMapPages)
{
    const std::string spec = "pytorch:expandable_segments:True";
    {
        Rig r(spec);
        r.alloc(1);
        EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 0u);
        EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 2 * MiB }));
    }
    {
        Rig r(spec);
        r.alloc(5 * MiB);
        EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 20 * MiB }));
    }
    {
        Rig r(spec);
        Address a = r.alloc(25 * MiB);
        EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 40 * MiB }));
        auto seg = r.segmentOf(a);
        EXPECT_TRUE(seg.expandable);
        ASSERT_EQ(seg.blocks.size(), 2u);
        EXPECT_EQ(seg.blocks[0].size, 25 * MiB);
        EXPECT_EQ(seg.blocks[1].size, 15 * MiB);
        Address b = r.alloc(10 * MiB);
        EXPECT_EQ(b, a + 25 * MiB);
        EXPECT_EQ(r.log.count(EventKind::SegmentMap), 1u);
    }
    {
        Rig r(spec);
        Address a = r.alloc(5 * MiB);
        Address b = r.alloc(25 * MiB);
        EXPECT_EQ(b, a + 5 * MiB); // starts at the free 15 MiB tail
        EXPECT_EQ(r.log.sizes(EventKind::SegmentMap), std::vector<Bytes>({ 20 * MiB, 20 * MiB }));
        auto seg = r.segmentOf(a);
        ASSERT_EQ(seg.blocks.size(), 3u);
        EXPECT_EQ(seg.blocks[2].size, 10 * MiB);
        EXPECT_EQ(seg.blocks[2].state, BlockState::Free);
        EXPECT_EQ(seg.size, 40 * MiB);
    }
}

TEST(PyTorchFidelity, Check20_DeviceAllocationsEqualSegmentAllocsPlusMaps)
{
    for (const std::string spec : { "pytorch", "pytorch:expandable_segments:True" }) {
        Rig r(spec);
        std::mt19937_64 rng(20);
        std::vector<Address> live;
        for (int i = 0; i < 3000; ++i) {
            if (!live.empty() && rng() % 3 == 0) {
                std::size_t k = rng() % live.size();
                r.free(live[k]);
                live.erase(live.begin() + std::ptrdiff_t(k));
            } else {
                live.push_back(r.alloc(1 + rng() % (40 * MiB)));
            }
            if (i % 700 == 699)
                r.policy->releaseCached();
        }
        const auto& c = r.pytorch().counters();
        EXPECT_EQ(c.numDeviceAlloc, r.log.count(EventKind::SegmentAlloc) + r.log.count(EventKind::SegmentMap)) << spec;
        EXPECT_EQ(c.numDeviceFree, r.log.count(EventKind::SegmentFree) + r.log.count(EventKind::SegmentUnmap)) << spec;
        EXPECT_EQ(c.numDeviceAlloc, r.device.counters().mallocCalls + r.device.counters().mapCalls) << spec;
        EXPECT_GT(c.numDeviceAlloc, 0u);
    }
}

TEST(PyTorchFidelity, Check21_ReplayReproducesTheRecordedSegmentEventSequence)
{
    // Record a run of the policy itself as a trace (requests and the segment events they caused,
    // including empty_cache bursts), replay it, and compare the segment events in order.
    Rig r;
    TraceBuilder tb;
    DeviceId d = tb.device(DeviceType::Cuda, 0);
    StreamId s = tb.stream(d, 0);
    TimeNs t = 1;
    Bytes reserved = 0;
    auto add = [&](EventKind k, Address addr, Bytes size) {
        MemoryEvent e;
        e.time = t++;
        e.kind = k;
        e.device = d;
        e.stream = s;
        e.address = addr;
        e.size = size;
        e.requestedSize = isRequestLevel(k) ? size : 0;
        tb.add(e);
    };
    std::size_t seen = 0;
    auto flushSegments = [&] {
        for (; seen < r.log.calls.size(); ++seen) {
            const auto& c = r.log.calls[seen];
            // 21a: reserved changes only at device calls, by exactly their size.
            reserved += (c.kind == EventKind::SegmentAlloc || c.kind == EventKind::SegmentMap) ? c.size : 0;
            reserved -= (c.kind == EventKind::SegmentFree || c.kind == EventKind::SegmentUnmap) ? c.size : 0;
            add(c.kind, c.address, c.size);
        }
        EXPECT_EQ(reserved, r.device.counters().reserved);
    };
    std::mt19937_64 rng(21);
    std::vector<std::pair<Address, Bytes>> live;
    for (int i = 0; i < 4000; ++i) {
        if (!live.empty() && rng() % 2 == 0) {
            std::size_t k = rng() % live.size();
            r.free(live[k].first);
            add(EventKind::Free, live[k].first, live[k].second);
            add(EventKind::FreeCompleted, live[k].first, live[k].second);
            live.erase(live.begin() + std::ptrdiff_t(k));
        } else {
            Bytes n = rng() % 4 == 0 ? 1 + rng() % (30 * MiB) : 1 + rng() % (2 * MiB);
            Address a = r.alloc(n);
            flushSegments(); // the segment_alloc precedes the alloc, as in PyTorch's trace
            add(EventKind::Alloc, a, n);
            live.emplace_back(a, n);
        }
        if (i % 1000 == 999) {
            r.policy->releaseCached();
            flushSegments();
        }
    }
    Trace trace = tb.build();
    FidelityReport rep = checkFidelity(trace, parsePolicySpec("pytorch"));
    EXPECT_GT(rep.recordedSegmentEvents, 20u);
    EXPECT_EQ(rep.matched, rep.recordedSegmentEvents);
    EXPECT_EQ(rep.simulatedSegmentEvents, rep.recordedSegmentEvents);
    EXPECT_FALSE(rep.firstMismatch.has_value());
    EXPECT_EQ(rep.peakReservedError, 0);
    EXPECT_EQ(rep.allocAddressesMatched, rep.allocAddressesCompared);
    EXPECT_GT(rep.emptyCacheDirectives, 0u);
}

TEST(PyTorchFidelity, Check22_OomFreesWholeSegmentsOfBothPoolsThenRetriesOnce)
{
    Rig r("pytorch", 64 * MiB);
    Address split = r.alloc(5 * MiB); // 20 MiB segment that stays partly used
    Address small = r.alloc(1); // small segment, 2 MiB
    Address large = r.alloc(40 * MiB); // 40 MiB segment
    r.free(small);
    r.free(large);
    // 62 MiB reserved; 41 MiB needs a 42 MiB segment: both whole free segments go, large first.
    Address big = r.alloc(41 * MiB);
    EXPECT_NE(big, 0u);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 40 * MiB, 2 * MiB }));
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 20 * MiB, 2 * MiB, 40 * MiB, 42 * MiB }));
    EXPECT_EQ(r.pytorch().counters().numAllocRetries, 1u);
    EXPECT_EQ(r.segmentOf(split).blocks.size(), 2u); // the split segment was kept
    // A request that cannot fit even then fails as data, after one more retry.
    auto none = r.policy->allocate(100 * MiB, 0);
    EXPECT_FALSE(none.has_value());
    EXPECT_EQ(r.pytorch().counters().numAllocRetries, 2u);
    EXPECT_EQ(r.pytorch().counters().numOoms, 1u);
    EXPECT_EQ(r.log.count(EventKind::Oom), 1u);
}

TEST(PyTorchFidelity, Check23_GarbageCollectionNeedsAMemoryFraction)
{
    auto churn = [](Rig& r) {
        // Cached whole segments of various sizes, then misses that would trigger GC.
        std::vector<Address> as;
        for (Bytes mb : { 12, 14, 16, 18, 22, 24 })
            as.push_back(r.alloc(mb * MiB));
        for (Address a : as)
            r.free(a);
        for (Bytes mb : { 30, 32, 34 })
            r.alloc(mb * MiB);
    };
    Rig without("pytorch:garbage_collection_threshold:0.5", 0, 200 * MiB);
    churn(without);
    EXPECT_EQ(without.log.count(EventKind::SegmentFree), 0u);
    EXPECT_EQ(without.pytorch().counters().gcSegmentFrees, 0u);
    Rig fractionOne("pytorch:garbage_collection_threshold:0.5,per_process_memory_fraction:1.0", 0, 200 * MiB);
    churn(fractionOne);
    EXPECT_EQ(fractionOne.pytorch().counters().gcSegmentFrees, 0u);
    Rig with("pytorch:garbage_collection_threshold:0.5,per_process_memory_fraction:0.99", 0, 200 * MiB);
    churn(with);
    EXPECT_GT(with.pytorch().counters().gcSegmentFrees, 0u);
    EXPECT_GT(with.log.count(EventKind::SegmentFree), 0u);
}
