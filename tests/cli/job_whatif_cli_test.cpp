// replay, fit and sweep over the rank traces of a job (tests/data/job: three hand-written ranks; rank 1
// holds an extra 16 MiB buffer, so its peak is 40 MiB against 24 and 26 MiB). The same commands under
// mpirun are compared with these byte for byte by the ctest test mpi.JobWhatIfMatchesUnderMpirun.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace {
using gpumem::test::runCli;
constexpr const char* kJob = "tests/data/job/rank0.jsonl tests/data/job/rank1.jsonl tests/data/job/rank10.jsonl";
constexpr unsigned long long kMiB = 1ull << 20;

nlohmann::json jsonOf(const std::string& args)
{
    auto r = runCli(args);
    EXPECT_EQ(r.exitCode, 0) << args << '\n' << r.err;
    return nlohmann::json::parse(r.out);
}

TEST(JobWhatIf, ASettingFitsOnlyWhenEveryRankRunsWithoutOom)
{
    auto j = jsonOf(std::string("replay ") + kJob + " --capacity 32MiB --format json");
    ASSERT_EQ(j["settings"].size(), 1u);
    const auto& s = j["settings"][0];
    EXPECT_EQ(s["fits"], false);
    EXPECT_EQ(s["worst_rank"], "rank 1"); // the one with the extra buffer: its second tensor fails
    EXPECT_EQ(s["ranks_with_oom"], 1);
    EXPECT_EQ(s["per_rank"][0]["ooms"], 0);
    EXPECT_EQ(s["per_rank"][1]["ooms"], 1);
    EXPECT_EQ(s["per_rank"][1]["first_oom_size"], 12 * kMiB);
    EXPECT_EQ(s["per_rank"][1]["first_oom_time_ns"], 3000);
    EXPECT_EQ(s["per_rank"][2]["peak_reserved"], 26 * kMiB);
    EXPECT_EQ(s["median_peak_reserved"], 26 * kMiB);

    auto roomy = jsonOf(std::string("replay ") + kJob + " --capacity 40MiB --format json");
    EXPECT_EQ(roomy["settings"][0]["fits"], true);
    EXPECT_EQ(roomy["settings"][0]["worst_rank"], "rank 1");
    EXPECT_EQ(roomy["settings"][0]["worst_peak_reserved"], 40 * kMiB);
}

TEST(JobWhatIf, FitOfAJobIsTheLargestOfTheRanksOwnFits)
{
    auto job = jsonOf(std::string("fit ") + kJob + " --policy pytorch --policy ideal --format json");
    ASSERT_EQ(job["policies"].size(), 2u);
    for (const auto& p : job["policies"]) {
        unsigned long long largest = 0;
        for (const char* rank : { "rank0", "rank1", "rank10" }) {
            auto one = jsonOf(std::string("fit tests/data/job/") + rank + ".jsonl --policy " + p["spec"].get<std::string>()
                + " --format json");
            largest = std::max(largest, one[0]["capacity"].get<unsigned long long>());
        }
        EXPECT_EQ(p["capacity"], largest) << p["spec"];
        EXPECT_EQ(p["worst_rank"], "rank 1") << p["spec"];
        EXPECT_EQ(p["confirmed"], true);
    }
    EXPECT_EQ(job["policies"][0]["capacity"], 40 * kMiB);
    EXPECT_EQ(job["policies"][0]["median_rank_capacity"], 26 * kMiB);
}

TEST(JobWhatIf, ADirectoryIsItsTracesInNaturalNameOrder)
{
    auto dir = runCli("sweep tests/data/job --policy 'pytorch:expandable_segments:{True,False}' --capacity 32MiB");
    auto files = runCli(std::string("sweep ") + kJob + " --policy 'pytorch:expandable_segments:{True,False}' --capacity 32MiB");
    EXPECT_EQ(dir.exitCode, 0) << dir.err;
    EXPECT_EQ(dir.out, files.out);
    EXPECT_NE(dir.out.find("job of 3 ranks"), std::string::npos) << dir.out;
    EXPECT_NE(dir.out.find("* best: pytorch:expandable_segments:"), std::string::npos) << dir.out;
}

TEST(JobWhatIf, GatesNameTheWorstRank)
{
    auto r = runCli(std::string("replay ") + kJob + " --capacity 32MiB --fail-if-oom");
    EXPECT_EQ(r.exitCode, 3);
    EXPECT_EQ(r.err, "gpumem replay: gate: pytorch (worst: rank 1) had 1 failed request (--fail-if-oom)\n");
    auto fit = runCli(std::string("fit ") + kJob + " --max-reserved 32MiB");
    EXPECT_EQ(fit.exitCode, 3);
    EXPECT_NE(fit.err.find("pytorch (needed by rank 1) reserved 40.00 MiB"), std::string::npos) << fit.err;
}

TEST(JobWhatIf, ARankThatDoesNotLoadFailsTheJobNamingItsFile)
{
    auto r = runCli("replay tests/data/job/rank0.jsonl tests/data/job/missing.jsonl");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("tests/data/job/missing.jsonl"), std::string::npos) << r.err;
    auto fidelity = runCli(std::string("replay --fidelity ") + kJob);
    EXPECT_EQ(fidelity.exitCode, 2);
}
} // namespace

// Review defect H1 (2026-12-02): in a job, --empty-cache and --empty-cache-at were silently ignored.
// tests/data/empty_cache_steps.jsonl alone reserves 30 MiB with its recorded empty_cache calls and
// 50 MiB without them (tests/replay/pools_empty_cache_test.cpp derives both); two copies of it as a
// job of two ranks must give the same figures per rank.
TEST(JobWhatIf, EmptyCacheOptionsApplyToEveryRank)
{
    const auto dir = gpumem::test::scratchDir("job-empty-cache");
    for (const char* name : { "a.jsonl", "b.jsonl" })
        std::filesystem::copy_file(GPUMEM_SOURCE_DIR "/tests/data/empty_cache_steps.jsonl", dir / name);
    const std::string job = "'" + (dir / "a.jsonl").string() + "' '" + (dir / "b.jsonl").string() + "'";
    auto kept = jsonOf("replay " + job + " --format json");
    auto dropped = jsonOf("replay --empty-cache drop " + job + " --format json");
    for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ(kept["settings"][0]["per_rank"][rank]["peak_reserved"], 30 * kMiB) << kept.dump();
        EXPECT_EQ(dropped["settings"][0]["per_rank"][rank]["peak_reserved"], 50 * kMiB) << dropped.dump();
    }
    // A job sweep has no with/without pair of rows for --empty-cache-at: refused, not ignored.
    auto r = runCli("sweep --empty-cache-at step-end --policy 'pytorch@{2.0,2.10}' " + job);
    EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--empty-cache-at in a sweep over several ranks"), std::string::npos) << r.err;
}

// Review defect M9 (2026-12-02): `replay R R` ran as a job of two ranks, counting one rank twice.
TEST(JobWhatIf, TheSameTraceTwiceIsAUsageError)
{
    auto r = runCli("replay tests/data/job/rank0.jsonl tests/data/job/../job/rank0.jsonl");
    EXPECT_EQ(r.exitCode, 2) << r.out;
    EXPECT_NE(r.err.find("is given twice (also as tests/data/job/rank0.jsonl)"), std::string::npos) << r.err;
}
