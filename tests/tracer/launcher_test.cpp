// runRecorded, the body of `gpumem record`: environment, exit codes, signal forwarding and the
// list of files written — on this machine, without a GPU.
#include "core/error.h"
#include "tracer/launcher.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

#include <csignal>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace gpumem;
using namespace gpumem::tracer;
using namespace gpumem::tracer::test;

namespace {
struct Run {
    int code = -1;
    std::string listing;
    std::string diagnostics;
};
Run record(std::vector<std::string> command, const std::string& outDir, bool annotate = false)
{
    std::ostringstream listing, diag;
    RecordOptions o;
    o.command = std::move(command);
    o.outputDir = outDir;
    o.annotateModules = annotate;
    o.tracerLibrary = GPUMEM_TRACER_SO;
    o.listing = &listing;
    o.diagnostics = &diag;
    Run r;
    r.code = runRecorded(o);
    r.listing = listing.str();
    r.diagnostics = diag.str();
    return r;
}
} // namespace

TEST(RecordLauncher, ReturnsTheExitCodeOfTheCommand)
{
    TempDir out;
    auto ok = record({ "/bin/true" }, out.path());
    EXPECT_EQ(ok.code, 0);
    EXPECT_EQ(ok.listing, "");
    EXPECT_NE(ok.diagnostics.find("no trace file was written"), std::string::npos);
    EXPECT_EQ(record({ "sh", "-c", "exit 7" }, out.path()).code, 7);
    EXPECT_EQ(record({ "sh", "-c", "kill -TERM $$" }, out.path()).code, 128 + SIGTERM);
    auto missing = record({ "/nonexistent/gpumem-test-command" }, out.path());
    EXPECT_EQ(missing.code, 127);
    EXPECT_NE(missing.diagnostics.find("cannot run /nonexistent/gpumem-test-command"), std::string::npos);
    EXPECT_THROW(record({}, out.path()), UsageError);
}

TEST(RecordLauncher, SetsTheInjectionEnvironmentAndCreatesTheOutputFolder)
{
    TempDir scratch;
    const std::string out = scratch.path() + "/new/traces";
    const std::string seen = scratch.path() + "/env.txt";
    auto r = record({ "sh", "-c", "echo \"$CUDA_INJECTION64_PATH|$NVTX_INJECTION64_PATH|$GPUMEM_TRACE_DIR|$PYTHONPATH\" > " + seen }, out);
    EXPECT_EQ(r.code, 0);
    const std::string so = GPUMEM_TRACER_SO;
    std::string expected = so + "|" + so + "|" + out + "|" + (std::getenv("PYTHONPATH") ? std::getenv("PYTHONPATH") : "") + "\n";
    EXPECT_EQ(readText(seen), expected);

    auto annotated = record({ "sh", "-c", "echo \"$PYTHONPATH|$GPUMEM_ANNOTATE_MODULES\" > " + seen }, out, true);
    EXPECT_EQ(annotated.code, 0);
    const std::string text = readText(seen);
    EXPECT_EQ(text.rfind(std::string(GPUMEM_SOURCE_DIR) + "/tracer/python", 0), 0u) << text;
    EXPECT_NE(text.find("|1\n"), std::string::npos) << text;
}

TEST(RecordLauncher, ListsTheTraceFilesTheProgramWrote)
{
    TempDir out;
    auto r = record({ GPUMEM_NVTX_APP }, out.path());
    EXPECT_EQ(r.code, 0);
    auto files = out.files();
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(r.listing.rfind(files[0] + "\t", 0), 0u) << r.listing;
    EXPECT_NE(r.listing.find(" bytes\n"), std::string::npos);
    EXPECT_EQ(r.diagnostics, "");
}

TEST(RecordLauncher, ForwardsTerminationSignalsToTheCommand)
{
    TempDir out;
    const std::string ready = out.path() + "/ready";
    std::thread killer([&] {
        for (int i = 0; i < 1000 && ::access(ready.c_str(), F_OK) != 0; ++i)
            ::usleep(10000);
        ::kill(::getpid(), SIGTERM); // to gpumem, as a job scheduler would send it
    });
    auto r = record({ "sh", "-c", "trap 'exit 42' TERM; touch " + ready + "; while :; do sleep 0.05; done" }, out.path());
    killer.join();
    EXPECT_EQ(r.code, 42); // the command's own TERM handler ran and its exit code came back
}

TEST(RecordLauncher, FindsTheTracerLibraryAndPythonHelperBuiltHere)
{
    EXPECT_EQ(locateTracerLibrary(), std::string(GPUMEM_TRACER_SO));
    EXPECT_EQ(locatePythonHelperDir(), std::string(GPUMEM_SOURCE_DIR) + "/tracer/python");
}
