// `gpumem explain` of a .gmt runs in passes over its chunks (analyze::diagnose over a source, with the bounded
// analysis; issue 22: 10^8 events took 15.9 GB read whole) and prints what the whole trace's explain prints:
// every bundled trace as .gmt, in passes (the default) against read whole (GPUMEM_REPLAY_IN_MEMORY=1), at the
// default moment, at a capacity, at a time, in each format, without remedies; stdout, stderr and exit code.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>

using gpumem::test::forEachBundledTraceAsGmt;
using gpumem::test::runCli;
using gpumem::test::runCliWith;

TEST(StreamingExplainCli, EveryBundledTraceAsGmtExplainsInPassesAsReadWhole)
{
    const auto dir = gpumem::test::scratchDir("streaming_explain");
    const std::string gmt = (dir / "trace.gmt").string();
    std::size_t compared = 0, answered = 0;
    forEachBundledTraceAsGmt(gmt, [&](const std::string& trace) {
        for (const char* args : { "", "--format json --capacity 64MiB", "--at 1ms --format markdown", "--no-remedies --fail-if-oom" }) {
            const std::string command = std::string("explain ") + args + " '" + gmt + "'";
            const auto passes = runCli(command);
            const auto whole = runCliWith("GPUMEM_REPLAY_IN_MEMORY", "1", command);
            EXPECT_EQ(passes.exitCode, whole.exitCode) << trace << ' ' << args << ": " << passes.err;
            EXPECT_EQ(passes.out, whole.out) << trace << ' ' << args;
            EXPECT_EQ(passes.err, whole.err) << trace << ' ' << args;
            ++compared;
            answered += whole.exitCode == 0 || whole.exitCode == 3;
        }
    });
    EXPECT_GE(compared, 280u);
    EXPECT_GE(answered, 150u);
}

// The passes hold no more than the replays need: 2 M generated events (bench/make_big_gmt, 22 MB), explained
// in passes under a 150 MiB address-space cap — where the whole trace (340 MB resident, GPUMEM_REPLAY_IN_MEMORY=1)
// runs out of memory — print the whole trace's explanation.
TEST(StreamingExplainCli, APassedExplainFitsWhereTheWholeTraceDoesNot)
{
    const std::string generator = GPUMEM_BINARY_DIR "/bench/make_big_gmt";
    if (!std::filesystem::exists(generator) || std::system("command -v prlimit >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "needs bench/make_big_gmt (build the whole project) and prlimit (util-linux)";
    const auto dir = gpumem::test::scratchDir("streaming_explain_cap");
    const std::string gmt = (dir / "big.gmt").string(), out = (dir / "out.txt").string();
    ASSERT_EQ(std::system(("'" + generator + "' --events 2000000 -o '" + gmt + "' >/dev/null 2>&1").c_str()), 0);
    const auto whole = runCliWith("GPUMEM_REPLAY_IN_MEMORY", "1", "explain '" + gmt + "'");
    ASSERT_EQ(whole.exitCode, 0) << whole.err;
    const std::string capped = "prlimit --as=157286400 '" GPUMEM_CLI "' explain '" + gmt + "' >'" + out + "' 2>/dev/null";
    EXPECT_NE(std::system(("GPUMEM_REPLAY_IN_MEMORY=1 " + capped).c_str()), 0) << "the whole trace fitted the cap: the test proves nothing";
    const int rc = std::system(capped.c_str());
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(gpumem::test::slurp(out), whole.out);
}

// Review finding: in passes, a refused --device or --at came before the damaged-trace note (or, where the only
// MEMV chunk is damaged, instead of the whole read's error, exit 2 for 1). Now a pass checks the chunks first:
// explain prints what it prints read whole, and analyze and diff say the trace is damaged before refusing.
TEST(StreamingExplainCli, ADamagedTraceIsSaidSoBeforeARefusedOption)
{
    const auto dir = gpumem::test::scratchDir("streaming_explain_damaged");
    const std::string one = (dir / "two.gmt").string(), tiny = (dir / "tiny.gmt").string();
    ASSERT_EQ(runCli("convert tests/data/two_devices_streams.jsonl -o '" + one + "'").exitCode, 0);
    ASSERT_EQ(runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + tiny + "'").exitCode, 0);
    const std::string bytes = gpumem::test::slurp(one);
    std::string flipped = gpumem::test::slurp(tiny);
    ASSERT_GT(flipped.size(), 260u);
    flipped[260] = static_cast<char>(flipped[260] ^ 0xff); // inside its one MEMV chunk
    const std::string joined = (dir / "joined.gmt").string(), cut = (dir / "cut.gmt").string(), flip = (dir / "flip.gmt").string();
    std::ofstream(joined, std::ios::binary) << bytes << bytes;
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 1);
    std::ofstream(flip, std::ios::binary) << flipped;
    for (const std::string& file : { joined, cut, flip })
        for (const char* args : { "--device 7", "--at peak" }) {
            const std::string command = std::string("explain ") + args + " '" + file + "'";
            const auto passes = runCli(command);
            const auto whole = runCliWith("GPUMEM_REPLAY_IN_MEMORY", "1", command);
            EXPECT_EQ(passes.exitCode, whole.exitCode) << command;
            EXPECT_EQ(passes.err, whole.err) << command;
            EXPECT_NE(whole.exitCode, 0) << command;
        }
    for (const std::string& command : { "analyze --device 7 '" + joined + "'", "diff --device 7 '" + joined + "' '" + joined + "'",
             "diff --at 999s '" + cut + "' '" + cut + "'" }) {
        const auto r = runCli(command);
        EXPECT_EQ(r.exitCode, 2) << command;
        EXPECT_NE(r.err.find(" is damaged"), std::string::npos) << command << ": " << r.err;
    }
}
