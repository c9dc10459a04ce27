#pragma once
// PyTorch's CUDA caching allocator ("native" backend), one device, as allocators.md §1 specifies it:
// round_size with both forms of roundup_power2_divisions, small and large pools, segment sizes,
// per-stream best fit keyed (stream, size, address), the split rules, max_split_size_mb with the
// max_non_split_rounding_mb tolerance, merging, garbage_collection_threshold with the memory fraction,
// the out-of-memory recovery sequence (release_available_cached_blocks, release_cached_blocks),
// free_requested/free_completed, and expandable segments (page mapping, segment_map/unmap).
// Source: PyTorch c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator), paraphrased, never
// copied; `PyTorchVersion::V2_0` selects the 2.0 differences (§1.14).
// Private pools (CUDA-graph pools, torch.cuda.MemPool; selectPool/releasePool): each has its own small
// and large free sets, never shared with the default pools; its segments are released only after its
// last user released it (releasePool; then by it and by every later release_cached_blocks), and a
// MemPool made with use_on_oom lends its cached blocks to other requests that find no memory
// (try_mempool_fallback, newest only). Not modelled: free-memory callbacks, graph capture itself
// (process_events paused, deferred record_stream frees), MemPools with their own allocator. Owns its
// blocks; uses the SimulatedDevice it was given.
// Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/policies/pytorch_config.h"

#include <memory>

namespace gpumem::replay {

// memory_stats counters the other policies do not have (allocators.md §1.16).
struct PyTorchCounters {
    std::uint64_t numAllocRetries = 0;
    std::uint64_t numOoms = 0;
    std::uint64_t numSyncAllStreams = 0;
    std::uint64_t numDeviceAlloc = 0; // cudaMalloc + segment maps
    std::uint64_t numDeviceFree = 0; // cudaFree + unmaps
    std::uint64_t gcSegmentFrees = 0; // segments released by garbage_collect_cached_blocks
};

class PyTorchPolicy final : public AllocatorPolicy {
public:
    PyTorchPolicy(SimulatedDevice& device, PyTorchConfig config);
    ~PyTorchPolicy() override;

    std::string name() const override;
    PolicyState describeState() const override;
    FragmentationSample fragmentation() const override;
    const PyTorchConfig& config() const { return m_config; }
    const PyTorchCounters& counters() const;
    // The rounded size and pool a request of n bytes gets (tests and reports).
    Bytes roundSize(Bytes n) const { return m_config.roundSize(n); }
    // A request served from the cached free blocks only: the best fit and split of §1.5-1.6, no device
    // call, no garbage collection or recovery, no OOM report; nullopt on a miss. GMLake's first step
    // (allocators.md §5.1), which tries its own steps before PyTorch would allocate.
    std::optional<Address> allocateCached(Bytes bytes, StreamKey stream);

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doRequestFree(Address address) override;
    bool doCountsPendingFrees() const override { return true; } // releaseAccounting at requestFree
    void doReleaseCached() override;
    void doDeclarePool(PoolId pool, bool useOnOom) override;
    void doSelectPool(PoolId pool) override;
    void doReleasePool(PoolId pool) override;
    bool doKeepsPoolsApart() const override { return true; }
    std::vector<PoolMemory> doPoolMemory() const override;
    bool doAdoptSegment(const SegmentInfo& segment) override;
    bool doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream) override;

    struct Impl;
    PyTorchConfig m_config;
    std::unique_ptr<Impl> m_impl;
};

} // namespace gpumem::replay
