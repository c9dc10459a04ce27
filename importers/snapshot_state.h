#pragma once
// The caching allocator's state as a PyTorch memory snapshot describes it (segments tiled by blocks),
// and SegmentBlockMap, which rebuilds that state by replaying memory events. The snapshot importer
// uses the map to reconstruct the state before a ring-buffer trace begins and to infer each block's
// rounded size; tests and the replay engine's fidelity check use replaySnapshotState() to replay an
// imported Trace and compareSnapshotState() to compare the result with the recorded `segments`.
//
// Model (PyTorch c10/cuda/CUDACachingAllocator.cpp; docs allocators.md §1.6–1.7): a segment is a
// cudaMalloc'd range (segment_alloc/segment_free) or, for expandable segments, a maximal contiguous
// mapped range (segment_map/segment_unmap, merged with mapped neighbours as `snapshot()` reports
// them). Inside a segment, the map keeps only the *active* blocks (allocated, or freed but pending
// cross-stream events). Free space is implied: PyTorch merges a freed block with free neighbours, so
// every maximal gap between active blocks is exactly one `inactive` block, which is how dump()
// tiles each segment.
//
// Value type; not thread-safe (one map per replay).
#include "core/import_stats.h"
#include "core/trace.h"

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpumem {

enum class SnapshotBlockState : std::uint8_t { ActiveAllocated, ActivePendingFree, Inactive };
std::string_view toString(SnapshotBlockState state); // PyTorch's names: "active_allocated", …

struct SnapshotBlock {
    Address address = 0;
    Bytes size = 0; // the block's bytes (rounded, possibly not split)
    Bytes requestedSize = 0; // what the program asked for; 0 if unknown (stale for inactive blocks in dumps)
    SnapshotBlockState state = SnapshotBlockState::Inactive;
    friend bool operator==(const SnapshotBlock&, const SnapshotBlock&) = default;
};

struct SnapshotSegment {
    std::int32_t device = 0; // CUDA ordinal
    Address address = 0;
    Bytes totalSize = 0;
    std::uint64_t stream = 0;
    bool small = false; // segment_type "small" (the ≤ 1 MiB pool)
    bool expandable = false;
    std::pair<std::int64_t, std::int64_t> poolId { 0, 0 }; // segment_pool_id; (0,0) = default pool
    std::vector<SnapshotBlock> blocks; // in address order, tiling [address, address + totalSize)
};

namespace detail {
    // Storage for the nodes of one SegmentBlockMap's active-block maps: a block is allocated and freed
    // per alloc and free_completed event, and malloc/free per node cost as much as the rest of the
    // event. Nodes of the first size asked for come from 64-node chunks and go back to a free list;
    // other sizes go to operator new. Chunks are released with the pool. Not thread-safe.
    class BlockNodePool {
    public:
        BlockNodePool() = default;
        BlockNodePool(const BlockNodePool&) = delete;
        BlockNodePool& operator=(const BlockNodePool&) = delete;
        void* allocate(std::size_t bytes);
        void deallocate(void* p, std::size_t bytes) noexcept;

    private:
        struct FreeNode {
            FreeNode* next;
        };
        std::size_t m_nodeBytes = 0; // 0 until the first allocation
        FreeNode* m_free = nullptr;
        std::vector<std::unique_ptr<std::byte[]>> m_chunks;
    };
    // A std allocator over a BlockNodePool; allocators over the same pool are equal (maps merge).
    template <typename T> struct BlockNodeAllocator {
        using value_type = T;
        explicit BlockNodeAllocator(BlockNodePool* p) noexcept
            : pool(p)
        {
        }
        template <typename U>
        BlockNodeAllocator(const BlockNodeAllocator<U>& other) noexcept // NOLINT: rebinding is implicit
            : pool(other.pool)
        {
        }
        T* allocate(std::size_t n) { return static_cast<T*>(pool->allocate(n * sizeof(T))); }
        void deallocate(T* p, std::size_t n) noexcept { pool->deallocate(p, n * sizeof(T)); }
        template <typename U> bool operator==(const BlockNodeAllocator<U>& other) const noexcept
        {
            return pool == other.pool;
        }
        BlockNodePool* pool;
    };
} // namespace detail

class SegmentBlockMap {
public:
    SegmentBlockMap() = default;
    SegmentBlockMap(const SegmentBlockMap& other);
    SegmentBlockMap& operator=(const SegmentBlockMap& other);
    SegmentBlockMap(SegmentBlockMap&& other) noexcept;
    SegmentBlockMap& operator=(SegmentBlockMap&& other) noexcept;

    // Each mutator returns an empty string on success, or an anomaly code ("alloc_outside_segment",
    // …) with `detail` filled in; the map is left in the most sensible state (documented per call).

    // A new segment [address, address+size). Non-expandable segments are distinct objects even when
    // adjacent; an expandable range merges with adjacent expandable ranges. Refuses an overlap
    // (code "segment_overlap"; nothing added).
    std::string addSegment(Address address, Bytes size, bool expandable, std::string& detail);
    // Removes a segment (non-expandable: must start at `address`) or unmaps a range of an
    // expandable segment (may split it). Active blocks inside are dropped (code
    // "segment_free_with_live_blocks").
    std::string removeSegment(Address address, Bytes size, bool expandable, std::string& detail);
    // An active block. Outside every segment: "alloc_outside_segment" (the block is not kept);
    // overlapping an active block: "alloc_overlaps_block" (the older block is dropped).
    std::string allocate(Address address, Bytes size, Bytes requested, std::string& detail);
    // free_requested: the block becomes pending ("free_of_unknown_block" if there is none).
    std::string freeRequested(Address address, std::string& detail);
    // free_completed: the block is removed (a block still allocated is accepted: the request was
    // before the window).
    std::string freeCompleted(Address address, std::string& detail);

    // The free block that starts exactly at `address`: its size (to the next active block or the
    // segment end). nullopt when `address` is not the start of free space inside a segment.
    std::optional<Bytes> freeBlockAt(Address address) const;
    // For the active block at `address`: the free bytes between its end and the next active block
    // (or the segment end). nullopt if there is no active block at `address`.
    std::optional<Bytes> slackAfter(Address address) const;
    // The active block at exactly `address`.
    const SnapshotBlock* activeBlock(Address address) const;
    // True if `address` lies in an expandable segment.
    bool inExpandable(Address address) const;
    // Grows the active block at `address` by `extra` bytes (used to undo a split guess).
    void growBlock(Address address, Bytes extra);

    // The segments with their blocks tiled (gaps as inactive blocks), in address order. Fields the
    // events do not carry (stream, small, poolId, requested sizes of inactive blocks) are left 0.
    std::vector<SnapshotSegment> dump(std::int32_t device) const;
    std::size_t segmentCount() const { return m_segments.size(); }
    std::size_t activeBlockCount() const;

private:
    using ActiveBlocks = std::map<Address, SnapshotBlock, std::less<Address>,
        detail::BlockNodeAllocator<std::pair<const Address, SnapshotBlock>>>;
    struct Segment {
        Bytes size = 0;
        bool expandable = false;
        ActiveBlocks active;
    };
    // A segment whose blocks use this map's pool (made on first use: a moved-from map gets a new one).
    Segment newSegment(Bytes size, bool expandable);
    void copySegments(const SegmentBlockMap& other);
    std::unique_ptr<detail::BlockNodePool> m_pool; // declared before m_segments: it outlives the nodes
    std::map<Address, Segment>::iterator containing(Address address);
    std::map<Address, Segment>::const_iterator containing(Address address) const;
    std::map<Address, Segment> m_segments; // by start address
    // The segment found last: consecutive events mostly touch one segment. Reset when segments change.
    mutable std::map<Address, Segment>::const_iterator m_last = m_segments.end();
    // Behind it, the segment found last per 2 MiB granule of the address (hashed to 256 slots): events
    // alternate among a few segments, and a tree walk per event cost more than the rest of the event.
    // A slot counts only if its generation is current; every change to the segments starts a new one.
    struct CachedSegment {
        std::map<Address, Segment>::const_iterator it {};
        std::uint64_t generation = 0;
    };
    mutable std::array<CachedSegment, 256> m_cache {};
    std::uint64_t m_generation = 1;
    void forgetSegments()
    {
        m_last = m_segments.end();
        ++m_generation;
        ++m_version;
    }
    // The importer asks about an address and then changes it (freeBlockAt then allocate, activeBlock
    // then freeRequested/freeCompleted): the last lookup, (segment, first active block ≥ address), is
    // kept until blocks are added or removed (m_version), so the change needs no second search.
    struct Lookup {
        std::map<Address, Segment>::const_iterator seg; // m_segments.end(): in no segment
        ActiveBlocks::const_iterator lower; // valid only with a segment
    };
    Lookup lookup(Address address) const;
    struct Hint {
        Address address = 0;
        Lookup found {};
        std::uint64_t version = 0;
    };
    mutable Hint m_hint;
    std::uint64_t m_version = 1;
};

// Replays the memory events of `device` in `trace` (in the trace's order) through a SegmentBlockMap:
// segment_alloc/free and segment_map/unmap shape the segments; alloc, free and free_completed the
// blocks, with each event's address and size. Anomalies (a free of an unknown block, …) are
// counted in `stats` when given. The result is what PyTorch's `segments` would list at the end.
std::vector<SnapshotSegment> replaySnapshotState(const Trace& trace, DeviceId device, ImportStats* stats = nullptr);

// Compares two states segment by segment (address, total size) and block by block (address, size,
// state). Returns one line per difference, at most `maxDifferences` (then a "… more" line); empty
// when equal.
std::vector<std::string> compareSnapshotState(const std::vector<SnapshotSegment>& expected,
    const std::vector<SnapshotSegment>& actual, std::size_t maxDifferences = 20);

} // namespace gpumem
