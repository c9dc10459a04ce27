// `gpumem analyze` on a .gmt runs in passes over its chunks (analyze/bounded_analysis.h): its output equals
// the in-memory analysis of the same file (--strict reads the trace whole), on traces with two devices,
// marker steps, ProfilerStep# steps with guessed phases (mlp_train) and a snapshot. Text under the in-memory
// budget reads the trace whole for its verdict alone (explain's replays), diagnosed with the streamed analysis.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>

using gpumem::test::forEachBundledTraceAsGmt;
using gpumem::test::runCli;
using gpumem::test::runCliWith;


TEST(BoundedAnalyzeCli, GmtOutputEqualsTheInMemoryAnalysis)
{
    const auto dir = gpumem::test::scratchDir("bounded_analyze");
    for (const char* trace : { "tests/data/tiny_alloc_free.jsonl", "tests/data/two_devices_streams.jsonl",
             "tests/data/marker_steps.jsonl", "traces/mlp_train.jsonl", "tests/data/snapshot/protocol_2.pickle" }) {
        const std::string gmt = (dir / "trace.gmt").string();
        ASSERT_EQ(runCli(std::string("convert ") + trace + " -o '" + gmt + "'").exitCode, 0) << trace;
        for (const char* args : { "--format json", "--format csv", "--format json --at reserved-peak --at 1ms", "--format csv --by site --top 3",
                 "--format text", "--by site --top 3", "--at reserved-peak --at 1ms" }) {
            const auto bounded = runCli(std::string("analyze ") + args + " '" + gmt + "'");
            const auto whole = runCli(std::string("analyze --strict ") + args + " '" + gmt + "'");
            EXPECT_EQ(bounded.exitCode, whole.exitCode) << trace << ' ' << args;
            EXPECT_EQ(bounded.out, whole.out) << trace << ' ' << args;
            EXPECT_EQ(bounded.err, whole.err) << trace << ' ' << args;
            EXPECT_FALSE(bounded.out.empty() && bounded.err.empty()) << trace << ' ' << args;
        }
    }
}

// Text analyze of a .gmt (its tables from the passes, its verdict from explain's diagnosis of the trace read
// whole with the streamed analysis: no in-memory timeline, 1.3 -> 0.95 GB for 10 M events) prints what the
// in-memory analysis prints, on every bundled trace (tests/data and traces/, every format gpumem converts) that
// reads without an anomaly --strict refuses.
TEST(BoundedAnalyzeCli, TextOfEveryBundledTraceAsGmtEqualsTheInMemoryAnalysis)
{
    const auto dir = gpumem::test::scratchDir("bounded_analyze_every");
    const std::string gmt = (dir / "trace.gmt").string();
    std::size_t compared = 0;
    forEachBundledTraceAsGmt(gmt, [&](const std::string& trace) {
        const auto whole = runCli("analyze --strict '" + gmt + "'");
        if (whole.exitCode != 0) // --strict refuses a damaged trace, or the trace has nothing to analyse
            return;
        const auto bounded = runCli("analyze '" + gmt + "'");
        EXPECT_EQ(bounded.exitCode, 0) << trace << ": " << bounded.err;
        EXPECT_EQ(bounded.out, whole.out) << trace;
        EXPECT_EQ(bounded.err, whole.err) << trace;
        ++compared;
    });
    EXPECT_GE(compared, 70u); // 73 on 2026-12-02
}

// `gpumem diff` of .gmt traces analyses each side in passes (issue 22: the diff of two 10 M-event streams read
// both whole, 1.8 GB; now 61 MiB), and prints what the in-memory diff prints (--strict reads both whole): every
// bundled trace that --strict accepts against mlp_train and against itself, at the peak, the reserved peak (a
// usage error naming the side where there is none) and a time (one before a device's first event, or after the
// trace, is refused naming the side), in each format.
TEST(BoundedAnalyzeCli, DiffOfEveryBundledTraceAsGmtEqualsTheInMemoryDiff)
{
    const auto dir = gpumem::test::scratchDir("bounded_diff_every");
    const std::string gmt = (dir / "trace.gmt").string(), mlp = (dir / "mlp.gmt").string();
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + mlp + "'").exitCode, 0);
    std::size_t compared = 0, refused = 0;
    forEachBundledTraceAsGmt(gmt, [&](const std::string& trace) {
        for (const std::string& args : { "'" + gmt + "' '" + mlp + "'", "--format json --at reserved-peak '" + mlp + "' '" + gmt + "'",
                 "--format csv '" + gmt + "' '" + gmt + "'", "--at 2ms '" + gmt + "' '" + mlp + "'" }) {
            const auto whole = runCli("diff --strict " + args);
            if (whole.exitCode == 1) // --strict refuses a damaged trace
                continue;
            const auto streamed = runCli("diff " + args);
            EXPECT_EQ(streamed.exitCode, whole.exitCode) << trace << ' ' << args << ": " << streamed.err;
            EXPECT_EQ(streamed.out, whole.out) << trace << ' ' << args;
            EXPECT_EQ(streamed.err, whole.err) << trace << ' ' << args;
            ++compared;
            refused += whole.exitCode == 2;
        }
    });
    EXPECT_GE(compared, 280u); // 292 on 2026-12-03, 116 of them refused
    EXPECT_GE(refused, 20u); // traces without a reserved series, or shorter than 2 ms
}

TEST(BoundedAnalyzeCli, TextOverTheInMemoryBudgetLeadsWithAVerdictThatNamesExplain)
{
    // Over the budget (here 0 events) text analyze prints the summary from the passes; the verdict, which
    // needs explain's replays of the trace held whole, says its remedies were not proven and names explain.
    const auto dir = gpumem::test::scratchDir("bounded_analyze_text");
    const std::string gmt = (dir / "mlp.gmt").string();
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + gmt + "'").exitCode, 0);
    const auto whole = runCli("analyze '" + gmt + "'");
    const auto bounded = runCliWith("GPUMEM_ANALYZE_IN_MEMORY_EVENTS", "0", "analyze '" + gmt + "'");
    ASSERT_EQ(bounded.exitCode, 0) << bounded.err;
    EXPECT_EQ(bounded.out.rfind("verdict: ", 0), 0u) << bounded.out;
    std::string verdict = bounded.out.substr(0, bounded.out.find("\n\n"));
    for (std::size_t at; (at = verdict.find("\n         ")) != std::string::npos;) // the verdict's continuation lines
        verdict.replace(at, 10, " ");
    EXPECT_NE(verdict.find("remedies were not proven by replay"), std::string::npos) << verdict;
    EXPECT_NE(verdict.find("gpumem explain"), std::string::npos) << verdict;
    EXPECT_NE(verdict.find("reserved beyond live"), std::string::npos) << verdict;
    // After the verdict, the summary is the in-memory one.
    ASSERT_NE(whole.out.find("\n\n"), std::string::npos);
    EXPECT_EQ(bounded.out.substr(bounded.out.find("\n\n")), whole.out.substr(whole.out.find("\n\n")));
}

// Review of issue 22: "-1" was read as 2^64 - 1 (text analyze then never streamed) and "text" silently
// as the default; a value that is not a whole number is now a usage error naming the variable.
TEST(BoundedAnalyzeCli, ABudgetThatIsNotAWholeNumberIsAUsageError)
{
    const auto dir = gpumem::test::scratchDir("bounded_analyze_budget");
    const std::string gmt = (dir / "mlp.gmt").string(); // the budget is read for a .gmt input only
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + gmt + "'").exitCode, 0);
    for (const char* value : { "-1", "text", " 5", "99999999999999999999999" }) {
        SCOPED_TRACE(value);
        const auto r = runCliWith("GPUMEM_ANALYZE_IN_MEMORY_EVENTS", value, "analyze '" + gmt + "'");
        EXPECT_EQ(r.exitCode, 2);
        EXPECT_NE(r.err.find("GPUMEM_ANALYZE_IN_MEMORY_EVENTS='" + std::string(value) + "' is not a whole number"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
}
