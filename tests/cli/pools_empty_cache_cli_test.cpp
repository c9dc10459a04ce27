// The what-if options of issue 19 on the command line: --empty-cache keep|drop, --empty-cache-at,
// --merge-pools, and the per-pool report, on the micro traces whose figures
// tests/replay/pools_empty_cache_test.cpp derives.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using gpumem::test::runCli;

TEST(PoolsCli, ReplayReportsReservedPerPoolAndMergePoolsChangesTheAnswer)
{
    auto apart = runCli("replay tests/data/mempool_release.jsonl --format json");
    ASSERT_EQ(apart.exitCode, 0) << apart.err;
    auto j = nlohmann::json::parse(apart.out);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["peak_reserved"], 40u << 20);
    ASSERT_EQ(j[0]["reserved_per_pool"].size(), 2u);
    EXPECT_EQ(j[0]["reserved_per_pool"][1]["peak_reserved"], 20u << 20);
    EXPECT_EQ(j[0]["reserved_per_pool"][1]["released"], true);
    EXPECT_EQ(j[0]["empty_cache"]["recorded_replayed"], 1);

    auto text = runCli("replay tests/data/mempool_release.jsonl");
    EXPECT_NE(text.out.find("pytorch: pool default: reserved 20.00 MiB at the end, peak 20.00 MiB\n"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("pytorch: pool mem_pool (0,1): reserved 0 B at the end, peak 20.00 MiB (released)\n"),
        std::string::npos)
        << text.out;
    auto csv = runCli("replay tests/data/mempool_release.jsonl --format csv");
    EXPECT_NE(csv.out.find(",reserved_per_pool\n"), std::string::npos) << csv.out;
    EXPECT_NE(csv.out.find("default=20971520;mem_pool (0,1)=20971520"), std::string::npos) << csv.out;

    auto merged = runCli("replay tests/data/mempool_release.jsonl --merge-pools --format json");
    ASSERT_EQ(merged.exitCode, 0) << merged.err;
    auto m = nlohmann::json::parse(merged.out);
    EXPECT_EQ(m[0]["peak_reserved"], 20u << 20);
    EXPECT_EQ(m[0]["pools_merged"], true);
    EXPECT_EQ(m[0]["empty_cache"]["recorded_dropped"], 1);
}

TEST(PoolsCli, EmptyCacheDropAndAddAreWhatIfOptions)
{
    auto drop = runCli("replay tests/data/empty_cache_steps.jsonl --empty-cache drop --format json");
    ASSERT_EQ(drop.exitCode, 0) << drop.err;
    EXPECT_EQ(nlohmann::json::parse(drop.out)[0]["peak_reserved"], 50u << 20);
    auto kept = runCli("replay tests/data/empty_cache_steps.jsonl");
    EXPECT_NE(kept.out.find("empty_cache: 1 recorded call"), std::string::npos) << kept.out;

    auto bad = runCli("replay tests/data/empty_cache_steps.jsonl --empty-cache sometimes");
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("--empty-cache 'sometimes': give keep"), std::string::npos) << bad.err;
    auto badAt = runCli("replay tests/data/empty_cache_steps.jsonl --empty-cache-at weekly");
    EXPECT_EQ(badAt.exitCode, 2);
    EXPECT_NE(badAt.err.find("give step-end"), std::string::npos) << badAt.err;
    auto fidelity = runCli("replay --fidelity tests/data/empty_cache_steps.jsonl --merge-pools");
    EXPECT_EQ(fidelity.exitCode, 2);
}

TEST(PoolsCli, SweepTriesEmptyCacheAfterEachStepAndPrintsTheProvenEffect)
{
    // tests/data/empty_cache_helps.jsonl (no recorded call): 50 MiB peak and 2 cudaMalloc without,
    // 30 MiB and 3 with empty_cache after each step (derived in tests/replay/pools_empty_cache_test.cpp).
    auto r = runCli("sweep tests/data/empty_cache_helps.jsonl --policy pytorch --empty-cache-at step-end");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("pytorch + empty_cache step-end"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pytorch: empty_cache after each step: peak reserved −20.00 MiB, 1 more cudaMalloc calls"),
        std::string::npos)
        << r.out;
}

// Review defect M6 (2026-12-02): --empty-cache-at that matches nothing added 0 calls without a word.
// tests/data/tiny_alloc_free.jsonl has no annotations at all, so neither form can match.
TEST(PoolsEmptyCacheCli, AScheduleThatMatchesNothingSaysSo)
{
    auto steps = gpumem::test::runCli("replay tests/data/tiny_alloc_free.jsonl --empty-cache-at step-end");
    EXPECT_EQ(steps.exitCode, 0) << steps.err;
    EXPECT_NE(steps.err.find("note: --empty-cache-at 'step-end' matched no point of this trace"), std::string::npos) << steps.err;
    auto glob = gpumem::test::runCli("replay tests/data/tiny_alloc_free.jsonl --empty-cache-at 'annotation nomatch*'");
    EXPECT_NE(glob.err.find("(no annotation name matches the pattern)"), std::string::npos) << glob.err;
    // Where the schedule matches, no note.
    auto ok = gpumem::test::runCli("replay tests/data/empty_cache_steps.jsonl --empty-cache-at step-end");
    EXPECT_EQ(ok.err.find("matched no point"), std::string::npos) << ok.err;
}

// Review defect M5 (2026-12-02): unquoted, `--empty-cache-at every 10` left "10" as a second trace and
// failed with "10: no such file or folder" (exit 1). Now a usage error that says to quote, before any
// trace is read.
TEST(PoolsEmptyCacheCli, AnUnquotedTwoWordScheduleIsAUsageErrorThatSaysToQuote)
{
    auto every = gpumem::test::runCli("replay --empty-cache-at every 10 tests/data/empty_cache_steps.jsonl");
    EXPECT_EQ(every.exitCode, 2) << every.out;
    EXPECT_NE(every.err.find("quote the two words, e.g. --empty-cache-at 'every 10'"), std::string::npos) << every.err;
    auto glob = gpumem::test::runCli("sweep tests/data/empty_cache_steps.jsonl --policy pytorch --empty-cache-at annotation 'x*'");
    EXPECT_EQ(glob.exitCode, 2) << glob.out;
    EXPECT_NE(glob.err.find("--empty-cache-at 'annotation ProfilerStep*'"), std::string::npos) << glob.err;
}
