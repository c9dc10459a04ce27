#include "core/error.h"
#include "core/file_io.h"
#include "tests/core/address_space_limit.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace gpumem;
using gpumem::test::gzipOf;

// Regression: a forged gzip trailer (ISIZE = 0xfffffff0) made the fast path allocate 4 GiB for a
// 38-byte file before finding the data corrupt.
TEST(Gunzip, DoesNotTrustAForgedSizeInTheTrailer)
{
    std::string gz = gzipOf("{\"traceEvents\":[]}");
    gz.replace(gz.size() - 4, 4, "\xf0\xff\xff\xff", 4);
    EXPECT_THROW(gunzip(gz, "forged.json.gz"), FormatError);
}

namespace {
// Resident memory of this process now, in bytes (/proc/self/statm, field 2).
std::size_t residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}
} // namespace

// Regression (fresh-user review, 2026-11-30): a cut .gz ends in compressed bytes that the one-shot path
// read as ISIZE; anything up to 1,032× the file was zero-filled before inflating (a cut 2.2 MB HTA trace:
// 2.2 GB resident, seconds). Smallest input: 1 MiB that does not compress, ISIZE forged to 1,000 MiB
// (within deflate's bound, so the one-shot path takes it). Run in a child process so its peak resident
// memory can be measured alone.
TEST(Gunzip, AnImplausibleSizeInTheTrailerCommitsOnlyWhatInflates)
{
    std::string payload(1 << 20, '\0');
    std::uint64_t x = 88172645463325252ull; // xorshift64: bytes deflate cannot shrink
    for (char& c : payload) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c = static_cast<char>(x);
    }
    std::string gz = gzipOf(payload);
    const std::uint32_t forged = 1000u << 20;
    for (int i = 0; i < 4; ++i)
        gz[gz.size() - 4 + i] = static_cast<char>(forged >> (8 * i));
    if (forged > maxDecompressedBytes())
        GTEST_SKIP() << "this machine's decompression limit is below the forged size";
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        const std::size_t before = residentBytes();
        bool threw = false;
        try {
            (void)gunzip(gz, "forged.gz");
        } catch (const FormatError&) {
            threw = true;
        }
        rusage usage {};
        ::getrusage(RUSAGE_SELF, &usage);
        const std::size_t peak = static_cast<std::size_t>(usage.ru_maxrss) * 1024;
        const std::size_t grown = peak > before ? peak - before : 0;
        ::_exit(!threw ? 1 : grown > (std::size_t(64) << 20) ? 2 : 0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 1) << "a forged ISIZE was accepted";
    EXPECT_NE(WEXITSTATUS(status), 2) << "reading it grew the resident memory by more than 64 MiB";
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Gunzip, RoundTripsAndReportsACutStream)
{
    std::string text(100000, 'x');
    std::string gz = gzipOf(text);
    EXPECT_EQ(gunzip(gz, "ok.gz"), text);
    try {
        gunzip(gz.substr(0, gz.size() / 2), "cut.gz");
        FAIL() << "expected FormatError";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("cut.gz"), std::string::npos);
    }
}

// The GzipEnd overload: a whole stream (one member: libdeflate when built with it; two members: zlib)
// is not a prefix; a stream cut in its second member yields the first member and what the second's
// bytes hold; a cut in the first header and a corrupt complete stream still throw.
TEST(Gunzip, TheGzipEndOverloadKeepsThePrefixOfAStreamThatEndsEarly)
{
    const std::string a(70000, 'a'), b = "0123456789abcdef" + std::string(70000, 'b');
    const std::string one = gzipOf(a), two = one + gzipOf(b);
    GzipEnd end;
    EXPECT_EQ(gunzip(one, "one.gz", end), a);
    EXPECT_FALSE(end.endsEarly);
    EXPECT_EQ(gunzip(two, "two.gz", end), a + b);
    EXPECT_FALSE(end.endsEarly);

    const std::string cut = two.substr(0, one.size() + 40);
    const std::string prefix = gunzip(cut, "cut.gz", end);
    EXPECT_TRUE(end.endsEarly);
    EXPECT_EQ(end.compressedBytes, cut.size());
    ASSERT_GT(prefix.size(), a.size());
    ASSERT_LT(prefix.size(), a.size() + b.size());
    EXPECT_EQ(prefix, (a + b).substr(0, prefix.size()));
    EXPECT_GE(prefix.capacity() - prefix.size(), kReadPadding);

    EXPECT_THROW(gunzip(one.substr(0, 5), "head.gz", end), FormatError);
    std::string crc = one;
    crc[crc.size() - 6] = static_cast<char>(crc[crc.size() - 6] ^ 1); // the CRC-32
    try {
        gunzip(crc, "crc.gz", end);
        FAIL() << "a bad CRC-32 must not read";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("crc.gz: corrupt gzip data near compressed offset"), std::string::npos)
            << e.what();
    }
    // The plain overload still refuses the cut stream.
    EXPECT_THROW(gunzip(cut, "cut.gz"), FormatError);
}

TEST(Gunzip, HasAPositiveDecompressionLimit)
{
    EXPECT_GE(maxDecompressedBytes(), std::size_t(1) << 30);
}

namespace {
std::string writeTemp(const std::string& name, const std::string& bytes)
{
    const std::string path = ::testing::TempDir() + "gpumem_file_io_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}
} // namespace

TEST(FileBuffer, ReadsAWholeFileOrMapsItAboveTheLimit)
{
    std::string bytes(100000, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<char>(i * 7 + i / 251);
    const std::string path = writeTemp("buffer.bin", bytes);
    const FileBuffer read = readFileBuffer(path);
    EXPECT_EQ(read.bytes(), bytes);
    const FileBuffer mapped = readFileBuffer(path, 1000); // larger than 1000 bytes: mapped
    EXPECT_EQ(mapped.bytes(), bytes);
    EXPECT_NE(mapped.data.get(), read.data.get());
    std::filesystem::remove(path);
    EXPECT_EQ(read.bytes().substr(99990), bytes.substr(99990)); // the buffers outlive the file's name
    EXPECT_EQ(mapped.bytes().substr(0, 10), bytes.substr(0, 10));

    const std::string empty = writeTemp("empty.bin", "");
    EXPECT_EQ(readFileBuffer(empty).size, 0u);
    std::filesystem::remove(empty);
    try {
        readFileBuffer(path);
        FAIL() << "a missing file was read";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
    try {
        readFileBuffer(::testing::TempDir());
        FAIL() << "a directory was read";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos);
    }
}

TEST(ReadContentHead, ReadsThePlainHeadOnceAndInflatesAGzipHead)
{
    const std::string text = "{\"segments\": []}" + std::string(200, ' ');
    const std::string plain = writeTemp("head.json", text);
    const std::string gz = writeTemp("head.json.gz", gzipOf(text));
    EXPECT_EQ(readContentHead(plain, 16), text.substr(0, 16));
    EXPECT_EQ(readContentHead(gz, 16), text.substr(0, 16));
    EXPECT_EQ(readContentHead(plain, 1), "{");
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
}

namespace {
// `n` bytes that differ from place to place (a copy that drops or repeats a piece shows).
std::string patternBytes(std::size_t n)
{
    std::string s(n, '\0');
    std::uint32_t x = 2463534242u;
    for (auto& c : s) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        c = static_cast<char>(x);
    }
    return s;
}

std::string readAll(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}
} // namespace

// copyDescriptor serves GmtWriter::appendSpool and OutputFile's commit through a descriptor (review finding:
// two copies of the copy). 2.5 MiB: more than one 1 MiB piece of the fallback.
TEST(CopyDescriptor, CopiesAFileToAFileAtItsOffsetAndToAPipeThroughTheFallback)
{
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem_copy_descriptor_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string fromPath = (dir / "from").string(), toPath = (dir / "to").string();
    const std::string bytes = patternBytes((5u << 20) / 2);
    std::ofstream(fromPath, std::ios::binary) << bytes;
    const int from = ::open(fromPath.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(from, 0);

    // A regular file that already holds a head: the bytes go after it, and `from`'s offset does not move.
    const int to = ::open(toPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(to, 0);
    ASSERT_EQ(::write(to, "head", 4), 4);
    copyDescriptor(from, bytes.size(), to, fromPath, toPath);
    ::close(to);
    EXPECT_EQ(readAll(toPath), "head" + bytes);
    EXPECT_EQ(::lseek(from, 0, SEEK_CUR), 0);

    // A pipe: copy_file_range refuses it, pread/write copy it; a child reads the other end.
    int pipeFds[2];
    ASSERT_EQ(::pipe(pipeFds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(pipeFds[1]);
        std::string got;
        char buffer[65536];
        for (ssize_t n; (n = ::read(pipeFds[0], buffer, sizeof buffer)) > 0;)
            got.append(buffer, static_cast<std::size_t>(n));
        ::_exit(got == bytes ? 0 : 1);
    }
    ::close(pipeFds[0]);
    copyDescriptor(from, bytes.size(), pipeFds[1], fromPath, "the pipe");
    ::close(pipeFds[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the pipe's reader got other bytes";

    // Fewer bytes than asked for: an IoError naming the source and how far it got.
    const int short_ = ::open(toPath.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    ASSERT_GE(short_, 0);
    try {
        copyDescriptor(from, bytes.size() + 10, short_, fromPath, toPath);
        ADD_FAILURE() << "no IoError";
    } catch (const IoError& e) {
        EXPECT_EQ(std::string(e.what()),
            fromPath + ": cannot read: it ends after " + std::to_string(bytes.size()) + " of " + std::to_string(bytes.size() + 10)
                + " bytes");
    }
    ::close(short_);
    ::close(from);
    std::filesystem::remove_all(dir);
}

// A file mapped whole needs address space of its size; where the process may not use that much, the error says
// so and what to do (review finding: "cannot map: Cannot allocate memory", while `analyze` of the same .jsonl
// advised `convert`, which maps it too). The smallest input: a sparse 1 GiB file, mapped in a child whose address
// space is held to what it uses plus 256 MiB.
TEST(FileBuffer, AMapLargerThanTheAddressSpaceLeftSaysSoAndWhatToDo)
{
    const std::string path = writeTemp("sparse.bin", "");
    std::filesystem::resize_file(path, std::uintmax_t(1) << 30);
    const std::string said = gpumem::test::whatUnderAddressSpaceLimit(rlim_t(256) << 20, [&] { readFileBuffer(path, 0); });
    std::filesystem::remove(path);
    EXPECT_EQ(said,
        path + ": cannot map its 1073741824 bytes: the process may not use that much address space; run where it may use "
               "more (ulimit -v, the job's or container's memory limit)");
}

namespace {
// Runs f in a child process with its stderr in `err`; returns the wait status.
template <typename F> int inChild(const std::string& err, F&& f)
{
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 2);
        f();
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
}
std::string slurpFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
} // namespace

// Review finding: a trace cut while it was mapped whole (readGmt, the JSON and pickle readers) killed gpumem with
// SIGBUS (exit 135). Now the read of a page past the new end is the file's error: exit 1, the path and what
// happened on stderr, after the hook that removes an output's temporary; a SIGBUS that is not a mapped file's keeps
// its default action.
TEST(MappedFile, AFileCutWhileMappedIsAnErrorNamingItNotACrash)
{
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem_cut_map_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "trace.gmt").string(), err = (dir / "err.txt").string(), temp = (dir / "out.tmp").string();
    std::ofstream(path, std::ios::binary) << std::string(std::size_t(1) << 20, 'x');
    std::ofstream(temp) << "partial output";
    static std::string tempPath;
    tempPath = temp;
    const int status = inChild(err, [&] {
        setBeforeFatalReadError([] { ::unlink(tempPath.c_str()); });
        setFatalReadErrorPrefix("gpumem explain"); // as the CLI sets it for the verb
        MappedFile map(path);
        ::truncate(path.c_str(), 4096); // another process cuts the file
        volatile char last = map.bytes().back(); // a page past the new end
        (void)last;
    });
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 1);
    const std::string message = slurpFile(err);
    EXPECT_NE(message.find("gpumem explain: error: " + path + ": the file was cut while it was read"), std::string::npos) << message;
    EXPECT_FALSE(std::filesystem::exists(temp)) << "the hook did not run";
    // A SIGBUS of another cause: the default action (the process dies of it).
    const int other = inChild(err, [&] {
        MappedFile map(path); // the handler is installed
        ::raise(SIGBUS);
    });
    EXPECT_TRUE(WIFSIGNALED(other) && WTERMSIG(other) == SIGBUS) << "status " << other;
    std::filesystem::remove_all(dir);
}

// A regular file that ends before the size it had when it was opened — what a trace cut while gpumem reads it is —
// is that error, not a short trace taken for a damaged one (second review: a Kineto JSON cut while read gave a page
// from 61 % of its events, exit 0). The race itself cannot be forced; a sysfs attribute is a regular file whose
// size (4096) is more than it holds, so both whole readers meet the same condition on every run.
TEST(ReadWhole, AFileShorterThanItsSizeAtOpenSaysItWasCutWhileRead)
{
    const std::string path = "/sys/devices/system/cpu/online";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 64)
        GTEST_SKIP() << path << " is absent or not a regular file larger than what it holds here";
    try {
        readFileMaybeGzip(path);
        FAIL() << "read whole without an error";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find(path + ": the file was cut while it was read (it had " + std::to_string(st.st_size)
                      + " bytes when it was opened;"),
            std::string::npos)
            << e.what();
    }
    LineReader lines(path);
    std::string_view line;
    EXPECT_THROW(
        {
            while (lines.next(line)) {
            }
        },
        IoError);
    // A head read (what sniffing reads) asks for no more than the start: it is not an error.
    EXPECT_FALSE(readFileHead(path, 2).empty());
}
