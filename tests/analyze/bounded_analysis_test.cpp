// analyzeSource (analyze/bounded_analysis.h) against analyzeTrace on every trace of tests/data, traces/ and
// the public traces: the same JSON, text and CSV, byte for byte, from a memory source in slices of 7 events
// and from the trace written as .gmt in chunks of 5 events, wherever the passes give the whole answer; where
// they do not, they say what needs the trace.
// (BOUNDED_DUMP=1 writes the first differing JSON pair to /tmp/sa_got.json and /tmp/sa_exp.json.)
#include "analyze/analysis_report.h"
#include "analyze/bounded_analysis.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "micro_traces.h"
#include "public_trace_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
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
             "live_bytes_past_2pow64.jsonl", "ring_buffer_window.jsonl" })
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
