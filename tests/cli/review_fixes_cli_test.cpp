// CLI sides of the analyze/info review fixes (task "an"), on the repository's hand-made traces and
// the shared public ones (skipped with a message where absent).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <fstream>

using gpumem::test::runCli;

// tests/data/tiny_alloc_free.jsonl at its peak: 512 B, 1536 B and 4 MiB live.
TEST(AnalyzeTop, BySizeTop1IsTheClassHoldingTheMostBytes)
{
    const auto r = runCli("analyze --by size --top 1 tests/data/tiny_alloc_free.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("| [4.00 MiB, 8.00 MiB)"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("| [512 B, 1.00 KiB)"), std::string::npos) << r.out;
}

TEST(AnalyzeTop, NegativeTopIsAUsageError)
{
    for (const char* verb : { "analyze", "report -o /dev/null" }) {
        const auto r = runCli(std::string(verb) + " --top -1 tests/data/tiny_alloc_free.jsonl");
        EXPECT_EQ(r.exitCode, 2) << verb << ": " << r.out << r.err;
        EXPECT_NE(r.err.find("--top -1 is not a number of rows"), std::string::npos) << r.err;
    }
    const auto d = runCli("diff --top -1 tests/data/colocate_a.jsonl tests/data/colocate_b.jsonl");
    EXPECT_EQ(d.exitCode, 2) << d.out << d.err;
}

// --at before the analyzed device's first memory event printed no breakdown and no reason.
// tests/data/two_devices_streams.jsonl: cuda:0 starts at the trace start, cuda:1 200 ns later.
TEST(AnalyzeAt, ATimeBeforeTheDevicesFirstEventIsAUsageError)
{
    const auto r = runCli("analyze --at 100ns --device 1 tests/data/two_devices_streams.jsonl");
    EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--at '100ns' is before the first memory event of cuda:1, at +0.000000 s from the trace start "
                         "(@1732000000000000200); give a later time or --device"),
        std::string::npos)
        << r.err;
    const auto ok = runCli("analyze --at 200ns --device 1 --by size tests/data/two_devices_streams.jsonl");
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
    EXPECT_NE(ok.out.find("| Live at t=1732000000000000200 ns +0.000000 s: 0 B in 0 blocks"), std::string::npos) << ok.out;
}

// Review finding (2026-12-04): a trace without memory events is the input's fault, not the command line's, yet
// explain and diff exited 2 (usage) where replay, fit and sweep exit 1. Smallest input: a header and a device.
TEST(EventlessTrace, ExplainAndDiffFailWithExitOneNotAUsageError)
{
    const auto path = gpumem::test::scratchDir("eventless") / "eventless.jsonl";
    std::ofstream(path) << R"({"format":"gpumem-jsonl","version":1,"metadata":{}})" "\n"
                        << R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" "\n"
                        << R"({"type":"stream","id":0,"device":0,"handle":0})" "\n";
    const auto e = runCli("explain '" + path.string() + "'");
    EXPECT_EQ(e.exitCode, 1) << e.err;
    EXPECT_NE(e.err.find("gpumem explain: error: the trace has no memory events and no memory counters"),
        std::string::npos) << e.err;
    const auto d = runCli("diff '" + path.string() + "' traces/mlp_train.jsonl");
    EXPECT_EQ(d.exitCode, 1) << d.err;
    EXPECT_NE(d.err.find("gpumem diff: error: nothing to compare: the first trace has no memory events"),
        std::string::npos) << d.err;
    const auto r = runCli("replay --policy pytorch '" + path.string() + "'");
    EXPECT_EQ(r.exitCode, 1) << r.err;
}
