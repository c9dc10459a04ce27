// Fixes of a fresh-user review of analyze/info (task "an"): each test is the smallest input that
// showed the defect, with its exact figures, plus the public trace where the reviewer saw it.
#include "analyze/analysis.h"
#include "analyze/trace_summary.h"
#include "core/error.h"
#include "core/importer.h"
#include "tests/analyze/public_trace_support.h"
#include "core/units.h"
#include "core/trace_builder.h"
#include "replay/capacity_fit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::publicTrace;

namespace {
void segment(TraceBuilder& b, TimeNs t, EventKind kind, Address a, Bytes size)
{
    MemoryEvent e;
    e.time = t;
    e.kind = kind;
    e.device = b.device(DeviceType::Cuda, 0);
    e.stream = b.stream(e.device, 0);
    e.address = a;
    e.size = size;
    b.add(e);
}
} // namespace

// Defect 1: the lower bound was the peak of ROUNDED block sizes (above what `ideal` holds) and the
// overhead divided by the recorded allocated counter instead of the printed bound.
TEST(LowerBound, IsTheMaxOfLiveRequestedBytesAndTheOverheadDividesThePrintedFigures)
{
    TraceBuilder b;
    segment(b, 5, EventKind::SegmentAlloc, 0x10000, 2 << 20);
    b.alloc(10, 0x10000, 512, 100);         // requested 100 B, rounded to 512 B
    b.alloc(20, 0x10200, 1 << 20, 1000000); // requested 1,000,000 B, rounded to 1 MiB
    b.free(30, 0x10000, 512);
    Trace t = b.build();
    const auto a = analyzeTrace(t);
    EXPECT_EQ(a.fragmentation.peakAllocated, 512u + (1u << 20));
    EXPECT_EQ(a.fragmentation.lowerBound, 1000100u);
    ASSERT_TRUE(a.fragmentation.peakReserved);
    EXPECT_EQ(*a.fragmentation.peakReserved, 2u << 20);
    EXPECT_DOUBLE_EQ(*a.fragmentation.overheadVsLowerBound, 2097152.0 / 1000100.0);
    EXPECT_EQ(a.fragmentation.lowerBound, replay::livePeak(t, std::nullopt));
}

TEST(LowerBound, WithRecordedCountersTheOverheadStillDividesReservedByTheBound)
{
    TraceBuilder b;
    b.alloc(10, 0x1000, 1 << 20);
    b.alloc(20, 0x200000, 1 << 20);
    const auto reserved = b.addCounterSeries({ b.intern("Total Reserved"), 0 });
    const auto allocated = b.addCounterSeries({ b.intern("Total Allocated"), 0 });
    b.add(CounterSample { 10, reserved, 8 << 20 });
    b.add(CounterSample { 10, allocated, 5 << 20 }); // 3 MiB allocated before the window
    Trace t = b.build();
    const auto a = analyzeTrace(t);
    EXPECT_EQ(a.fragmentation.lowerBound, 2u << 20);
    EXPECT_EQ(*a.fragmentation.peakRecordedAllocated, 5u << 20);
    EXPECT_DOUBLE_EQ(*a.fragmentation.overheadVsLowerBound, 4.0); // 8 MiB / 2 MiB, not 8/5
}

TEST(LowerBound, Bf16SnapshotBoundEqualsIdealsLivePeak)
{
    const auto path = publicTrace("cs336-silmont2000/memory_forward_bf16_128.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    const auto a = analyzeTrace(t);
    // 743.71 MiB requested (the rounded blocks peak at 777.99 MiB, above first-fit's 767.71 MiB).
    EXPECT_EQ(a.fragmentation.lowerBound, replay::livePeak(t, a.device));
    EXPECT_GT(a.fragmentation.peakAllocated, a.fragmentation.lowerBound);
    EXPECT_EQ(formatBytes(a.fragmentation.lowerBound), "743.71 MiB");
    ASSERT_TRUE(a.fragmentation.peakReserved);
    EXPECT_GE(*a.fragmentation.peakReserved, a.fragmentation.lowerBound);
}

