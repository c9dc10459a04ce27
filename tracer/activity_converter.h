#pragma once
// ActivityConverter: turns CUPTI activity records into trace events in a TraceSink. This is the
// tracer's buffer-completion path, kept free of CUPTI calls so tests drive it with hand-made
// records in real activity buffers walked by the real cuptiActivityGetNextRecord (cupti.md §7.1).
//
// Mapping (docs/tracer.md §Events is the full table; record layouts from cupti.md §2–3):
//  - MEMORY2 (CUpti_ActivityMemory4). Stream-ordered or pool allocations (isAsync or a memory
//    pool type) are request-level alloc/free events — one per cudaMallocAsync/cudaFreeAsync — and
//    add samples to the counter series "pool <address> reserved" / "pool <address> used" from the
//    record's pool figures. Every other allocation is a segment_alloc/segment_free (memory the
//    program took from the driver). Memory kinds map to devices: DEVICE/ARRAY/DEVICE_STATIC to
//    (cuda, deviceId), PINNED to (cpu, -1, "pinned host"), PAGEABLE to (cpu, -1, "pageable
//    host"), MANAGED/MANAGED_STATIC to (other, deviceId, "managed"). `source` (the requesting
//    library) becomes a one-frame site (function = file name, file = full path); a static
//    variable's `name` becomes the frame's function. The NVTX scope and thread come from the
//    CorrelationMap (the allocation API callback); sequence = correlationId.
//  - MEMORY_POOL (CUpti_ActivityMemoryPool3): an instant annotation "pool <address> created|
//    destroyed|trimmed" and samples of the pool's reserved and used bytes.
//  - CONCURRENT_KERNEL (CUpti_ActivityKernel10): a kernel (mangled name as CUPTI gives it).
//    Records with start == end == 0 (timestamps lost to a full device buffer) are counted as
//    "kernel_timestamps_lost" and skipped.
//  - DEVICE (CUpti_ActivityDevice5): the metadata patch "cuda_devices": {"<id>": {name, uuid,
//    total_memory, compute_capability, multiprocessors}} (device rows are written before the
//    records that name them arrive, so the GPU's name and size travel in the metadata).
//  - other kinds are counted as "unhandled_activity_kind" (info).
// Thread-safe: every conversion takes the sink's mutex once per buffer.
#include "tracer/correlation_map.h"
#include "tracer/trace_sink.h"

#include <cupti.h>

#include <unordered_map>

namespace gpumem::tracer {

// cuptiActivityGetNextRecord's signature.
using GetNextRecordFn = CUptiResult (*)(uint8_t* buffer, size_t validBufferSizeBytes, CUpti_Activity** record);

struct ConverterOptions {
    // Read CUpti_ActivityMemory4::source (offset 120). Only records of CUPTI ≥ 13.0 have it; the
    // injection sets this from cuptiGetVersion() (cupti.md §6.3).
    bool recordsHaveSource = true;
};

class ActivityConverter {
public:
    ActivityConverter(TraceSink& sink, CorrelationMap& correlations, ConverterOptions options = {});

    // Walks one completed activity buffer with `next` (cuptiActivityGetNextRecord) and converts
    // every record. Stops at CUPTI_ERROR_MAX_LIMIT_REACHED (the end); any other error stops the
    // walk and is counted as "cupti_buffer_error". Returns the number of records walked.
    std::size_t convertBuffer(std::uint8_t* buffer, std::size_t validSize, GetNextRecordFn next);
    // Converts one record (already under no lock).
    void convert(const CUpti_Activity& record);
    // Counts records CUPTI dropped (cuptiActivityGetNumDroppedRecords) as "dropped_records".
    void addDroppedRecords(std::uint64_t count);
    void setOptions(ConverterOptions options) { m_options = options; }

private:
    void convertLocked(const CUpti_Activity& record, SinkTables& t, PendingEvents& p);
    void memory(const CUpti_ActivityMemory4& r, SinkTables& t, PendingEvents& p);
    void pool(const CUpti_ActivityMemoryPool3& r, SinkTables& t, PendingEvents& p);
    void kernel(const CUpti_ActivityKernel10& r, SinkTables& t, PendingEvents& p);
    void device(const CUpti_ActivityDevice5& r, PendingEvents& p);

    DeviceId memoryDevice(SinkTables& t, CUpti_ActivityMemoryKind kind, std::uint32_t deviceId);
    std::pair<std::uint32_t, std::uint32_t> poolSeries(SinkTables& t, std::uint64_t poolAddress, DeviceId device);

    TraceSink& m_sink;
    CorrelationMap& m_correlations;
    ConverterOptions m_options;
    // Lookups cached per record key (only touched under the sink's mutex): the tables' own indexes
    // build strings and tuples, which showed as most of the per-record cost (bench/tracer_overhead).
    std::unordered_map<std::uint64_t, DeviceId> m_devices;                          // (kind, deviceId) → device
    std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> m_pools; // (pool, device) → series
};

// Names used by the converter, shared with tests and docs.
std::string poolSeriesName(std::uint64_t poolAddress, bool used);
std::string hexAddress(std::uint64_t address);

} // namespace gpumem::tracer
