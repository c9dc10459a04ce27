// libgpumem_tracer.so as the driver and NVTX see it: its exported symbols, loading it with dlopen
// where no CUDA driver exists, and NVTX injection end to end in a real program.
#include "core/gmt_format.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

#include <csignal>
#include <dlfcn.h>
#include <set>
#include <sstream>

using namespace gpumem;
using namespace gpumem::tracer::test;

namespace {
std::vector<std::string> lines(const std::string& text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            out.push_back(line);
    return out;
}
} // namespace

TEST(TracerLibrary, ExportsOnlyTheThreeInjectionEntryPoints)
{
    TempDir scratch;
    auto r = runShell(std::string(GPUMEM_NM) + " -D --defined-only " + GPUMEM_TRACER_SO, scratch);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::set<std::string> symbols;
    for (const auto& line : lines(r.out)) {
        std::istringstream fields(line);
        std::string address, type, name;
        fields >> address >> type >> name;
        symbols.insert(name);
    }
    EXPECT_EQ(symbols, (std::set<std::string> { "InitializeInjection", "InitializeInjectionNvtx2", "InitializeInjectionNvtxExtension" })) << r.out;
}

TEST(TracerLibrary, LoadsWithoutTheCudaDriverAndSwitchesItselfOffInOneLine)
{
    TempDir out, scratch;
    auto r = runShell("GPUMEM_TRACE_DIR=" + out.path() + " " + GPUMEM_DLOPEN_PROBE + " " + GPUMEM_TRACER_SO, scratch);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, "loaded\nInitializeInjection returned 1\n");
    void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (driver == nullptr)
        driver = ::dlopen("libcuda.so.1", RTLD_LAZY);
    if (driver != nullptr)
        GTEST_SKIP() << "a CUDA driver is installed here; CUPTI may start, so the switch-off path is not exercised";
    // CUPTI cannot start without a driver: exactly one line, then nothing is left behind.
    auto errLines = lines(r.err);
    ASSERT_EQ(errLines.size(), 1u) << r.err;
    EXPECT_NE(errLines[0].find("gpumem tracer: "), std::string::npos) << errLines[0];
    EXPECT_NE(errLines[0].find("tracing is off for this process"), std::string::npos) << errLines[0];
    EXPECT_TRUE(out.files().empty());
}

TEST(TracerLibrary, RecordsNvtxRangesOfAnUnmodifiedProgramAcrossThreadsAndLibraries)
{
    TempDir out, scratch;
    auto r = runShell("NVTX_INJECTION64_PATH=" + std::string(GPUMEM_TRACER_SO) + " GPUMEM_TRACE_DIR=" + out.path() + " "
            + GPUMEM_NVTX_APP,
        scratch);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.err, "");
    auto files = out.files();
    ASSERT_EQ(files.size(), 1u);
    EXPECT_NE(files[0].find("/gpumem."), std::string::npos);

    Trace t = readGmt(files[0]);
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().code << ": " << t.stats().anomalies().front().detail;
    EXPECT_EQ(t.metadata()["tool"], "gpumem-tracer");
    EXPECT_EQ(t.metadata()["exit"], "normal");
    std::set<std::string> paths;
    for (ScopeId s = 1; s < t.scopes().size(); ++s)
        paths.insert(scopePath(t, s));
    // The library's domain range nests inside the application's ranges, and the library's
    // default-domain range inside that: one stack per thread, whichever shared object pushes. The
    // range the library pops with nvtxRangePopPayload (as NCCL pops ncclCommInitAll's) is closed:
    // the application's next range is at app:step again, not under [mylib] lib:init (the first GPU
    // run had every later range of the program under NCCL's).
    EXPECT_EQ(paths,
        (std::set<std::string> { "app:main", "app:main/app:step", "app:main/app:step/[mylib] lib:gemm",
            "app:main/app:step/[mylib] lib:gemm/lib:inner", "app:main/app:step/[mylib] lib:init",
            "app:main/app:step/app:after", "worker:outer", "worker:outer/worker:inner" }));

    std::map<std::string, Annotation> byName;
    for (const auto& a : t.annotations())
        byName[std::string(t.str(a.name))] = a;
    ASSERT_EQ(byName.size(), 10u);
    EXPECT_LE(byName.at("[mylib] lib:init").end, byName.at("app:after").start);
    const auto& main = byName.at("app:main");
    const auto& worker = byName.at("worker:outer");
    EXPECT_NE(main.thread, worker.thread);
    EXPECT_EQ(byName.at("lib:inner").thread, main.thread);
    EXPECT_EQ(byName.at("worker:mark").kind, AnnotationKind::Instant);
    EXPECT_EQ(byName.at("worker:mark").thread, worker.thread);
    // The start/end range began on the main thread before everything and ended on the worker.
    const auto& span = byName.at("app:span");
    EXPECT_EQ(span.thread, main.thread);
    EXPECT_LE(span.start, main.start);
    EXPECT_GE(span.end, byName.at("worker:inner").end);
    EXPECT_LE(main.start, byName.at("[mylib] lib:gemm").start);
    EXPECT_GE(main.end, span.end);
}

TEST(TracerLibrary, FinishesTheFileWhenATerminationSignalEndsTheProgram)
{
    TempDir out, scratch;
    auto r = runShell("NVTX_INJECTION64_PATH=" + std::string(GPUMEM_TRACER_SO) + " GPUMEM_TRACE_DIR=" + out.path() + " exec "
            + GPUMEM_NVTX_APP + " --die-by-sigterm",
        scratch);
    EXPECT_EQ(r.exitCode, 128 + SIGTERM) << r.err; // it still dies by the signal
    auto files = out.files();
    ASSERT_EQ(files.size(), 1u);
    Trace t = readGmt(files[0]);
    EXPECT_EQ(t.stats().find("truncated"), nullptr); // the end chunk was written
    EXPECT_EQ(t.metadata()["exit"], "signal");
    EXPECT_EQ(t.metadata()["signal"], SIGTERM);
    ASSERT_EQ(t.annotations().size(), 1u); // the mark; the open range was never closed
    EXPECT_EQ(t.str(t.annotations()[0].name), "about to die");
    ASSERT_EQ(t.scopes().size(), 2u);
    EXPECT_EQ(t.str(t.scopes()[1].name), "before:signal");
}
