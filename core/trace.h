#pragma once
// The in-memory trace model (design.md §3). A Trace is immutable once built (by TraceBuilder, the
// .gmt/.jsonl readers or an importer) and cheap to copy: copies share one read-only body, so a
// Trace may be read from many threads at once. Memory events are stored as contiguous columns in
// time order (ties broken by sequence number); allocations (alloc → free pairs) are derived on
// first use and the anomalies found while pairing join stats().
#include "core/import_stats.h"
#include "core/string_table.h"
#include "core/types.h"

#include <nlohmann/json_fwd.hpp>

#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace gpumem {

inline constexpr std::uint64_t kNoIndex = std::numeric_limits<std::uint64_t>::max();
inline constexpr DeviceId kNoDevice = std::numeric_limits<DeviceId>::max();

struct Device {
    DeviceType type = DeviceType::Cuda;
    std::int32_t ordinal = 0; // the index the source uses (CUDA device 0, 1, …; -1 for the host)
    StringId name = 0;        // e.g. "NVIDIA H100 80GB HBM3"; 0 if unknown
    Bytes totalMemory = 0;    // bytes; 0 if unknown
};

struct Stream {
    DeviceId device = 0;
    std::uint64_t handle = 0; // the source's stream id or cudaStream_t value; 0 = default stream
    StringId name = 0;
};

struct Frame {
    StringId name = 0;     // function
    StringId file = 0;     // source file ("??" for unknown C++ frames)
    std::int32_t line = 0; // 0 if unknown
};

// An allocator pool of the trace (PyTorch's private pools: CUDA-graph captures, torch.cuda.MemPool).
// Pool 0 is the default pool, implicit; a memory event names its pool by index (MemoryEvent::pool).
struct MemoryPool {
    PoolKind kind = PoolKind::Default;
    // The source's id: PyTorch's MempoolId_t (segment_pool_id in a snapshot); (0,0) for pool 0.
    std::int64_t idFirst = 0, idSecond = 0;
    // PyTorch MemPool(use_on_oom=True): a default-pool request that finds no memory may take a cached
    // block of this pool (CUDACachingAllocator.cpp try_mempool_fallback, newest versions only).
    bool useOnOom = false;
    friend bool operator==(const MemoryPool&, const MemoryPool&) = default;
};

// A node of the module/range tree. Scope 0 is the root (no scope).
struct Scope {
    ScopeId parent = 0;
    StringId name = 0;
    ScopeKind kind = ScopeKind::Range;
};

// One memory event as a row (the columns below hold the same fields).
struct MemoryEvent {
    static constexpr std::uint64_t kAutoSequence = std::numeric_limits<std::uint64_t>::max();
    TimeNs time = 0;
    EventKind kind = EventKind::Alloc;
    DeviceId device = 0;
    StreamId stream = 0;
    Address address = 0;
    Bytes size = 0;          // as the allocator rounded it
    Bytes requestedSize = 0; // what the program asked for; 0 if unknown
    ScopeId scope = 0;
    SiteId site = 0;
    std::uint64_t thread = 0;
    std::uint64_t sequence = kAutoSequence; // the source's order; TraceBuilder assigns arrival order if left auto
    Category category = Category::Unknown;
    PoolId pool = 0; // the allocator pool of the block or segment (0 = default); see EventKind::EmptyCache
    friend bool operator==(const MemoryEvent&, const MemoryEvent&) = default;
};

// Columnar storage of memory events; every vector has the same length.
struct MemoryEventColumns {
    std::vector<TimeNs> time;
    std::vector<EventKind> kind;
    std::vector<DeviceId> device;
    std::vector<StreamId> stream;
    std::vector<Address> address;
    std::vector<Bytes> size;
    std::vector<Bytes> requestedSize;
    std::vector<ScopeId> scope;
    std::vector<SiteId> site;
    std::vector<std::uint64_t> thread;
    std::vector<std::uint64_t> sequence;
    std::vector<Category> category;
    std::vector<PoolId> pool;

    std::size_t count() const { return time.size(); }
    void reserve(std::size_t n);
    void clear(); // every column emptied, its capacity kept
    void push(const MemoryEvent& e);
    MemoryEvent row(std::size_t i) const;
};

struct Kernel {
    TimeNs start = 0;
    TimeNs end = 0;
    DeviceId device = 0;
    StreamId stream = 0;
    StringId name = 0;
    std::uint64_t correlation = 0;
    friend bool operator==(const Kernel&, const Kernel&) = default;
};

enum class AnnotationKind : std::uint8_t { Range = 0, Step = 1, Instant = 2 };
std::string_view toString(AnnotationKind kind);
std::optional<AnnotationKind> annotationKindFromString(std::string_view name);

// A named time range on the host (NVTX range, user_annotation, ProfilerStep#N, optimizer step).
struct Annotation {
    TimeNs start = 0;
    TimeNs end = 0; // == start for an instant
    StringId name = 0;
    AnnotationKind kind = AnnotationKind::Range;
    DeviceId device = kNoDevice;
    std::uint64_t thread = 0;
    friend bool operator==(const Annotation&, const Annotation&) = default;
};

// A recorded counter such as PyTorch profiler's "Total Reserved" for one device.
struct CounterSeries {
    StringId name = 0;
    DeviceId device = kNoDevice;
};
struct CounterSample {
    TimeNs time = 0;
    std::uint32_t series = 0; // index into counterSeries()
    std::int64_t value = 0;   // bytes for memory counters
    friend bool operator==(const CounterSample&, const CounterSample&) = default;
};

// A paired lifetime: indexes into the memory event columns; kNoIndex where the event is missing
// (freed after the window ends, or allocated before it began).
struct Allocation {
    std::uint64_t allocEvent = kNoIndex;
    std::uint64_t freeEvent = kNoIndex;
    std::uint64_t freeCompletedEvent = kNoIndex;
};

namespace detail {
    struct TraceBody;
}

class Trace {
public:
    Trace(); // an empty trace
    ~Trace();
    Trace(const Trace&);
    Trace& operator=(const Trace&);
    Trace(Trace&&) noexcept;
    Trace& operator=(Trace&&) noexcept;

    // Free-form JSON object: "source_format", "tool", "tool_version", "allocator_settings", …
    const nlohmann::json& metadata() const;
    const StringTable& strings() const;
    std::string_view str(StringId id) const { return strings().at(id); }
    std::span<const Device> devices() const;
    std::span<const Stream> streams() const;
    std::span<const Frame> frames() const;
    std::span<const Scope> scopes() const;
    // The allocator pools; pools()[0] is the default pool (always present).
    std::span<const MemoryPool> pools() const;
    std::size_t siteCount() const;
    // The frames of a site, innermost first.
    std::span<const FrameId> siteFrames(SiteId site) const;
    const MemoryEventColumns& memory() const;
    std::span<const Kernel> kernels() const;
    std::span<const Annotation> annotations() const;
    std::span<const CounterSeries> counterSeries() const;
    std::span<const CounterSample> counterSamples() const;
    // Pairs alloc → free → free_completed by (device, address) on first call. Thread-safe.
    std::span<const Allocation> allocations() const;
    // The allocation (index into allocations()) each memory event opens, frees or completes the free of;
    // kNoAllocationOfEvent where none (segment events, unmatched frees, …). Shape: memory().count(), 4 bytes
    // an event, computed once on first call and kept with the trace, so that the replays of one trace share it
    // (replay/detail/foresight.h). Thread-safe.
    std::span<const std::uint32_t> allocationOfEvents() const;
    static constexpr std::uint32_t kNoAllocationOfEvent = 0xffffffffu;
    // Anomalies of the import plus those found while pairing.
    const ImportStats& stats() const;
    // Anomalies recorded by the importer alone (what a writer stores; pairing re-derives the rest).
    const ImportStats& importStats() const;

private:
    friend class TraceBuilder;
    friend class TraceAccess;
    explicit Trace(std::shared_ptr<detail::TraceBody> body);
    std::shared_ptr<detail::TraceBody> m_body;
};

} // namespace gpumem
