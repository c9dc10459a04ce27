#pragma once
// RAPIDS RMM's binning_memory_resource with fixed-size bins over a pool_memory_resource, one device,
// as allocators.md §3.4 paraphrases rapidsai/rmm (binning_memory_resource.hpp,
// fixed_size_memory_resource.hpp, detail/fixed_size_free_list.hpp): bins of 2^min_exp … 2^max_exp
// bytes (the replay benchmark's 2^18 … 2^22); a request goes to the smallest bin at least its size,
// anything larger straight to the pool. A bin takes chunks of block_size × 128 from the pool on the
// requesting stream (the first one at construction, on the default stream) and cuts them into equal
// blocks; its per-stream free lists are FIFO and follow the stream_ordered_memory_resource order
// (§3.1). Bins never give chunks back while they live;
// releaseCached() stands for their destruction per chunk (a chunk with no allocated block goes back
// to the pool) and then for the pool's. Owns its pool and bins; uses the SimulatedDevice it was given.
// Not thread-safe.
#include "replay/detail/free_ranges.h"
#include "replay/policies/rmm_pool_policy.h"

#include <deque>
#include <memory>

namespace gpumem::replay {

struct RmmBinningConfig {
    unsigned minExp = 18;
    unsigned maxExp = 22;
    RmmPoolConfig pool;
};

class RmmBinningPolicy final : public AllocatorPolicy {
public:
    static constexpr std::size_t kBlocksPerChunk = 128; // fixed_size default blocks_to_preallocate

    RmmBinningPolicy(SimulatedDevice& device, RmmBinningConfig config);
    ~RmmBinningPolicy() override;

    // The bin size serving a request of n bytes, or 0 when it goes to the pool.
    Bytes binFor(Bytes n) const;
    // Chunks a bin of `blockSize` took from the pool (addresses, in the order taken).
    std::vector<Address> chunksOf(Bytes blockSize) const;
    const RmmPoolPolicy& pool() const { return m_pool; }

    std::string name() const override;
    PolicyState describeState() const override;

private:
    struct Bin;
    struct FifoList;
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;
    void updateStats();
    bool grabChunk(Bin& bin, StreamKey stream, FifoList& into);

    RmmBinningConfig m_config;
    RmmPoolPolicy m_pool;
    std::vector<std::unique_ptr<Bin>> m_bins; // ascending block size
    // Size: the bin's block size, or the aligned request when it went to the pool; tag: the bin it
    // came from (nullptr: a pool block).
    detail::LiveBlocks<Bin*> m_live;
};

} // namespace gpumem::replay
