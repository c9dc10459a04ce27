// Output-file rules shared by every verb that writes a file (cli/output_file.h): never the input,
// never a write-protected file; each test is the smallest input that showed the defect.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;
namespace fs = std::filesystem;

// Regression: `report /tmp/v.jsonl -o /tmp/v.jsonl` replaced the trace with the HTML report.
TEST(OutputGuard, ReportRefusesToWriteOverItsInput)
{
    auto path = scratchDir("report-self") / "v.jsonl";
    fs::copy_file(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl", path);
    const std::string before = slurp(path);
    auto r = runCli("report '" + path.string() + "' -o '" + path.string() + "'");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_EQ(r.err, "gpumem report: the output '" + path.string() + "' is the input; choose another output file\n");
    EXPECT_EQ(slurp(path), before);
}

TEST(OutputGuard, ReportRefusesAnInputReachedThroughALinkAmongSeveralTraces)
{
    auto dir = scratchDir("report-link");
    auto path = dir / "b.jsonl";
    fs::copy_file(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl", path);
    fs::create_symlink(path, dir / "out.html");
    auto r = runCli("report tests/data/tiny_alloc_free.jsonl '" + path.string() + "' -o '" + (dir / "out.html").string() + "'");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("is the input; choose another output file"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(path), slurp(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl"));
}

TEST(OutputGuard, ConvertStillRefusesItsInput)
{
    auto path = scratchDir("convert-self") / "v.jsonl";
    fs::copy_file(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl", path);
    auto r = runCli("convert '" + path.string() + "' -o '" + path.string() + "'");
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_EQ(r.err, "gpumem convert: the output '" + path.string() + "' is the input; choose another output file\n");
}

// Regression: write-temp-then-rename replaced a chmod 444 file silently. The check refuses a file with
// no write permission bit even for root (rm's "write-protected" rule), so this test runs as root too.
TEST(OutputGuard, WriteProtectedOutputsAreRefusedForEveryVerb)
{
    auto dir = scratchDir("readonly");
    for (const std::string verb : { "report", "convert" }) {
        auto target = dir / (verb + (verb == "report" ? ".html" : ".gmt"));
        std::ofstream(target) << "keep me";
        fs::permissions(target, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
        auto r = runCli(verb + " tests/data/tiny_alloc_free.jsonl -o '" + target.string() + "'");
        EXPECT_EQ(r.exitCode, 1) << verb;
        EXPECT_EQ(r.err, "gpumem " + verb + ": error: " + target.string() + ": the output file exists and is write-protected; not replacing it "
                  "(make it writable or choose another output file)\n") << verb;
        EXPECT_EQ(slurp(target), "keep me") << verb;
    }
}

TEST(OutputGuard, WritableOutputsAreStillReplaced)
{
    auto target = scratchDir("writable") / "r.html";
    std::ofstream(target) << "old";
    auto r = runCli("report tests/data/tiny_alloc_free.jsonl -o '" + target.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(slurp(target).rfind("<!DOCTYPE html>", 0), 0u) << slurp(target).substr(0, 40);
}
