// A writer killed with SIGKILL mid-run leaves a .gmt file that reads up to its last whole chunk
// (the reader behind `gpumem info`), and a stopped writer leaves a complete one.
#include "tracer/range_recorder.h"
#include "tracer/trace_writer_thread.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

using namespace gpumem;
using namespace gpumem::tracer;
using namespace gpumem::tracer::test;

namespace {
void produceForever(const std::string& path)
{
    TraceSink sink;
    RangeRecorder ranges(sink);
    TraceWriterThread writer(sink, path, processMetadata(), std::chrono::milliseconds(5));
    for (std::uint64_t i = 0;; ++i) {
        sink.update([&](SinkTables& t, PendingEvents& p) {
            MemoryEvent e;
            e.time = static_cast<TimeNs>(i);
            e.kind = i % 2 ? EventKind::Free : EventKind::Alloc;
            e.device = t.device(DeviceType::Cuda, 0, "");
            e.stream = t.stream(e.device, 7);
            e.address = 0x1000 + (i / 2) * 0x100;
            e.size = 256;
            e.sequence = i;
            p.memory.push_back(e);
        });
        if (i % 64 == 0) {
            ranges.push("step");
            ranges.pop();
            ::usleep(100);
        }
    }
}

off_t fileSize(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}
} // namespace

TEST(TraceWriterThread, FileOfAWriterKilledMidRunReadsUpToItsLastWholeChunk)
{
    TempDir dir;
    const std::string path = dir.path() + "/killed.gmt";
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        produceForever(path);
        ::_exit(0);
    }
    // Let it write a few hundred KiB of chunks, then kill it without warning.
    for (int i = 0; i < 2000 && fileSize(path) < (256 << 10); ++i)
        ::usleep(5000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    ASSERT_GE(fileSize(path), 256 << 10);

    Trace t = readGmt(path);
    const Anomaly* truncated = t.stats().find("truncated");
    ASSERT_NE(truncated, nullptr);
    EXPECT_EQ(truncated->severity, Severity::Error);
    EXPECT_EQ(t.stats().find("corrupt_chunk"), nullptr);
    const auto& m = t.memory();
    ASSERT_GT(m.count(), 1000u);
    // Every event up to the cut is there, in order, with nothing invented.
    for (std::size_t i = 0; i < m.count(); ++i) {
        ASSERT_EQ(m.sequence[i], i);
        ASSERT_EQ(m.address[i], 0x1000 + (i / 2) * 0x100);
    }
    EXPECT_EQ(t.metadata()["tool"], "gpumem-tracer");
    EXPECT_FALSE(t.annotations().empty());

    // `gpumem info` reads it too, reporting the cut instead of failing.
    auto info = runShell(std::string(GPUMEM_CLI) + " info " + path, dir);
    EXPECT_EQ(info.exitCode, 0) << info.err;
    EXPECT_NE(info.out.find("memory events   " + std::to_string(m.count())), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("error truncated"), std::string::npos) << info.out;
}

TEST(TraceWriterThread, StopWritesEverythingAndTheEndChunk)
{
    TempDir dir;
    const std::string path = dir.path() + "/complete.gmt";
    TraceSink sink;
    {
        TraceWriterThread writer(sink, path, processMetadata(), std::chrono::milliseconds(1000));
        RangeRecorder ranges(sink);
        ranges.push("only");
        ranges.pop();
        writer.stop({ { "exit", "normal" } });
        writer.stop(); // idempotent
        EXPECT_FALSE(writer.failed());
    }
    Trace t = readGmt(path);
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().code;
    ASSERT_EQ(t.annotations().size(), 1u);
    EXPECT_EQ(t.metadata()["exit"], "normal");
    EXPECT_EQ(t.metadata()["events_written"], 1);
    EXPECT_EQ(t.metadata()["pid"], ::getpid());
}

TEST(TraceFileName, NamesThePidHostAndTorchrunRanksAndNeverOverwrites)
{
    TempDir dir;
    auto env = [](const char* name) -> const char* {
        if (std::string_view(name) == "RANK")
            return "3";
        if (std::string_view(name) == "LOCAL_RANK")
            return "1";
        return nullptr;
    };
    const std::string first = traceFileName(dir.path(), 4242, "node-7.cluster", env);
    EXPECT_EQ(first, dir.path() + "/gpumem.node-7_cluster.4242.rank3.local1.gmt");
    std::ofstream(first) << "x";
    EXPECT_EQ(traceFileName(dir.path(), 4242, "node-7.cluster", env), dir.path() + "/gpumem.node-7_cluster.4242.rank3.local1.1.gmt");
    EXPECT_EQ(traceFileName(dir.path(), 17, "h", [](const char*) -> const char* { return nullptr; }), dir.path() + "/gpumem.h.17.gmt");
}
