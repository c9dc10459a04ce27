// `gpumem info` says what it counts: streams by what they carry (kernels, memory events) rather than
// the rows of the stream table, and annotations as time ranges by kind. Figures from SOURCES.md (the
// review found "3 streams" where the HTA trace has 2 kernel streams, and "annotations 1" for a
// snapshot's 2 external_annotations records, one START/END pair).
#include "analyze/summary_report.h"
#include "analyze/trace_summary.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

using namespace gpumem;

namespace {
std::string publicTrace(const std::string& relative) { return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative; }

std::string infoText(const Trace& t)
{
    std::ostringstream out;
    analyze::writeSummaryText(analyze::summarize(t), "t", "r", out);
    return out.str();
}
} // namespace

TEST(InfoWording, CountsStreamsByWhatTheyCarry)
{
    // Device 0: a kernel on the side stream; memory events on stream 0 and on the side stream.
    // Device 1: the NCCL kernel on its own stream; memory events on stream 0 and on the NCCL stream.
    Trace t = loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/two_devices_streams.jsonl");
    const auto s = analyze::summarize(t);
    ASSERT_EQ(s.devices.size(), 2u);
    for (const auto& d : s.devices) {
        EXPECT_EQ(d.kernelStreams, 1u);
        EXPECT_EQ(d.memoryStreams, 2u);
        EXPECT_EQ(d.streams, 2u); // the table's rows
    }
    const std::string text = infoText(t);
    EXPECT_NE(text.find("(79.20 GiB), 1 kernel stream, memory events on 2 streams\n"), std::string::npos) << text;

    // The shape of an imported profiler trace: kernels on stream 7, memory events on a stream of
    // handle 0 that the format does not record (Kineto [memory]); an unused stream row; a device with
    // neither.
    TraceBuilder b;
    const DeviceId gpu = b.device(DeviceType::Cuda, 0);
    b.device(DeviceType::Cuda, 1);
    const StreamId memory = b.stream(gpu, 0), kernels = b.stream(gpu, 7);
    b.stream(gpu, 9);
    MemoryEvent e;
    e.time = 10;
    e.kind = EventKind::Alloc;
    e.device = gpu;
    e.stream = memory;
    e.address = 0x1000;
    e.size = 512;
    b.add(e);
    Kernel k;
    k.start = 5;
    k.end = 20;
    k.device = gpu;
    k.stream = kernels;
    b.add(k);
    const Trace built = b.build();
    const auto bs = analyze::summarize(built);
    EXPECT_EQ(bs.devices[0].streams, 3u);
    EXPECT_EQ(bs.devices[0].kernelStreams, 1u);
    EXPECT_EQ(bs.devices[0].memoryStreams, 1u);
    const std::string builtText = infoText(built);
    EXPECT_NE(builtText.find("  device cuda:0, 1 kernel stream, memory events on 1 stream\n"), std::string::npos)
        << builtText;
    EXPECT_NE(builtText.find("  device cuda:1\n"), std::string::npos) << builtText;
    EXPECT_NE(builtText.find("  annotations     0\n"), std::string::npos) << builtText;
    const auto j = analyze::summaryToJson(bs, "t", "r");
    EXPECT_EQ(j["devices"][0]["streams"], 3);
    EXPECT_EQ(j["devices"][0]["kernel_streams"], 1);
    EXPECT_EQ(j["devices"][0]["memory_streams"], 1);
}

TEST(InfoWording, HtaTraceHasTwoKernelStreamsAndItsMemoryEventsApart)
{
    const auto path = publicTrace("hta/df_index_resolver.json.gz");
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    Trace t = loadTrace(path);
    const auto s = analyze::summarize(t);
    const std::string text = infoText(t);
    // SOURCES.md: 19,370 kernels (device 1, 2 streams); 2,035 user_annotation, 5 of them ProfilerStep#N.
    EXPECT_NE(
        text.find("device cuda:1 \"Tesla V100-SXM2-32GB\" (31.75 GiB), 2 kernel streams, memory events on 1 stream\n"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("device cpu, memory events on 1 stream\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  annotations     2035 (2030 ranges, 5 steps)\n"), std::string::npos) << text;
    const auto j = analyze::summaryToJson(s, "t", "r");
    EXPECT_EQ(j["annotations"], 2035);
    EXPECT_EQ(j["annotations_by_kind"]["range"], 2030);
    EXPECT_EQ(j["annotations_by_kind"]["step"], 5);
}

TEST(InfoWording, SnapshotStartEndPairIsOneRange)
{
    const auto path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    Trace t = loadTrace(path);
    // SOURCES.md: external_annotations: 2 (AdamW.step START/END): one range.
    const std::string text = infoText(t);
    EXPECT_NE(text.find("  annotations     1 range\n"), std::string::npos) << text;
    EXPECT_NE(text.find("device cuda:0, memory events on 1 stream\n"), std::string::npos) << text;
}
