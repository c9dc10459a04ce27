// analyzeSource (analyze/bounded_analysis.h) against analyzeTrace on every trace of tests/data, traces/ and
// the public traces: the same JSON, text and CSV, byte for byte, from a memory source in slices of 7 events
// and from the trace written as .gmt in chunks of 5 events, wherever the passes give the whole answer; where
// they do not, they say what needs the trace.
// (BOUNDED_DUMP=1 writes the first differing JSON pair to /tmp/sa_got.json and /tmp/sa_exp.json.)
#include "analyze/analysis_report.h"
#include "analyze/bounded_analysis.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"
#include "micro_traces.h"
#include "public_trace_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

using namespace gpumem;
using namespace gpumem::analyze;

namespace {

struct Outputs {
    std::string json, text, csv;
};

Outputs outputsOf(const Trace& tables, const Analysis& a)
{
    ReportOptions report;
    report.top = 1000;
    report.details = true;
    Outputs o;
    o.json = analysisToJson(tables, a, "trace", report).dump(1);
    std::ostringstream text, csv;
    writeAnalysisText(tables, a, "trace", report, text);
    writeAnalysisCsv(a, "trace", report, csv);
    o.text = text.str();
    o.csv = csv.str();
    return o;
}

std::vector<std::string> traceFiles()
{
    namespace fs = std::filesystem;
    std::vector<std::string> files;
    for (const auto& root : { std::string(GPUMEM_SOURCE_DIR) + "/tests/data", std::string(GPUMEM_SOURCE_DIR) + "/traces",
             std::string(GPUMEM_PUBLIC_TRACES) })
        if (fs::exists(root))
            for (const auto& e : fs::recursive_directory_iterator(root))
                if (e.is_regular_file() && e.file_size() < (64u << 20) && e.path().extension() != ".md"
                    && e.path().extension() != ".txt" && e.path().extension() != ".py")
                    files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

// The instants of the default run and of an explicit --at list (peak, reserved peak, the middle of the trace).
std::vector<AnalysisOptions> optionSets(const Trace& trace)
{
    std::vector<AnalysisOptions> sets(1);
    const auto& time = trace.memory().time;
    if (!time.empty()) {
        AnalysisOptions at;
        at.instants = { InstantSpec {}, InstantSpec { InstantSpec::Kind::PeakReserved, 0 },
            InstantSpec { InstantSpec::Kind::Time, time[time.size() / 2] } };
        sets.push_back(at);
    }
    return sets;
}

// Compares both sources on one trace; returns whether the passes gave the whole answer.
bool checkTrace(const std::string& name, const Trace& trace)
{
    bool complete = true;
    const std::string gmt = (std::filesystem::temp_directory_path()
        / ("bounded_analysis_test_" + std::to_string(::getpid()) + ".gmt")).string(); // one per process: ctest -j runs the tests of this file at once
    writeGmt(trace, gmt, 5);
    for (const auto& options : optionSets(trace)) {
        const Analysis whole = analyzeTrace(trace, options);
        const Outputs expected = outputsOf(trace, whole);
        auto sliced = memorySource(trace, 7);
        auto file = openGmtSource(gmt);
        for (const MemoryEventSource* source : { sliced.get(), file.get() }) {
            const BoundedAnalysis bounded = analyzeSource(*source, options);
            if (!bounded.needsTrace.empty()) {
                if (complete)
                    std::cout << "  " << std::filesystem::path(name).filename().string() << ": needs the trace for " << bounded.needsTrace << '\n';
                complete = false;
                continue;
            }
            const Outputs got = outputsOf(source->skeleton(), bounded.analysis);
            if (got.json != expected.json && getenv("BOUNDED_DUMP")) {
                std::ofstream(std::string("/tmp/sa_got.json")) << got.json;
                std::ofstream(std::string("/tmp/sa_exp.json")) << expected.json;
            }
            EXPECT_EQ(got.json, expected.json) << name;
            EXPECT_EQ(got.text, expected.text) << name;
            EXPECT_EQ(got.csv, expected.csv) << name;
            EXPECT_TRUE(bounded.analysis.timeline.devices().empty()) << name;
        }
    }
    std::filesystem::remove(gmt);
    return complete;
}

} // namespace

// The smallest input of a heap overflow found by a fuzzing review: a free on device 1 whose address folds onto a
// live block of device 0 (core/detail/address_map.h blockKey: device << 52 ^ address) closes that block, and pass 1
// marked the block's peak-snapshot position in the freeing device's snapshot, one entry long (a write past its end;
// a three-device fuzzed trace aborted in glibc). Now the mark is in the block's own device's snapshot, so the peak
// breakdown (the block freed: temporary) is the in-memory one; before, the block stayed unfreed (a parameter).
// Only the default instants: a breakdown at --at instants takes its own pass per device, which skips the other
// device's free and still differs from the in-memory one here (CHANGELOG, Left).
TEST(BoundedAnalysis, AFreeWhoseKeyFoldsOntoAnotherDevicesBlockMarksThatDevicesSnapshot)
{
    const std::string jsonl = R"({"format":"gpumem-jsonl","version":1,"metadata":{}}
{"type":"device","id":0,"kind":"cuda","ordinal":0}
{"type":"device","id":1,"kind":"cuda","ordinal":1}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"stream","id":1,"device":1,"handle":0}
{"type":"mem","t":1000,"kind":"alloc","device":0,"stream":0,"addr":4096,"size":1024}
{"type":"mem","t":2000,"kind":"alloc","device":0,"stream":0,"addr":8192,"size":1024}
{"type":"mem","t":3000,"kind":"alloc","device":0,"stream":0,"addr":12288,"size":1024}
{"type":"mem","t":4000,"kind":"free","device":0,"stream":0,"addr":8192,"size":1024}
{"type":"mem","t":5000,"kind":"alloc","device":1,"stream":1,"addr":4096,"size":512}
{"type":"mem","t":6000,"kind":"free","device":1,"stream":1,"addr":4096,"size":512}
{"type":"mem","t":7000,"kind":"free","device":1,"stream":1,"addr":4503599627382784,"size":1024}
)";
    ASSERT_EQ(std::uint64_t(4503599627382784), std::uint64_t(12288) ^ (std::uint64_t(1) << 52)); // the fold of device 1
    const Trace trace = readJsonlText(jsonl, "key_collision.jsonl");
    const Analysis whole = analyzeTrace(trace, {});
    const Outputs expected = outputsOf(trace, whole);
    ASSERT_NE(expected.text.find("| temporary                             |            |   2048 B   |  66.7 % |"), std::string::npos)
        << expected.text;
    for (std::size_t slice : { std::size_t(1), std::size_t(7) }) {
        auto source = memorySource(trace, slice);
        const BoundedAnalysis bounded = analyzeSource(*source, {});
        ASSERT_TRUE(bounded.needsTrace.empty()) << bounded.needsTrace;
        const Outputs got = outputsOf(source->skeleton(), bounded.analysis);
        EXPECT_EQ(got.json, expected.json) << "slices of " << slice;
        EXPECT_EQ(got.text, expected.text) << "slices of " << slice;
    }
}

TEST(BoundedAnalysis, EqualsTheInMemoryAnalysisOnEveryTraceItCompletes)
{
    std::set<std::string> complete, partial;
    for (const auto& path : traceFiles()) {
        Trace trace;
        try {
            trace = loadTrace(path);
        } catch (const Error&) {
            continue; // not a trace (expected outputs, configuration files)
        }
        (checkTrace(path, trace) ? complete : partial).insert(std::filesystem::path(path).filename().string());
    }
    // The passes must give the whole answer where nothing needs the timeline: plain request-level traces,
    // segment events, two devices, markers, ProfilerStep annotations with annotated phases.
    for (const char* name : { "tiny_alloc_free.jsonl", "two_devices_streams.jsonl", "marker_steps.jsonl", "zero_byte_alloc.jsonl",
             "live_bytes_past_2pow64.jsonl", "ring_buffer_window.jsonl", "counter_before_memory.jsonl" })
        EXPECT_TRUE(complete.count(name)) << name << " needs the trace in memory";
    EXPECT_GE(complete.size(), 50u);
    std::cout << complete.size() << " traces complete in passes, " << partial.size() << " need the trace\n";
}

TEST(BoundedAnalysis, LoopsWithAnnotatedPhasesAndLeaksMatch)
{
    for (Bytes leak : { Bytes(0), Bytes(1) << 20 })
        for (bool recorded : { true, false }) {
            test::MicroLoop p;
            p.leakPerStep = leak;
            p.recordCategories = recorded;
            const Trace trace = test::buildMicroLoop(p);
            EXPECT_TRUE(checkTrace("micro loop", trace)) << "leak " << leak << " recorded " << recorded;
        }
}

TEST(BoundedAnalysis, SaysWhatNeedsTheTrace)
{
    // A loop without step annotations: steps come from the alloc-size period, whose boundaries need the timeline.
    test::MicroLoop p;
    p.annotateSteps = false;
    p.steps = 12;
    const Trace trace = test::buildMicroLoop(p);
    auto source = memorySource(trace, 7);
    const auto bounded = analyzeSource(*source);
    EXPECT_NE(bounded.needsTrace.find("alloc-size period"), std::string::npos) << bounded.needsTrace;
}

TEST(BoundedAnalysis, AStreamWithoutStepsTakesOnePass)
{
    // tiny_alloc_free.jsonl has no steps and no segments: its breakdown at the allocated peak comes out of pass 1.
    const Trace trace = loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/tiny_alloc_free.jsonl");
    auto source = memorySource(trace, 3);
    const auto bounded = analyzeSource(*source);
    ASSERT_TRUE(bounded.needsTrace.empty()) << bounded.needsTrace;
    EXPECT_EQ(bounded.passes, 1);
    ASSERT_EQ(bounded.analysis.breakdowns.size(), 1u);
    EXPECT_EQ(bounded.analysis.breakdowns[0].liveBytes, analyzeTrace(trace).breakdowns[0].liveBytes);
    // Asking for a time as well needs the third pass.
    AnalysisOptions at;
    at.instants = { InstantSpec {}, InstantSpec { InstantSpec::Kind::Time, trace.memory().time.back() } };
    EXPECT_EQ(analyzeSource(*source, at).passes, 2);
}

namespace {

// A long alloc/free stream on cuda:0 (the case pass 1's alloc/free kernel takes) with what makes a chunk or a
// whole pass leave it: frees of unknown blocks, allocs at a live address, zero-byte blocks, recorded
// categories, a block of 2^41 bytes, a marker, an oom, events on cuda:1, and (by variant) a segment late in
// the trace, free_completed events, or an allocated counter that gives the memory allocated before the trace
// (the lower bound then counts the frees of unknown blocks against it). Times rise with ties. Fixed seeds:
// deterministic.
struct StreamVariant {
    bool segmentLate = false, completions = false, huge = false, secondDevice = false, opening = false;
};
Trace allocFreeStream(std::uint32_t seed, const StreamVariant& v)
{
    std::mt19937_64 rng(seed);
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    TraceBuilder b;
    const DeviceId devs[] = { b.device(DeviceType::Cuda, 0), b.device(DeviceType::Cuda, 1) };
    const StreamId streams[] = { b.stream(devs[0], 0), b.stream(devs[1], 0) };
    const ScopeId scope = b.scope(0, "Layer", ScopeKind::Module);
    const FrameId f[] = { b.frame("forward", "model.py", 12) };
    const SiteId site = b.site(f);
    std::vector<Address> live;
    TimeNs t = 1000;
    const int n = 3000;
    auto event = [&](EventKind kind, Address address, Bytes size, DeviceId dev = 0) {
        MemoryEvent e;
        e.time = t;
        e.kind = kind;
        e.device = devs[dev];
        e.stream = streams[dev];
        e.address = address;
        e.size = size;
        e.requestedSize = kind == EventKind::Alloc && pick(2) ? size - pick(size + 1) : 0;
        e.scope = pick(2) ? scope : 0;
        e.site = pick(3) ? site : 0;
        e.category = pick(4) == 0 ? static_cast<Category>(pick(kCategoryCount)) : Category::Unknown;
        b.add(e);
    };
    if (v.opening) {
        const std::uint32_t series = b.addCounterSeries({ b.intern("Total Allocated"), devs[0] });
        b.add(CounterSample { 500, series, std::int64_t(64) << 20 });
        event(EventKind::Free, 0x900000, 1 << 20); // the first request: a block from before the trace
    }
    for (int i = 0; i < n; ++i) {
        t += static_cast<TimeNs>(pick(3)); // ties: several events at one time
        const std::uint64_t r = pick(1000);
        if (r < 8)
            event(EventKind::Free, 0x900000 + pick(64) * 0x100, 256); // a block from before the trace
        else if (r < 14 && !live.empty())
            event(EventKind::Alloc, live[pick(live.size())], 512); // at a live address: the earlier block stays live
        else if (r == 14)
            event(EventKind::Marker, 0, 0);
        else if (r == 15 && i > n / 2)
            event(EventKind::Oom, 0, 1 << 20);
        else if (r < 20 && v.secondDevice)
            event(pick(2) ? EventKind::Alloc : EventKind::Free, 0x40000 + pick(8) * 0x1000, 4096, 1);
        else if (r == 20 && v.huge)
            event(EventKind::Alloc, 0x7000000000 + pick(4) * 0x10000000000, Bytes(1) << 41);
        else if (v.completions && r < 40 && !live.empty()) {
            const std::size_t k = pick(live.size());
            event(EventKind::Free, live[k], 0);
            event(EventKind::FreeCompleted, live[k], 0);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        } else if ((live.size() < 40 && pick(2)) || live.empty()) {
            const Address a = 0x100000 + pick(256) * 0x1000;
            if (std::find(live.begin(), live.end(), a) == live.end())
                live.push_back(a);
            event(EventKind::Alloc, a, pick(10) == 0 ? 0 : 512 * (1 + pick(64)));
        } else {
            const std::size_t k = pick(live.size());
            event(EventKind::Free, live[k], 0);
            live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
        if (v.segmentLate && i == 2 * n / 3)
            event(EventKind::SegmentAlloc, 0x80000000, 20 << 20);
    }
    return b.build();
}

} // namespace

TEST(BoundedAnalysis, AllocFreeKernelGivesTheGeneralLoopsAnswerOnRandomStreams)
{
    // Pass 1 reads chunks of allocs and frees on one device through a kernel of its own (issue 22); every
    // variant must give the in-memory analysis's JSON, text and CSV byte for byte, in slices of 7 events and
    // in .gmt chunks of 5, and the plain streams must go through the kernel (else this test tests nothing).
    const StreamVariant variants[] = { {}, { .segmentLate = true }, { .completions = true }, { .huge = true },
        { .secondDevice = true }, { .opening = true }, { .segmentLate = true, .huge = true, .secondDevice = true } };
    for (std::uint32_t seed = 1; seed <= 6; ++seed)
        for (const auto& v : variants) {
            SCOPED_TRACE(testing::Message() << "seed " << seed << " segmentLate " << v.segmentLate << " completions "
                                            << v.completions << " huge " << v.huge << " secondDevice " << v.secondDevice
                                            << " opening " << v.opening);
            const Trace trace = allocFreeStream(seed, v);
            EXPECT_TRUE(checkTrace("alloc/free stream", trace));
            auto source = memorySource(trace, 7);
            const auto bounded = analyzeSource(*source);
            const std::uint64_t chunks = (trace.memory().count() + 6) / 7;
            if (v.completions)
                EXPECT_EQ(bounded.allocFreeChunks, 0u); // a free awaits its completion: active is not allocated's
            else {
                EXPECT_GT(bounded.allocFreeChunks, chunks / 4);
                EXPECT_LT(bounded.allocFreeChunks, chunks); // the chunks with a marker, an oom, … take the general loop
            }
        }
}
