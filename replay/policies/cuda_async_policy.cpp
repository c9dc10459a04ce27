#include "replay/policies/cuda_async_policy.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>

namespace gpumem::replay {

CudaAsyncPolicy::CudaAsyncPolicy(SimulatedDevice& device, CudaAsyncConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
{
}

std::string CudaAsyncPolicy::name() const
{
    if (!m_config.displayName.empty())
        return m_config.displayName;
    std::string opts;
    if (m_config.releaseThreshold != std::numeric_limits<Bytes>::max())
        opts += ":release_threshold:" + std::to_string(m_config.releaseThreshold);
    if (!m_config.oomRetry)
        opts += std::string(opts.empty() ? ":" : ",") + "oom_retry:false";
    return "cuda-async" + opts;
}

Address CudaAsyncPolicy::take(Address chunk, Address block, Bytes blockSize, Bytes size)
{
    Chunk& c = m_chunks.at(chunk);
    m_free.erase({ blockSize, block });
    c.free.erase(block);
    if (blockSize > size) {
        c.free.emplace(block + size, blockSize - size);
        m_free.insert({ blockSize - size, block + size });
    }
    return block;
}

void CudaAsyncPolicy::trimTo(Bytes keep)
{
    for (auto it = m_chunks.end(); it != m_chunks.begin() && device().counters().reserved > keep;) {
        --it;
        if (!it->second.wholeFree())
            continue;
        m_free.erase({ it->second.size, it->first });
        device().free(it->first, it->second.stream);
        it = m_chunks.erase(it);
        ++m_trims;
    }
    m_stats.reserved = device().counters().reserved;
}

// Best fit over the pool, else a new chunk (after trimming when the device refuses it).
std::optional<Address> CudaAsyncPolicy::place(Bytes size, StreamKey stream)
{
    if (auto best = m_free.lower_bound({ size, 0 }); best != m_free.end()) {
        auto [blockSize, block] = *best;
        return take(std::prev(m_chunks.upper_bound(block))->first, block, blockSize, size);
    }
    Bytes grow = detail::roundUpToMultiple(size, kChunkGranularity);
    auto chunk = device().malloc(grow, stream);
    if (!chunk && m_config.oomRetry) {
        trimTo(0);
        chunk = device().malloc(grow, stream);
    }
    if (!chunk)
        return std::nullopt;
    m_chunks.emplace(*chunk, Chunk { grow, stream, { { *chunk, grow } } });
    m_free.insert({ grow, *chunk });
    return take(*chunk, *chunk, grow, size);
}

std::optional<Address> CudaAsyncPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes size = detail::alignedRequest(bytes, kAlignment);
    // PyTorch's memory-fraction check comes before cudaMallocAsync (its own count, no device call).
    const bool overLimit = m_config.usedLimit != 0 && m_stats.requested + bytes > m_config.usedLimit;
    auto a = size != 0 && !overLimit ? place(size, stream) : std::nullopt;
    m_stats.reserved = device().counters().reserved;
    return m_live.settle(a, size, bytes, stream, m_stats, device());
}

void CudaAsyncPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    auto block = m_live.release(address, m_stats, "cuda-async");
    Chunk& c = std::prev(m_chunks.upper_bound(address))->second;
    auto merged = detail::insertCoalescing(c.free, address, block.size, [&](Address a, Bytes n) {
        m_free.erase({ n, a });
    });
    m_free.insert({ merged.second, merged.first });
    if (device().counters().reserved > m_config.releaseThreshold)
        trimTo(m_config.releaseThreshold);
}

void CudaAsyncPolicy::doReleaseCached() { trimTo(0); }

PolicyState CudaAsyncPolicy::describeState() const
{
    PolicyState state;
    const auto live = m_live.sorted();
    for (const auto& [base, c] : m_chunks) {
        SegmentInfo seg { base, c.size, c.stream, false, false, {} };
        std::map<Address, BlockInfo> blocks;
        for (const auto& [a, n] : c.free)
            blocks.emplace(a, BlockInfo { a, n, 0, BlockState::Free });
        for (auto it = live.lower_bound(base); it != live.end() && it->first < base + c.size; ++it)
            blocks.emplace(
                it->first, BlockInfo { it->first, it->second.size, it->second.requested, BlockState::Allocated });
        for (auto& [a, b] : blocks)
            seg.blocks.push_back(b);
        state.segments.push_back(std::move(seg));
    }
    return state;
}

} // namespace gpumem::replay
