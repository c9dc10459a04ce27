// `gpumem info` and `gpumem analyze` measure "+x s" offsets from one origin: the trace start, its
// earliest record of any kind (analyze::traceSpan), which info's header prints as "(start N ns)" and
// analyze's header as "times: +s from the trace start @N ns". They used to differ by the time between
// the first record and the first memory event (0.37 ms on OWLv2: its profiler step begins first).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

using gpumem::test::runCli;

namespace {
// The first match of `pattern`'s group 1 in `text`, or "".
std::string find(const std::string& text, const std::string& pattern)
{
    std::smatch m;
    return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : std::string();
}

// Checks that info and analyze put the device's peak allocated, and the trace start, at the same place.
// With `exactAt`, the printed offset is the peak's exact time, so `--at` with it must land on the peak.
void expectSameOffsets(
    const std::string& path, const std::string& deviceLine, const std::string& expectedPeak, bool exactAt)
{
    SCOPED_TRACE(path);
    const auto info = runCli("info " + path);
    ASSERT_EQ(info.exitCode, 0) << info.err;
    const auto analyze = runCli("analyze " + path);
    ASSERT_EQ(analyze.exitCode, 0) << analyze.err;
    const std::string start = find(info.out, R"(time span +[0-9.]+ s \(start ([0-9]+) ns\))");
    ASSERT_FALSE(start.empty()) << info.out;
    EXPECT_NE(
        analyze.out.find("| times: +s from the trace start @" + start + " ns, as in gpumem info"), std::string::npos)
        << analyze.out;
    const std::size_t device = info.out.find(deviceLine);
    ASSERT_NE(device, std::string::npos) << info.out;
    const std::string infoPeak = find(info.out.substr(device), R"(peak allocated .*? at (\+[0-9.]+ s))");
    const std::string analyzePeak = find(analyze.out, R"(Live at peak allocated (\+[0-9.]+ s))");
    EXPECT_EQ(infoPeak, expectedPeak) << info.out;
    EXPECT_EQ(analyzePeak, expectedPeak) << analyze.out;
    if (!exactAt)
        return;
    // --at takes the same offsets: info's peak time names the peak's live set.
    const auto at = runCli("analyze --at " + expectedPeak.substr(1, expectedPeak.size() - 3) + "s " + path);
    ASSERT_EQ(at.exitCode, 0) << at.err;
    EXPECT_EQ(find(at.out, R"(Live at t=[0-9]+ ns (\+[0-9.]+ s))"), expectedPeak) << at.out;
    EXPECT_EQ(find(at.out, R"(Live at t=[0-9]+ ns \+[0-9.]+ s: ([0-9.]+ [KMG]iB))"),
        find(analyze.out, R"(Live at peak allocated \+[0-9.]+ s: ([0-9.]+ [KMG]iB))"));
}
} // namespace

// The smallest trace with a record before its first memory event: a ProfilerStep begins 400 µs earlier.
TEST(TimeOrigin, InfoAndAnalyzeReportThePeakAtTheSameOffset)
{
    expectSameOffsets("tests/data/step_before_memory.jsonl", "device cuda:0", "+0.000420 s", true);
}

TEST(TimeOrigin, OwlV2PeakIsAtTheSameOffsetInInfoAndAnalyze)
{
    const std::string path
        = std::string(GPUMEM_PUBLIC_TRACES) + "/tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)";
    // SOURCES.md / docs/kineto-import.md: peak allocated 1,790,402,560 B of tracked blocks; info puts it at +0.132233
    // s.
    expectSameOffsets(path, "device cuda:0", "+0.132233 s", false); // its times have sub-µs digits
}

TEST(TimeOrigin, AnAtOffsetBeforeTheFirstMemoryEventIsRefusedWithOffsetsFromTheTraceStart)
{
    const auto r = runCli("analyze --at 100us tests/data/step_before_memory.jsonl");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("which span +0.000400 s to +0.000480 s from the trace start"), std::string::npos) << r.err;
}
