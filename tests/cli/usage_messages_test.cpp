// Usage mistakes a fresh user made (review fx1): a verb run without its trace file, and --fidelity on
// a snapshot converted to .gmt. Both must say what to do in one line and exit 2.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>

using gpumem::test::runCli;

// Every verb whose trace is positional. Boost used to say "the option '--trace' is required", an
// option no verb documents.
TEST(UsageMessages, AVerbWithoutItsTraceSaysToGiveOneAndShowsItsUsage)
{
    for (const std::string verb : { "info", "analyze", "replay", "fit", "sweep", "diff", "report", "convert" }) {
        // Options that are required too (convert/report -o, sweep --policy) are given: the trace is
        // what is missing.
        const std::string extra = verb == "convert" ? " -o x.gmt" : verb == "report" ? " -o x.html" : verb == "sweep" ? " --policy pytorch" : "";
        auto r = runCli(verb + extra);
        EXPECT_EQ(r.exitCode, 2) << verb << ": " << r.err;
        const std::string give = verb == "diff" ? "give two trace files A and B" : "give a trace file";
        EXPECT_EQ(r.err.rfind("gpumem " + verb + ": " + give + " (usage: gpumem " + verb + " ", 0), 0u) << r.err;
        EXPECT_EQ(r.err.find("--trace"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("'--input'"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    }
    // The other forms of a verb are joined on the line.
    auto replay = runCli("replay");
    EXPECT_NE(replay.err.find("TRACE | gpumem replay --colocate "), std::string::npos) << replay.err;
    EXPECT_NE(replay.err.find("TRACE... | gpumem replay --fidelity "), std::string::npos) << replay.err;
    // A missing required option that is not positional keeps boost's message (it names a real option).
    auto noOutput = runCli("convert traces/mlp_train.jsonl");
    EXPECT_EQ(noOutput.exitCode, 2);
    EXPECT_NE(noOutput.err.find("'--output'"), std::string::npos) << noOutput.err;
}

TEST(UsageMessages, FidelityOnAConvertedSnapshotSaysToRunItOnTheSnapshot)
{
    const auto dir = gpumem::test::scratchDir("fidelity-gmt");
    const std::string gmt = (dir / "x.gmt").string();
    auto convert = runCli("convert tests/data/snapshot/entry_shapes.pickle -o '" + gmt + "'");
    ASSERT_EQ(convert.exitCode, 0) << convert.err;
    // The snapshot itself works.
    auto original = runCli("replay --fidelity tests/data/snapshot/entry_shapes.pickle");
    EXPECT_EQ(original.exitCode, 0) << original.err;
    auto r = runCli("replay --fidelity '" + gmt + "'");
    EXPECT_EQ(r.exitCode, 2) << r.err;
    EXPECT_EQ(r.err, "gpumem replay: --fidelity compares the replay with the snapshot's recorded segments and blocks; " + gmt
            + " is a gpumem trace (.gmt): run it on the original snapshot file\n");
    // A trace that never was a snapshot keeps working with --fidelity (no end-state comparison).
    EXPECT_EQ(runCli("replay --fidelity traces/mlp_train.jsonl").exitCode, 0);
}
