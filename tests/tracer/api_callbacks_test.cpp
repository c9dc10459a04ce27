// The virtual-memory calls behind PyTorch's expandable segments, as CUPTI's driver callbacks hand
// them over (CUpti_CallbackData with the generated *_params structs), become segment map/unmap
// events and a physical-bytes counter.
#include "tracer/api_callbacks.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

using namespace gpumem;
using namespace gpumem::tracer;
using namespace gpumem::tracer::test;

namespace {

struct Driver {
    TraceSink sink;
    RangeRecorder ranges { sink };
    CorrelationMap correlations;
    TimeNs clock = 5000;
    std::string caller; // the library the tracer would find on the calling stack
    ApiCallbacks api { sink, ranges, correlations, [this] { return clock += 100; }, [this] { return caller; } };
    std::uint32_t correlation = 0;

    void call(CUpti_CallbackId cbid, void* params, CUresult result = CUDA_SUCCESS)
    {
        ++correlation;
        for (auto site : { CUPTI_API_ENTER, CUPTI_API_EXIT }) {
            CUpti_CallbackData d;
            std::memset(&d, 0, sizeof d);
            d.callbackSite = site;
            d.correlationId = correlation;
            d.functionParams = params;
            d.functionReturnValue = &result;
            api.onApi(CUPTI_CB_DOMAIN_DRIVER_API, cbid, d);
        }
    }
    CUmemGenericAllocationHandle create(std::size_t size, int device, CUmemGenericAllocationHandle value)
    {
        CUmemAllocationProp prop {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device;
        CUmemGenericAllocationHandle handle = value; // what the driver wrote at exit
        cuMemCreate_params p { &handle, size, &prop, 0 };
        call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &p);
        return handle;
    }
    void map(CUdeviceptr ptr, std::size_t size, CUmemGenericAllocationHandle h, CUresult result = CUDA_SUCCESS)
    {
        cuMemMap_params p { ptr, size, 0, h, 0 };
        call(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &p, result);
    }
    void unmap(CUdeviceptr ptr, std::size_t size)
    {
        cuMemUnmap_params p { ptr, size };
        call(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &p);
    }
    void release(CUmemGenericAllocationHandle h)
    {
        cuMemRelease_params p { h };
        call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &p);
    }
};

} // namespace

TEST(ApiCallbacks, ExpandableSegmentGrowthAndShrinkBecomeMapAndUnmapEvents)
{
    Driver d;
    constexpr CUdeviceptr base = 0x7f2000000000;
    constexpr std::size_t page = 20 << 20;
    d.ranges.push("fwd:mod:Net.fc1");
    auto h1 = d.create(page, 1, 0x11);
    d.map(base, page, h1);
    auto h2 = d.create(page, 1, 0x12);
    d.map(base + page, page, h2);
    d.ranges.pop();
    d.map(base + 2 * page, page, 0x99, CUDA_ERROR_OUT_OF_MEMORY); // failed calls leave no event
    d.unmap(base + page, page);
    d.release(h2);

    TempDir dir;
    Trace t = roundTrip(d.sink, dir);
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.kind[0], EventKind::SegmentMap);
    EXPECT_EQ(m.address[0], base);
    EXPECT_EQ(m.size[0], page);
    EXPECT_EQ(m.kind[1], EventKind::SegmentMap);
    EXPECT_EQ(m.address[1], base + page);
    EXPECT_EQ(m.kind[2], EventKind::SegmentUnmap);
    EXPECT_EQ(m.address[2], base + page);
    EXPECT_EQ(m.size[2], page);
    EXPECT_EQ(t.devices()[m.device[0]].ordinal, 1); // from cuMemCreate's location
    EXPECT_EQ(t.devices()[m.device[2]].ordinal, 1);
    EXPECT_EQ(scopePath(t, m.scope[0]), "fwd:mod:Net.fc1");
    EXPECT_EQ(m.scope[2], 0u);
    EXPECT_EQ(m.thread[0], currentThreadId());
    EXPECT_LT(m.time[0], m.time[1]);

    std::vector<std::int64_t> physical;
    for (const auto& s : t.counterSamples())
        physical.push_back(s.value);
    EXPECT_EQ(physical, (std::vector<std::int64_t> { page, 2 * page, page }));
    ASSERT_EQ(t.counterSeries().size(), 1u);
    EXPECT_EQ(t.str(t.counterSeries()[0].name), ApiCallbacks::kVmmSeries);
}

TEST(ApiCallbacks, AllocationCallsRememberTheCallerAndOtherCallsAreIgnored)
{
    Driver d;
    d.ranges.push("optimizer");
    CUpti_CallbackData data;
    std::memset(&data, 0, sizeof data);
    data.callbackSite = CUPTI_API_ENTER;
    data.correlationId = 77;
    d.api.onApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, data);
    data.correlationId = 78;
    d.api.onApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, data);
    data.correlationId = 79;
    d.api.onApi(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, data);
    EXPECT_EQ(d.correlations.size(), 1u);
    auto origin = d.correlations.take(77);
    ASSERT_TRUE(origin.has_value());
    EXPECT_EQ(origin->scope, d.ranges.currentScope());
    EXPECT_EQ(origin->thread, currentThreadId());
    EXPECT_FALSE(d.correlations.take(77).has_value());
}

TEST(CorrelationMap, EvictsTheOldestBeyondItsCapacity)
{
    CorrelationMap map(3);
    for (std::uint32_t id = 1; id <= 5; ++id)
        map.remember(id, CallOrigin { id, 0 });
    EXPECT_EQ(map.size(), 3u);
    EXPECT_FALSE(map.take(2).has_value());
    EXPECT_EQ(map.take(3)->scope, 3u);
}

TEST(ApiCallbacks, AMapNamesTheLibraryThatCalledIt)
{
    // NCCL 2.2x maps its buffers with cuMemCreate + cuMemMap; the first GPU run had 194 such maps
    // in ncclCommInitAll with no library (traces/gpu_check_h200.gmt). The map's site is now the
    // caller, as CUPTI's allocation source names a cudaMalloc's: the file's name and its path.
    Driver d;
    constexpr std::size_t chunk = 2 << 20;
    d.caller = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    auto h = d.create(chunk, 0, 0x21);
    d.map(0x7f3101c00000, chunk, h);
    d.caller = "";
    auto h2 = d.create(chunk, 0, 0x22);
    d.map(0x7f3101e00000, chunk, h2); // no caller found: no site
    d.caller = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    d.unmap(0x7f3101c00000, chunk);

    TempDir dir;
    Trace t = roundTrip(d.sink, dir);
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    ASSERT_NE(m.site[0], 0u);
    auto frames = t.siteFrames(m.site[0]);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "libnccl.so.2");
    EXPECT_EQ(t.str(t.frames()[frames[0]].file), "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
    EXPECT_EQ(m.site[1], 0u);
    EXPECT_EQ(m.site[2], 0u); // an unmap carries no site
}
