// `-o /dev/stdout` with standard output redirected to a regular file (review finding 2026-12-02): the path was
// opened again, at offset 0 and truncated, so the output overwrote what the shell had written before it, and
// convert's "wrote" line then overwrote the output's start. Such a path (one of the process's descriptors on a
// regular file) is now written through the descriptor, at its offset; the "wrote" line goes to stderr whenever
// OUT is standard output (a pipe too). A link to a regular file elsewhere is still refused.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using gpumem::test::runCli;
using gpumem::test::slurp;

namespace {
    // Runs `gpumem ARGS` in the source folder between two echo lines, standard output `mode` ('>' or '>>') the
    // file `out`; stderr to `err`. Returns the exit status of the group.
    int between(const std::string& args, const fs::path& out, const fs::path& err, const char* mode = ">")
    {
        const std::string cmd = "cd '" GPUMEM_SOURCE_DIR "' && { echo first; '" GPUMEM_CLI "' " + args + " || exit 9; echo last; } "
            + mode + "'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
        return std::system(cmd.c_str());
    }
} // namespace

TEST(StdoutOutputCli, ConvertToDevStdoutRedirectedToAFileKeepsWhatCameBeforeAndAfter)
{
    const auto dir = gpumem::test::scratchDir("stdout_output");
    const fs::path ref = dir / "ref.jsonl", out = dir / "out.txt", err = dir / "err.txt";
    ASSERT_EQ(runCli("convert tests/data/tiny_alloc_free.jsonl --to jsonl -o '" + ref.string() + "'").exitCode, 0);
    const std::string jsonl = slurp(ref);
    ASSERT_GT(jsonl.size(), 1000u);
    for (const char* path : { "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1" }) {
        SCOPED_TRACE(path);
        ASSERT_EQ(between("convert tests/data/tiny_alloc_free.jsonl --to jsonl -o " + std::string(path), out, err), 0) << slurp(err);
        EXPECT_EQ(slurp(out), "first\n" + jsonl + "last\n");
        EXPECT_EQ(slurp(err), "wrote " + std::string(path) + " (jsonl, 10 memory events)\n");
    }
    // Appending (>>): after what the file held.
    std::ofstream(out) << "kept\n";
    ASSERT_EQ(between("convert tests/data/tiny_alloc_free.jsonl --to jsonl -o /dev/stdout", out, err, ">>"), 0) << slurp(err);
    EXPECT_EQ(slurp(out), "kept\nfirst\n" + jsonl + "last\n");
    // A .gmt (the streamed .jsonl to .gmt path, its spool in the temporary folder), byte for byte.
    const fs::path gmt = dir / "ref.gmt";
    ASSERT_EQ(runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + gmt.string() + "'").exitCode, 0);
    ASSERT_EQ(between("convert tests/data/tiny_alloc_free.jsonl --to gmt -o /dev/stdout", out, err), 0) << slurp(err);
    EXPECT_EQ(slurp(out), "first\n" + slurp(gmt) + "last\n");
    // No temporary file is left in the temporary folder.
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
        EXPECT_EQ(e.path().filename().string().find("gpumem-fd1.gpumem-tmp-" + std::to_string(::getpid())), std::string::npos);
}

TEST(StdoutOutputCli, ReportAndRanksToDevStdoutWriteTheSameBytesAsToAFile)
{
    const auto dir = gpumem::test::scratchDir("stdout_output_report");
    const fs::path html = dir / "ref.html", text = dir / "ref.txt", out = dir / "out.txt", err = dir / "err.txt";
    ASSERT_EQ(runCli("report tests/data/tiny_alloc_free.jsonl -o '" + html.string() + "'").exitCode, 0);
    ASSERT_EQ(between("report tests/data/tiny_alloc_free.jsonl -o /dev/stdout", out, err), 0) << slurp(err);
    EXPECT_EQ(slurp(out), "first\n" + slurp(html) + "last\n");
    EXPECT_EQ(slurp(err), "wrote /dev/stdout\n");
    ASSERT_EQ(runCli("ranks tests/data/job -o '" + text.string() + "'").exitCode, 0);
    ASSERT_EQ(between("ranks tests/data/job -o /dev/stdout", out, err), 0) << slurp(err);
    EXPECT_EQ(slurp(out), "first\n" + slurp(text) + "last\n");
}

TEST(StdoutOutputCli, ALinkToARegularFileIsStillRefusedAndStdinIsNotWritten)
{
    const auto dir = gpumem::test::scratchDir("stdout_output_link");
    std::ofstream(dir / "victim") << "victim";
    fs::create_symlink(dir / "victim", dir / "link.jsonl");
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl --to jsonl -o '" + (dir / "link.jsonl").string() + "'");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("the output is a symbolic link"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(dir / "victim"), "victim");
    // /dev/stdin on a regular file is a link to it, not an output of this process: refused, the file kept.
    const std::string cmd = "cd '" GPUMEM_SOURCE_DIR "' && '" GPUMEM_CLI "' convert tests/data/tiny_alloc_free.jsonl --to jsonl -o "
        "/dev/stdin <'" + (dir / "victim").string() + "' >/dev/null 2>'" + (dir / "err").string() + "'";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    EXPECT_NE(slurp(dir / "err").find("the output is a symbolic link"), std::string::npos) << slurp(dir / "err");
    EXPECT_EQ(slurp(dir / "victim"), "victim");
}
