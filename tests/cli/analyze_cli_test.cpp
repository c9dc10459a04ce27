// gpumem analyze / diff / report end to end, on the sample trace and on micro loops written as .jsonl.
#include "core/jsonl_format.h"
#include "tests/analyze/micro_traces.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::scratchDir;

namespace {
std::string writeLoop(const std::string& name, const gpumem::test::MicroLoop& p)
{
    auto path = scratchDir("analyze") / name;
    gpumem::writeJsonl(gpumem::test::buildMicroLoop(p), path.string());
    return path.string();
}
} // namespace

TEST(AnalyzeCli, TextSummaryIsLaidOutLikeTorchMemorySummary)
{
    auto r = runCli("analyze traces/mlp_train.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("|        Metric         |   At end   | Peak Usage | Tot Alloc  | Tot Freed  |"), std::string::npos);
    EXPECT_NE(r.out.find("| Allocated memory      | 442896 KiB | 656097 KiB |   1786 MiB |   1353 MiB |"), std::string::npos);
    EXPECT_NE(r.out.find("| GPU reserved memory   | 747520 KiB | 747520 KiB | 747520 KiB |      0 B   |"), std::string::npos);
    EXPECT_NE(r.out.find("found by ProfilerStep annotations"), std::string::npos);
    // gpumem explain's verdict opens the output (issue 15), a blank line after it; then every line of the box
    // is 77 columns wide, as in PyTorch.
    ASSERT_EQ(r.out.rfind("verdict: ", 0), 0u) << r.out;
    std::istringstream in(r.out.substr(r.out.find("\n\n") + 2));
    for (std::string line; std::getline(in, line);)
        EXPECT_EQ(line.size(), 77u) << line;
}

TEST(AnalyzeCli, JsonAndCsvCarryTheSameBreakdown)
{
    auto j = runCli("analyze --format json --by module --top 100 traces/mlp_train.jsonl");
    ASSERT_EQ(j.exitCode, 0) << j.err;
    auto doc = nlohmann::json::parse(j.out);
    const auto& b = doc["breakdowns"][0];
    EXPECT_EQ(b["instant"], "peak allocated");
    std::uint64_t depth0 = 0;
    for (const auto& r : b["by_module"])
        if (r["depth"] == 0)
            depth0 += r["total_bytes"].get<std::uint64_t>();
    EXPECT_EQ(depth0, b["live_bytes"].get<std::uint64_t>());
    EXPECT_EQ(b["live_bytes"].get<std::uint64_t>(), doc["stats"]["allocated_bytes"]["peak"].get<std::uint64_t>());

    auto c = runCli("analyze --format csv --by category --at peak traces/mlp_train.jsonl");
    ASSERT_EQ(c.exitCode, 0) << c.err;
    EXPECT_EQ(c.out.substr(0, c.out.find('\n')), "trace,instant,time_ns,group,depth,key,label,self_bytes,total_bytes,self_blocks,total_blocks");
    EXPECT_NE(c.out.find(",category,0,optimizer_state,optimizer_state,302317568,302317568,8,8"), std::string::npos) << c.out;
}

TEST(AnalyzeCli, BadOptionsAreUsageErrors)
{
    EXPECT_EQ(runCli("analyze --by colour traces/mlp_train.jsonl").exitCode, 2);
    EXPECT_EQ(runCli("analyze --at yesterday traces/mlp_train.jsonl").exitCode, 2);
    EXPECT_EQ(runCli("analyze --device 7 traces/mlp_train.jsonl").exitCode, 2);
    EXPECT_EQ(runCli("diff traces/mlp_train.jsonl").exitCode, 2);
    EXPECT_EQ(runCli("analyze no-such-file.jsonl").exitCode, 1);
}

TEST(AnalyzeCli, FlagsTheLeakingLoopWithItsSiteAndNotTheSteadyOne)
{
    auto leaky = runCli("analyze --format json " + writeLoop("leak.jsonl", { .steps = 5, .leakPerStep = 1 << 20 }));
    ASSERT_EQ(leaky.exitCode, 0) << leaky.err;
    auto l = nlohmann::json::parse(leaky.out)["leaks"];
    EXPECT_TRUE(l["leaking"].get<bool>());
    EXPECT_EQ(l["sites"][0]["label"], "cache_append (train.py:42)");
    EXPECT_EQ(l["growth_per_step"].get<double>(), 1048576.0);
    auto steady = runCli("analyze --format json " + writeLoop("steady.jsonl", { .steps = 5 }));
    EXPECT_FALSE(nlohmann::json::parse(steady.out)["leaks"]["leaking"].get<bool>());
}

TEST(DiffCli, ReportsExactlyTheModuleThatDiffers)
{
    auto a = writeLoop("a.jsonl", {});
    auto b = writeLoop("b.jsonl", { .fc2Extra = 2 << 20 });
    auto r = runCli("diff --format json " + a + " " + b);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out);
    std::vector<std::string> modules;
    for (const auto& row : doc["changed"])
        if (row["group"] == "module")
            modules.push_back(row["key"]);
    EXPECT_EQ(modules, std::vector<std::string> { "Net/Net.fc2" });
    auto text = runCli("diff " + a + " " + b);
    EXPECT_NE(text.out.find("by module (self bytes): 1 row changed\n    +2.00 MiB  Net/Net.fc2"), std::string::npos) << text.out;
    // The answer first, in one sentence, then the evidence (review finding M9, 2026-12-04).
    EXPECT_EQ(text.out.substr(0, text.out.find("  A: ")), "B peaks 2.00 MiB (10.0 %) higher than A: 22.00 MiB allocated against 20.00 MiB; the largest change\n"
              "  at peak allocated is module Net/Net.fc2, +2.00 MiB.\n")
        << text.out;
}

TEST(DiffCli, AGapTooSmallForTheUnitIsGivenInBytes)
{
    // Review finding (2026-12-04): "B peaks 1 B (0.0 %) higher than A: 20.00 MiB reserved against 20.00 MiB".
    auto write = [](const std::string& name, std::uint64_t segment) {
        auto path = scratchDir("diff-bytes") / name;
        std::ofstream(path) << R"({"format":"gpumem-jsonl","version":1,"metadata":{}})" "\n"
                            << R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" "\n"
                            << R"({"type":"stream","id":0,"device":0,"handle":0})" "\n"
                            << R"({"type":"mem","t":1000,"kind":"segment_alloc","addr":1048576,"size":)" << segment << "}\n"
                            << R"({"type":"mem","t":2000,"kind":"alloc","addr":1048576,"size":4194304})" "\n"
                            << R"({"type":"mem","t":3000,"kind":"free","addr":1048576,"size":4194304})" "\n";
        return path.string();
    };
    auto r = runCli("diff " + write("a.jsonl", 20971520) + " " + write("b.jsonl", 20971521));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find("  A: ")),
        "B peaks 1 B (< 0.1 %) higher than A: 20.00 MiB reserved against 20.00 MiB (20971521 B against\n"
        "  20971520 B); nothing live at peak allocated changed.\n")
        << r.out;
}

TEST(DiffCli, TwoEqualTracesAreSaidToPeakTheSame)
{
    auto r = runCli("diff traces/mlp_train.jsonl traces/mlp_train.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("B peaks at the same 730.00 MiB reserved as A; nothing live at peak allocated changed.\n"
                          "  A: traces/mlp_train.jsonl\n  B: traces/mlp_train.jsonl\n",
                  0),
        0u)
        << r.out;
}

TEST(ReportCli, WritesOneSelfContainedHtmlFile)
{
    auto out = scratchDir("report") / "r.html";
    auto leak = writeLoop("leak-report.jsonl", { .steps = 5, .leakPerStep = 1 << 20 });
    auto r = runCli("report traces/mlp_train.jsonl " + leak + " -o " + out.string());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto html = gpumem::test::slurp(out);
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("src="), std::string::npos);
    EXPECT_EQ(html.find("href="), std::string::npos);
    EXPECT_EQ(html.find("url("), std::string::npos);
    EXPECT_NE(html.find("<svg"), std::string::npos);
    EXPECT_NE(html.find("cache_append (train.py:42)"), std::string::npos);
    EXPECT_NE(html.find("No policies were given"), std::string::npos);
    EXPECT_EQ(runCli("report --policy bogus traces/mlp_train.jsonl -o " + out.string()).exitCode, 2);
}

TEST(ReportCli, ComparesPoliciesWithTheReplayEngine)
{
    auto out = scratchDir("report-policies") / "r.html";
    auto r = runCli("report --policy pytorch --policy pytorch:expandable_segments:True traces/mlp_train.jsonl -o " + out.string());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto html = gpumem::test::slurp(out);
    EXPECT_EQ(html.find("No policies were given"), std::string::npos);
    EXPECT_NE(html.find("pytorch:expandable_segments:True"), std::string::npos);
    // The same peaks `gpumem replay` prints for this trace: 666 MiB with the default policy, 722 MiB expandable.
    EXPECT_NE(html.find("666.00 MiB"), std::string::npos);
    EXPECT_NE(html.find("722.00 MiB"), std::string::npos);
}
