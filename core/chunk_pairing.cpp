#include "core/chunk_pairing.h"

#include <algorithm>
#include <string>

namespace gpumem {

ChunkPairing::ChunkPairing(ImportStats& stats, bool trackCompletions)
    : m_stats(stats)
    , m_trackCompletions(trackCompletions)
{
    // m_live starts small and grows with the live blocks: a table reserved for 4096 of them (512 KiB) spread a
    // stream of 64 live blocks over the L2 cache, where a table of 32 KiB keeps them in L1 (issue 22: `replay`
    // of the 64-live-block heaptrack stream 6 % less CPU without the reserve).
}

void ChunkPairing::finish()
{
    for (Tally* t : { &m_atLiveAddress, &m_unmatchedFree, &m_sizeMismatch, &m_segmentFreeWithLive })
        if (t->pending > 0) {
            m_stats.add(t->code, t->severity, {}, t->pending);
            t->pending = 0;
        }
}

// The rules and messages of TraceBody::pair (core/trace.cpp): the rare cases of step().
void ChunkPairing::replaced(Outcome& out, std::uint32_t earlier, std::uint64_t index)
{
    out.replaced = m_blocks[earlier];
    release(earlier);
    note(m_atLiveAddress, [&] {
        return "memory event " + std::to_string(index) + ": alloc at address " + std::to_string(out.block.address)
            + " which is still live since event " + std::to_string(out.replaced->allocEvent)
            + "; the earlier block is treated as never freed";
    });
}

void ChunkPairing::unmatchedFree(Address address, std::uint64_t index)
{
    note(m_unmatchedFree, [&] {
        return "memory event " + std::to_string(index) + ": free of address " + std::to_string(address)
            + " with no alloc in the trace (allocated before the recording began)";
    });
}

void ChunkPairing::sizeMismatch(const Block& block, Address freeAddress, Bytes freeSize, std::uint64_t index)
{
    note(m_sizeMismatch, [&] {
        return "memory event " + std::to_string(index) + ": free of " + std::to_string(freeSize) + " bytes at address "
            + std::to_string(freeAddress) + ", whose alloc (event " + std::to_string(block.allocEvent) + ") was of "
            + std::to_string(block.size) + " bytes";
    });
}

void ChunkPairing::segmentFree(const MemoryEventColumns& m, std::size_t i, std::uint64_t index)
{
    // A live block inside the segment means a missing free, or a segment_free that did not happen
    // (the reasoning is at TraceBody::pair).
    if (!m_byAddress) {
        m_byAddress.emplace();
        forEachLive([&](const Block& b) { m_byAddress->emplace(b.device, b.address); });
    }
    const Address end = m.address[i] + std::min(m.size[i], ~Address(0) - m.address[i]);
    auto inside = m_byAddress->lower_bound({ m.device[i], m.address[i] });
    if (inside == m_byAddress->end() || inside->first != m.device[i] || !(inside->second < end || inside->second == m.address[i]))
        return;
    note(m_segmentFreeWithLive, [&] {
        const std::uint32_t block = m_live.find(key(inside->first, inside->second));
        const Bytes blockSize = block == detail::AddressMap::kNone ? 0 : m_blocks[block].size;
        return "memory event " + std::to_string(index) + ": segment_free of " + std::to_string(m.size[i]) + " bytes at address "
            + std::to_string(m.address[i]) + " while the block of " + std::to_string(blockSize) + " bytes at address "
            + std::to_string(inside->second) + " in it is live (allocated, not freed)";
    });
}

} // namespace gpumem
