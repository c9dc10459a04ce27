#pragma once
// The allocator interface of the replay engine (design.md §5, RMM's device_memory_resource shape):
// public non-virtual calls that forward to private virtuals, so adaptors and policies compose by
// nesting. Every policy sits on a SimulatedDevice it does not own (the caller keeps the device alive
// longer than the policy). A simulated out-of-memory is data: allocate() returns nullopt.
// Not thread-safe: one policy stack per replay.
#include "replay/simulated_device.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay {

enum class BlockState : std::uint8_t {
    Allocated = 0, // handed to the program (PyTorch active_allocated)
    PendingFree = 1, // freed by the program, not reusable yet (PyTorch active_pending_free)
    Free = 2, // cached, reusable (PyTorch inactive)
    Unmapped = 3, // expandable-segment address space with no physical pages
};
std::string_view toString(BlockState state);

struct BlockInfo {
    Address address = 0;
    Bytes size = 0; // bytes of the block (after rounding and non-split)
    Bytes requested = 0; // the program's request (0 for free blocks)
    BlockState state = BlockState::Free;
    friend bool operator==(const BlockInfo&, const BlockInfo&) = default;
};

// One segment (a cudaMalloc range, or one contiguous mapped range of an expandable segment, as
// PyTorch's snapshot reports it) with its blocks in address order.
struct SegmentInfo {
    Address address = 0;
    Bytes size = 0;
    StreamKey stream = 0;
    bool smallPool = false;
    bool expandable = false;
    std::vector<BlockInfo> blocks;
    PoolId pool = 0; // the private pool that owns it (the trace's pool index; 0 = default), see selectPool()
};

// The whole request sequence of a replay, handed before it starts to a policy that plans offline
// (needsPlan(): `optimal`, allocators.md §6.1–6.2). Time is the position in the replay's sequence of
// allocate()/deallocate() calls: it orders like the trace's event index (§6.1 "event-index time") and
// extends over warm-up passes and the frees between them. A request is live on [allocAt, freeAt).
struct PlannedRequest {
    Bytes bytes = 0; // the request exactly as allocate() will receive it (not rounded)
    StreamKey stream = 0;
    std::uint64_t allocAt = 0; // position of its allocate() call
    std::uint64_t freeAt = ~std::uint64_t(0); // position of its deallocate(); all ones = live to the end
    std::uint64_t event = 0; // the trace event being replayed at the allocate() call
    bool initial = false; // live before the window (a rebuilt pre-window block, the opening allocated bytes)
};
struct RequestPlan {
    std::vector<PlannedRequest> requests; // in allocate() call order: the k-th call is requests[k]
    std::uint64_t calls = 0; // allocate() plus deallocate() calls in the whole replay
};

// When a compacting policy (`compaction:INNER`) wants its live blocks moved: before the first request
// event at or after the start or end of every annotation whose name matches `annotationGlob` (`*` and
// `?`; empty = none), and before every `everyRequests`-th request event (0 = never). The Replayer
// turns it into compaction points, because only it sees the trace.
struct CompactionSchedule {
    std::string annotationGlob;
    std::uint64_t everyRequests = 0;
};
// One live block of a compaction pass: `from` → `to` (to == 0: the block could not be placed again,
// an out-of-memory during the compaction; the block is lost and its later free is dropped).
struct BlockMove {
    Address from = 0;
    Address to = 0;
    Bytes requested = 0;
    StreamKey stream = 0;
};
struct CompactionPass {
    std::vector<BlockMove> moves; // only the blocks whose address changed (or that were lost)
    Bytes bytesMoved = 0; // requested bytes of the blocks whose address changed (the data a compactor copies)
};

// Reserved bytes of one allocator pool (AllocatorPolicy::poolMemory()).
struct PoolMemory {
    PoolId pool = 0; // the trace's pool index; 0 = the default pools
    Bytes reserved = 0; // now
    Bytes peakReserved = 0; // the most it held at once
    bool released = false; // its last user released it (releasePool)
    friend bool operator==(const PoolMemory&, const PoolMemory&) = default;
};

// describeState(): every segment in address order.
struct PolicyState {
    std::vector<SegmentInfo> segments;
};

// Running totals a policy keeps up to date after every call (PyTorch memory_stats names).
struct PolicyStats {
    Bytes allocated = 0; // bytes of blocks handed out (PyTorch allocated_bytes: block sizes)
    Bytes requested = 0; // bytes the program asked for, of blocks handed out
    Bytes reserved = 0; // bytes held from the device (segments or mapped pages)
    std::uint64_t allocRetries = 0; // PyTorch num_alloc_retries
    std::uint64_t ooms = 0; // failed requests
};

// Fragmentation at one instant (allocators.md §5.4).
struct FragmentationSample {
    Bytes reserved = 0;
    Bytes allocated = 0;
    Bytes freeBytes = 0; // reserved bytes in free (mapped) blocks
    Bytes largestFree = 0; // the largest free block
    Bytes inactiveSplit = 0; // free bytes inside split (partially used) non-expandable segments
    // 1 − allocated/reserved (PyTorch-style waste); 0 when nothing is reserved.
    double waste() const { return reserved == 0 ? 0.0 : 1.0 - double(allocated) / double(reserved); }
    // (free − largest_free)/free (TensorFlow BFC GetFragmentation); 0 when nothing is free.
    double external() const { return freeBytes == 0 ? 0.0 : double(freeBytes - largestFree) / double(freeBytes); }
};
FragmentationSample fragmentationOf(const PolicyState& state, const PolicyStats& stats);

class AllocatorPolicy {
public:
    virtual ~AllocatorPolicy() = default;
    AllocatorPolicy(const AllocatorPolicy&) = delete;
    AllocatorPolicy& operator=(const AllocatorPolicy&) = delete;

    // A block of at least `bytes` (> 0) for `stream`, or nullopt when the device cannot provide it.
    std::optional<Address> allocate(Bytes bytes, StreamKey stream) { return doAllocate(bytes, stream); }
    // The block at `address` becomes reusable (PyTorch free_completed). `bytes` is the request.
    void deallocate(Address address, Bytes bytes, StreamKey stream) { doDeallocate(address, bytes, stream); }
    // The program freed the block but it must not be reused yet (PyTorch free_requested of a block
    // used on another stream; its free_completed comes later as deallocate()). Default: nothing.
    void requestFree(Address address) { doRequestFree(address); }
    // True if requestFree() itself takes the block's bytes out of stats().allocated and requested (the
    // pending-free rule, PyTorch CUDACachingAllocator.cpp free(): they drop at the user's free, the memory
    // stays occupied until the free completes). For a policy that does not, the Replayer applies the rule
    // with a PendingFreeAdaptor (replay/adaptors/pending_free_adaptor.h). Default: false.
    bool countsPendingFrees() const { return doCountsPendingFrees(); }
    // Gives every cached, wholly free segment back to the device (torch.cuda.empty_cache()). A policy
    // with no such call (one that never caches, or whose real counterpart has no release) does nothing;
    // docs/policies.md says which is which.
    void releaseCached() { doReleaseCached(); }

    // Private pools (PyTorch CUDA-graph pools and torch.cuda.MemPool, allocators.md §1.4). A policy that
    // keeps pools apart (keepsPoolsApart()) serves each pool from its own free blocks; every other policy
    // ignores these calls, i.e. replays as if every pool were the default one. Pools are named by the
    // trace's pool index (Trace::pools()); 0 is the default pool.
    // declarePool: pool `pool` exists (PyTorch createOrIncrefPool); `useOnOom`: a request of another pool
    // that finds no memory may take one of its cached blocks (MemPool(use_on_oom=True)).
    void declarePool(PoolId pool, bool useOnOom) { doDeclarePool(pool, useOnOom); }
    // The pool that the following allocate() calls serve (PyTorch beginAllocateToPool/endAllocateToPool).
    void selectPool(PoolId pool) { doSelectPool(pool); }
    // The pool's last user released it (PyTorch releasePool), then its cache is emptied
    // (emptyCache(mempool_id), as ~MemPool does): its wholly free segments go back to the device, and
    // the rest when a later releaseCached() finds them free.
    void releasePool(PoolId pool) { doReleasePool(pool); }
    bool keepsPoolsApart() const { return doKeepsPoolsApart(); }
    // Reserved bytes per pool seen so far, by pool; empty for a policy that keeps no pools apart.
    std::vector<PoolMemory> poolMemory() const { return doPoolMemory(); }
    // Initial state of a trace window: a segment that already existed, at its recorded address,
    // and a block inside it that was live. False when the policy cannot take it (no caching, or the
    // block does not fall inside a free range).
    bool adoptSegment(const SegmentInfo& segment) { return doAdoptSegment(segment); }
    bool adoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream)
    {
        return doAdoptBlock(address, size, requested, stream);
    }

    // Offline planning: true if the policy must be handed the whole request sequence (plan()) before
    // its first allocate(); the Replayer does so. Default: false.
    bool needsPlan() const { return doNeedsPlan(); }
    void plan(const RequestPlan& requests) { doPlan(requests); }
    // Compaction: the schedule of a compacting policy (nullptr for every other policy), and one pass
    // that moves the live blocks to close holes; the caller remaps its addresses with the moves.
    const CompactionSchedule* compactionSchedule() const { return doCompactionSchedule(); }
    CompactionPass compact() { return doCompact(); }

    virtual std::string name() const = 0;
    virtual PolicyState describeState() const = 0;
    virtual FragmentationSample fragmentation() const { return fragmentationOf(describeState(), stats()); }
    const PolicyStats& stats() const { return m_stats; }
    SimulatedDevice& device() const { return *m_device; }

protected:
    explicit AllocatorPolicy(SimulatedDevice& device)
        : m_device(&device)
    {
    }
    PolicyStats m_stats;

private:
    virtual std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) = 0;
    virtual void doDeallocate(Address address, Bytes bytes, StreamKey stream) = 0;
    virtual void doRequestFree(Address) { }
    virtual bool doCountsPendingFrees() const { return false; }
    virtual void doReleaseCached() { }
    virtual void doDeclarePool(PoolId, bool) { }
    virtual void doSelectPool(PoolId) { }
    virtual void doReleasePool(PoolId) { }
    virtual bool doKeepsPoolsApart() const { return false; }
    virtual std::vector<PoolMemory> doPoolMemory() const { return {}; }
    virtual bool doAdoptSegment(const SegmentInfo&) { return false; }
    virtual bool doAdoptBlock(Address, Bytes, Bytes, StreamKey) { return false; }
    virtual bool doNeedsPlan() const { return false; }
    virtual void doPlan(const RequestPlan&) { }
    virtual const CompactionSchedule* doCompactionSchedule() const { return nullptr; }
    virtual CompactionPass doCompact() { return {}; }
    SimulatedDevice* m_device;
};

} // namespace gpumem::replay
