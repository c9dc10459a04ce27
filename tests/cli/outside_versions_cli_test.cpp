// Issue 19 at the command line: the RMM option check on the replay's device, PyTorch's async backend by
// its own name with its rows marked (approx.), allocator versions in a sweep, and the layer outside the
// allocator in replay, fit, info, analyze and explain (hand-written traces in tests/data/; the figures
// are derived in tests/replay/allocator_versions_test.cpp and outside_memory_test.cpp).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using gpumem::test::runCli;

TEST(OutsideVersionsCli, RmmMaximumBelowFortyGiBIsNoLongerRefusedAtParse)
{
    // 16 GiB device: the 23.02 default initial pool is 8 GiB, below the 10 GiB maximum.
    auto r = runCli("replay tests/data/rmm/pool_2302_small_device.jsonl --policy rmm-pool@23.02:maximum_pool_size:10GiB "
                    "--format json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j[0]["peak_reserved"], 8589934592u);
    EXPECT_EQ(j[0]["ooms"], 0);
}

TEST(OutsideVersionsCli, TheAsyncBackendIsAcceptedByPyTorchsNameAndMarkedApproximate)
{
    auto r = runCli("replay tests/data/tiny_alloc_free.jsonl --policy pytorch:backend:cudaMallocAsync --policy pytorch --wide");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("pytorch:backend:cudaMallocAsync (approx.)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(approx.): pytorch:backend:cudaMallocAsync approximates its allocator"), std::string::npos)
        << r.out;
    auto j = runCli("replay tests/data/tiny_alloc_free.jsonl --policy cuda-async --policy pytorch --format json");
    ASSERT_EQ(j.exitCode, 0) << j.err;
    const auto rows = nlohmann::json::parse(j.out);
    EXPECT_TRUE(rows[0].contains("approximation"));
    EXPECT_FALSE(rows[1].contains("approximation")); // pytorch follows its source: its JSON is unchanged
}

TEST(OutsideVersionsCli, ASweepOverPyTorchVersionsAnswersWouldAnUpgradeFragmentThis)
{
    // record_stream_queue.jsonl: 38 MiB with one global event queue (@1.11), 26 MiB with per-stream queues.
    auto r = runCli("sweep tests/data/versions/record_stream_queue.jsonl --policy 'pytorch@{1.11,2.0,2.5,2.10}' "
                    "--format json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto rows = nlohmann::json::parse(r.out);
    ASSERT_EQ(rows.size(), 4u);
    for (const auto& row : rows)
        EXPECT_EQ(row["peak_reserved"], row["spec"] == "pytorch@1.11" ? 39845888u : 27262976u) << row["spec"];
}

TEST(OutsideVersionsCli, TheOutsideFigureIsTakenFromTheCapacity)
{
    // 64 MiB device, 30 MiB outside: a 40 MiB segment does not fit; --outside 0 replaces the figure.
    auto r = runCli("replay tests/data/outside_30mib.jsonl --capacity 64MiB --policy pytorch --wide");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("outside the allocator: 30.00 MiB of the device"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("refused by the device capacity, 64.00 MiB less 30.00 MiB outside the allocator"),
        std::string::npos)
        << r.out;
    auto none = runCli("replay tests/data/outside_30mib.jsonl --capacity 64MiB --policy pytorch --outside 0 --format json");
    ASSERT_EQ(none.exitCode, 0) << none.err;
    EXPECT_EQ(nlohmann::json::parse(none.out)[0]["ooms"], 0);
    // fit: the allocator needs 40 MiB, the device 40 + 30 = 70 MiB.
    auto fit = runCli("fit tests/data/outside_30mib.jsonl --policy pytorch --format json");
    ASSERT_EQ(fit.exitCode, 0) << fit.err;
    EXPECT_EQ(nlohmann::json::parse(fit.out)[0]["capacity"], 73400320u);
}

TEST(OutsideVersionsCli, InfoAnalyzeAndExplainShowTheLayer)
{
    // current_issue16417.txt: 547283271 B (521.93 MiB) outside PyTorch in this process
    // (tests/core/oom_text_importer_test.cpp).
    auto info = runCli("info tests/data/oom/current_issue16417.txt");
    ASSERT_EQ(info.exitCode, 0) << info.err;
    EXPECT_NE(info.out.find("    outside         521.93 MiB in this process (CUDA context, NCCL"), std::string::npos)
        << info.out;
    auto explain = runCli("explain tests/data/oom/current_issue16417.txt");
    EXPECT_NE(explain.out.find("outside the allocator: 521.93 MiB in this process"), std::string::npos) << explain.out;
    auto analyze = runCli("analyze tests/data/outside_30mib.jsonl");
    ASSERT_EQ(analyze.exitCode, 0) << analyze.err;
    EXPECT_NE(analyze.out.find("outside the allocator: 30.00 MiB in this process"), std::string::npos) << analyze.out;
    EXPECT_NE(analyze.out.find("layers at the peaks: allocated 40.00 MiB ⊂ reserved"), std::string::npos) << analyze.out;
    // A trace without the figure prints no such line (the golden outputs stay as they were).
    auto plain = runCli("info tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(plain.out.find("outside"), std::string::npos) << plain.out;
}

// Review defect M4 (2026-12-02): --outside at or above --capacity left the allocator 0 B and was taken
// silently ("capacity, 100.00 GiB less 100.00 GiB outside"). Now a usage error; just below still runs.
TEST(OutsideVersionsCli, OutsideNotBelowTheCapacityIsAUsageError)
{
    for (const char* outside : { "64MiB", "100GiB", "18446744073709551615" }) {
        auto r = runCli(std::string("replay tests/data/outside_30mib.jsonl --capacity 64MiB --outside ") + outside);
        EXPECT_EQ(r.exitCode, 2) << outside << '\n' << r.out;
        EXPECT_NE(r.err.find("is not below --capacity 64MiB"), std::string::npos) << r.err;
    }
    EXPECT_EQ(runCli("replay tests/data/outside_30mib.jsonl --capacity 64MiB --outside 63MiB").exitCode, 0);
}
