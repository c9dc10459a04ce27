#pragma once
// The common substrate of the classic policies (allocators.md §6 "Common substrate" [choice]): a
// coalescing free list of blocks with a placement rule (first, next, best or worst fit), used by the
// first-fit/next-fit/best-fit/worst-fit policies and by size-class for requests above its largest
// small class.
//
// Memory comes from the device in one of two ways:
// - heap mode (default): one heap per stream, a virtual range that grows at the top. When nothing
//   fits, the heap is extended by max(request − free bytes at the top, growth_chunk) (rounded to the
//   alignment): one SimulatedDevice::map call, counted as reserved memory. Free blocks coalesce across
//   extensions because the heap is contiguous. release() gives back the free block at the top of each
//   heap (one unmap each), as sbrk-style heaps trim.
// - segment mode: every miss is one cudaMalloc of PyTorch's segment size for the request
//   (allocators.md §1.4, PyTorchConfig::allocationSize); blocks coalesce only inside their segment, and
//   release() frees every wholly free segment.
// Blocks are tagged with their stream and only reused by that stream (as PyTorch does, §1.12).
// Ties go to the lowest address. Splitting keeps the lower part; a remainder below min_block stays in
// the handed-out block. Best and worst fit search a (stream, size, address)-ordered tree (O(log n));
// first and next fit scan a (stream, address)-ordered tree. Owns its blocks; uses the device it was
// given. Not thread-safe.
#include "replay/allocator_policy.h"

#include <map>
#include <memory>
#include <optional>

namespace gpumem::replay::detail {

enum class FitRule : std::uint8_t { First = 0, Next = 1, Best = 2, Worst = 3 };
std::string_view toString(FitRule rule); // "first-fit", …

struct FreeListConfig {
    FitRule rule = FitRule::Best;
    Bytes alignment = 512; // every block size is a multiple (power of two)
    Bytes growthChunk = Bytes(2) << 20; // heap mode: the smallest extension
    Bytes minBlock = 512; // a split remainder smaller than this stays in the block
    bool segments = false; // segment mode instead of heap mode
    // The option string of the non-default settings, e.g. "alignment:256,segments:true".
    std::string toString() const;
};

class FreeListHeap {
public:
    FreeListHeap(SimulatedDevice& device, FreeListConfig config);
    ~FreeListHeap();
    FreeListHeap(const FreeListHeap&) = delete;
    FreeListHeap& operator=(const FreeListHeap&) = delete;

    const FreeListConfig& config() const { return m_config; }
    // bytes (> 0) rounded up to the alignment.
    Bytes roundSize(Bytes bytes) const;

    struct Grant {
        Address address = 0;
        Bytes size = 0; // the block's size (the rounded request, or more when the remainder was too small)
    };
    // A block for `rounded` bytes (a multiple of the alignment) on `stream`: the rule's choice among
    // the free blocks, else new memory, else release() and new memory once more (a retry). nullopt when
    // the device cannot provide it. Records `requested` for describe().
    std::optional<Grant> allocate(Bytes rounded, Bytes requested, StreamKey stream);
    // Frees a handed-out block and coalesces it with free neighbours. Returns its size and request.
    // Throws gpumem::Error for an address that is not allocated here.
    std::pair<Bytes, Bytes> free(Address address);
    // allocate() for a policy: rounds `bytes`, counts the result into `stats` (allocated, requested,
    // reserved, allocRetries, ooms) and reports a failure to the device as an OOM.
    std::optional<Address> allocateFor(Bytes bytes, StreamKey stream, PolicyStats& stats);
    // free() for a policy, counted out of `stats`.
    void freeFor(Address address, PolicyStats& stats);
    // Gives back what can be given back (see above).
    void release();

    // Appends every non-empty segment (heap) in address order.
    void describe(PolicyState& state) const;
    // Adds the free blocks to a fragmentation sample (freeBytes, largestFree, inactiveSplit).
    void addFree(FragmentationSample& sample) const;

private:
    struct Impl;
    FreeListConfig m_config;
    std::unique_ptr<Impl> m_impl;
    std::uint64_t m_retries = 0;
};

} // namespace gpumem::replay::detail
