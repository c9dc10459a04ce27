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
    // Gives every cached, wholly free segment back to the device (torch.cuda.empty_cache()).
    void releaseCached() { doReleaseCached(); }
    // Initial state of a trace window: a segment that already existed, at its recorded address,
    // and a block inside it that was live. False when the policy cannot take it (no caching, or the
    // block does not fall inside a free range).
    bool adoptSegment(const SegmentInfo& segment) { return doAdoptSegment(segment); }
    bool adoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream)
    {
        return doAdoptBlock(address, size, requested, stream);
    }

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
    virtual void doReleaseCached() { }
    virtual bool doAdoptSegment(const SegmentInfo&) { return false; }
    virtual bool doAdoptBlock(Address, Bytes, Bytes, StreamKey) { return false; }
    SimulatedDevice* m_device;
};

} // namespace gpumem::replay
