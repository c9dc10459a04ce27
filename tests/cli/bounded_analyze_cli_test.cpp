// `gpumem analyze --format json|csv` on a .gmt runs in passes over its chunks (analyze/bounded_analysis.h):
// its output equals the in-memory analysis of the same file (--strict reads the trace whole), on traces with
// two devices, marker steps, ProfilerStep# steps with guessed phases (mlp_train) and a snapshot.
#include "cli_runner.h"

#include <gtest/gtest.h>

using gpumem::test::runCli;

TEST(BoundedAnalyzeCli, GmtOutputEqualsTheInMemoryAnalysis)
{
    const auto dir = gpumem::test::scratchDir("bounded_analyze");
    for (const char* trace : { "tests/data/tiny_alloc_free.jsonl", "tests/data/two_devices_streams.jsonl",
             "tests/data/marker_steps.jsonl", "traces/mlp_train.jsonl", "tests/data/snapshot/protocol_2.pickle" }) {
        const std::string gmt = (dir / "trace.gmt").string();
        ASSERT_EQ(runCli(std::string("convert ") + trace + " -o '" + gmt + "'").exitCode, 0) << trace;
        for (const char* args : { "--format json", "--format csv", "--format json --at reserved-peak --at 1ms", "--format csv --by site --top 3" }) {
            const auto bounded = runCli(std::string("analyze ") + args + " '" + gmt + "'");
            const auto whole = runCli(std::string("analyze --strict ") + args + " '" + gmt + "'");
            EXPECT_EQ(bounded.exitCode, whole.exitCode) << trace << ' ' << args;
            EXPECT_EQ(bounded.out, whole.out) << trace << ' ' << args;
            EXPECT_EQ(bounded.err, whole.err) << trace << ' ' << args;
            EXPECT_FALSE(bounded.out.empty() && bounded.err.empty()) << trace << ' ' << args;
        }
    }
}
