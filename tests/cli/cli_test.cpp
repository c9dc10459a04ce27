#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

using gpumem::test::runCli;
using gpumem::test::scratchDir;

namespace {
std::size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }
}

TEST(Cli, PrintsVersionAndHelp)
{
    auto v = runCli("--version");
    EXPECT_EQ(v.exitCode, 0);
    EXPECT_EQ(v.out, "gpumem " GPUMEM_VERSION "\n");
    auto h = runCli("help");
    EXPECT_EQ(h.exitCode, 0);
    EXPECT_NE(h.out.find("info"), std::string::npos);
    EXPECT_NE(h.out.find("convert"), std::string::npos);
    auto hv = runCli("help info");
    EXPECT_EQ(hv.exitCode, 0);
    EXPECT_NE(hv.out.find("--format"), std::string::npos);
    auto dash = runCli("convert -h");
    EXPECT_EQ(dash.exitCode, 0);
    EXPECT_NE(dash.out.find("--output"), std::string::npos);
    auto formats = runCli("help formats");
    EXPECT_NE(formats.out.find("gmt"), std::string::npos);
}

TEST(Cli, UsageErrorsExitTwo)
{
    EXPECT_EQ(runCli("").exitCode, 2);
    EXPECT_EQ(runCli("frobnicate").exitCode, 2);
    EXPECT_EQ(runCli("help frobnicate").exitCode, 2);
    EXPECT_EQ(runCli("info").exitCode, 2);
    auto bad = runCli("info --format xml traces/mlp_train.jsonl");
    EXPECT_EQ(bad.exitCode, 2);
    EXPECT_NE(bad.err.find("text, json"), std::string::npos) << bad.err;
    EXPECT_EQ(runCli("info --no-such-option traces/mlp_train.jsonl").exitCode, 2);
    EXPECT_EQ(runCli("convert traces/mlp_train.jsonl -o out.txt").exitCode, 2);
}

TEST(Cli, BadFilesGiveOneLineErrorAndExitOne)
{
    auto dir = scratchDir("badfiles");
    std::ofstream(dir / "empty.gmt").close();
    {
        std::mt19937 rng(7);
        std::ofstream f(dir / "random.bin", std::ios::binary);
        for (int i = 0; i < 4096; ++i)
            f.put(static_cast<char>(rng()));
    }
    {
        std::ofstream f(dir / "newer.gmt", std::ios::binary);
        f.write("\x89GMT\r\n\x1a\n\x09\x00\x00\x00", 12);
        f.write("\x02\x00\x00\x00{}\x00\x00\x00\x00", 10);
    }
    {
        std::ofstream f(dir / "magic.gmt", std::ios::binary);
        f << "GMTX not really a trace";
    }
    for (const char* name : { "empty.gmt", "random.bin", "newer.gmt", "magic.gmt", "missing.gmt" }) {
        SCOPED_TRACE(name);
        auto r = runCli("info '" + (dir / name).string() + "'");
        EXPECT_EQ(r.exitCode, 1);
        EXPECT_EQ(lines(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find(name), std::string::npos) << "the error names the file: " << r.err;
        EXPECT_EQ(r.out, "");
    }
    EXPECT_NE(runCli("info '" + (dir / "newer.gmt").string() + "'").err.find("newer gpumem"), std::string::npos);
}

TEST(Cli, ConvertedTraceReportsTheSameFigures)
{
    auto dir = scratchDir("convert");
    auto gmt = (dir / "mlp.gmt").string();
    auto jsonl = (dir / "mlp.jsonl").string();
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + gmt + "'").exitCode, 0);
    ASSERT_EQ(runCli("convert '" + gmt + "' -o '" + jsonl + "'").exitCode, 0);
    EXPECT_EQ(gpumem::test::slurp(jsonl), gpumem::test::slurp(std::string(GPUMEM_SOURCE_DIR) + "/traces/mlp_train.jsonl"));
    auto a = nlohmann::json::parse(runCli("info --format json traces/mlp_train.jsonl").out)[0];
    auto b = nlohmann::json::parse(runCli("info --format json '" + gmt + "'").out)[0];
    for (auto* j : { &a, &b }) {
        j->erase("file");
        j->erase("reader");
    }
    EXPECT_EQ(a, b);
    EXPECT_EQ(a["devices"][0]["peak_allocated"]["bytes"], 671843328);
}

TEST(Cli, ConvertRefusesToOverwriteItsInputAndLeavesNoPartialFile)
{
    auto dir = scratchDir("overwrite");
    auto gmt = (dir / "t.gmt").string();
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + gmt + "'").exitCode, 0);
    EXPECT_EQ(runCli("convert '" + gmt + "' -o '" + gmt + "'").exitCode, 2);
    auto bad = runCli("convert /nonexistent.jsonl -o '" + (dir / "x.gmt").string() + "'");
    EXPECT_EQ(bad.exitCode, 1);
    EXPECT_FALSE(std::filesystem::exists(dir / "x.gmt"));
}

TEST(Cli, InfoContinuesPastABadFileAndExitsOne)
{
    auto r = runCli("info /nonexistent.gmt traces/mlp_train.jsonl");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.out.find("traces/mlp_train.jsonl"), std::string::npos);
    EXPECT_NE(r.err.find("/nonexistent.gmt"), std::string::npos);
}
