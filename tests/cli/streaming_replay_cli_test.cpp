// `gpumem replay`, `sweep` and `fit` on a .gmt file replay it chunk by chunk (issue 22,
// docs/streaming.md "Replay"): their output, in every format, their notes and exit codes are what the
// whole-trace replays of the same file give (GPUMEM_REPLAY_IN_MEMORY=1), byte for byte, on every trace
// of tests/data and every public trace (skipped with a message when absent) written as .gmt in chunks
// of 5 events.
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
using gpumem::test::runCliWith;
using namespace gpumem;

namespace {

using gpumem::test::forEachLoadableTrace;

// The replay of `args` on the .gmt streamed and read whole.
void expectStreamedEqualsWhole(const std::string& args, const std::string& what)
{
    const auto streamed = runCli(args);
    const auto whole = runCliWith("GPUMEM_REPLAY_IN_MEMORY", "1", args);
    EXPECT_EQ(streamed.exitCode, whole.exitCode) << what << ": " << args << "\n" << streamed.err;
    EXPECT_EQ(streamed.out, whole.out) << what << ": " << args;
    EXPECT_EQ(streamed.err, whole.err) << what << ": " << args;
}

std::size_t checkDirectory(const fs::path& dir, const std::vector<std::string>& argSets)
{
    const fs::path tmp = fs::temp_directory_path() / ("gpumem_streaming_replay_cli_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    std::size_t checked = 0;
    forEachLoadableTrace(dir, [&](const fs::path& path, const Trace& trace) {
        if (trace.memory().count() == 0)
            return;
        const std::string gmt = (tmp / (path.filename().string() + ".gmt")).string();
        writeGmt(trace, gmt, 5);
        for (const auto& a : argSets)
            expectStreamedEqualsWhole(a + " " + gmt, path.string());
        fs::remove(gmt);
        ++checked;
    });
    fs::remove_all(tmp);
    return checked;
}

TEST(StreamingReplayCli, AGmtReplaysAsTheWholeTraceOnEveryDataTrace)
{
    const std::vector<std::string> argSets = {
        "replay --policy pytorch --policy direct --policy best-fit",
        "replay --policy pytorch --policy direct --policy rmm-pool --start empty",
        "replay --policy pytorch --policy direct --format json",
        "replay --policy pytorch --policy tf-bfc --format csv --start empty",
        "replay --policy pytorch --policy direct --capacity 3MiB --on-oom stop",
        "replay --policy pytorch --policy direct --capacity 3MiB --on-oom skip --format json",
        "replay --policy compaction:pytorch --policy optimal --empty-cache-at step-end",
        "sweep --policy 'pytorch:max_split_size_mb:{64,128}' --policy direct",
        "sweep --policy pytorch --policy best-fit --format json --start empty --empty-cache-at 'every 4'",
        "sweep --policy pytorch --capacity 3MiB --on-oom stop --format csv",
        "fit --policy pytorch --policy direct",
        "fit --policy pytorch --format json --start empty --step 1MiB",
    };
    EXPECT_GE(checkDirectory(fs::path(GPUMEM_SOURCE_DIR) / "tests/data", argSets), 30u);
}

TEST(StreamingReplayCli, AGmtReplaysAsTheWholeTraceOnEveryPublicTrace)
{
    const fs::path dir(GPUMEM_PUBLIC_TRACES);
    if (!fs::exists(dir))
        GTEST_SKIP() << "the public traces are absent (" << dir.string() << ")";
    const std::vector<std::string> argSets = {
        "replay --policy pytorch --policy direct --policy best-fit --format json",
        "replay --policy pytorch --policy direct --start empty --capacity 1GiB --on-oom stop",
        "sweep --policy 'pytorch:max_split_size_mb:{64,512}' --format json",
        "fit --policy pytorch",
    };
    EXPECT_GE(checkDirectory(dir, argSets), 1u);
}

} // namespace
