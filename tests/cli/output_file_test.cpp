// The output-file rules of cli/output_file.h (docs/cli-options.md, "Output files"), against the attacks
// issue 21 found: a symlink planted at the temporary file's name or at OUT, a replaced OUT losing its
// mode, and a `kill -9` leaving the temporary file behind for good.
#include "cli/output_file.h"
#include "core/error.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using gpumem::cli::OutputFile;
using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;
namespace fs = std::filesystem;

namespace {
// Deterministic suffixes "a00000", "a00001", …: the names OutputFile will try, in order.
int g_next = 0;
std::string countingSuffix()
{
    char s[24];
    std::snprintf(s, sizeof s, "a%05d", g_next++);
    return s;
}

std::vector<std::string> tempNamesIn(const fs::path& dir, const std::string& outName)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) {
        long pid = 0;
        if (gpumem::cli::isOutputTempName(e.path().filename().string(), outName, pid))
            names.push_back(e.path().filename().string());
    }
    return names;
}

// What every file in `dir` (recursively, links not followed) holds, so a test can show nothing changed.
std::map<std::string, std::string> snapshotOf(const fs::path& dir)
{
    std::map<std::string, std::string> m;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_symlink())
            m[e.path().string()] = "-> " + fs::read_symlink(e.path()).string();
        else if (e.is_regular_file())
            m[e.path().string()] = slurp(e.path());
    }
    return m;
}
} // namespace

// Regression: the temporary file was the predictable OUT.tmp-<pid>, opened with O_TRUNC and no O_EXCL or
// O_NOFOLLOW, so a link planted there made gpumem overwrite the file it pointed to.
TEST(OutputFile, LinksPlantedAtEveryTemporaryNameAndAtOutChangeNoOtherFile)
{
    auto dir = scratchDir("planted");
    auto outside = dir / "outside";
    auto shared = dir / "shared";
    fs::create_directories(outside);
    fs::create_directories(shared);
    std::ofstream(outside / "victim") << "victim";
    const fs::path out = shared / "out.gmt";
    const std::string pid = std::to_string(::getpid());
    // The old name, and the first 99 of the 100 names OutputFile will try.
    fs::create_symlink(outside / "victim", shared / ("out.gmt.tmp-" + pid));
    for (int i = 0; i < 99; ++i) {
        char s[24];
        std::snprintf(s, sizeof s, "a%05d", i);
        fs::create_symlink(outside / "victim", shared / ("out.gmt.gpumem-tmp-" + pid + "-" + s));
    }
    const auto before = snapshotOf(outside);
    g_next = 0;
    gpumem::cli::setTempSuffixSource(countingSuffix);
    {
        OutputFile output(out.string());
        EXPECT_EQ(output.writePath(), (shared / ("out.gmt.gpumem-tmp-" + pid + "-a00099")).string());
        std::ofstream(output.writePath()) << "new output";
        output.commit();
    }
    EXPECT_EQ(slurp(out), "new output");
    EXPECT_FALSE(fs::is_symlink(out));
    EXPECT_EQ(snapshotOf(outside), before);
    for (int i = 0; i < 99; ++i) { // every planted link is still a link to the victim
        char s[24];
        std::snprintf(s, sizeof s, "a%05d", i);
        EXPECT_TRUE(fs::is_symlink(shared / ("out.gmt.gpumem-tmp-" + pid + "-" + s))) << s;
    }

    // All 100 names taken: gpumem gives up rather than write through any of them.
    fs::remove(out);
    fs::create_symlink(outside / "victim", shared / ("out.gmt.gpumem-tmp-" + pid + "-a00099"));
    g_next = 0;
    EXPECT_THROW(OutputFile(out.string()), gpumem::IoError);
    EXPECT_FALSE(fs::exists(out));

    // A link at OUT itself (to a file, or dangling) is refused before anything is created.
    fs::create_symlink(outside / "victim", out);
    g_next = 1000;
    try {
        OutputFile output(out.string());
        ADD_FAILURE() << "a symlink at OUT was accepted";
    } catch (const gpumem::IoError& e) {
        EXPECT_NE(std::string(e.what()).find("the output is a symbolic link"), std::string::npos) << e.what();
    }
    fs::remove(out);
    fs::create_symlink(outside / "not-yet", out);
    EXPECT_THROW(OutputFile(out.string()), gpumem::IoError);
    EXPECT_FALSE(fs::exists(outside / "not-yet"));
    gpumem::cli::setTempSuffixSource(nullptr);
    EXPECT_EQ(snapshotOf(outside), before);
}

TEST(OutputFile, TemporaryNamesAreRecognisedOnlyInTheirExactPattern)
{
    long pid = 0;
    EXPECT_TRUE(gpumem::cli::isOutputTempName("a.gmt.gpumem-tmp-123-Ab9xYz", "a.gmt", pid));
    EXPECT_EQ(pid, 123);
    EXPECT_FALSE(gpumem::cli::isOutputTempName("a.gmt.gpumem-tmp-123-Ab9xY", "a.gmt", pid)); // 5 characters
    EXPECT_FALSE(gpumem::cli::isOutputTempName("a.gmt.gpumem-tmp--Ab9xYz", "a.gmt", pid)); // no pid
    EXPECT_FALSE(gpumem::cli::isOutputTempName("a.gmt.gpumem-tmp-12x-Ab9xYz", "a.gmt", pid));
    EXPECT_FALSE(gpumem::cli::isOutputTempName("b.gmt.gpumem-tmp-123-Ab9xYz", "a.gmt", pid)); // another OUT
    EXPECT_FALSE(gpumem::cli::isOutputTempName("a.gmt.gpumem-tmp-123-Ab/xYz", "a.gmt", pid));
}

// Regression: a replaced OUT became a new 0644 file (umask) although it was 0600.
TEST(OutputFile, ReplacingKeepsTheModeOfOut)
{
    auto out = scratchDir("mode") / "private.gmt";
    std::ofstream(out) << "old";
    ASSERT_EQ(::chmod(out.c_str(), 0600), 0);
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + out.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_GT(st.st_size, 100);
}

TEST(OutputFile, ConvertRefusesAnOutThatIsASymlinkAndLeavesItsTarget)
{
    auto dir = scratchDir("out-link");
    std::ofstream(dir / "real.gmt") << "old";
    fs::create_symlink(dir / "real.gmt", dir / "link.gmt");
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + (dir / "link.gmt").string() + "'");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find("link.gmt: the output is a symbolic link (to "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("remove the link or give the file's own path"), std::string::npos) << r.err;
    EXPECT_EQ(slurp(dir / "real.gmt"), "old");
    EXPECT_TRUE(fs::is_symlink(dir / "link.gmt"));
    EXPECT_TRUE(tempNamesIn(dir, "link.gmt").empty());
    // Its own path works.
    r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + (dir / "real.gmt").string() + "'");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(slurp(dir / "real.gmt"), "old");
}

TEST(OutputFile, DevicesAreStillWrittenDirectly)
{
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl --to jsonl -o /dev/null");
    EXPECT_EQ(r.exitCode, 0) << r.err;
}

// Cleanup of what an earlier run left: only regular files of our own pattern, owned by us, whose pid is
// gone; a planted link of that pattern is neither followed nor removed, a live pid's file stays.
TEST(OutputFile, StaleTemporaryFilesAreRemovedSafely)
{
    auto dir = scratchDir("stale");
    std::ofstream(dir / "victim") << "victim";
    pid_t child = ::fork();
    if (child == 0)
        ::_exit(0);
    ASSERT_GT(child, 0);
    ::waitpid(child, nullptr, 0); // a pid that no longer runs
    const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
    std::ofstream(dir / ("out.gmt.gpumem-tmp-" + dead + "-Stale1")) << "left by kill -9";
    fs::create_symlink(dir / "victim", dir / ("out.gmt.gpumem-tmp-" + dead + "-Link01"));
    std::ofstream(dir / ("out.gmt.gpumem-tmp-" + alive + "-Alive1")) << "still being written";
    std::ofstream(dir / ("other.gmt.gpumem-tmp-" + dead + "-Other1")) << "another output's";
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + (dir / "out.gmt").string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_FALSE(fs::exists(dir / ("out.gmt.gpumem-tmp-" + dead + "-Stale1")));
    EXPECT_TRUE(fs::is_symlink(dir / ("out.gmt.gpumem-tmp-" + dead + "-Link01")));
    EXPECT_EQ(slurp(dir / "victim"), "victim");
    EXPECT_TRUE(fs::exists(dir / ("out.gmt.gpumem-tmp-" + alive + "-Alive1")));
    EXPECT_TRUE(fs::exists(dir / ("other.gmt.gpumem-tmp-" + dead + "-Other1")));
}

// Regression: `kill -9` during a convert left OUT.tmp-<pid> (54 MB seen) behind for good.
TEST(OutputFile, AConvertKilledMidWriteLeavesNoStaleTemporaryAfterTheNextRun)
{
    auto dir = scratchDir("killed");
    auto in = dir / "big.jsonl";
    {
        std::ofstream f(in);
        f << "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{}}\n"
             "{\"type\":\"device\",\"id\":0,\"kind\":\"cuda\",\"ordinal\":0,\"name\":\"d\",\"total_memory\":0}\n"
             "{\"type\":\"stream\",\"id\":0,\"device\":0,\"handle\":0}\n";
        for (long i = 0; i < 300000; ++i) // ~30 MB: seconds of work after the temporary file appears
            f << "{\"type\":\"mem\",\"t\":" << 1000 + 2 * i << ",\"kind\":\"alloc\",\"addr\":" << 4096 * (i + 1)
              << ",\"size\":4096}\n";
    }
    const fs::path out = dir / "out.gmt";
    pid_t child = ::fork();
    if (child == 0) {
        ::execl(GPUMEM_CLI, GPUMEM_CLI, "convert", in.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ASSERT_GT(child, 0);
    bool appeared = false;
    for (int i = 0; i < 2000 && !appeared; ++i) { // up to 20 s on a loaded machine
        appeared = !tempNamesIn(dir, "out.gmt").empty();
        if (!appeared)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(appeared) << "no temporary file appeared";
    ASSERT_TRUE(WIFSIGNALED(status)) << "the convert finished before it was killed";
    EXPECT_EQ(tempNamesIn(dir, "out.gmt").size(), 1u); // SIGKILL cannot be caught: it is left behind
    EXPECT_FALSE(fs::exists(out));
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + out.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(tempNamesIn(dir, "out.gmt").empty());
    EXPECT_TRUE(fs::is_regular_file(out));
}

// Root (who may give a file away) keeps OUT's owner and group on replace; others keep what they can.
TEST(OutputFile, ReplacingKeepsTheOwnerOfOutWhereTheSystemAllows)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "only root can create a file owned by another user to replace";
    auto out = scratchDir("owner") / "theirs.gmt";
    std::ofstream(out) << "old";
    ASSERT_EQ(::chown(out.c_str(), 4321, 4322), 0);
    ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
    auto r = runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + out.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    struct stat st {};
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4321u);
    EXPECT_EQ(st.st_gid, 4322u);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
}

// Review finding (2026-12-04): only INT, TERM and HUP removed the temporary; a report whose stderr pipe was
// closed died of SIGPIPE at its first warning and left OUT.gpumem-tmp-… behind. The smallest input: the bundled
// trace as .gmt, cut inside a chunk (so the report warns while its output is open).
TEST(OutputFile, AReportKilledBySigpipeOnItsStderrLeavesNoTemporary)
{
    auto dir = scratchDir("sigpipe");
    const fs::path whole = dir / "whole.gmt", cut = dir / "cut.gmt", out = dir / "r.html";
    ASSERT_EQ(runCli("convert traces/mlp_train.jsonl -o '" + whole.string() + "'").exitCode, 0);
    const std::string bytes = slurp(whole);
    ASSERT_GT(bytes.size(), 3700u);
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, 3700);
    // stderr into a pipe whose read end is closed before the report starts: its first warning raises SIGPIPE
    // (a shell pipeline whose reader had closed "at once" raced the report's first write).
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ::close(fds[0]);
    pid_t child = ::fork();
    if (child == 0) {
        ::signal(SIGPIPE, SIG_DFL); // as a shell starts it
        ::dup2(fds[1], 2);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::execl(GPUMEM_CLI, GPUMEM_CLI, "report", cut.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(fds[1]);
    ASSERT_GT(child, 0);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the report should die of the closed pipe, status " << status;
    EXPECT_EQ(WTERMSIG(status), SIGPIPE);
    EXPECT_TRUE(tempNamesIn(dir, "r.html").empty()) << "the temporary was left behind";
    EXPECT_FALSE(fs::exists(out));
}

// Review finding (2026-12-04): an output name of 245 bytes (legal: NAME_MAX is 255) failed with "cannot create a
// temporary file … File name too long", the infix and suffix taking the temporary's name past 255 bytes.
TEST(OutputFile, AnOutputNameNearNameMaxIsWrittenThroughAShortenedTemporary)
{
    auto dir = scratchDir("long-name");
    const std::string name = std::string(240, 'r') + ".html";
    const auto r = runCli("report traces/mlp_train.jsonl -o '" + (dir / name).string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(dir / name));
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
        ++files;
    EXPECT_EQ(files, 1u) << "a temporary was left beside the output";
}
