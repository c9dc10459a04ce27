// gpumem analyze --by stack, --format folded, --by line and --fold-rules (issue 18, docs/stacks.md).
#include "tests/cli/cli_runner.h"
#include "core/display_width.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <sstream>

using gpumem::test::runCli;

namespace {
// A folded-stack reader as flamegraph.pl, inferno and speedscope read the format: one stack a line, the
// frames joined by ';', one space, a positive integer weight. Fails the test on the first line that does
// not parse; returns the summed weights.
std::uint64_t parseFolded(const std::string& text, std::size_t* lines = nullptr)
{
    const std::regex line(R"(^([^;\n]+(;[^;\n]+)*) ([0-9]+)$)");
    std::istringstream in(text);
    std::string l;
    std::uint64_t sum = 0;
    std::size_t n = 0;
    while (std::getline(in, l)) {
        std::smatch m;
        EXPECT_TRUE(std::regex_match(l, m, line)) << "not a folded line: " << l;
        if (m.empty())
            continue;
        for (std::size_t at = 0, next; at <= m[1].str().size(); at = next + 1) {
            next = m[1].str().find(';', at);
            if (next == std::string::npos)
                next = m[1].str().size();
            EXPECT_GT(next, at) << "empty frame in " << l;
        }
        const auto weight = std::stoull(m[3].str());
        EXPECT_GT(weight, 0u) << l;
        sum += weight;
        ++n;
    }
    if (lines)
        *lines = n;
    return sum;
}
bool withinColumns(const std::string& text, std::size_t columns)
{
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        std::size_t width = 0; // UTF-8 code points (every character here is one column wide)
        for (unsigned char c : l)
            width += (c & 0xC0) != 0x80;
        if (width > columns)
            return false;
    }
    return true;
}
} // namespace

TEST(StacksCli, FoldedStacksOfBcraftonParseAndSumToTheLiveBytesAtThePeak)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/cs336-bcrafton/memory_snapshot.pickle";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    auto folded = runCli("analyze '" + path + "' --format folded");
    ASSERT_EQ(folded.exitCode, 0) << folded.err;
    std::size_t lines = 0;
    const auto sum = parseFolded(folded.out, &lines);
    auto json = runCli("analyze '" + path + "' --by size --at peak --format json");
    ASSERT_EQ(json.exitCode, 0) << json.err;
    const auto live = nlohmann::json::parse(json.out)["breakdowns"][0]["live_bytes"].get<std::uint64_t>();
    EXPECT_EQ(sum, live);
    EXPECT_EQ(sum, 3861684736u); // 3.60 GiB in 455 blocks at bcrafton's allocated peak
    EXPECT_GT(lines, 5u);
    // No line carries an allocator or unwinder frame.
    EXPECT_EQ(folded.out.find("CachingAllocator"), std::string::npos);
    EXPECT_EQ(folded.out.find("torch::unwind"), std::string::npos);
    EXPECT_EQ(folded.out.find("_PyEval"), std::string::npos);
    // --all-frames keeps them, and the same bytes.
    auto all = runCli("analyze '" + path + "' --format folded --all-frames");
    ASSERT_EQ(all.exitCode, 0) << all.err;
    EXPECT_EQ(parseFolded(all.out), live);
    EXPECT_NE(all.out.find("DeviceCachingAllocator::malloc"), std::string::npos);
}

TEST(StacksCli, ByStackIsAnIndentedTreeWithinOneHundredColumns)
{
    auto r = runCli("analyze tests/data/stacks/line_trace.jsonl --by stack");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out,
        "\nBy stack. Live at peak allocated +0.000005 s: 7.75 MiB in 6 blocks on cuda:0\n"
        "      total       self  blocks  stack (outermost first)\n"
        "   7.75 MiB          -       6  all (live blocks)\n"
        "   4.00 MiB          -       1    torch::autograd::generated::MmBackward0::apply\n"
        "   4.00 MiB   4.00 MiB       1      at::_ops::mm::call\n"
        "   3.75 MiB          -       4    <module> (run.py:3)\n"
        "   3.75 MiB 512.00 KiB       4      train (model.py:11)\n"
        "   3.00 MiB          -       2        forward (model.py:6)\n"
        "   2.00 MiB          -       1          at::_ops::relu::call\n"
        "   2.00 MiB   2.00 MiB       1            at::native::relu (Activation.cpp)\n"
        "   1.00 MiB   1.00 MiB       1          linear (functional.py:100)\n"
        " 256.00 KiB          -       1        forward (model.py:7)\n"
        " 256.00 KiB 256.00 KiB       1          linear (functional.py:100)\n"
        "      512 B      512 B       1    (no stack)\n");
    // --top 1: one child per node, the rest summed.
    auto top = runCli("analyze tests/data/stacks/line_trace.jsonl --by stack --top 1");
    ASSERT_EQ(top.exitCode, 0) << top.err;
    EXPECT_NE(top.out.find("   3.75 MiB          -       5    … 2 more frames\n"), std::string::npos) << top.out;
    // Every public snapshot's tree fits in 100 columns.
    for (const char* rel : { "cs336-bcrafton/memory_snapshot.pickle", "cs336-magma27/memory_snapshot.pickle" }) {
        const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + rel;
        if (!std::filesystem::exists(path))
            continue;
        auto t = runCli("analyze '" + path + "' --by stack --top 50");
        ASSERT_EQ(t.exitCode, 0) << t.err;
        EXPECT_TRUE(withinColumns(t.out, 100)) << rel;
    }
}

TEST(StacksCli, ByLinePrintsTheFileWithTheBytesOfEachLine)
{
    auto r = runCli("analyze tests/data/stacks/line_trace.jsonl --by line tests/data/stacks/model.py");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("  3.75 MiB in 4 blocks have a frame in the file (recorded as /home/u/proj/model.py)\n"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("   3.00 MiB       2      6          h = torch.relu(self.up(x))\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" 256.00 KiB       1      7          return self.down(h)\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" 512.00 KiB       1     11      y = model(x)\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("                        12      y.sum().backward()\n"), std::string::npos) << r.out;
    auto json = runCli("analyze tests/data/stacks/line_trace.jsonl --by line tests/data/stacks/model.py --format json");
    ASSERT_EQ(json.exitCode, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out)["lines"][0];
    EXPECT_EQ(j["attributed_bytes"], 3932160u);
    EXPECT_EQ(j["lines"], nlohmann::json::parse(R"([{"line":6,"bytes":3145728,"blocks":2},{"line":7,"bytes":262144,"blocks":1},)"
                                                R"({"line":11,"bytes":524288,"blocks":1}])"));
}

TEST(StacksCli, ByLineNamesTheFileItCannotReadOrThatNoFrameNames)
{
    auto missing = runCli("analyze tests/data/stacks/line_trace.jsonl --by line tests/data/stacks/absent.py");
    EXPECT_EQ(missing.exitCode, 1) << missing.err;
    EXPECT_NE(missing.err.find("cannot read the source file tests/data/stacks/absent.py: cannot open"), std::string::npos)
        << "the path once, not twice (review finding, 2026-12-04): " << missing.err;
    auto folder = runCli("analyze tests/data/stacks/line_trace.jsonl --by line tests/data/stacks");
    EXPECT_EQ(folder.exitCode, 2) << folder.err;
    EXPECT_NE(folder.err.find("--by line: tests/data/stacks is a directory; give the Python source file"), std::string::npos)
        << folder.err;
    auto unnamed = runCli("analyze tests/data/stacks/line_trace.jsonl --by line tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(unnamed.exitCode, 2) << unnamed.err;
    EXPECT_NE(unnamed.err.find("no frame of tests/data/stacks/line_trace.jsonl names tests/data/tiny_alloc_free.jsonl"),
        std::string::npos)
        << unnamed.err;
    auto noSource = runCli("analyze tests/data/stacks/line_trace.jsonl --by line");
    EXPECT_EQ(noSource.exitCode, 2);
    EXPECT_NE(noSource.err.find("--by line needs the source file"), std::string::npos) << noSource.err;
}

TEST(StacksCli, FoldRulesPrintTheTableWithoutATrace)
{
    auto r = runCli("analyze --fold-rules");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("  caching allocator         c10::cuda::CUDACachingAllocator::*\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  nn.Module call            _call_impl  [*torch/nn/modules/module.py]\n"), std::string::npos) << r.out;
    EXPECT_TRUE(withinColumns(r.out, 100));
}

TEST(StacksCli, SnapshotAnnotationsAndCompileContextBecomeModules)
{
    // tests/data/snapshot/annotated_scopes.json: four allocs at 10, 20, 25 and 40 us; AdamW.step runs from
    // 15 to 30 us; the alloc at 25 us has compile_context "0/1".
    auto r = runCli("analyze tests/data/snapshot/annotated_scopes.json --by module --format json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto rows = nlohmann::json::parse(r.out)["breakdowns"][0]["by_module"];
    ASSERT_EQ(rows.size(), 3u) << rows.dump();
    EXPECT_EQ(rows[0]["key"], "AdamW.step");
    EXPECT_EQ(rows[0]["self_bytes"], 2048);
    EXPECT_EQ(rows[0]["total_bytes"], 2560);
    EXPECT_EQ(rows[1]["key"], "AdamW.step/0/1");
    EXPECT_EQ(rows[1]["depth"], 1);
    EXPECT_EQ(rows[1]["total_bytes"], 512);
    EXPECT_EQ(rows[2]["key"], "(no scope)");
    EXPECT_EQ(rows[2]["total_bytes"], 1536); // before and after the range, "N/A" compile context
}

TEST(StacksCli, CategoriesRulesFileSaysRuleRecordedOrInferredPerCategory)
{
    const auto dir = gpumem::test::scratchDir("category-rules");
    const auto rules = (dir / "rules.txt").string();
    {
        std::ofstream f(rules);
        f << "# the autograd thread's matmul output, then everything the model file made\n"
             "gradient frame Backward0::apply\n"
             "activation file /proj/model\\.py$\n";
    }
    auto r = runCli("analyze tests/data/stacks/line_trace.jsonl --by category --categories '" + rules + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find(" categories: rules first (--categories), then inferred"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| gradient (rule)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| activation (rule)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" (inferred)"), std::string::npos) << r.out; // the block without a stack
    // On a trace that records categories the others say "recorded".
    auto recorded = runCli("analyze traces/mlp_train.jsonl --by category --format json --categories '" + rules + "'");
    ASSERT_EQ(recorded.exitCode, 0) << recorded.err;
    const auto j = nlohmann::json::parse(recorded.out);
    EXPECT_EQ(j["categories"], "rules, then recorded");
    for (const auto& row : j["breakdowns"][0]["by_category"])
        EXPECT_TRUE(row["label"].get<std::string>().ends_with(" (recorded)")) << row.dump(); // no frame matches there
    // A bad rule names the file and line.
    {
        std::ofstream f(rules);
        f << "gradient frame ok\nweights frame x\n";
    }
    auto bad = runCli("analyze tests/data/stacks/line_trace.jsonl --categories '" + rules + "'");
    EXPECT_EQ(bad.exitCode, 1);
    EXPECT_NE(bad.err.find(rules + ":2: 'weights' is not a category"), std::string::npos) << bad.err;
}

TEST(StacksCli, HtmlReportDrawsTheFlameGraphWithoutScript)
{
    const auto dir = gpumem::test::scratchDir("flame");
    const auto html = (dir / "r.html").string();
    auto r = runCli("report tests/data/stacks/line_trace.jsonl -o '" + html + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string text = gpumem::test::slurp(html);
    EXPECT_NE(text.find("<svg xmlns='http://www.w3.org/2000/svg' class='flame'"), std::string::npos);
    EXPECT_NE(text.find("<title>train (model.py:11) — 3.75 MiB (48.4 %) in 4 blocks, 512.00 KiB allocated here; "
                        "/home/u/proj/model.py:11</title>"),
        std::string::npos);
    EXPECT_NE(text.find("<title>torch::autograd::generated::MmBackward0::apply — 4.00 MiB (51.6 %) in 1 block</title>"),
        std::string::npos);
    EXPECT_EQ(text.find("<script"), std::string::npos);
    EXPECT_EQ(text.find("CachingAllocator"), std::string::npos);
}

TEST(StacksCli, JsonSiteRowsCarryTheFoldedStack)
{
    auto r = runCli("analyze tests/data/stacks/line_trace.jsonl --by site --format json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    bool found = false;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& row : j["breakdowns"][0]["by_site"])
        if (row["total_bytes"] == 4194304) {
            found = true;
            EXPECT_EQ(row["label"], "mm in MmBackward0"); // the autograd thread's label stays
            EXPECT_EQ(row["stack"], nlohmann::json::parse(R"j(["torch::autograd::generated::MmBackward0::apply", "at::_ops::mm::call"])j"));
            // The key keeps every recorded frame (diff matches on it).
            EXPECT_NE(row["key"].get<std::string>().find("DeviceCachingAllocator::malloc"), std::string::npos);
        }
    EXPECT_TRUE(found) << r.out;
}

// Review defect M7 (2026-12-02): on a counters-only trace (PyTorch <= 1.9 profiler, no addresses),
// `--by stack` and `--format folded` printed nothing and exited 0. Now the text says why, and folded
// output stays empty (a pipe into flamegraph.pl gets no bogus line) with the reason on stderr.
TEST(StacksCli, ACountersOnlyTraceSaysWhyItHasNoCodeTree)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    // The sentence is wrapped at 100 columns around the long path: compare it with spaces for breaks.
    auto flat = [](std::string t) {
        t = std::regex_replace(t, std::regex("\\s+"), " ");
        return t;
    };
    const auto text = runCli("analyze --by stack '" + path + "'");
    EXPECT_EQ(text.exitCode, 0) << text.err;
    EXPECT_EQ(text.out.rfind("no code tree:", 0), 0u) << text.out;
    EXPECT_NE(flat(text.out).find("records memory counters only"), std::string::npos) << text.out;
    const auto folded = runCli("analyze --format folded '" + path + "'");
    EXPECT_EQ(folded.exitCode, 0) << folded.err;
    EXPECT_EQ(folded.out, "");
    EXPECT_NE(flat(folded.err).find("records memory counters only"), std::string::npos) << folded.err;
}

// Review defect L1 (2026-12-02): the --by line heading cut the source path to 60 and the instant to 90
// columns separately, so a long path made a line of up to 160 columns.
TEST(StacksCli, TheByLineHeadingFitsOneHundredColumnsWithALongSourcePath)
{
    const auto dir = gpumem::test::scratchDir("a-rather-long-folder-name-for-the-column-test/another-long-folder-name-here");
    std::filesystem::copy_file(GPUMEM_SOURCE_DIR "/tests/data/stacks/model.py", dir / "model.py");
    const auto r = runCli("analyze --by line tests/data/stacks/line_trace.jsonl '" + (dir / "model.py").string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::istringstream lines(r.out);
    bool heading = false;
    for (std::string line; std::getline(lines, line);) {
        EXPECT_LE(gpumem::displayWidth(line), 100u) << line;
        heading = heading || line.rfind("By line of ", 0) == 0;
    }
    EXPECT_TRUE(heading) << r.out;
}
