#pragma once
// The CUDA stream-ordered allocator (cudaMallocAsync on a memory pool), one device, as PyTorch's
// backend:cudaMallocAsync and RMM's cuda_async_memory_resource drive it (allocators.md §4, §3.5).
// CUDA does not document its placement policy, rounding or reservation granularity; this is the
// documented approximation [choice, §4]: every request is one exact-size allocation (no allocator-side
// rounding; blocks start at 256 B-aligned offsets, CUDA's minimum alignment), placed by best fit over
// every free block of the pool whatever the stream (the three reuse flags are on and offline every
// free has completed), the block taken from the front; when nothing fits the pool grows by one chunk
// of the request rounded up to 2 MiB (one device allocation, never merged with another chunk); freed
// blocks coalesce inside their chunk. release_threshold (cudaMemPoolAttrReleaseThreshold): after a
// free, when the pool holds more than it, wholly free chunks go back to the device (highest address
// first) until it holds no more than it — as if every free were followed by a synchronization.
// When the device refuses a new chunk, wholly free chunks go back first and the growth is retried
// once (oomRetry; PyTorch's own rule since PR #188110, CUDAMallocAsyncAllocator.cpp mallocAsync:
// synchronize, cudaMemPoolTrimTo(pool, 0), retry once; off: the OOM is raised at once, as the 2.0-era
// mallocAsync did). usedLimit: PyTorch's per_process_memory_fraction on this backend, its own count of
// live bytes (pytorch_used_bytes + size > pytorch_memory_limits -> OOM, no device call).
// releaseCached() is torch.cuda.empty_cache() on this backend: cudaMemPoolTrimTo(pool, 0).
// Owns its chunks; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/detail/free_ranges.h"

#include <limits>
#include <map>
#include <set>

namespace gpumem::replay {

struct CudaAsyncConfig {
    // Bytes the pool keeps across synchronizations; UINT64_MAX (PyTorch and RMM set it) keeps all,
    // 0 is CUDA's own default.
    Bytes releaseThreshold = std::numeric_limits<Bytes>::max();
    bool oomRetry = true; // trim the pool and retry once when the device refuses a chunk
    Bytes usedLimit = 0; // live requested bytes allowed (PyTorch memory fraction x total); 0 = none
    // The name the policy reports (PyTorch's spelling when selected as pytorch:backend:cudaMallocAsync);
    // empty = cuda-async with its options.
    std::string displayName;
};

class CudaAsyncPolicy final : public AllocatorPolicy {
public:
    static constexpr Bytes kAlignment = 256;
    static constexpr Bytes kChunkGranularity = Bytes(2) << 20;

    CudaAsyncPolicy(SimulatedDevice& device, CudaAsyncConfig config);

    std::uint64_t trims() const { return m_trims; } // chunks released by the threshold or a trim

    std::string name() const override;
    PolicyState describeState() const override;

private:
    struct Chunk {
        Bytes size = 0;
        StreamKey stream = 0;
        std::map<Address, Bytes> free; // free blocks, address order, coalesced
        bool wholeFree() const { return free.size() == 1 && free.begin()->second == size; }
    };
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    std::optional<Address> place(Bytes size, StreamKey stream);
    Address take(Address chunk, Address block, Bytes blockSize, Bytes size);
    void trimTo(Bytes keep);

    CudaAsyncConfig m_config;
    std::map<Address, Chunk> m_chunks;
    std::set<std::pair<Bytes, Address>> m_free; // every free block by (size, address)
    detail::LiveBlocks<> m_live;
    std::uint64_t m_trims = 0;
};

} // namespace gpumem::replay
