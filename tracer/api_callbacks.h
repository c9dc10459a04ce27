#pragma once
// ApiCallbacks: the synchronous half of the tracer (cupti.md §2.5). CUPTI calls it on the
// application thread inside the CUDA API call, so it is where the calling thread's NVTX range
// stack is read:
//  - allocation APIs (cudaMalloc, cudaMallocHost, cudaHostAlloc, cudaMallocManaged,
//    cudaMallocAsync, cudaMallocFromPoolAsync and their driver counterparts), at API entry:
//    remember correlationId → (innermost NVTX scope, thread) for the MEMORY2 record to come;
//  - the virtual-memory calls behind PyTorch's expandable segments, at API exit when they
//    succeeded: cuMemMap → segment_map and cuMemUnmap → segment_unmap events (address, size;
//    device from the handle's cuMemCreate; site: the library that called cuMemMap, from the
//    calling thread's stack, caller_library.h), cuMemCreate/cuMemRelease → samples of the counter
//    "vmm physical bytes" of the handle's device (MEMORY2 does not report these calls: seen on
//    the first GPU run).
// Thread-safe; handlers do in-memory work only.
#include "tracer/correlation_map.h"
#include "tracer/range_recorder.h"

#include <cupti.h>

#include <functional>
#include <span>
#include <string>
#include <unordered_map>

namespace gpumem::tracer {

class ApiCallbacks {
public:
    // The file of the library making the current driver call, "" when unknown (callingLibrary()
    // in the tracer; the replay of tests/gpu names the library its run list says called).
    using Caller = std::function<std::string()>;

    ApiCallbacks(TraceSink& sink, RangeRecorder& ranges, CorrelationMap& correlations, RangeRecorder::Clock clock = realtimeNs,
        Caller caller = {});

    // The CUPTI callback body for domains CUPTI_CB_DOMAIN_RUNTIME_API and CUPTI_CB_DOMAIN_DRIVER_API.
    // Other domains and callback ids are ignored.
    void onApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& data);

    // The callback ids to enable (cuptiEnableCallback) in each domain.
    static std::span<const CUpti_CallbackId> runtimeCallbackIds();
    static std::span<const CUpti_CallbackId> driverCallbackIds();

    static constexpr std::string_view kVmmSeries = "vmm physical bytes";

private:
    void vmm(CUpti_CallbackId cbid, const CUpti_CallbackData& data);

    TraceSink& m_sink;
    RangeRecorder& m_ranges;
    CorrelationMap& m_correlations;
    RangeRecorder::Clock m_clock;
    Caller m_caller;
    std::mutex m_mutex; // guards the VMM state; taken before the sink's mutex
    struct Handle {
        std::int32_t device;
        std::uint64_t size;
    };
    std::unordered_map<std::uint64_t, Handle> m_handles; // cuMemCreate handle → device, bytes
    std::unordered_map<std::uint64_t, std::int32_t> m_mapped; // mapped address → device
    std::unordered_map<std::int32_t, std::int64_t> m_physical; // device → bytes created and not released
};

} // namespace gpumem::tracer
