// gpumem explain: the verdict first, the findings, the proven fixes; the formats, --fail-if-oom, and the
// verdict that opens `analyze` (docs/explain.md). Inputs: tests/data/explain/*.jsonl.
#include "core/display_width.h"
#include "tests/cli/cli_runner.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using gpumem::test::runCli;

TEST(ExplainCli, OpensWithTheVerdictAndListsTheProvenFix)
{
    auto r = runCli("explain tests/data/explain/oversize_split.jsonl --capacity 100MiB");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("verdict: At +0.000006 s a 60.00 MiB request fails at 100.00 MiB", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("1. oversize_split  60.00 MiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("proven fixes (replayed on this trace at 100.00 MiB):\n"
                         "  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"),
        std::string::npos)
        << r.out;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);)
        EXPECT_LE(gpumem::displayWidth(l), 100u) << l;
}

TEST(ExplainCli, FailIfOomExitsThreeAtAnOom)
{
    auto r = runCli("explain tests/data/explain/capacity.jsonl --capacity 100MiB --fail-if-oom");
    EXPECT_EQ(r.exitCode, 3) << r.err;
    EXPECT_NE(r.err.find("gate: the moment explained is an OOM (50.00 MiB request)"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("fixes: no allocator setting can help"), std::string::npos) << r.out;
    r = runCli("explain tests/data/explain/capacity.jsonl --fail-if-oom");
    EXPECT_EQ(r.exitCode, 0) << r.err; // unlimited: no OOM, the reserved peak is explained
}

TEST(ExplainCli, JsonAndMarkdown)
{
    auto r = runCli("explain tests/data/explain/stream_stranded.jsonl --capacity 60MiB --format json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["moment"]["kind"], "replayed_oom");
    EXPECT_EQ(j["moment"]["request"], 12u << 20);
    bool stranded = false;
    for (const auto& f : j["findings"])
        if (f["id"] == "stream_stranded") {
            stranded = true;
            EXPECT_EQ(f["bytes"], 14u << 20);
            EXPECT_EQ(f["streams"][1]["stream"], 7u);
        }
    EXPECT_TRUE(stranded) << r.out;
    r = runCli("explain tests/data/explain/stream_stranded.jsonl --capacity 60MiB --format markdown");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("**Verdict:** ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("**`stream_stranded`** (14.00 MiB)"), std::string::npos) << r.out;
}

TEST(ExplainCli, CountersOnlyTraceGetsLayersAndWhatToRecordNext)
{
    auto r = runCli("explain tests/data/explain/counters_fragmented.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("layers: allocated 70.00 GiB ⊂ reserved 75.00 GiB ⊂ process 78.00 GiB ⊂ device"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("outside_allocator  3.00 GiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("external_fragmentation  5.00 GiB  (unproven)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("torch.cuda.memory._record_memory_history("), std::string::npos) << r.out;
}

TEST(ExplainCli, AnalyzeOpensWithTheSameVerdict)
{
    const auto e = runCli("explain tests/data/explain/rounding_overhead.jsonl");
    const auto a = runCli("analyze tests/data/explain/rounding_overhead.jsonl");
    ASSERT_EQ(e.exitCode, 0) << e.err;
    ASSERT_EQ(a.exitCode, 0) << a.err;
    const std::string verdict = e.out.substr(0, e.out.find("\n\n"));
    EXPECT_EQ(verdict.rfind("verdict: ", 0), 0u);
    EXPECT_EQ(a.out.rfind(verdict + "\n\n", 0), 0u) << a.out;
}

TEST(ExplainCli, UsageErrors)
{
    EXPECT_EQ(runCli("explain tests/data/explain/capacity.jsonl --format csv").exitCode, 2);
    EXPECT_EQ(runCli("explain tests/data/explain/capacity.jsonl --policy nosuch").exitCode, 2);
    EXPECT_EQ(runCli("explain tests/data/explain/capacity.jsonl --at peak").exitCode, 2);
}

TEST(ExplainCli, TheHtmlReportOpensWithTheSameVerdict)
{
    const auto e = runCli("explain tests/data/explain/rounding_overhead.jsonl --format json");
    ASSERT_EQ(e.exitCode, 0) << e.err;
    const std::string verdict = nlohmann::json::parse(e.out)["verdict"];
    const auto out = std::filesystem::temp_directory_path() / "gpumem-explain-report.html";
    const auto r = runCli("report tests/data/explain/rounding_overhead.jsonl -o " + out.string());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string html = gpumem::test::slurp(out);
    std::filesystem::remove(out);
    EXPECT_NE(html.find("<p class='verdict'><strong>Verdict:</strong> " + verdict + "</p>"), std::string::npos) << html;
}
