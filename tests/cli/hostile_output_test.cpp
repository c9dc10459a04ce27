// Regressions from a hostile-input review of the CLI: each test is the smallest input that showed it.
#include "core/gmt_format.h"
#include "core/trace_builder.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

using gpumem::test::runCli;
using gpumem::test::scratchDir;
namespace fs = std::filesystem;

// An OUT that is a symlink is refused now (issue 21): tests/cli/output_file_test.cpp.

TEST(CliOutput, RefusesStandardOutputEmptyNamesAndMissingFolders)
{
    EXPECT_EQ(runCli("convert traces/mlp_train.jsonl -o -").exitCode, 2);
    EXPECT_EQ(runCli("convert traces/mlp_train.jsonl --to gmt -o ''").exitCode, 2);
    auto r = runCli("convert traces/mlp_train.jsonl -o /nonexistent-folder/x.gmt");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

TEST(CliInput, RefusesAPipeInsteadOfHanging)
{
    auto fifo = scratchDir("fifo") / "trace.jsonl";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    auto r = runCli("info '" + fifo.string() + "'"); // nobody writes: a reader would block forever
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

TEST(CliOutput, InvalidUtf8NamesDoNotBreakJsonOutput)
{
    gpumem::TraceBuilder b;
    gpumem::Device d;
    d.name = b.intern("\xff\xfe" "A");
    b.addDevice(d);
    b.stream(0, 0);
    b.alloc(1, 4096, 512);
    auto path = (scratchDir("utf8") / "bad-name.gmt").string();
    gpumem::writeGmt(b.build(), path);
    auto r = runCli("info --format json '" + path + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto parsed = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << r.out;
    EXPECT_EQ(parsed[0]["devices"][0]["events"]["alloc"], 1);
}

TEST(CliOutput, ControlCharactersFromTracesNeverReachTheTerminal)
{
    auto path = scratchDir("escape") / "escape.jsonl";
    std::ofstream(path) << R"({"format":"gpumem-jsonl","version":1,"metadata":{"tool":"\u001b]0;pwned\u0007x"}})" "\n"
                        << R"({"type":"device","id":0,"kind":"cuda","ordinal":0,"name":"a\u001b[31m"})" "\n";
    auto r = runCli("info '" + path.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
    EXPECT_EQ(r.out.find('\x07'), std::string::npos);
    EXPECT_NE(r.out.find("\"a\\x1b[31m\""), std::string::npos) << r.out; // escaped as in messages (textForTerminal)
}

// Regression: the segments a snapshot reserved before its trace began were adopted without checking
// --capacity, so a 3.95 GiB run "fit" on a 1 GiB device.
TEST(ReplayCapacity, ThePreWindowStateCountsAgainstTheCapacity)
{
    const std::string file = GPUMEM_PUBLIC_TRACES "/cs336-bcrafton/memory_snapshot.pickle";
    if (!fs::exists(file))
        GTEST_SKIP() << "public traces not found at " GPUMEM_PUBLIC_TRACES;
    auto small = runCli("replay --format json --policy pytorch --capacity 1GiB --on-oom stop '" + file + "'");
    ASSERT_EQ(small.exitCode, 0) << small.err;
    EXPECT_NE(small.out.find("\"ooms\": 1"), std::string::npos) << small.out;
    auto big = runCli("replay --format json --policy pytorch --capacity 8GiB --on-oom stop '" + file + "'");
    EXPECT_NE(big.out.find("\"ooms\": 0"), std::string::npos) << big.out;
}

// Regression: a pickle that is not snapshot-shaped was "not a trace format" instead of being refused
// for the global it names. Bytes of pickle.dumps(collections.OrderedDict()), protocol 4.
TEST(CliInput, AnyPickleWithAGlobalIsRefusedByOpcodeAndOffset)
{
    auto path = scratchDir("global") / "g.pickle";
    const char bytes[] = "\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00\x8c\x0b" "collections\x94\x8c\x0b" "OrderedDict\x94"
                         "\x93\x94)R\x94.";
    std::ofstream(path, std::ios::binary).write(bytes, sizeof bytes - 1);
    auto r = runCli("info '" + path.string() + "'");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("STACK_GLOBAL (0x93) at byte offset"), std::string::npos) << r.err;
}

// Review finding: replaying a profiler trace that began after the model loaded printed a table that
// looked complete while 3.82 GiB (HTA's opening Total Allocated) was missing from it.
TEST(ReplayCapacity, WarnsWhenAProfilerTraceBeganWithMemoryAlreadyAllocated)
{
    const std::string file = GPUMEM_PUBLIC_TRACES "/hta/df_index_resolver.json.gz";
    if (!fs::exists(file))
        GTEST_SKIP() << "public traces not found at " GPUMEM_PUBLIC_TRACES;
    auto r = runCli("replay --policy pytorch '" + file + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("note: 3.82 GiB was already allocated"), std::string::npos) << r.err;
    auto sample = runCli("replay --policy pytorch traces/mlp_train.jsonl");
    EXPECT_EQ(sample.err, "");
}

// Review finding (session 1): `analyze` of the same trace showed a 2.36 GiB lower bound and module
// breakdowns with no word that 3.82 GiB allocated before the trace are not in them.
TEST(AnalyzeNotes, WarnsWhenAProfilerTraceBeganWithMemoryAlreadyAllocated)
{
    const std::string file = GPUMEM_PUBLIC_TRACES "/hta/df_index_resolver.json.gz";
    if (!fs::exists(file))
        GTEST_SKIP() << "public traces not found at " GPUMEM_PUBLIC_TRACES;
    auto r = runCli("analyze --top 1 '" + file + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.err.find("note: 3.82 GiB was already allocated when the trace began"), std::string::npos)
        << r.err;
    // ProfilerStep#2 began 19.4 ms before the first memory event: it is the trace start, from which
    // analyze counts as info does (it read -0.019424 s when analyze counted from the first memory event).
    EXPECT_NE(r.out.find("|     2 |   +0.000000 s |"), std::string::npos) << r.out;
    auto sample = runCli("analyze traces/mlp_train.jsonl");
    EXPECT_EQ(sample.err, "");
}

// Review finding: `--at 0.35` (no unit) was read as 0.35 ns and `--at 100s` on a 4 ms trace snapped to
// the last event; both printed a breakdown of some other instant, or none, and exited 0.
TEST(AnalyzeNotes, RefusesAnInstantWithoutUnitOrOutsideTheTrace)
{
    auto unitless = runCli("analyze traces/mlp_train.jsonl --at 0.35");
    EXPECT_EQ(unitless.exitCode, 2) << unitless.err;
    auto late = runCli("analyze traces/mlp_train.jsonl --at 100s");
    EXPECT_EQ(late.exitCode, 2) << late.err;
    EXPECT_NE(late.err.find("is outside the trace's memory events"), std::string::npos) << late.err;
    EXPECT_EQ(runCli("analyze traces/mlp_train.jsonl --at 2ms").exitCode, 0);
    EXPECT_EQ(runCli("analyze traces/mlp_train.jsonl --at 0").exitCode, 0);
}

// Review finding: `--policy pytorch --policy pytorch:expandable_segments:False` printed two rows named
// "pytorch" with different results: the bare spec adopted the snapshot's pre-window state, the other
// allocated it as requests. Since issue 16 item 2 every row starts from the same state (the rebuilt
// blocks as requests; `--fidelity` alone adopts), so the two rows now agree and say where they start.
TEST(ReplayLabels, TheRowThatStartsFromTheRecordedStateSaysSo)
{
    const std::string file = GPUMEM_PUBLIC_TRACES "/cs336-bcrafton/memory_snapshot.pickle";
    if (!fs::exists(file))
        GTEST_SKIP() << "public traces not found at " GPUMEM_PUBLIC_TRACES;
    auto r = runCli("replay --policy pytorch --policy pytorch:expandable_segments:False '" + file + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.find("(recorded state)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("   1  pytorch        3.88 GiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("   2  pytorch        3.88 GiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("start: recorded: every row starts with the 543 events rebuilt from before the window"),
        std::string::npos)
        << r.out;
    auto json = runCli("replay --format json --policy pytorch '" + file + "'");
    EXPECT_NE(json.out.find("\"initial_state\": \"allocated\""), std::string::npos) << json.out;
}

// Review finding: on the 8-GPU xplane trace `replay` silently replayed one device (index 5) while
// `analyze` and the viewer showed hip:7 (index 1), and no verb could replay GPU_0.
TEST(ReplayDevice, DefaultsToTheBusiestDeviceAndTakesDevice)
{
    const std::string dir = GPUMEM_PUBLIC_TRACES "/tracelens/jax-xplane";
    if (!fs::exists(dir))
        GTEST_SKIP() << "public traces not found at " GPUMEM_PUBLIC_TRACES;
    std::string file;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().string().ends_with(".xplane.pb"))
            file = e.path().string();
    ASSERT_FALSE(file.empty());
    auto busiest = runCli("replay --format json --policy ideal '" + file + "'");
    ASSERT_EQ(busiest.exitCode, 0) << busiest.err;
    EXPECT_NE(busiest.out.find("\"device\": 1,"), std::string::npos) << "hip:7, as analyze: " << busiest.out;
    EXPECT_NE(runCli("analyze --top 1 '" + file + "'").out.find("device hip:7"), std::string::npos);
    auto first = runCli("replay --format json --policy ideal --device 0 '" + file + "'");
    EXPECT_NE(first.out.find("\"device\": 0,"), std::string::npos) << first.out;
    EXPECT_EQ(runCli("fit --policy ideal --device 0 '" + file + "'").exitCode, 0);
    EXPECT_EQ(runCli("sweep --policy 'ideal:alignment:{256,512}' --device 0 '" + file + "'").exitCode, 0);
    EXPECT_EQ(runCli("replay --policy ideal --device 8 '" + file + "'").exitCode, 2);
}

// Review finding: `--capacity 0` silently meant an unlimited device (exit 0) while `--max-reserved 0`
// and `--limit NAME=0` were usage errors.
TEST(ReplayCapacity, ZeroIsAUsageError)
{
    auto r = runCli("replay traces/mlp_train.jsonl --capacity 0");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("leave --capacity out for an unlimited device"), std::string::npos) << r.err;
    EXPECT_EQ(runCli("sweep traces/mlp_train.jsonl --policy 'pytorch:max_split_size_mb:{64,128}' --capacity 0").exitCode, 2);
}
