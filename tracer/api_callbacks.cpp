#include "tracer/api_callbacks.h"

#include "tracer/caller_library.h"

#include <array>

namespace gpumem::tracer {

namespace {
    constexpr std::array<CUpti_CallbackId, 11> kRuntimeAllocs = {
        CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020,
    };
    constexpr std::array<CUpti_CallbackId, 10> kDriverAllocs = {
        CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2,
    };
    constexpr std::array<CUpti_CallbackId, 4> kDriverVmm = {
        CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
        CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
        CUPTI_DRIVER_TRACE_CBID_cuMemMap,
        CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    };
    constexpr auto kDriverAll = [] {
        std::array<CUpti_CallbackId, kDriverAllocs.size() + kDriverVmm.size()> all {};
        std::size_t i = 0;
        for (auto id : kDriverAllocs)
            all[i++] = id;
        for (auto id : kDriverVmm)
            all[i++] = id;
        return all;
    }();

    template <std::size_t N> bool contains(const std::array<CUpti_CallbackId, N>& ids, CUpti_CallbackId id)
    {
        for (auto x : ids)
            if (x == id)
                return true;
        return false;
    }
} // namespace

std::span<const CUpti_CallbackId> ApiCallbacks::runtimeCallbackIds() { return kRuntimeAllocs; }
std::span<const CUpti_CallbackId> ApiCallbacks::driverCallbackIds() { return kDriverAll; }

ApiCallbacks::ApiCallbacks(TraceSink& sink, RangeRecorder& ranges, CorrelationMap& correlations, RangeRecorder::Clock clock,
    Caller caller)
    : m_sink(sink)
    , m_ranges(ranges)
    , m_correlations(correlations)
    , m_clock(std::move(clock))
    , m_caller(caller ? std::move(caller) : Caller(callingLibrary))
{
}

void ApiCallbacks::onApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData& data)
{
    const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    const bool driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
    if ((runtime && contains(kRuntimeAllocs, cbid)) || (driver && contains(kDriverAllocs, cbid))) {
        if (data.callbackSite == CUPTI_API_ENTER) {
            const std::uint64_t thread = currentThreadId();
            m_correlations.remember(data.correlationId, CallOrigin { m_ranges.currentScope(), thread });
        }
        return;
    }
    if (driver && contains(kDriverVmm, cbid) && data.callbackSite == CUPTI_API_EXIT && data.functionParams != nullptr) {
        const auto* result = static_cast<const CUresult*>(data.functionReturnValue);
        if (result == nullptr || *result == CUDA_SUCCESS)
            vmm(cbid, data);
    }
}

void ApiCallbacks::vmm(CUpti_CallbackId cbid, const CUpti_CallbackData& data)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    const ScopeId scope = m_ranges.currentScope();
    // The library a map belongs to, as CUPTI's allocation source names a cudaMalloc's; found before
    // the VMM state's mutex is taken (a stack walk takes the loader's lock), and for maps only.
    const std::string caller = cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap ? m_caller() : std::string();
    std::lock_guard lock(m_mutex);
    auto physicalSample = [&](std::int32_t device, std::int64_t delta) {
        const std::int64_t total = (m_physical[device] += delta);
        m_sink.update([&](SinkTables& t, PendingEvents& p) {
            if (!p.admit())
                return;
            auto series = t.counterSeries(kVmmSeries, t.device(DeviceType::Cuda, device, ""));
            p.samples.push_back(CounterSample { now, series, total });
        });
    };
    auto segmentEvent = [&](EventKind kind, std::int32_t device, std::uint64_t address, std::uint64_t size) {
        m_sink.update([&](SinkTables& t, PendingEvents& p) {
            if (!p.admit())
                return;
            MemoryEvent e;
            e.time = now;
            e.kind = kind;
            e.device = t.device(DeviceType::Cuda, device, "");
            e.stream = t.stream(e.device, 0);
            e.address = address;
            e.size = size;
            e.requestedSize = kind == EventKind::SegmentMap ? size : 0;
            e.scope = scope;
            e.thread = thread;
            e.sequence = data.correlationId;
            if (kind == EventKind::SegmentMap)
                e.site = t.librarySite(caller);
            p.memory.push_back(e);
        });
    };
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        const auto* a = static_cast<const cuMemCreate_params*>(data.functionParams);
        if (a->handle == nullptr)
            return;
        std::int32_t device = 0;
        if (a->prop != nullptr && a->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
            device = a->prop->location.id;
        m_handles[static_cast<std::uint64_t>(*a->handle)] = Handle { device, a->size };
        physicalSample(device, static_cast<std::int64_t>(a->size));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
        const auto* a = static_cast<const cuMemRelease_params*>(data.functionParams);
        auto it = m_handles.find(static_cast<std::uint64_t>(a->handle));
        if (it == m_handles.end())
            return;
        const Handle h = it->second;
        m_handles.erase(it);
        physicalSample(h.device, -static_cast<std::int64_t>(h.size));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        const auto* a = static_cast<const cuMemMap_params*>(data.functionParams);
        auto it = m_handles.find(static_cast<std::uint64_t>(a->handle));
        std::int32_t device = 0;
        if (it != m_handles.end()) {
            device = it->second.device;
        } else {
            m_sink.update([&](SinkTables&, PendingEvents& p) {
                p.stats.add("vmm_unknown_handle", Severity::Warning,
                    "cuMemMap of a handle whose cuMemCreate was not seen; device 0 assumed");
            });
        }
        m_mapped[a->ptr] = device;
        segmentEvent(EventKind::SegmentMap, device, a->ptr, a->size);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const auto* a = static_cast<const cuMemUnmap_params*>(data.functionParams);
        std::int32_t device = 0;
        if (auto it = m_mapped.find(a->ptr); it != m_mapped.end()) {
            device = it->second;
            m_mapped.erase(it);
        }
        segmentEvent(EventKind::SegmentUnmap, device, a->ptr, a->size);
        break;
    }
    default:
        break;
    }
}

} // namespace gpumem::tracer
