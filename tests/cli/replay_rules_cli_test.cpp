// The replay engine's rules as the CLI shows them: a block pending a free before a snapshot's trace
// (gpumem info and gpumem replay agree with PyTorch's allocated_size).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using gpumem::test::runCli;

TEST(ReplayRulesCli, FlexgenPeakAllocatedIsTheSnapshotsAllocatedSizeInInfoAndReplay)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/flexgen-llm-inference/1.3b_snapshot.pickle";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    // PyTorch's allocated_size summed over `segments`: the block pending a free (active_pending_free) is
    // not allocated. Before: info said 5,692,347,392 B.
    constexpr std::uint64_t kAllocated = 5683450880;
    auto info = runCli("info --format json '" + path + "'");
    ASSERT_EQ(info.exitCode, 0) << info.err;
    EXPECT_EQ(nlohmann::json::parse(info.out)[0]["devices"][0]["peak_allocated"]["bytes"], kAllocated);
    auto replay = runCli("replay --format json --policy ideal --policy pytorch '" + path + "'");
    ASSERT_EQ(replay.exitCode, 0) << replay.err;
    auto rows = nlohmann::json::parse(replay.out);
    ASSERT_EQ(rows.size(), 2u);
    for (const auto& row : rows) {
        EXPECT_EQ(row["peak_allocated"], kAllocated) << row["policy"];
        EXPECT_EQ(row["peak_requested"], rows[0]["peak_requested"]) << row["policy"];
    }
}
