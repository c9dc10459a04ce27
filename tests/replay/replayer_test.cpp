// The Replayer on small hand-made traces: request sizes, address mapping, OOM handling, timelines,
// determinism, device choice.
#include "replay_test_support.h"

#include "core/error.h"
#include "core/trace_builder.h"
#include "replay/replayer.h"

#include <nlohmann/json.hpp>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

struct TraceSketch {
    TraceBuilder tb;
    DeviceId cpu = tb.device(DeviceType::Cpu, -1);
    DeviceId gpu = tb.device(DeviceType::Cuda, 0);
    TimeNs t = 100;
    void ev(EventKind k, Address a, Bytes requested, DeviceId d, std::uint64_t stream = 0, Bytes size = 0)
    {
        MemoryEvent e;
        e.time = t++;
        e.kind = k;
        e.device = d;
        e.stream = tb.stream(d, stream);
        e.address = a;
        e.size = size ? size : requested;
        e.requestedSize = requested;
        tb.add(e);
    }
    void alloc(Address a, Bytes n, std::uint64_t stream = 0) { ev(EventKind::Alloc, a, n, gpu, stream); }
    void free(Address a, Bytes n, std::uint64_t stream = 0) { ev(EventKind::Free, a, n, gpu, stream); }
};

} // namespace

TEST(Replayer, UsesTheRequestedSizeAndMapsAddressesThroughPairing)
{
    TraceSketch s;
    s.ev(EventKind::Alloc, 0x10, 64, s.cpu); // another device: ignored
    s.ev(EventKind::Alloc, 0xA000, 1000, s.gpu, 0, 4096); // requested 1000, recorded block 4096
    s.alloc(0xB000, 3 * MiB);
    s.free(0xA000, 1000);
    s.free(0xDEAD, 77); // allocated before the window
    s.alloc(0xA000, 1000); // the same trace address again: a new allocation
    ReplayOptions o;
    o.recordAllocAddresses = true;
    ReplayResult r = Replayer(o).run(s.tb.build(), parsePolicySpec("pytorch"));
    EXPECT_EQ(r.device, 1u);
    EXPECT_EQ(r.allocations, 3u);
    EXPECT_EQ(r.unmatchedFrees, 1u);
    EXPECT_EQ(r.peakAllocated.bytes, 1024u + 3 * MiB); // 1000 rounds to 1024, not the recorded 4096
    EXPECT_EQ(r.peakRequested.bytes, 1000u + 3 * MiB);
    ASSERT_EQ(r.allocAddresses.size(), 3u);
    EXPECT_EQ(r.allocAddresses[2].second, r.allocAddresses[0].second); // freed block reused
    EXPECT_EQ(r.finalAllocated, 1024u + 3 * MiB);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 2u); // one small, one large segment
}

TEST(Replayer, OnOomStopEndsAtTheFirstFailureAndSkipDropsItsFree)
{
    TraceSketch s;
    s.alloc(0x1000, 40 * MiB);
    s.alloc(0x2000, 40 * MiB); // does not fit in 64 MiB
    s.alloc(0x3000, 4 * MiB);
    s.free(0x2000, 40 * MiB); // the dropped allocation's free
    s.free(0x1000, 40 * MiB);
    s.alloc(0x4000, 42 * MiB);
    Trace trace = s.tb.build();
    ReplayOptions o;
    o.capacity = 64 * MiB;
    o.onOom = OnOom::Stop;
    ReplayResult stop = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    EXPECT_TRUE(stop.stopped);
    ASSERT_EQ(stop.failures.size(), 1u);
    EXPECT_EQ(stop.failures[0].time, 101);
    EXPECT_EQ(stop.failures[0].size, 40 * MiB);
    EXPECT_EQ(stop.failures[0].reserved, 40 * MiB);
    EXPECT_EQ(stop.failures[0].deviceFree, 24 * MiB);
    EXPECT_EQ(stop.allocations, 1u);

    o.onOom = OnOom::Skip;
    ReplayResult skip = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    EXPECT_FALSE(skip.stopped);
    EXPECT_EQ(skip.ooms, 1u);
    EXPECT_EQ(skip.allocations, 3u);
    EXPECT_EQ(skip.finalAllocated, 4 * MiB + 42 * MiB); // 42 MiB fit once the OOM recovery freed the 40 MiB segment
    EXPECT_EQ(skip.deviceCounters.freeCalls, 1u);
}

TEST(Replayer, TimelineChangesOnlyWhenReservedOrAllocatedDo)
{
    TraceSketch s;
    s.alloc(0x1000, 5 * MiB);
    s.alloc(0x2000, 5 * MiB);
    s.free(0x1000, 5 * MiB);
    s.free(0x2000, 5 * MiB);
    ReplayOptions o;
    o.recordTimeline = true;
    ReplayResult r = Replayer(o).run(s.tb.build(), parsePolicySpec("pytorch"));
    std::vector<TimelinePoint> expected = {
        { 100, 0, 20 * MiB, 5 * MiB },
        { 101, 1, 20 * MiB, 10 * MiB },
        { 102, 2, 20 * MiB, 5 * MiB },
        { 103, 3, 20 * MiB, 0 },
    };
    EXPECT_EQ(r.timeline, expected);
    EXPECT_EQ(r.peakReserved.bytes, 20 * MiB);
    EXPECT_EQ(r.peakReserved.time, 100);
    EXPECT_EQ(r.peakAllocated.time, 101);
    // 10 of 20 MiB allocated at the fullest instant of the peak reservation (5 of 20 when it began):
    // waste at peak is what the peak reservation never used.
    EXPECT_DOUBLE_EQ(r.atPeak.waste(), 0.5);
    EXPECT_EQ(r.atPeak.allocated, 10 * MiB);
}

TEST(Replayer, IsDeterministicAndComparesPoliciesOnOneTrace)
{
    TraceSketch s;
    for (int i = 0; i < 200; ++i)
        s.alloc(Address(0x1000 + i * 0x100), Bytes(1 + (i * 7919) % (6 * MiB)), i % 2);
    for (int i = 0; i < 200; i += 2)
        s.free(Address(0x1000 + i * 0x100), Bytes(1 + (i * 7919) % (6 * MiB)), 0);
    Trace trace = s.tb.build();
    ReplayOptions o;
    o.recordTimeline = true;
    o.recordAllocAddresses = true;
    auto a = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    auto b = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    EXPECT_EQ(a.timeline, b.timeline);
    EXPECT_EQ(a.allocAddresses, b.allocAddresses);
    auto ideal = Replayer(o).run(trace, parsePolicySpec("ideal"));
    auto direct = Replayer(o).run(trace, parsePolicySpec("direct"));
    EXPECT_LE(ideal.peakReserved.bytes, a.peakReserved.bytes);
    EXPECT_EQ(ideal.peakReserved.bytes, ideal.peakAllocated.bytes);
    EXPECT_EQ(direct.peakReserved.bytes, ideal.peakReserved.bytes); // both hold exactly the live blocks
    EXPECT_EQ(direct.deviceCounters.mallocCalls, 200u);
    EXPECT_EQ(ideal.deviceCalls(), 0u);
    EXPECT_EQ(a.policy, "pytorch");
}

TEST(Replayer, RejectsADeviceThatDoesNotExist)
{
    TraceSketch s;
    s.alloc(0x1000, 100);
    ReplayOptions o;
    o.device = 7;
    EXPECT_THROW(Replayer(o).run(s.tb.build(), parsePolicySpec("pytorch")), UsageError);
}

TEST(Replayer, WarmupPassesKeepThePreWindowStateAndDoNotReplayItAgain)
{
    // Two rebuilt pre-window blocks (metadata reconstruction: 2 events before the trace), then a window
    // that allocates 4 MiB, frees it, and leaves 2 MiB live.
    TraceSketch s;
    s.tb.metadata()["reconstruction"] = nlohmann::json::array({ { { "device", 0 }, { "events_before_trace", 2 } } });
    s.alloc(0x1000, 1 * MiB);
    s.alloc(0x2000, 3 * MiB);
    s.alloc(0x3000, 4 * MiB);
    s.free(0x3000, 4 * MiB);
    s.alloc(0x4000, 2 * MiB);
    Trace trace = s.tb.build();
    for (const char* spec : { "ideal", "optimal", "pytorch:expandable_segments:True" }) {
        ReplayOptions o;
        ReplayResult cold = Replayer(o).run(trace, parsePolicySpec(spec));
        o.warmupPasses = 2;
        ReplayResult warm = Replayer(o).run(trace, parsePolicySpec(spec));
        EXPECT_EQ(cold.finalAllocated, 6 * MiB) << spec;
        EXPECT_EQ(warm.finalAllocated, 6 * MiB) << spec; // 1 + 3 once, and the window's 2 MiB of this pass
        EXPECT_EQ(warm.peakAllocated.bytes, 8 * MiB) << spec;
        EXPECT_EQ(warm.requestEvents, 3u) << spec; // the window only
    }
}

namespace {
// A window that starts with a rebuilt state (a snapshot's, adopted by `pytorch` with the recorded
// settings): segment A (20 MiB) holding a live 18 MiB block, segment B (20 MiB) wholly free; then the
// window allocates 10 MiB (windowRequest false: the trace ends with its pre-window state).
Trace adoptedStateAboveTheCapacity(bool windowRequest = true)
{
    TraceSketch s;
    s.tb.metadata()["reconstruction"] = nlohmann::json::array({ { { "device", 0 }, { "events_before_trace", 3 } } });
    s.tb.metadata()["allocator_settings"] = nlohmann::json::object();
    s.ev(EventKind::SegmentAlloc, 0x10000000, 20 * MiB, s.gpu);
    s.alloc(0x10000000, 18 * MiB);
    s.ev(EventKind::SegmentAlloc, 0x20000000, 20 * MiB, s.gpu);
    if (windowRequest)
        s.alloc(0x30000000, 10 * MiB);
    return s.tb.build();
}
} // namespace

TEST(Replayer, AnAdoptedStateAboveTheCapacityReleasesItsFreeSegmentsFirst)
{
    // 40 MiB adopted, capacity 36 MiB: PyTorch would release B on the first failed cudaMalloc; then the
    // window's 10 MiB segment fits (20 + 10 MiB). Before the fix: one phantom 40 MiB "request" failed.
    Trace trace = adoptedStateAboveTheCapacity();
    ReplayOptions o;
    o.capacity = 36 * MiB;
    o.onOom = OnOom::Stop;
    ReplayResult r = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    EXPECT_TRUE(r.initialAdopted);
    EXPECT_EQ(r.initialSegments, 2u);
    EXPECT_EQ(r.initialBlocks, 1u);
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_TRUE(r.failures.empty());
    EXPECT_EQ(r.allocations, 1u);
    EXPECT_EQ(r.peakReserved.bytes, 30 * MiB);
    EXPECT_EQ(r.finalAllocated, 28 * MiB);
    // Without a capacity nothing is released and the 10 MiB request splits the cached segment B.
    EXPECT_EQ(Replayer().run(trace, parsePolicySpec("pytorch")).peakReserved.bytes, 40 * MiB);
}

TEST(Replayer, AnAdoptedStateWithoutWindowEventsHasThatStateAsItsPeaks)
{
    // The peaks are not sampled while the state is adopted (they restart at the window); with no event
    // after the state, they are the state's.
    ReplayResult r = Replayer().run(adoptedStateAboveTheCapacity(false), parsePolicySpec("pytorch"));
    EXPECT_TRUE(r.initialAdopted);
    EXPECT_EQ(r.initialSegments, 2u);
    EXPECT_EQ(r.peakReserved.bytes, 40 * MiB);
    EXPECT_EQ(r.peakAllocated.bytes, 18 * MiB);
    EXPECT_EQ(r.peakRequested.bytes, 18 * MiB);
}

TEST(Replayer, AnAdoptedStateThatDoesNotFitStopsTheReplayEvenWithOnOomSkip)
{
    // The starting state is not a request: --on-oom skip cannot drop it, so the replay stops as with stop
    // (it went on and reported the 20 MiB state on a 16 MiB device as its peak, the window's 10 MiB too).
    Trace trace = adoptedStateAboveTheCapacity();
    for (int warmup : { 0, 1 }) {
        ReplayOptions o;
        o.capacity = 16 * MiB;
        o.onOom = OnOom::Skip;
        o.warmupPasses = warmup;
        ReplayResult r = Replayer(o).run(trace, parsePolicySpec("pytorch"));
        EXPECT_TRUE(r.stopped) << "warm-up passes " << warmup;
        EXPECT_EQ(r.ooms, 1u);
        ASSERT_EQ(r.failures.size(), 1u);
        EXPECT_TRUE(r.failures[0].beforeWindow);
        EXPECT_EQ(r.failures[0].allocated, 18 * MiB);
        EXPECT_EQ(r.failures[0].reserved, 20 * MiB);
        EXPECT_EQ(r.allocations, 0u);
        EXPECT_EQ(r.requestEvents, 0u);
        EXPECT_EQ(r.finalReserved, 20 * MiB);
    }
}

TEST(Replayer, AnAdoptedStateWhoseLiveSegmentsExceedTheCapacityIsOneFailureBeforeTheWindow)
{
    // Capacity 16 MiB: after releasing B, segment A (20 MiB, 18 MiB live) still does not fit.
    Trace trace = adoptedStateAboveTheCapacity();
    ReplayOptions o;
    o.capacity = 16 * MiB;
    o.onOom = OnOom::Stop;
    ReplayResult r = Replayer(o).run(trace, parsePolicySpec("pytorch"));
    EXPECT_EQ(r.ooms, 1u);
    EXPECT_TRUE(r.stopped);
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_TRUE(r.failures[0].beforeWindow);
    EXPECT_EQ(r.failures[0].reserved, 20 * MiB);
    EXPECT_EQ(r.failures[0].allocated, 18 * MiB);
    EXPECT_EQ(r.failures[0].size, 18 * MiB);
    EXPECT_EQ(r.allocations, 0u);
}
