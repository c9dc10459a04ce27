// gpumem explain: the verdict first, the findings, the proven fixes; the formats, --fail-if-oom, and the
// verdict that opens `analyze` (docs/explain.md). Inputs: tests/data/explain/*.jsonl.
#include "core/display_width.h"
#include "tests/cli/cli_runner.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

using gpumem::test::runCli;

TEST(ExplainCli, OpensWithTheVerdictAndListsTheProvenFix)
{
    auto r = runCli("explain tests/data/explain/oversize_split.jsonl --capacity 100MiB");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("verdict: At +0.000006 s, a 60.00 MiB request fails on a device of 100.00 MiB", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("1. oversize_split  60.00 MiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("proven fixes (replayed on this trace at 100.00 MiB):\n"
                         "  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"),
        std::string::npos)
        << r.out;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);)
        EXPECT_LE(gpumem::displayWidth(l), 100u) << l;
}

// The blocks that pin a segment are listed under it, indented as the markdown nests them (review finding: in the
// text they stood level with the segments, so a reader could not tell which segment each one pinned).
TEST(ExplainCli, PinningBlocksAreNestedUnderTheirSegment)
{
    const auto r = runCli("explain tests/data/explain/external_fragmentation.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("   - segment 0x1000000000000 (20.00 MiB, stream 0): free 8.00 MiB, 6.00 MiB; pinned by 1 live block\n"
                         "     - pinned by 6.00 MiB at 0x1000000600000 from keep (train.py:9), allocated +0.000001 s\n"
                         "   - segment 0x1000001600000"),
        std::string::npos)
        << r.out;
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

TEST(ExplainCli, AnAtThatIsNotATimeIsRefusedWithoutOfferingPeak)
{
    // explain takes a time only: its error for 'soon' offered "peak, reserved-peak", which it then refused.
    for (const char* at : { "soon", "peak", "reserved-peak" }) {
        const auto r = runCli(std::string("explain tests/data/explain/capacity.jsonl --at ") + at);
        EXPECT_EQ(r.exitCode, 2) << at;
        EXPECT_NE(r.err.find(std::string("--at '") + at + "' is not a time after the trace start"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("is not peak"), std::string::npos) << r.err;
    }
    // A time as the verdict prints it is taken: the moment is the same as --at 1us.
    const auto printed = runCli("explain tests/data/explain/capacity.jsonl --at '+0.000001 s'");
    const auto plain = runCli("explain tests/data/explain/capacity.jsonl --at 1us");
    ASSERT_EQ(printed.exitCode, 0) << printed.err;
    EXPECT_EQ(printed.out, plain.out);
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

// Every out-of-memory text in tests/data/oom (verbatim from issues, SOURCES.md) explains: exit 0, the
// verdict first, at least one finding, nothing wider than 100 columns, one blank line before "what to
// record next".
TEST(ExplainCli, EveryOomTextExplains)
{
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/oom"))
        if (e.path().extension() == ".txt")
            files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    ASSERT_GE(files.size(), 12u);
    for (const auto& name : files) {
        const auto r = runCli("explain tests/data/oom/" + name);
        ASSERT_EQ(r.exitCode, 0) << name << ": " << r.err;
        EXPECT_EQ(r.out.rfind("verdict: ", 0), 0u) << name << ":\n" << r.out;
        EXPECT_NE(r.out.find("findings, ranked by bytes:\n1. "), std::string::npos) << name << ":\n" << r.out;
        EXPECT_EQ(r.out.find("\n\n\n"), std::string::npos) << name << ":\n" << r.out;
        EXPECT_NE(r.out.find("\n\nwhat to record next ("), std::string::npos) << name << ":\n" << r.out;
        std::istringstream lines(r.out);
        for (std::string l; std::getline(lines, l);)
            EXPECT_LE(gpumem::displayWidth(l), 100u) << name << ": " << l;
    }
}

TEST(ExplainCli, CurrentWordingFromIssue16417)
{
    // 23.60 GiB in use by the process − (22.90 GiB allocated + 194.87 MiB reserved but unallocated)
    // = 521.93 MiB outside the allocator; the 194.87 MiB cached free exceeds the 22.00 MiB request.
    const auto r = runCli("explain tests/data/oom/current_issue16417.txt");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("1. outside_allocator  521.93 MiB\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("process in use 23.60 GiB − reserved by PyTorch 23.09 GiB = 521.93 MiB"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("2. external_fragmentation  194.87 MiB  (unproven)\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("free_exceeds_request"), std::string::npos) << r.out; // 11.06 MiB free < 22.00 MiB
}

TEST(ExplainCli, TensorFlowOomWithoutFiguresExplains)
{
    const auto r = runCli("explain tests/data/oom/tf_oom_azure880.txt");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("verdict: A 112.55 MiB request failed: the message has no memory figures "
                          "(no_memory_figures)",
                  0),
        0u)
        << r.out;
    EXPECT_NE(r.out.find("the failed request 112.55 MiB; the message has no memory figures\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("what to record next (the allocator's log or a profile says what held the memory):"),
        std::string::npos)
        << r.out;
}

// The README shows one real `explain` output (its ```text block after the three commands): every line of
// that block, but the "..." standing for what it leaves out, is a line of today's output.
TEST(ExplainCli, TheReadmeExcerptIsRealOutput)
{
    std::ifstream readme(std::string(GPUMEM_SOURCE_DIR) + "/README.md");
    ASSERT_TRUE(readme) << "README.md not found";
    std::vector<std::string> excerpt;
    bool inBlock = false;
    for (std::string l; std::getline(readme, l);) {
        if (!inBlock && l == "```text" && excerpt.empty()) {
            inBlock = true;
            continue;
        }
        if (inBlock && l == "```")
            break;
        if (inBlock && l != "...")
            excerpt.push_back(l);
    }
    ASSERT_GE(excerpt.size(), 5u) << "the README has no ```text block with explain's output";
    const auto r = runCli("explain traces/mlp_train.jsonl --capacity 660MiB");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::vector<std::string> out;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);)
        out.push_back(l);
    for (const auto& l : excerpt)
        EXPECT_NE(std::find(out.begin(), out.end(), l), out.end()) << "README line not in the output: " << l << "\n"
                                                                   << r.out;
}

// Review findings: a cut trace was explained without a word, and an --at past the trace's end was
// explained as if the state there were known.
TEST(ExplainCli, SaysTheTraceIsCutAndRefusesAnInstantAfterItsEnd)
{
    const std::string whole = gpumem::test::slurp(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/kineto/prewarm_a.json");
    const auto cut = gpumem::test::scratchDir("explain_cut") / "cut.json";
    std::ofstream(cut) << whole.substr(0, whole.size() * 7 / 10);
    auto r = runCli("explain --no-remedies '" + cut.string() + "'");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.err.rfind("gpumem explain: note: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("is damaged (truncated ×1)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("in a string inside traceEvents[1]"), std::string::npos) << r.err;
    r = runCli("explain traces/mlp_train.jsonl --at 999s");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("--at +999.000000 s is after the last memory event of cuda:0 (+0.004185 s)"), std::string::npos)
        << r.err;
}

// Review finding: a PyTorch <= 1.9 profiler trace (sizes, no addresses) was "device cpu has no allocations
// and no memory counters" (exit 1). tests/data/kineto/legacy_counters_only.json: cuda:0's counter peaks
// highest, so it is explained, from its counter.
TEST(ExplainCli, AProfilerTraceWithoutAddressesIsExplainedFromItsCounter)
{
    const auto r = runCli("explain tests/data/kineto/legacy_counters_only.json");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("device cuda:0;"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1. no_addresses  5.00 MiB  (unproven)"), std::string::npos) << r.out; // info: peak 5242880 B
    EXPECT_NE(r.out.find("bytes peak at 5.00 MiB at +0.000040 s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(no_addresses); record a memory snapshot"), std::string::npos) << r.out;
}

// Review finding: the help of replay, sweep, fit, analyze, diff and report and `help formats` ran to
// 101-141 columns. Every verb's help (the verbs `gpumem help` lists) and `help formats` keep within 100.
TEST(HelpText, EveryVerbsHelpAndTheFormatsFitOneHundredColumns)
{
    const auto list = runCli("help");
    ASSERT_EQ(list.exitCode, 0) << list.err;
    std::vector<std::string> topics { "formats", "" };
    std::istringstream in(list.out.substr(list.out.find("verbs:\n") + 7));
    for (std::string l; std::getline(in, l) && l.rfind("  ", 0) == 0;)
        topics.push_back(l.substr(2, l.find(' ', 2) - 2));
    ASSERT_GE(topics.size(), 12u) << list.out;
    for (const auto& topic : topics) {
        const auto r = runCli("help " + topic);
        ASSERT_EQ(r.exitCode, 0) << topic << ": " << r.err;
        std::istringstream lines(r.out);
        for (std::string l; std::getline(lines, l);)
            EXPECT_LE(gpumem::displayWidth(l), 100u) << "help " << topic << ": " << l;
    }
}

// Review finding (2026-12-03): a trace recorded with PyTorch 1.10 replays under 1.10's rules, which have no
// expandable segments; the expandable_segments candidate failed the whole explain ("unknown pytorch@1.10
// option"). Candidates now come from the settings the replayed version has.
TEST(ExplainCli, ATraceOfAnOldPyTorchIsExplainedWithTheSettingsItHas)
{
    const auto r = runCli("explain --format json tests/data/versions/record_stream_queue_torch110.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("pytorch@1.10"), std::string::npos);
    EXPECT_EQ(r.out.find("expandable_segments:True"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("roundup_power2_divisions:4"), std::string::npos) << r.out; // a 1.10 setting, still tried
}

TEST(ExplainCli, ARunTracedOnAGpuIsReplayedUnderTheCudaPoolOnItsOwnGpusMemory)
{
    // The first run recorded by gpumem-tracer on a GPU (traces/gpu_check_h200.gmt: a CUDA program
    // with cudaMallocAsync pool requests, cuBLAS and NCCL, no PyTorch) was explained under PyTorch's
    // policy with PyTorch's settings as the fixes, and replayed on the default 80 GiB although the
    // tracer had recorded the H200's 139.80 GiB in the metadata.
    auto info = runCli("info traces/gpu_check_h200.gmt");
    ASSERT_EQ(info.exitCode, 0) << info.err;
    EXPECT_NE(info.out.find("  device cuda:0 (139.80 GiB), 1 kernel stream, memory events on 2 streams\n"), std::string::npos)
        << info.out;
    auto r = runCli("explain traces/gpu_check_h200.gmt");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // The recorded figure holds the program's own, NCCL's and cuBLAS's segments; the verdict says how much
    // (review finding).
    EXPECT_EQ(r.out.rfind("verdict: No OOM (unlimited device); the reserved peak is 34.00 MiB at +0.671130 s for 32.00 MiB\n"
                          "         allocated in replay (the run recorded 962.58 MiB, up to 542.58 MiB of it not the\n"
                          "         allocator's); no candidate setting lowered the peak in replay.\n",
                  0),
        0u)
        << r.out;
    auto analyze = runCli("analyze traces/gpu_check_h200.gmt");
    ASSERT_EQ(analyze.exitCode, 0) << analyze.err;
    EXPECT_NE(analyze.out.find("| layers at the peaks: allocated 32.00 MiB ⊂ reserved 962.58 MiB, of which  |\n"
                               "|   up to 542.58 MiB not the allocator's (the program's and other libraries'|\n"
                               "|   segments) ⊂ device 139.80 GiB"),
        std::string::npos)
        << analyze.out;
    EXPECT_NE(r.out.find("policy cuda-async (recorded by the trace: gpumem-tracer records requests of the\n"
                         "cudaMallocAsync pool only)"),
        std::string::npos)
        << r.out;
    auto replay = runCli("replay traces/gpu_check_h200.gmt");
    ASSERT_EQ(replay.exitCode, 0) << replay.err;
    EXPECT_EQ(replay.err.find("records no memory size"), std::string::npos) << replay.err;
}

TEST(ExplainCli, TheTracersOutsideFigureIsNeverShownAboveTheReservedOneItIsPartOf)
{
    // Review finding (2026-12-04): an unmap that covers no whole mapping lowers the reserved figure (paired by
    // size) but not the outside one (paired by address): "reserved 4.00 MiB, of which up to 6.00 MiB".
    auto r = runCli("analyze tests/data/outside/stray_unmap.jsonl");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("| layers at the peaks: allocated 0 B ⊂ reserved 4.00 MiB, of which up to    |\n"
                         "|   4.00 MiB not the allocator's"),
        std::string::npos)
        << r.out;
}
