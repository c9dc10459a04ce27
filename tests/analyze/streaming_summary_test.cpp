// analyze::summarize over a MemoryEventSource (issue 22): the same summary — text, JSON and anomalies —
// as summarize() of the whole trace, on every trace of tests/data and every public trace, streamed
// from memory in slices of 7 events and from the trace written as .gmt in chunks of 5.
#include "analyze/summary_report.h"
#include "analyze/trace_summary.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"

#include "tests/trace_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>
#include <unistd.h>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

using gpumem::test::forEachLoadableTrace;
using gpumem::test::tracesUnder;

std::string summaryText(const analyze::TraceSummary& s)
{
    std::ostringstream out;
    analyze::writeSummaryText(s, "trace", "reader", out);
    return out.str() + analyze::summaryToJson(s, "trace", "reader").dump(1);
}

std::string anomalyText(const ImportStats& stats)
{
    std::string s;
    for (const auto& a : stats.anomalies())
        s += a.code + " " + std::to_string(static_cast<int>(a.severity)) + " " + std::to_string(a.count) + " " + a.detail + "\n";
    return s;
}

// Checks the three ways of summarizing `trace`; returns how many memory events it has.
std::size_t expectStreamedSummariesEqual(const Trace& trace, const fs::path& gmt, const std::string& what)
{
    const std::string whole = summaryText(analyze::summarize(trace));
    ImportStats fromSlices, fromFile;
    EXPECT_EQ(summaryText(analyze::summarize(*memorySource(trace, 7), &fromSlices)), whole) << what << " in slices of 7";
    EXPECT_EQ(anomalyText(fromSlices), anomalyText(trace.stats())) << what;
    writeGmt(trace, gmt.string(), 5);
    auto source = openGmtSource(gmt.string());
    EXPECT_EQ(summaryText(analyze::summarize(*source, &fromFile)), whole) << what << " as .gmt in chunks of 5";
    EXPECT_EQ(anomalyText(fromFile), anomalyText(trace.stats())) << what;
    const analyze::TimeSpan span = analyze::traceSpan(trace), streamed = analyze::traceSpan(*source);
    EXPECT_EQ(streamed.start, span.start) << what;
    EXPECT_EQ(streamed.end, span.end) << what;
    return trace.memory().count();
}

fs::path tempGmt()
{
    auto dir = fs::temp_directory_path() / ("gpumem_streaming_summary_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / "trace.gmt";
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryOnEveryDataTrace)
{
    const fs::path gmt = tempGmt();
    std::size_t read = 0, withAnomalies = 0, withKernels = 0;
    forEachLoadableTrace(fs::path(GPUMEM_SOURCE_DIR) / "tests/data", [&](const fs::path& path, const Trace& trace) {
        ++read;
        withAnomalies += !trace.stats().empty();
        withKernels += !trace.kernels().empty();
        expectStreamedSummariesEqual(trace, gmt, path.string());
    });
    EXPECT_GE(read, 60u);
    EXPECT_GE(withAnomalies, 15u); // pairing anomalies among them: the live-block table's rules
    EXPECT_GE(withKernels, 5u);
    fs::remove_all(gmt.parent_path());
}

TEST(StreamingSummary, EqualsTheWholeTraceSummaryOnEveryPublicTrace)
{
    const auto paths = tracesUnder(GPUMEM_PUBLIC_TRACES);
    if (paths.empty())
        GTEST_SKIP() << "public traces absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)";
    const fs::path gmt = tempGmt();
    std::size_t events = 0;
    for (const auto& path : paths) {
        Trace trace;
        try {
            trace = loadTrace(path.string());
        } catch (const Error& e) {
            ADD_FAILURE() << path << ": " << e.what();
            continue;
        }
        events += expectStreamedSummariesEqual(trace, gmt, path.string());
    }
    EXPECT_GT(events, 10000u);
    fs::remove_all(gmt.parent_path());
}

} // namespace
