// The buffer-completion path: hand-made CUPTI records in real activity buffers, walked by the real
// cuptiActivityGetNextRecord, converted, written as .gmt chunks and read back by the real reader.
#include "tracer/activity_converter.h"
#include "tracer/api_callbacks.h"
#include "tracer/range_recorder.h"
#include "tracer_test_util.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <thread>

using namespace gpumem;
using namespace gpumem::tracer;
using namespace gpumem::tracer::test;

namespace {

// The offsets the converter relies on (cupti.md §2.1 and §3.1 list them, verified there).
static_assert(offsetof(CUpti_ActivityMemory4, correlationId) == 12);
static_assert(offsetof(CUpti_ActivityMemory4, address) == 16);
static_assert(offsetof(CUpti_ActivityMemory4, bytes) == 24);
static_assert(offsetof(CUpti_ActivityMemory4, timestamp) == 32);
static_assert(offsetof(CUpti_ActivityMemory4, streamId) == 60);
static_assert(offsetof(CUpti_ActivityMemory4, isAsync) == 72);
static_assert(offsetof(CUpti_ActivityMemory4, memoryPoolConfig.memoryPoolType) == 80);
static_assert(offsetof(CUpti_ActivityMemory4, memoryPoolConfig.pool.size) == 104);
static_assert(offsetof(CUpti_ActivityMemory4, memoryPoolConfig.utilizedSize) == 112);
static_assert(offsetof(CUpti_ActivityMemory4, source) == 120);
static_assert(offsetof(CUpti_ActivityKernel10, start) == 16);
static_assert(offsetof(CUpti_ActivityKernel10, streamId) == 48);
static_assert(offsetof(CUpti_ActivityKernel10, correlationId) == 92);
static_assert(offsetof(CUpti_ActivityKernel10, name) == 104);

constexpr std::uint64_t kT0 = 1'700'000'000'000'000'000ull; // Unix ns, as CUPTI's default clock gives

struct Fixture {
    TraceSink sink;
    CorrelationMap correlations;
    ActivityConverter converter { sink, correlations };
    TempDir dir;

    std::size_t walk(ActivityBuffer& b) { return converter.convertBuffer(b.data(), b.size(), cuptiActivityGetNextRecord); }
    Trace trace() { return roundTrip(sink, dir); }
};

CUpti_ActivityMemory4 poolRecord(CUpti_ActivityMemoryOperationType op, std::uint64_t address, std::uint64_t bytes,
    std::uint64_t t, std::uint32_t corr, std::uint64_t poolSize, std::uint64_t used)
{
    auto r = memoryRecord(op, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, address, bytes, t, corr);
    r.isAsync = 1;
    r.streamId = 13;
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.memoryPoolConfig.address = 0x7f0000000000;
    r.memoryPoolConfig.releaseThreshold = UINT64_MAX;
    r.memoryPoolConfig.pool.size = poolSize;
    r.memoryPoolConfig.utilizedSize = used;
    return r;
}

std::vector<std::int64_t> seriesValues(const Trace& t, std::string_view name)
{
    std::vector<std::int64_t> values;
    for (const auto& s : t.counterSamples())
        if (t.str(t.counterSeries()[s.series].name) == name)
            values.push_back(s.value);
    return values;
}

} // namespace

TEST(ActivityConverter, WalksARealBufferOfMixedRecordsToTheEnd)
{
    Fixture f;
    ActivityBuffer b;
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x1000, 2 << 20, kT0, 7));
    b.add(kernelRecord("_Z6kernelv", kT0 + 100, kT0 + 900, 7, 8));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x1000, 2 << 20, kT0 + 1000, 9));
    EXPECT_EQ(f.walk(b), 3u);
    Trace t = f.trace();
    EXPECT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.kernels().size(), 1u);
    EXPECT_TRUE(t.stats().find("cupti_buffer_error") == nullptr);
}

TEST(ActivityConverter, SynchronousDeviceAllocationsAreSegmentEvents)
{
    Fixture f;
    ActivityBuffer b;
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7f00'0020'0000, 20 << 20, kT0, 11));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7f00'0020'0000, 20 << 20, kT0 + 5000, 12));
    f.walk(b);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 2u);
    EXPECT_EQ(m.kind[0], EventKind::SegmentAlloc);
    EXPECT_EQ(m.kind[1], EventKind::SegmentFree);
    EXPECT_EQ(m.time[0], static_cast<TimeNs>(kT0));
    EXPECT_EQ(m.time[1], static_cast<TimeNs>(kT0 + 5000));
    EXPECT_EQ(m.address[0], 0x7f00'0020'0000u);
    EXPECT_EQ(m.size[0], 20u << 20);
    EXPECT_EQ(m.requestedSize[0], 20u << 20);
    EXPECT_EQ(m.sequence[0], 11u);
    const Device& d = t.devices()[m.device[0]];
    EXPECT_EQ(d.type, DeviceType::Cuda);
    EXPECT_EQ(d.ordinal, 0);
    EXPECT_EQ(t.streams()[m.stream[0]].handle, 0u); // CUPTI_INVALID_STREAM_ID: no stream
}

TEST(ActivityConverter, PinnedManagedAndPageableMemoryGetTheirOwnDevices)
{
    Fixture f;
    ActivityBuffer b;
    auto device1 = memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xa000, 512, kT0, 1);
    device1.deviceId = 1;
    b.add(device1);
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0xb000, 4096, kT0 + 1, 2));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0xc000, 8192, kT0 + 2, 3));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 0xd000, 64, kT0 + 3, 4));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0xb000, 4096, kT0 + 4, 5));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0xc000, 8192, kT0 + 5, 6));
    f.walk(b);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 6u);
    auto deviceOf = [&](std::size_t i) {
        const Device& d = t.devices()[m.device[i]];
        return std::string(toString(d.type)) + ":" + std::to_string(d.ordinal) + ":" + std::string(t.str(d.name));
    };
    EXPECT_EQ(deviceOf(0), "cuda:1:");
    EXPECT_EQ(deviceOf(1), "cpu:-1:pinned host");
    EXPECT_EQ(deviceOf(2), "other:0:managed");
    EXPECT_EQ(deviceOf(3), "cpu:-1:pageable host");
    EXPECT_EQ(deviceOf(4), "cpu:-1:pinned host");
    EXPECT_EQ(deviceOf(5), "other:0:managed");
    EXPECT_EQ(m.kind[4], EventKind::SegmentFree);
    EXPECT_EQ(m.kind[5], EventKind::SegmentFree);
    EXPECT_EQ(t.devices().size(), 4u);
}

TEST(ActivityConverter, StreamOrderedPoolAllocationsAreRequestsWithPoolFigures)
{
    Fixture f;
    ActivityBuffer b;
    // cudaMallocAsync of 1000 B then 3000 B grows the pool to 2 MiB; the first is freed.
    b.add(poolRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000000, 1000, kT0 + 10, 21, 2 << 20, 1024));
    b.add(poolRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000400, 3000, kT0 + 20, 22, 2 << 20, 4096));
    b.add(poolRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f0000000000, 1000, kT0 + 30, 23, 2 << 20, 3072));
    f.walk(b);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.kind[0], EventKind::Alloc);
    EXPECT_EQ(m.kind[1], EventKind::Alloc);
    EXPECT_EQ(m.kind[2], EventKind::Free);
    EXPECT_EQ(m.size[1], 3000u);
    EXPECT_EQ(m.requestedSize[1], 3000u);
    EXPECT_EQ(t.streams()[m.stream[0]].handle, 13u);
    EXPECT_EQ(seriesValues(t, "pool 0x7f0000000000 reserved"), (std::vector<std::int64_t> { 2 << 20, 2 << 20, 2 << 20 }));
    EXPECT_EQ(seriesValues(t, "pool 0x7f0000000000 used"), (std::vector<std::int64_t> { 1024, 4096, 3072 }));
    // Paired at ingest: the first block freed, the second still live.
    ASSERT_EQ(t.allocations().size(), 2u);
}

TEST(ActivityConverter, MemoryPoolRecordsBecomeInstantsAndPoolSamples)
{
    Fixture f;
    CUpti_ActivityMemoryPool3 created;
    std::memset(&created, 0, sizeof created);
    created.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    created.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
    created.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    created.deviceId = 0;
    created.address = 0x7f0000000000;
    created.size = 0;
    created.timestamp = kT0;
    CUpti_ActivityMemoryPool3 trimmed = created;
    trimmed.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    trimmed.minBytesToKeep = 0;
    trimmed.size = 4 << 20;
    trimmed.utilizedSize = 512;
    trimmed.timestamp = kT0 + 100;
    ActivityBuffer b;
    b.add(created);
    b.add(trimmed);
    EXPECT_EQ(f.walk(b), 2u);
    Trace t = f.trace();
    ASSERT_EQ(t.annotations().size(), 2u);
    EXPECT_EQ(t.str(t.annotations()[0].name), "pool 0x7f0000000000 created");
    EXPECT_EQ(t.str(t.annotations()[1].name), "pool 0x7f0000000000 trimmed to 0 bytes");
    EXPECT_EQ(t.annotations()[1].kind, AnnotationKind::Instant);
    EXPECT_EQ(seriesValues(t, "pool 0x7f0000000000 reserved"), (std::vector<std::int64_t> { 0, 4 << 20 }));
    EXPECT_EQ(seriesValues(t, "pool 0x7f0000000000 used"), (std::vector<std::int64_t> { 0, 512 }));
}

TEST(ActivityConverter, KernelsKeepNameStreamDeviceAndCorrelation)
{
    Fixture f;
    ActivityBuffer b;
    b.add(kernelRecord("_Z4gemmPfS_", kT0 + 2000, kT0 + 7000, 7, 101, 0));
    b.add(kernelRecord("_Z4reluPf", kT0 + 1000, kT0 + 1500, 13, 100, 1));
    b.add(kernelRecord("_Z4lostv", 0, 0, 7, 102, 0)); // timestamps lost to a full device buffer
    EXPECT_EQ(f.walk(b), 3u);
    Trace t = f.trace();
    ASSERT_EQ(t.kernels().size(), 2u);
    const Kernel& first = t.kernels()[0]; // sorted by start
    EXPECT_EQ(t.str(first.name), "_Z4reluPf");
    EXPECT_EQ(first.start, static_cast<TimeNs>(kT0 + 1000));
    EXPECT_EQ(first.end, static_cast<TimeNs>(kT0 + 1500));
    EXPECT_EQ(first.correlation, 100u);
    EXPECT_EQ(t.devices()[first.device].ordinal, 1);
    EXPECT_EQ(t.streams()[first.stream].handle, 13u);
    EXPECT_EQ(t.str(t.kernels()[1].name), "_Z4gemmPfS_");
    EXPECT_EQ(t.stats().count("kernel_timestamps_lost"), 1u);
}

TEST(ActivityConverter, AllocationSourceLibraryBecomesTheSite)
{
    Fixture f;
    ActivityBuffer b;
    auto nccl = memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x5000, 1 << 20, kT0, 1);
    nccl.source = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    auto unknown = memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x9000, 1 << 20, kT0 + 1, 2);
    b.add(nccl);
    b.add(unknown);
    f.walk(b);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 2u);
    ASSERT_NE(m.site[0], 0u);
    auto frames = t.siteFrames(m.site[0]);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "libnccl.so.2");
    EXPECT_EQ(t.str(t.frames()[frames[0]].file), "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    EXPECT_EQ(m.site[1], 0u);

    // A CUPTI older than 13.0 writes records without the field: it must not be read.
    Fixture old;
    old.converter.setOptions(ConverterOptions { false });
    ActivityBuffer b2;
    b2.add(nccl);
    old.walk(b2);
    EXPECT_EQ(old.trace().memory().site[0], 0u);
}

TEST(ActivityConverter, DroppedRecordsAreCountedInTheTrace)
{
    Fixture f;
    f.converter.addDroppedRecords(17);
    f.converter.addDroppedRecords(0);
    f.converter.addDroppedRecords(5);
    Trace t = f.trace();
    ASSERT_NE(t.stats().find("dropped_records"), nullptr);
    EXPECT_EQ(t.stats().count("dropped_records"), 22u);
    EXPECT_EQ(t.stats().find("dropped_records")->severity, Severity::Error);
}

TEST(ActivityConverter, UnknownKindsAndInvalidOperationsAreCountedAndSkipped)
{
    Fixture f;
    CUpti_ActivityAPI api;
    std::memset(&api, 0, sizeof api);
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.correlationId = 5;
    ActivityBuffer b;
    b.add(api);
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x1, 1, kT0, 6));
    EXPECT_EQ(f.walk(b), 2u);
    Trace t = f.trace();
    EXPECT_EQ(t.memory().count(), 0u);
    EXPECT_EQ(t.stats().count("unhandled_activity_kind"), 1u);
    EXPECT_EQ(t.stats().count("cupti_invalid_memory_operation"), 1u);
}

TEST(ActivityConverter, BacklogBeyondTheBoundIsDroppedAndCounted)
{
    TraceSink sink(2);
    CorrelationMap correlations;
    ActivityConverter converter(sink, correlations);
    ActivityBuffer b;
    for (std::uint32_t i = 0; i < 5; ++i)
        b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x1000 * (i + 1), 64, kT0 + i, i + 1));
    converter.convertBuffer(b.data(), b.size(), cuptiActivityGetNextRecord);
    TempDir dir;
    Trace t = roundTrip(sink, dir);
    EXPECT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.stats().count("tracer_backlog_full"), 3u);
}

// The join that gives every allocation the NVTX range stack of the thread that made it: the API
// callback (on the calling thread) remembers the correlation id, the MEMORY2 record (delivered
// later, elsewhere) picks it up.
TEST(ActivityConverter, AllocationsCarryTheNvtxStackOfTheThreadThatMadeThem)
{
    Fixture f;
    RangeRecorder ranges(f.sink);
    ApiCallbacks api(f.sink, ranges, f.correlations);
    auto allocate = [&](std::uint32_t correlation, CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
        CUpti_CallbackData d;
        std::memset(&d, 0, sizeof d);
        d.callbackSite = CUPTI_API_ENTER;
        d.correlationId = correlation;
        api.onApi(domain, cbid, d);
        return currentThreadId();
    };
    ranges.push("fwd:mod:Net");
    ranges.push("fwd:mod:Net.fc1");
    const std::uint64_t mainThread = allocate(31, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020);
    ranges.pop();
    std::uint64_t workerThread = 0;
    std::thread([&] {
        ranges.push("bwd:mod:Net.fc1");
        workerThread = allocate(32, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync);
        ranges.pop();
        allocate(33, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020); // no open range
    }).join();
    ranges.pop();

    ActivityBuffer b;
    b.add(poolRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000000, 4096, kT0 + 1, 31, 2 << 20, 4096));
    b.add(poolRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000001000, 4096, kT0 + 2, 32, 2 << 20, 8192));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x9000000, 2 << 20, kT0 + 3, 33));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xa000000, 2 << 20, kT0 + 4, 34)); // no callback seen
    f.walk(b);
    EXPECT_EQ(f.correlations.size(), 0u);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 4u);
    EXPECT_EQ(scopePath(t, m.scope[0]), "fwd:mod:Net/fwd:mod:Net.fc1");
    EXPECT_EQ(t.scopes()[m.scope[0]].kind, ScopeKind::Module);
    EXPECT_EQ(m.thread[0], mainThread);
    EXPECT_EQ(scopePath(t, m.scope[1]), "bwd:mod:Net.fc1");
    EXPECT_EQ(m.thread[1], workerThread);
    EXPECT_NE(workerThread, mainThread);
    EXPECT_EQ(m.scope[2], 0u);
    EXPECT_EQ(m.thread[2], workerThread);
    EXPECT_EQ(m.scope[3], 0u);
    EXPECT_EQ(m.thread[3], 0u);
}

TEST(ActivityConverter, DeviceRecordsDescribeTheGpusInTheMetadata)
{
    Fixture f;
    CUpti_ActivityDevice5 d;
    std::memset(&d, 0, sizeof d);
    d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d.id = 1;
    d.name = "NVIDIA H200";
    d.globalMemorySize = 150'011'707'392ull;
    d.computeCapabilityMajor = 9;
    d.computeCapabilityMinor = 0;
    d.numMultiprocessors = 132;
    for (int i = 0; i < 16; ++i)
        d.uuid.bytes[i] = static_cast<char>(0xa0 + i);
    ActivityBuffer b;
    b.add(d);
    EXPECT_EQ(f.walk(b), 1u);
    Trace t = f.trace();
    const auto& dev = t.metadata()["cuda_devices"]["1"];
    EXPECT_EQ(dev["name"], "NVIDIA H200");
    EXPECT_EQ(dev["total_memory"], 150'011'707'392ull);
    EXPECT_EQ(dev["compute_capability"], "9.0");
    EXPECT_EQ(dev["multiprocessors"], 132);
    EXPECT_EQ(dev["uuid"], "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    EXPECT_EQ(t.metadata()["tool"], "test"); // merged into, not replacing, the header's metadata
}

TEST(ActivityConverter, StaticVariablesArraysAndUnknownKindsAreDeviceSegments)
{
    Fixture f;
    ActivityBuffer b;
    auto staticVar = memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 0x100, 256, kT0, 1);
    staticVar.name = "lookupTable";
    auto managedStatic = memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, 0x200, 64, kT0 + 1, 2);
    managedStatic.name = "counters";
    b.add(staticVar);
    b.add(managedStatic);
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, 0x300, 1 << 16, kT0 + 2, 3));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, 0x400, 32, kT0 + 3, 4));
    b.add(memoryRecord(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, 0x300, 1 << 16, kT0 + 4, 5));
    EXPECT_EQ(f.walk(b), 5u);
    Trace t = f.trace();
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 5u);
    auto frameName = [&](std::size_t i) { return std::string(t.str(t.frames()[t.siteFrames(m.site[i])[0]].name)); };
    EXPECT_EQ(frameName(0), "lookupTable"); // a static variable's name is its site
    EXPECT_EQ(frameName(1), "counters");
    EXPECT_EQ(t.devices()[m.device[0]].type, DeviceType::Cuda);
    EXPECT_EQ(t.str(t.devices()[m.device[1]].name), "managed");
    EXPECT_EQ(m.device[2], m.device[0]); // arrays and unknown kinds count as device memory
    EXPECT_EQ(m.device[3], m.device[0]);
    EXPECT_EQ(m.kind[2], EventKind::SegmentAlloc);
    EXPECT_EQ(m.kind[4], EventKind::SegmentFree);
    EXPECT_EQ(m.size[4], 1u << 16);
}
