// Fixes of a fresh-user review of analyze/info (task "an"): each test is the smallest input that
// showed the defect, with its exact figures, plus the public trace where the reviewer saw it.
#include "analyze/analysis.h"
#include "analyze/analysis_report.h"
#include "analyze/html_report.h"
#include "analyze/steps.h"
#include "analyze/trace_diff.h"
#include "analyze/summary_report.h"
#include "analyze/trace_summary.h"
#include "core/error.h"
#include "importers/importer_registry.h"
#include "tests/analyze/public_trace_support.h"
#include "core/units.h"
#include "core/trace_builder.h"
#include "replay/capacity_fit.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <tuple>

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

// Changed deliberately (issue 16 item 3): the bound now holds the bytes allocated before the profiler
// trace from the start, as every replay, fit and report row does (replay/start_state.h), so the overhead
// divides the recorded reserved (which holds them) by a bound that holds them too. The rule that left
// the ratio out when memory came before the trace (once duplicated in cli/command_analyze.cpp and
// analyze/html_report.cpp) is gone: the ratio no longer compares unlike figures.
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
    // 5 MiB after the first 1 MiB alloc: 4 MiB before the trace, live from the start; the bound is 4 + 2.
    EXPECT_EQ(a.fragmentation.openingAllocated, 4u << 20);
    EXPECT_EQ(a.fragmentation.lowerBound, 6u << 20);
    EXPECT_EQ(*a.fragmentation.peakRecordedAllocated, 5u << 20);
    EXPECT_DOUBLE_EQ(*a.fragmentation.overheadVsLowerBound, 8.0 / 6.0); // 8 MiB / (4 + 2) MiB, not 8/5
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

// Defect 2: --at went through a double (53 bits), and the label and offset named two times.
TEST(InstantSpecParse, AbsoluteAndRelativeTimesAreExactNanoseconds)
{
    EXPECT_EQ(InstantSpec::parse("@1752829952237228068", 0).time, 1752829952237228068);
    EXPECT_EQ(InstantSpec::parse("@1752829952237228068ns", 0).time, 1752829952237228068);
    EXPECT_EQ(InstantSpec::parse("@-5", 0).time, -5);
    EXPECT_EQ(InstantSpec::parse("@9223372036854775807", 0).time, INT64_MAX);
    EXPECT_EQ(InstantSpec::parse("10ms", 1752829952227228068).time, 1752829952237228068);
    EXPECT_EQ(InstantSpec::parse("0.000000001s", 100).time, 101);
    // A time as every verb prints it ("+0.001937 s") is taken back; a blank with no unit, or two, is not.
    EXPECT_EQ(InstantSpec::parse("+0.001937 s", 100).time, 1937100);
    EXPECT_EQ(InstantSpec::parse("+40us", 0).time, 40000);
    EXPECT_THROW(InstantSpec::parse("+0.5 ", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("0.5  s", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("+@5", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("++5s", 0), UsageError);
    EXPECT_EQ(InstantSpec::parse("1.0000000005s", 0).time, 1000000001); // half a ns rounds up
    EXPECT_EQ(InstantSpec::parse("1.5us", 0).time, 1500);
    EXPECT_EQ(InstantSpec::parse("0", 7).time, 7);
    EXPECT_THROW(InstantSpec::parse("@9223372036854775808", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("1s", INT64_MAX), UsageError);
    EXPECT_THROW(InstantSpec::parse("0.35", 0), UsageError); // a relative time needs its unit
    EXPECT_THROW(InstantSpec::parse("-1s", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("@1s", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("1e9ns", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("ms", 0), UsageError);
    EXPECT_THROW(InstantSpec::parse("@", 0), UsageError);
}

TEST(InstantSpecParse, ATimeBetweenEventsIsTheInstantAskedForWithTheStateThen)
{
    TraceBuilder b;
    b.alloc(1000, 0x1000, 512);
    b.alloc(2000, 0x2000, 1024);
    Trace t = b.build();
    const auto a = analyzeTrace(t, { .device = {}, .instants = { InstantSpec::parse("1.5us", 0) }, .progress = {}, .categoryRules = {} });
    ASSERT_EQ(a.breakdowns.size(), 1u);
    EXPECT_EQ(a.breakdowns[0].instant.time, 1500);
    EXPECT_EQ(a.breakdowns[0].instant.label, "t=1500 ns");
    EXPECT_EQ(a.breakdowns[0].instant.eventIndex, 0u);
    EXPECT_EQ(a.breakdowns[0].liveBytes, 512u);
}

TEST(InstantSpecParse, Owlv2AbsolutePeakNanosecondShowsThePeak)
{
    const auto path = publicTrace("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    const auto peak = analyzeTrace(t);
    ASSERT_FALSE(peak.breakdowns.empty());
    const TimeNs at = peak.breakdowns[0].instant.time;
    EXPECT_EQ(at, 1752829952237228068); // the reviewer's instant
    const auto a = analyzeTrace(t, { .device = {}, .instants = { InstantSpec::parse("@" + std::to_string(at), 0) }, .progress = {}, .categoryRules = {} });
    ASSERT_EQ(a.breakdowns.size(), 1u);
    EXPECT_EQ(a.breakdowns[0].instant.time, at);
    EXPECT_EQ(a.breakdowns[0].liveBytes, peak.breakdowns[0].liveBytes);
    EXPECT_EQ(a.breakdowns[0].liveBytes, 1790402560u); // SOURCES.md: tracked blocks at the peak
}

// Defect 3: spans and offsets were int64 differences that overflow for times far apart.
TEST(TimeSpan, DistancesBetweenAnyTwoInt64TimesPrintExactly)
{
    EXPECT_EQ(formatSecondsBetween(INT64_MIN, INT64_MAX), "18446744073.709551 s"); // 2^64 - 1 ns
    EXPECT_EQ(formatSecondsBetween(-5, INT64_MAX), "9223372036.854775 s");
    EXPECT_EQ(formatSecondsBetween(INT64_MAX, INT64_MIN), "-18446744073.709551 s");
    EXPECT_EQ(formatOffsetBetween(INT64_MIN, 0), "+9223372036.854775 s");
    EXPECT_EQ(formatOffsetBetween(0, INT64_MIN), "-9223372036.854775 s");
    EXPECT_EQ(formatOffsetBetween(10, 1500010), "+0.001500 s");
    EXPECT_EQ(formatOffset(-19424000), "-0.019424 s"); // the old form keeps its output
}

namespace {
// 1 KiB allocated at INT64_MIN, 1 KiB at 0, the first freed at INT64_MAX: a span of 2^64 − 1 ns.
Trace minZeroMaxTrace()
{
    TraceBuilder b;
    b.alloc(INT64_MIN, 0x1000, 1024);
    b.alloc(0, 0x2000, 1024);
    b.free(INT64_MAX, 0x1000, 1024);
    Trace t = b.build();
    return t;
}
} // namespace

TEST(TimeSpan, InfoOfEventsAtInt64MinZeroAndMaxPrintsTheRealSpanAndOffsets)
{
    Trace t = minZeroMaxTrace();
    std::ostringstream out;
    writeSummaryText(summarize(t), "tspan", "jsonl", out);
    EXPECT_NE(out.str().find("  time span       18446744073.709551 s (start -9223372036854775808 ns)\n"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("    peak allocated  2.00 KiB (2048 B) at +9223372036.854775 s\n"), std::string::npos) << out.str();
    const auto j = summaryToJson(summarize(t), "tspan", "jsonl");
    EXPECT_EQ(j["devices"][0]["peak_allocated"]["offset_ns"].get<std::uint64_t>(), 9223372036854775808ull);

    // analyze: the same offsets, and the time-weighted waste needs no int64 difference either.
    const auto a = analyzeTrace(t);
    ASSERT_EQ(a.breakdowns.size(), 1u);
    EXPECT_EQ(a.breakdowns[0].instant.time, 0);
    EXPECT_EQ(a.breakdowns[0].liveBytes, 2048u);
}

TEST(TimeSpan, InfoOfAnAllocAtMinus5AndAFreeAtInt64Max)
{
    TraceBuilder b;
    b.alloc(-5, 0x1000, 1024);
    b.free(INT64_MAX, 0x1000, 1024);
    Trace t = b.build();
    std::ostringstream out;
    writeSummaryText(summarize(t), "tspan", "jsonl", out);
    EXPECT_NE(out.str().find("  time span       9223372036.854775 s (start -5 ns)\n"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("    peak allocated  1.00 KiB (1024 B) at +0.000000 s\n"), std::string::npos) << out.str();
}

// Defect 4: --top N kept the N smallest size classes (ascending order), hiding the largest one.
TEST(TopRows, SizeClassesKeepTheNHoldingTheMostBytesInSizeOrder)
{
    TraceBuilder b;
    b.alloc(1, 0x1000, 512);
    b.alloc(2, 0x2000, 1024);
    b.alloc(3, 0x4000, 2048);
    b.alloc(4, 0x10000000, 12 << 20);
    b.alloc(5, 0x20000000, 1536); // [1 KiB, 2 KiB) now holds 2560 B, more than [2 KiB, 4 KiB)
    Trace t = b.build();
    const auto a = analyzeTrace(t);
    ASSERT_EQ(a.breakdowns.size(), 1u);
    auto labels = [&](std::size_t top) {
        std::vector<std::string> out;
        for (const auto* r : topRows(a.breakdowns[0], GroupBy::SizeClass, top))
            out.push_back(r->label + " " + std::to_string(r->totalBytes));
        return out;
    };
    EXPECT_EQ(labels(1), (std::vector<std::string> { "[8.00 MiB, 16.00 MiB) 12582912" }));
    EXPECT_EQ(labels(2), (std::vector<std::string> { "[1.00 KiB, 2.00 KiB) 2560", "[8.00 MiB, 16.00 MiB) 12582912" }));
    EXPECT_EQ(labels(3),
        (std::vector<std::string> { "[1.00 KiB, 2.00 KiB) 2560", "[2.00 KiB, 4.00 KiB) 2048", "[8.00 MiB, 16.00 MiB) 12582912" }));
    EXPECT_EQ(labels(10).size(), 4u);
    EXPECT_TRUE(labels(0).empty());
}

TEST(TopRows, Bf16SnapshotTop3SizeClassesIncludeTheLargestShareAtThePeak)
{
    const auto path = publicTrace("cs336-silmont2000/memory_forward_bf16_128.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    const auto a = analyzeTrace(t);
    ASSERT_FALSE(a.breakdowns.empty());
    const auto& b = a.breakdowns[0];
    const auto rows = topRows(b, GroupBy::SizeClass, 3);
    ASSERT_EQ(rows.size(), 3u);
    Bytes largest = 0;
    for (const auto& r : b.by(GroupBy::SizeClass))
        largest = std::max(largest, r.totalBytes);
    bool has = false;
    for (const auto* r : rows) {
        has = has || r->totalBytes == largest;
        EXPECT_GT(r->totalBytes, 0u);
    }
    EXPECT_TRUE(has);
}

// Defect 5: a counters-only trace (PyTorch <= 1.9: the running sum of Bytes from 0) printed its first
// event's size as "already allocated before the trace".
TEST(InfoCounters, CountersOnlyTraceHasNoBeforeTraceFigure)
{
    TraceBuilder b;
    const DeviceId gpu = b.device(DeviceType::Cuda, 0);
    const auto sum = b.addCounterSeries({ b.intern("Allocated (sum of Bytes)"), gpu });
    b.add(CounterSample { 100, sum, 19272704 }); // the first [memory] event: +18.38 MiB
    b.add(CounterSample { 200, sum, 19272704 + 1024 });
    b.add(CounterSample { 300, sum, 1024 });
    Trace t = b.build();
    const auto s = summarize(t);
    ASSERT_EQ(s.devices.size(), 1u);
    EXPECT_EQ(s.devices[0].allocatedBeforeTrace, 0u);
    ASSERT_EQ(s.devices[0].recordedPeaks.size(), 1u);
    EXPECT_EQ(s.devices[0].recordedPeaks[0].second.bytes, 19272704u + 1024u);
    std::ostringstream out;
    writeSummaryText(s, "counters", "kineto", out);
    EXPECT_EQ(out.str().find("before trace"), std::string::npos) << out.str();
}

TEST(InfoCounters, KinetoTbPluginCountersOnlyTraceHasNoBeforeTraceLine)
{
    const auto path = publicTrace("kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz");
    REQUIRE_PUBLIC_TRACE(path);
    const auto s = summarize(loadTrace(path));
    for (const auto& d : s.devices)
        EXPECT_EQ(d.allocatedBeforeTrace, 0u) << d.label;
    std::ostringstream out;
    writeSummaryText(s, path, "kineto", out);
    EXPECT_EQ(out.str().find("before trace"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("recorded peak   Allocated (sum of Bytes): 2.60 GiB (2791636480 B) at +0.121962 s"), std::string::npos)
        << out.str();
}

// The opening figure stays where it is measurable: alloc events after a counter that already counts more.
TEST(InfoCounters, WithAllocEventsTheOpeningIsTheFirstSampleLessItsEvent)
{
    TraceBuilder b;
    b.alloc(100, 0x1000, 1024);
    const auto sum = b.addCounterSeries({ b.intern("Total Allocated"), 0 });
    b.add(CounterSample { 100, sum, 5 * 1024 });
    Trace t = b.build();
    EXPECT_EQ(summarize(t).devices[0].allocatedBeforeTrace, 4096u);
}

// Defect 7: XPlane writes bytes_reserved 0 on every event of an allocator that does not report it;
// info printed "recorded peak Bytes Reserved: 0 B".
TEST(InfoCounters, AByteCounterThatStaysZeroIsNotListed)
{
    TraceBuilder b;
    b.alloc(100, 0x1000, 1024);
    const auto allocated = b.addCounterSeries({ b.intern("Bytes Allocated"), 0 });
    const auto reserved = b.addCounterSeries({ b.intern("Bytes Reserved"), 0 });
    const auto fragmentation = b.addCounterSeries({ b.intern("Fragmentation (ppm)"), 0 });
    b.add(CounterSample { 100, allocated, 1024 });
    b.add(CounterSample { 100, reserved, 0 });
    b.add(CounterSample { 100, fragmentation, 0 }); // 0 ppm is a measured ratio: kept
    Trace t = b.build();
    const auto s = summarize(t);
    ASSERT_EQ(s.devices[0].recordedPeaks.size(), 2u);
    EXPECT_EQ(s.devices[0].recordedPeaks[0].first, "Bytes Allocated");
    EXPECT_EQ(s.devices[0].recordedPeaks[1].first, "Fragmentation (ppm)");
    std::ostringstream out;
    writeSummaryText(s, "xplane", "xplane", out);
    EXPECT_EQ(out.str().find("Bytes Reserved"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("    recorded peak   Bytes Allocated: 1.00 KiB (1024 B) at +0.000000 s\n"), std::string::npos) << out.str();
}

TEST(InfoCounters, JaxXplaneInfoListsNoNeverRecordedReservedCounter)
{
    const auto path = publicTrace("tracelens/jax-xplane/jax_conv_minimal_legacy.xplane.pb");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    std::size_t reservedSeries = 0;
    for (const auto& c : t.counterSeries())
        reservedSeries += t.str(c.name) == "Bytes Reserved";
    EXPECT_GT(reservedSeries, 0u); // recorded as all-zero samples by the importer
    std::ostringstream out;
    writeSummaryText(summarize(t), path, "xplane", out);
    EXPECT_EQ(out.str().find("Bytes Reserved"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("recorded peak   Bytes Allocated"), std::string::npos) << out.str();
}

// Defect 8: identical allocs (one size throughout) were "steps found by periodicity: repeats every 2
// allocs" because periods below 2 were skipped instead of competing.
TEST(Periodicity, OneSizeThroughoutHasNoSteps)
{
    TraceBuilder b;
    for (int i = 0; i < 2000; ++i)
        b.alloc(1000 + i, 0x10000000000 + Address(i) * (2 << 20), 1 << 20);
    for (int i = 0; i < 2000; ++i)
        b.free(3000 + i, 0x10000000000 + Address(i) * (2 << 20), 1 << 20);
    Trace t = b.build();
    const auto a = analyzeTrace(t);
    EXPECT_EQ(a.steps.source, StepSource::None) << a.steps.detail;
    EXPECT_TRUE(a.steps.steps.empty());
}

TEST(Periodicity, TwoAllocStepsAreStillFound)
{
    // 40 steps of: alloc 1 MiB, alloc 3 MiB, free both (the allocated series drops to 0 between steps).
    TraceBuilder b;
    TimeNs t = 1000;
    for (int s = 0; s < 40; ++s) {
        b.alloc(t++, 0x100000, 1 << 20);
        b.alloc(t++, 0x900000, 3 << 20);
        b.free(t++, 0x100000, 1 << 20);
        b.free(t++, 0x900000, 3 << 20);
    }
    Trace tr = b.build();
    const auto a = analyzeTrace(tr);
    EXPECT_EQ(a.steps.source, StepSource::Periodicity);
    EXPECT_EQ(a.steps.detail, "alloc-size sequence repeats every 2 allocs");
    EXPECT_EQ(a.steps.steps.size(), 40u);
}

// Defect 6: labels named library frames (einops in site-packages, a Windows torch\ path), distinct
// stacks shared one label, and diff printed the whole stack key as the row label.
namespace {
struct SiteTrace {
    Trace trace;
    std::vector<SiteId> sites;
};
// One 1 MiB block per stack (frames innermost first, each {name, file, line}).
SiteTrace blocksAt(const std::vector<std::vector<std::tuple<const char*, const char*, int>>>& stacks, Bytes extra = 0)
{
    TraceBuilder b;
    SiteTrace st;
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    TimeNs t = 100;
    Address a = 0x100000;
    for (const auto& stack : stacks) {
        std::vector<FrameId> frames;
        for (const auto& [name, file, line] : stack)
            frames.push_back(b.frame(name, file, line));
        st.sites.push_back(b.site(frames));
        MemoryEvent e;
        e.time = t++;
        e.kind = EventKind::Alloc;
        e.device = dev;
        e.stream = stream;
        e.address = a;
        e.size = (1 << 20) + extra;
        e.site = st.sites.back();
        b.add(e);
        a += 4 << 20;
    }
    st.trace = b.build();
    return st;
}
std::vector<std::string> siteLabels(const Analysis& a)
{
    std::vector<std::string> out;
    for (const auto& r : a.breakdowns.at(0).by(GroupBy::Site))
        out.push_back(r.label + " " + std::to_string(r.totalBlocks));
    std::sort(out.begin(), out.end());
    return out;
}
} // namespace

TEST(SiteLabels, LibraryFramesOfEitherSeparatorAreSkipped)
{
    const auto st = blocksAt({
        { { "einsum", "/venv/lib/python3.11/site-packages/einops/_backends.py", 288 }, { "forward", "/home/u/model.py", 12 } },
        { { "einsum", "D:\\conda\\Lib\\site-packages\\torch\\functional.py", 373 }, { "attend", "D:\\work\\attn.py", 40 } },
        { { "einsum", "/usr/lib/python3/dist-packages/opt_einsum/contract.py", 9 }, { "mix", "/home/u/mix.py", 3 } },
        { { "einsum", "D:\\work\\torch\\functional.py", 373 } }, // only library Python: its innermost frame
    });
    EXPECT_EQ(siteLabel(st.trace, st.sites[0]), "forward (model.py:12)");
    EXPECT_EQ(siteLabel(st.trace, st.sites[1]), "attend (attn.py:40)");
    EXPECT_EQ(siteLabel(st.trace, st.sites[2]), "mix (mix.py:3)");
    EXPECT_EQ(siteLabel(st.trace, st.sites[3]), "einsum (functional.py:373)");
}

TEST(SiteLabels, DistinctStacksWithOneLabelAreToldApartByTheirCallers)
{
    const auto st = blocksAt({
        { { "einsum", "/sp/site-packages/einops/_backends.py", 288 }, { "forward", "/m/linear.py", 15 }, { "forward", "/m/attn.py", 35 } },
        { { "einsum", "/sp/site-packages/einops/_backends.py", 288 }, { "forward", "/m/linear.py", 15 }, { "forward", "/m/mlp.py", 7 } },
        { { "einsum", "/sp/site-packages/einops/_backends.py", 290 }, { "forward", "/m/linear.py", 15 }, { "forward", "/m/mlp.py", 7 } },
        { { "forward", "/m/norm.py", 4 } },
    });
    EXPECT_EQ(siteLabels(analyzeTrace(st.trace)),
        (std::vector<std::string> { "forward (linear.py:15) ← forward (attn.py:35) 1", "forward (linear.py:15) ← forward (mlp.py:7) (2 stacks) 2",
            "forward (norm.py:4) 1" }));
    // The merged row sums its stacks: 2 MiB, and every grouping still sums to the live bytes.
    Bytes sum = 0;
    for (const auto& r : analyzeTrace(st.trace).breakdowns.at(0).by(GroupBy::Site))
        sum += r.totalBytes;
    EXPECT_EQ(sum, 4u << 20);
}

TEST(SiteLabels, DiffTextPrintsTheLabelNotTheStackKey)
{
    const std::vector<std::vector<std::tuple<const char*, const char*, int>>> stacks {
        { { "einsum", "/sp/site-packages/einops/_backends.py", 288 }, { "forward", "/m/linear.py", 15 }, { "train", "/m/train.py", 80 } },
    };
    const auto a = blocksAt(stacks), b = blocksAt(stacks, 4096);
    const auto d = diffAnalyses(analyzeTrace(a.trace), analyzeTrace(b.trace));
    std::ostringstream out;
    writeDiffText(d, "a", "b", 10, out);
    EXPECT_NE(out.str().find("  forward (linear.py:15)  (1.00 MiB -> 1.00 MiB)\n"), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find("_backends.py"), std::string::npos) << out.str();
}

TEST(SiteLabels, Bf16SnapshotSiteRowsHaveDistinctLabelsAndNoEinopsFrame)
{
    const auto path = publicTrace("cs336-silmont2000/memory_forward_bf16_128.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    const auto a = analyzeTrace(t);
    for (const auto& b : a.breakdowns) {
        std::set<std::string> seen;
        Bytes sum = 0;
        for (const auto& r : b.by(GroupBy::Site)) {
            EXPECT_TRUE(seen.insert(r.label).second) << "twice: " << r.label;
            EXPECT_EQ(r.label.find("_backends.py"), std::string::npos) << r.label;
            sum += r.totalBytes;
        }
        EXPECT_EQ(sum, b.liveBytes);
    }
}

// Defect 3, the drawing side: buckets and the HTML time axis over a span beyond INT64_MAX.
TEST(TimeSpan, BucketsAndTheHtmlAxisCoverInt64MinToMax)
{
    Trace t = minZeroMaxTrace();
    const auto tl = Timeline::build(t);
    const auto buckets = tl.device(0)->buckets(SeriesKind::Allocated, INT64_MIN, INT64_MAX, 4);
    ASSERT_EQ(buckets.size(), 4u);
    EXPECT_EQ(buckets[0].begin, INT64_MIN);
    EXPECT_EQ(buckets[1].begin, INT64_MIN / 2); // -2^62
    EXPECT_EQ(buckets[2].begin, 0);
    EXPECT_EQ(buckets[3].begin, INT64_MAX / 2 + 1); // 2^62
    EXPECT_EQ(buckets[3].end, INT64_MAX);
    EXPECT_EQ(buckets[0].max, 1024u);
    EXPECT_EQ(buckets[1].last, 1024u);
    EXPECT_EQ(buckets[2].max, 2048u);
    EXPECT_EQ(buckets[3].last, 2048u); // the free at INT64_MAX is not before the end

    const auto a = analyzeTrace(t);
    const HtmlReportInput input { "tspan", &t, &a };
    std::ostringstream html;
    writeHtmlReport(std::span(&input, 1), {}, HtmlOptions {}, html);
    EXPECT_EQ(html.str().find("nan"), std::string::npos);
    EXPECT_EQ(html.str().find("inf'"), std::string::npos);
    EXPECT_NE(html.str().find(">+18446744073.709551 s<"), std::string::npos); // the last tick: the whole span
}
