#pragma once
// Vocabulary of the trace model (design.md §3): event kinds, categories, device types, severities.
// Units live in names: time is int64 nanoseconds, sizes and addresses are uint64 bytes.
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpumem {

using TimeNs = std::int64_t;
using Bytes = std::uint64_t;
using Address = std::uint64_t;

// Index types into the Trace's tables. 0 is "none/unknown" for scopes, sites and frames.
using StringId = std::uint32_t;
using ScopeId = std::uint32_t;
using SiteId = std::uint32_t;
using FrameId = std::uint32_t;
using StreamId = std::uint32_t; // index into Trace::streams()
using DeviceId = std::uint16_t; // index into Trace::devices()
using PoolId = std::uint32_t; // index into Trace::pools(); 0 = the allocator's default pool

// Memory event kinds. Request level: what the program asked its allocator for. Segment level: what
// the allocator took from the driver. Values are stored in .gmt files: never renumber, only append.
enum class EventKind : std::uint8_t {
    Alloc = 0,          // request level: a block handed to the program
    Free = 1,           // request level: the program freed the block (PyTorch free_requested)
    FreeCompleted = 2,  // request level: the block is reusable (differs from Free with cross-stream use)
    SegmentAlloc = 3,   // segment level: cudaMalloc of a whole segment
    SegmentFree = 4,    // segment level: cudaFree of a whole segment
    SegmentMap = 5,     // segment level: pages mapped into an expandable segment
    SegmentUnmap = 6,   // segment level: pages unmapped from an expandable segment
    Oom = 7,            // an allocation that failed; size = the request
    Marker = 8,         // a point of note (e.g. a snapshot was taken); size = allocated bytes then
    // The program emptied the allocator's cache (torch.cuda.empty_cache(); PyTorch
    // CUDACachingAllocator.cpp release_cached_blocks). Neither request nor segment level: an operation
    // a replay performs. pool 0: every pool the allocator may release (the default pools and the
    // private pools no user holds); pool p: private pool p lost its last user and is emptied (PyTorch
    // releasePool, then emptyCache(mempool_id), as ~MemPool does). address and size are 0.
    EmptyCache = 9,
};
inline constexpr int kEventKindCount = 10;

// Inline: the passes over memory events ask at every event (issue 22).
inline bool isRequestLevel(EventKind kind)
{
    return kind == EventKind::Alloc || kind == EventKind::Free || kind == EventKind::FreeCompleted;
}
inline bool isSegmentLevel(EventKind kind)
{
    return kind == EventKind::SegmentAlloc || kind == EventKind::SegmentFree || kind == EventKind::SegmentMap
        || kind == EventKind::SegmentUnmap;
}
std::string_view toString(EventKind kind);
std::optional<EventKind> eventKindFromString(std::string_view name);

// What made an allocator pool (PyTorch CUDACachingAllocator.cpp PrivatePool; the MempoolId_t pair
// says it: (0,0) the default pools, (n,0) a pool a CUDA-graph capture created for itself, (0,n) a
// user-created pool: torch.cuda.MemPool or torch.cuda.graph_pool_handle(), c10 generate_mempool_id).
// Stored in .gmt files: never renumber, only append.
enum class PoolKind : std::uint8_t { Default = 0, Graph = 1, MemPool = 2, Other = 3 };
inline constexpr int kPoolKindCount = 4;
std::string_view toString(PoolKind kind);
std::optional<PoolKind> poolKindFromString(std::string_view name);

// Tensor categories, PyTorch's names (torch.profiler._memory_profiler.Category) plus unknown.
enum class Category : std::uint8_t {
    Unknown = 0,
    Parameter = 1,
    Gradient = 2,
    Activation = 3,
    OptimizerState = 4,
    Input = 5,
    Temporary = 6,
    AutogradDetail = 7,
};
inline constexpr int kCategoryCount = 8;
std::string_view toString(Category category);
std::optional<Category> categoryFromString(std::string_view name);

enum class DeviceType : std::uint8_t { Cuda = 0, Hip = 1, Cpu = 2, Xla = 3, Other = 4 };
std::string_view toString(DeviceType type);
std::optional<DeviceType> deviceTypeFromString(std::string_view name);

// What a scope represents in the module/range tree.
enum class ScopeKind : std::uint8_t { Range = 0, Module = 1, Op = 2, Function = 3 };
std::string_view toString(ScopeKind kind);
std::optional<ScopeKind> scopeKindFromString(std::string_view name);

// Severity of an import anomaly. Info: expected in this kind of trace (a ring buffer's frees
// without allocs). Warning: the data is suspect but usable. Error: data was lost (truncation).
enum class Severity : std::uint8_t { Info = 0, Warning = 1, Error = 2 };
std::string_view toString(Severity severity);
std::optional<Severity> severityFromString(std::string_view name);

} // namespace gpumem
