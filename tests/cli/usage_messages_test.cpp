// Usage mistakes a fresh user made (review fx1): a verb run without its trace file must say what to
// do in one line and exit 2.
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
