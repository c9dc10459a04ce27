#include "tracer/activity_converter.h"

#include <cstdio>
#include <cstring>

namespace gpumem::tracer {

static_assert(sizeof(CUpti_ActivityMemory4) == 128, "CUpti_ActivityMemory4 layout changed (cupti.md §2.1)");
static_assert(sizeof(CUpti_ActivityMemoryPool3) == 80, "CUpti_ActivityMemoryPool3 layout changed (cupti.md §2.2)");
static_assert(sizeof(CUpti_ActivityKernel10) == 216, "CUpti_ActivityKernel10 layout changed (cupti.md §3.1)");

std::string hexAddress(std::uint64_t address)
{
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
    return buf;
}

std::string poolSeriesName(std::uint64_t poolAddress, bool used)
{
    return "pool " + hexAddress(poolAddress) + (used ? " used" : " reserved");
}

namespace {
    DeviceId lookupMemoryDevice(SinkTables& t, CUpti_ActivityMemoryKind kind, std::uint32_t deviceId)
    {
        const auto ordinal = static_cast<std::int32_t>(deviceId);
        switch (kind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
            return t.device(DeviceType::Cpu, -1, "pinned host");
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
            return t.device(DeviceType::Cpu, -1, "pageable host");
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
            return t.device(DeviceType::Other, ordinal, "managed");
        default:
            return t.device(DeviceType::Cuda, ordinal, "");
        }
    }

    // CUPTI_INVALID_STREAM_ID (synchronous operations) becomes stream handle 0.
    std::uint64_t streamHandle(std::uint32_t streamId) { return streamId == CUPTI_INVALID_STREAM_ID ? 0 : streamId; }
} // namespace

DeviceId ActivityConverter::memoryDevice(SinkTables& t, CUpti_ActivityMemoryKind kind, std::uint32_t deviceId)
{
    const std::uint64_t key = std::uint64_t(kind) << 32 | deviceId;
    auto it = m_devices.find(key);
    if (it == m_devices.end())
        it = m_devices.emplace(key, lookupMemoryDevice(t, kind, deviceId)).first;
    return it->second;
}

std::pair<std::uint32_t, std::uint32_t> ActivityConverter::poolSeries(SinkTables& t, std::uint64_t poolAddress, DeviceId device)
{
    const std::uint64_t key = poolAddress ^ (std::uint64_t(device) << 48);
    auto it = m_pools.find(key);
    if (it == m_pools.end())
        it = m_pools.emplace(key, std::make_pair(t.counterSeries(poolSeriesName(poolAddress, false), device),
                                                t.counterSeries(poolSeriesName(poolAddress, true), device))).first;
    return it->second;
}

ActivityConverter::ActivityConverter(TraceSink& sink, CorrelationMap& correlations, ConverterOptions options)
    : m_sink(sink)
    , m_correlations(correlations)
    , m_options(options)
{
}

std::size_t ActivityConverter::convertBuffer(std::uint8_t* buffer, std::size_t validSize, GetNextRecordFn next)
{
    if (buffer == nullptr || validSize == 0)
        return 0;
    std::size_t n = 0;
    m_sink.update([&](SinkTables& t, PendingEvents& p) {
        CUpti_Activity* record = nullptr;
        for (;;) {
            CUptiResult r = next(buffer, validSize, &record);
            if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
                break;
            if (r != CUPTI_SUCCESS) {
                p.stats.add("cupti_buffer_error", Severity::Error,
                    "cuptiActivityGetNextRecord returned error " + std::to_string(int(r)) + " after " + std::to_string(n)
                        + " records of a " + std::to_string(validSize) + "-byte buffer; the rest of that buffer was lost");
                break;
            }
            ++n;
            convertLocked(*record, t, p);
        }
    });
    return n;
}

void ActivityConverter::convert(const CUpti_Activity& record)
{
    m_sink.update([&](SinkTables& t, PendingEvents& p) { convertLocked(record, t, p); });
}

void ActivityConverter::addDroppedRecords(std::uint64_t count)
{
    if (count == 0)
        return;
    m_sink.update([&](SinkTables&, PendingEvents& p) {
        p.stats.add("dropped_records", Severity::Error,
            "CUPTI dropped activity records for lack of buffer space; the trace is incomplete", count);
    });
}

void ActivityConverter::convertLocked(const CUpti_Activity& record, SinkTables& t, PendingEvents& p)
{
    switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        memory(reinterpret_cast<const CUpti_ActivityMemory4&>(record), t, p);
        break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        pool(reinterpret_cast<const CUpti_ActivityMemoryPool3&>(record), t, p);
        break;
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        kernel(reinterpret_cast<const CUpti_ActivityKernel10&>(record), t, p);
        break;
    case CUPTI_ACTIVITY_KIND_DEVICE:
        device(reinterpret_cast<const CUpti_ActivityDevice5&>(record), p);
        break;
    default:
        p.stats.add("unhandled_activity_kind", Severity::Info,
            "CUPTI activity kind " + std::to_string(int(record.kind)) + " is not converted by this tracer; skipped");
        break;
    }
}

void ActivityConverter::memory(const CUpti_ActivityMemory4& r, SinkTables& t, PendingEvents& p)
{
    const bool allocation = r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    if (!allocation && r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        p.stats.add("cupti_invalid_memory_operation", Severity::Warning,
            "MEMORY2 record with operation type " + std::to_string(int(r.memoryOperationType)) + " (correlation "
                + std::to_string(r.correlationId) + "); skipped");
        return;
    }
    const bool inPool = r.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    const bool requestLevel = r.isAsync != 0 || inPool;
    if (!p.admit())
        return;
    MemoryEvent e;
    e.time = static_cast<TimeNs>(r.timestamp);
    e.kind = requestLevel ? (allocation ? EventKind::Alloc : EventKind::Free)
                          : (allocation ? EventKind::SegmentAlloc : EventKind::SegmentFree);
    e.device = memoryDevice(t, r.memoryKind, r.deviceId);
    e.stream = t.stream(e.device, streamHandle(r.streamId));
    e.address = r.address;
    e.size = r.bytes;
    e.requestedSize = allocation ? r.bytes : 0;
    e.sequence = r.correlationId;
    if (auto origin = m_correlations.take(r.correlationId)) {
        e.scope = origin->scope;
        e.thread = origin->thread;
    }
    std::string_view variable = r.name ? std::string_view(r.name) : std::string_view();
    std::string_view source = m_options.recordsHaveSource && r.source ? std::string_view(r.source) : std::string_view();
    e.site = !variable.empty() ? t.site(variable, source) : t.librarySite(source);
    p.memory.push_back(e);

    if (r.memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        auto [reserved, used] = poolSeries(t, r.memoryPoolConfig.address, e.device);
        p.samples.push_back(CounterSample { e.time, reserved, static_cast<std::int64_t>(r.memoryPoolConfig.pool.size) });
        p.samples.push_back(CounterSample { e.time, used, static_cast<std::int64_t>(r.memoryPoolConfig.utilizedSize) });
    }
}

void ActivityConverter::pool(const CUpti_ActivityMemoryPool3& r, SinkTables& t, PendingEvents& p)
{
    const char* what = nullptr;
    switch (r.memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
        what = " created";
        break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED:
        what = " destroyed";
        break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED:
        what = " trimmed";
        break;
    default:
        p.stats.add("cupti_invalid_pool_operation", Severity::Warning,
            "MEMORY_POOL record with operation type " + std::to_string(int(r.memoryPoolOperationType)) + "; skipped");
        return;
    }
    if (!p.admit())
        return;
    const DeviceId device = r.isManagedPool ? t.device(DeviceType::Other, static_cast<std::int32_t>(r.deviceId), "managed")
                                            : t.device(DeviceType::Cuda, static_cast<std::int32_t>(r.deviceId), "");
    const auto time = static_cast<TimeNs>(r.timestamp);
    std::string name = "pool " + hexAddress(r.address) + what;
    if (r.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED)
        name += " to " + std::to_string(r.minBytesToKeep) + " bytes";
    p.annotations.push_back(Annotation { time, time, t.intern(name), AnnotationKind::Instant, device, 0 });
    if (r.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        auto [reserved, used] = poolSeries(t, r.address, device);
        p.samples.push_back(CounterSample { time, reserved, static_cast<std::int64_t>(r.size) });
        p.samples.push_back(CounterSample { time, used, static_cast<std::int64_t>(r.utilizedSize) });
    }
}

void ActivityConverter::kernel(const CUpti_ActivityKernel10& r, SinkTables& t, PendingEvents& p)
{
    if (r.start == 0 && r.end == 0) {
        p.stats.add("kernel_timestamps_lost", Severity::Warning,
            "kernel records without timestamps (CUPTI's device buffer was full); they were skipped");
        return;
    }
    if (!p.admit())
        return;
    Kernel k;
    k.start = static_cast<TimeNs>(r.start);
    k.end = static_cast<TimeNs>(r.end);
    k.device = t.device(DeviceType::Cuda, static_cast<std::int32_t>(r.deviceId), "");
    k.stream = t.stream(k.device, streamHandle(r.streamId));
    k.name = t.intern(r.name ? std::string_view(r.name) : std::string_view("<unnamed kernel>"));
    k.correlation = r.correlationId;
    p.kernels.push_back(k);
}

void ActivityConverter::device(const CUpti_ActivityDevice5& r, PendingEvents& p)
{
    char uuid[2 * sizeof r.uuid.bytes + 1] = {};
    for (std::size_t i = 0; i < sizeof r.uuid.bytes; ++i)
        std::snprintf(uuid + 2 * i, 3, "%02x", static_cast<unsigned>(static_cast<unsigned char>(r.uuid.bytes[i])));
    p.metadataPatch["cuda_devices"][std::to_string(r.id)] = {
        { "name", r.name ? r.name : "" },
        { "uuid", uuid },
        { "total_memory", r.globalMemorySize },
        { "compute_capability", std::to_string(r.computeCapabilityMajor) + "." + std::to_string(r.computeCapabilityMinor) },
        { "multiprocessors", r.numMultiprocessors },
    };
}

} // namespace gpumem::tracer
