// Errors and usage messages fit 100 display columns, as the notes and the tables do (the house rule for
// text output): cli/main.cpp's fitMessage wraps each at blanks, continuations indented by two. Before, the
// error for a file no importer reads was one line of 302 characters. The smallest inputs: a 7-byte file, the
// bundled trace as .gmt cut inside a chunk, an unknown policy.
#include "core/display_width.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::scratchDir;

namespace {
std::string written(const std::string& file, const std::string& bytes)
{
    const auto path = scratchDir("error-width") / file;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
}

// Every line of `text` is within 100 display columns, and the lines after the first are continuations.
void expectWrapped(const std::string& text)
{
    std::istringstream lines(text);
    std::size_t n = 0;
    for (std::string line; std::getline(lines, line); ++n) {
        EXPECT_LE(gpumem::displayWidth(line), 100u) << line;
        if (n > 0) {
            EXPECT_EQ(line.rfind("  ", 0), 0u) << "a continuation is indented by two: " << line;
        }
    }
    EXPECT_GE(n, 2u) << "the message is long enough to wrap: " << text;
}
} // namespace

TEST(ErrorWidth, AnErrorForAFileNoImporterReadsIsWrappedWithinOneHundredColumns)
{
    const std::string path = written("garbage.bin", "garbage");
    const auto r = runCli("info '" + path + "'");
    EXPECT_EQ(r.exitCode, 1);
    expectWrapped(r.errRaw);
    // The words are the message's, in order: joined again it is one line naming the file and what to do.
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find("gpumem info: error: " + path + ": not a trace format gpumem reads"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("run `gpumem help formats` for what each format looks like"), std::string::npos) << r.err;
}

TEST(ErrorWidth, AReadErrorOfAnotherVerbIsWrappedToo)
{
    // The bundled trace as .gmt, cut inside its first MEMV chunk: a three-line error.
    const auto whole = scratchDir("error-width") / "mlp_train.gmt";
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + whole.string() + "'").exitCode, 0);
    const std::string bytes = gpumem::test::slurp(whole);
    ASSERT_GT(bytes.size(), 2000u);
    const std::string path = written("cut.gmt", bytes.substr(0, 2000));
    const auto r = runCli("analyze '" + path + "'");
    EXPECT_EQ(r.exitCode, 1) << r.errRaw;
    expectWrapped(r.errRaw);
    EXPECT_NE(r.err.find("gpumem analyze: error: " + path + ": the file ends at offset 2000 inside chunk MEMV"),
        std::string::npos) << r.err;
    EXPECT_NE(r.err.find("it is damaged or was cut in or before its first MEMV chunk"), std::string::npos) << r.err;
}

TEST(ErrorWidth, AUsageMessageListingEveryPolicyIsWrapped)
{
    const auto r = runCli("replay --policy no-such-policy traces/mlp_train.jsonl");
    EXPECT_EQ(r.exitCode, 2);
    expectWrapped(r.errRaw);
    EXPECT_NE(r.err.find("gpumem replay: unknown policy 'no-such-policy'; valid policies: pytorch, direct,"),
        std::string::npos) << r.err;
    EXPECT_NE(r.err.find("cuda-async, optimal, compaction"), std::string::npos) << r.err;
}
