// `gpumem replay` on a .gmt file replays it chunk by chunk (issue 22, docs/streaming.md "Replay"): its
// output, in every format, its notes and its exit code are what the whole-trace replay of the same file
// gives (GPUMEM_REPLAY_IN_MEMORY=1), byte for byte, on every trace of tests/data and every public trace
// (skipped with a message when absent) written as .gmt in chunks of 5 events.
#include "core/error.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "tests/cli/cli_runner.h"

#include "tests/trace_files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <unistd.h>

namespace fs = std::filesystem;
using gpumem::test::runCli;
using namespace gpumem;

namespace {

using gpumem::test::tracesUnder;

// The replay of `args` on the .gmt streamed and read whole.
void expectStreamedEqualsWhole(const std::string& args, const std::string& what)
{
    const auto streamed = runCli(args);
    ::setenv("GPUMEM_REPLAY_IN_MEMORY", "1", 1);
    const auto whole = runCli(args);
    ::unsetenv("GPUMEM_REPLAY_IN_MEMORY");
    EXPECT_EQ(streamed.exitCode, whole.exitCode) << what << ": " << args << "\n" << streamed.err;
    EXPECT_EQ(streamed.out, whole.out) << what << ": " << args;
    EXPECT_EQ(streamed.err, whole.err) << what << ": " << args;
}

std::size_t checkDirectory(const fs::path& dir, const std::vector<std::string>& argSets)
{
    const fs::path tmp = fs::temp_directory_path() / ("gpumem_streaming_replay_cli_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    std::size_t checked = 0;
    for (const fs::path& path : tracesUnder(dir)) {
        Trace trace;
        try {
            trace = loadTrace(path.string());
        } catch (const Error&) {
            continue;
        }
        if (trace.memory().count() == 0)
            continue;
        const std::string gmt = (tmp / (path.filename().string() + ".gmt")).string();
        writeGmt(trace, gmt, 5);
        for (const auto& a : argSets)
            expectStreamedEqualsWhole("replay " + a + " " + gmt, path.string());
        fs::remove(gmt);
        ++checked;
    }
    fs::remove_all(tmp);
    return checked;
}

TEST(StreamingReplayCli, AGmtReplaysAsTheWholeTraceOnEveryDataTrace)
{
    const std::vector<std::string> argSets = {
        "--policy pytorch --policy direct --policy best-fit",
        "--policy pytorch --policy direct --policy rmm-pool --start empty",
        "--policy pytorch --policy direct --format json",
        "--policy pytorch --policy tf-bfc --format csv --start empty",
        "--policy pytorch --policy direct --capacity 3MiB --on-oom stop",
        "--policy pytorch --policy direct --capacity 3MiB --on-oom skip --format json",
        "--policy compaction:pytorch --policy optimal --empty-cache-at step-end",
    };
    EXPECT_GE(checkDirectory(fs::path(GPUMEM_SOURCE_DIR) / "tests/data", argSets), 30u);
}

TEST(StreamingReplayCli, AGmtReplaysAsTheWholeTraceOnEveryPublicTrace)
{
    const fs::path dir(GPUMEM_PUBLIC_TRACES);
    if (!fs::exists(dir))
        GTEST_SKIP() << "the public traces are absent (" << dir.string() << ")";
    const std::vector<std::string> argSets = {
        "--policy pytorch --policy direct --policy best-fit --format json",
        "--policy pytorch --policy direct --start empty --capacity 1GiB --on-oom stop",
    };
    EXPECT_GE(checkDirectory(dir, argSets), 1u);
}

} // namespace
