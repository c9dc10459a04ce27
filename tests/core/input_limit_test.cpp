// Issue 21 item 4: gzip input is bounded by inflateLimit() (core/file_io.h): at most inflateRatio() ×
// the compressed bytes + 16 MiB, never more than maxDecompressedBytes(). Inputs are generated here.
#include "core/error.h"
#include "core/file_io.h"
#include "core/jsonl_format.h"
#include "core/trace.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace gpumem;

TEST(InputLimit, IsTheRatioTimesTheCompressedSizeCappedByTheMachineLimit)
{
    EXPECT_EQ(inflateRatio(), kDefaultInflateRatio); // GPUMEM_INFLATE_RATIO is not set under CTest
    EXPECT_EQ(inflateLimit(1000), std::min<std::size_t>(200 * 1000 + (16u << 20), maxDecompressedBytes()));
    EXPECT_EQ(inflateLimit(std::size_t(-1)), maxDecompressedBytes()); // no overflow
}

// A single gzip member of 40 MiB of blanks compresses ~1000×: far past 200× + 16 MiB.
TEST(InputLimit, AWhitespaceBombStopsAtTheLimitNamingItAndHowToRaiseIt)
{
    const std::string gz = test::gzipOf(std::string(std::size_t(40) << 20, ' '));
    ASSERT_LT(gz.size(), std::size_t(100) << 10);
    try {
        (void)gunzip(gz, "bomb.json.gz");
        FAIL() << "a 40 MiB whitespace bomb of " << gz.size() << " bytes was inflated";
    } catch (const FormatError& e) {
        const std::string m = e.what();
        EXPECT_EQ(m,
            "bomb.json.gz: decompresses to more than " + std::to_string(inflateLimit(gz.size()) >> 20)
                + " MiB, gpumem's limit for a gzip input of " + std::to_string(gz.size())
                + " bytes (200× its compressed size + 16 MiB; real traces inflate 9–30×, a gzip bomb 1,000×); if the "
                  "trace is real, set GPUMEM_INFLATE_RATIO to a larger ratio (e.g. 800)");
    }
    // The importers' overload (a cut stream returns a prefix) refuses it the same way.
    GzipEnd end;
    EXPECT_THROW((void)gunzip(gz, "bomb.json.gz", end), FormatError);
    // Within the limit: 4 MiB of blanks (under the 16 MiB every file may reach) inflate.
    EXPECT_EQ(gunzip(test::gzipOf(std::string(std::size_t(4) << 20, ' ')), "ok.gz").size(), std::size_t(4) << 20);
}

TEST(LineReader, GivesTheSameLinesFromGzipAsFromThePlainFileAndNamesACut)
{
    const std::string text = "first\n\nthird line\r\nlast without newline";
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem-linereader-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "plain.txt", std::ios::binary) << text;
    const std::string gz = test::gzipOf(text);
    std::ofstream(dir / "z.gz", std::ios::binary) << gz;
    for (const char* name : { "plain.txt", "z.gz" }) {
        LineReader lines((dir / name).string());
        std::vector<std::string> got;
        std::string_view line;
        while (lines.next(line))
            got.emplace_back(line);
        EXPECT_EQ(got, (std::vector<std::string> { "first", "", "third line\r", "last without newline" })) << name;
        EXPECT_EQ(lines.fractionRead(), 1.0) << name;
    }
    std::ofstream(dir / "cut.gz", std::ios::binary) << gz.substr(0, gz.size() - 12);
    LineReader cut((dir / "cut.gz").string());
    std::string_view line;
    try {
        while (cut.next(line)) { }
        ADD_FAILURE() << "a cut stream read to its end";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("cut.gz: the gzip stream ends early at compressed byte"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

// Reads `path` with readJsonl in a forked child (so its peak memory is measured alone) and removes the
// file. Returns the child's exit status: 0 when the peak grew by at most `bytes` / 4 and records were
// read, 1 when it grew more, 2 when no record was read, -1 when the child did not exit.
static int readJsonlInAChild(const std::filesystem::path& path, std::size_t bytes)
{
    pid_t child = ::fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        rusage before {};
        ::getrusage(RUSAGE_SELF, &before);
        Trace t = readJsonl(path.string());
        rusage after {};
        ::getrusage(RUSAGE_SELF, &after);
        const std::size_t grown = static_cast<std::size_t>(after.ru_maxrss - before.ru_maxrss) * 1024;
        ::_exit(t.stats().count("unknown_record") == 0 ? 2 : grown > bytes / 4 ? 1 : 0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    std::filesystem::remove(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// readJsonl inflates a .jsonl.gz as it reads it: 32 MiB of records (unknown types, so the trace stays
// empty) are read in a child whose peak memory grows far less than the inflated text.
TEST(LineReader, AGzipJsonlIsReadWithoutHoldingItsInflatedText)
{
    const auto path = std::filesystem::temp_directory_path() / ("gpumem-stream-" + std::to_string(::getpid()) + ".jsonl.gz");
    const std::size_t inflated = std::size_t(32) << 20;
    // Written by a child, so that this process's peak memory (which the reading child inherits) stays small.
    pid_t writer = ::fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        std::string text = "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{}}\n";
        while (text.size() < inflated)
            text += "{\"type\":\"future_record\",\"n\":" + std::to_string(text.size()) + "}\n";
        std::ofstream(path, std::ios::binary) << test::gzipOf(text);
        ::_exit(0);
    }
    ::waitpid(writer, nullptr, 0);
    EXPECT_EQ(readJsonlInAChild(path, inflated), 0) << "1: peak memory grew by more than a quarter of the " << inflated
                                                  << " inflated bytes; 2: no records read";
}

// A plain .jsonl is mapped and given back to the kernel as it is read (issue 22: `convert` of a 12 GB
// .jsonl held the whole file): 64 MiB of records (unknown types, so the trace stays empty) are read in
// a child whose peak memory grows by less than a quarter of the file.
TEST(LineReader, APlainJsonlIsReadWithoutHoldingTheWholeFile)
{
    const auto path = std::filesystem::temp_directory_path() / ("gpumem-stream-" + std::to_string(::getpid()) + ".jsonl");
    const std::size_t bytes = std::size_t(64) << 20;
    pid_t writer = ::fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        std::ofstream out(path, std::ios::binary);
        out << "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{}}\n";
        for (std::size_t written = 0; written < bytes;) {
            const std::string line = "{\"type\":\"future_record\",\"n\":" + std::to_string(written) + "}\n";
            out << line;
            written += line.size();
        }
        ::_exit(0);
    }
    ::waitpid(writer, nullptr, 0);
    EXPECT_EQ(readJsonlInAChild(path, bytes), 0) << "1: peak memory grew by more than a quarter of the " << bytes
                                               << "-byte file; 2: no records read";
}

// A plain file is read through an 8 MiB window: lines that straddle its edges, a line longer than the window
// (9 MiB) and a last line without '\n' come out whole and in order, and the progress reaches 1.
TEST(LineReader, LinesAcrossTheReadWindowAndLongerThanItComeOutWhole)
{
    std::vector<std::string> lines;
    std::string text;
    for (std::size_t i = 0; text.size() < (std::size_t(20) << 20); ++i) {
        lines.push_back(i == 700 ? std::string(std::size_t(9) << 20, 'x') : std::string(1 + i * 7919 % 40000, char('a' + i % 26)));
        text += lines.back() + '\n';
    }
    lines.push_back("last without newline");
    text += lines.back();
    const auto path = std::filesystem::temp_directory_path() / ("gpumem-window-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(path, std::ios::binary) << text;
    LineReader reader(path.string());
    std::string_view line;
    std::size_t n = 0;
    while (reader.next(line)) {
        ASSERT_LT(n, lines.size());
        ASSERT_EQ(line.size(), lines[n].size()) << "line " << n;
        ASSERT_EQ(line, lines[n]) << "line " << n;
        ++n;
    }
    EXPECT_EQ(n, lines.size());
    EXPECT_EQ(reader.fractionRead(), 1.0);
    std::filesystem::remove(path);
}

// The window needs no address space of the file's size (issue 22: a mapped 241 MB .jsonl failed to convert
// under `ulimit -v 250M`): a child limited to its own address space + 40 MiB reads a 96 MiB .jsonl.
TEST(LineReader, APlainJsonlIsReadInLessAddressSpaceThanTheFile)
{
    const auto path = std::filesystem::temp_directory_path() / ("gpumem-as-" + std::to_string(::getpid()) + ".jsonl");
    {
        std::ofstream out(path, std::ios::binary);
        out << "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{}}\n";
        for (std::size_t written = 0; written < (std::size_t(96) << 20);) {
            const std::string line = "{\"type\":\"future_record\",\"n\":" + std::to_string(written) + "}\n";
            out << line;
            written += line.size();
        }
    }
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        std::ifstream statm("/proc/self/statm");
        std::size_t pages = 0;
        statm >> pages;
        const rlim_t limit = pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) + (std::size_t(40) << 20);
        const rlimit as { limit, limit };
        if (pages == 0 || ::setrlimit(RLIMIT_AS, &as) != 0)
            ::_exit(3);
        try {
            Trace t = readJsonl(path.string());
            ::_exit(t.stats().count("unknown_record") > 0 ? 0 : 2);
        } catch (...) {
            ::_exit(1);
        }
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    std::filesystem::remove(path);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the read failed under the limit; 2: no records read; 3: no limit set";
}
