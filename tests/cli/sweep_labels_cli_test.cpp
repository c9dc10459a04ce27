// The sweep table's configuration column keeps every option's value (analyze::shortenSpec). Review finding
// (2026-12-04): the four rows of max_split_size_mb:{64,256} x roundup_power2_divisions:{1,4} read as two pairs of
// identical rows, the middle cut hiding the first option's value.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

TEST(SweepLabels, TheSweepTableShowsEveryRowOfATwoParameterGridDistinctly)
{
    const auto r = gpumem::test::runCli(
        "sweep traces/mlp_train.jsonl --policy 'pytorch:max_split_size_mb:{64,256},roundup_power2_divisions:{1,4}'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::set<std::string> labels;
    std::istringstream lines(r.out);
    std::size_t rows = 0;
    for (std::string line; std::getline(lines, line);)
        if (line.size() > 3 && line.compare(3, 8, "pytorch:") == 0) {
            ++rows;
            labels.insert(line.substr(3, line.find("  ", 3) - 3));
        }
    EXPECT_EQ(rows, 4u) << r.out;
    EXPECT_EQ(labels.size(), 4u) << r.out;
    EXPECT_EQ(labels.count("pytorch:max_split…:256,roundup_po…:4"), 1u) << r.out;
}

// The job sweep (several ranks) keeps the values too (writeJobSweepTable).
TEST(SweepLabels, TheJobSweepTableShowsEveryRowDistinctly)
{
    const auto r = gpumem::test::runCli("sweep tests/data/job/rank0.jsonl tests/data/job/rank1.jsonl "
                                        "--policy 'pytorch:max_split_size_mb:{64,256},roundup_power2_divisions:{1,4}'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::set<std::string> labels;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        if (line.size() > 3 && line.compare(3, 8, "pytorch:") == 0)
            labels.insert(line.substr(3, line.find("  ", 3) - 3));
    EXPECT_EQ(labels.size(), 4u) << r.out;
    EXPECT_EQ(labels.count("pytorch:max_split…:256,roundup_po…:1"), 1u) << r.out;
}
