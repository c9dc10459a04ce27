#include "core/chunk_pairing.h"

#include <algorithm>
#include <string>

namespace gpumem {

ChunkPairing::ChunkPairing(ImportStats& stats, bool trackCompletions)
    : m_stats(stats)
    , m_trackCompletions(trackCompletions)
{
    m_live.reserve(1u << 12);
}

std::uint32_t ChunkPairing::store(const Block& block, std::uint8_t state)
{
    std::uint32_t slot;
    if (!m_freeSlots.empty()) {
        slot = m_freeSlots.back();
        m_freeSlots.pop_back();
        m_blocks[slot] = block;
        m_inUse[slot] = state;
    } else {
        slot = static_cast<std::uint32_t>(m_blocks.size());
        m_blocks.push_back(block);
        m_inUse.push_back(state);
    }
    return slot;
}

void ChunkPairing::release(std::uint32_t slot)
{
    m_inUse[slot] = kFree;
    m_freeSlots.push_back(slot);
}

void ChunkPairing::finish()
{
    for (Tally* t : { &m_atLiveAddress, &m_unmatchedFree, &m_sizeMismatch, &m_segmentFreeWithLive })
        if (t->pending > 0) {
            m_stats.add(t->code, t->severity, {}, t->pending);
            t->pending = 0;
        }
}

// The rules and messages of TraceBody::pair (core/trace.cpp), event by event.
ChunkPairing::Outcome ChunkPairing::step(const MemoryEventColumns& m, std::size_t i, std::uint64_t index)
{
    Outcome out;
    switch (m.kind[i]) {
    case EventKind::Alloc: {
        if (m_byAddress)
            m_byAddress->emplace(m.device[i], m.address[i]);
        out.pairing = Pairing::Opened;
        out.block = Block { index, static_cast<std::uint32_t>(m_allocations++), m.device[i], m.address[i], m.size[i] };
        const std::uint32_t slot = store(out.block, kLive);
        const std::uint32_t earlier = m_live.exchange(key(m.device[i], m.address[i]), slot);
        if (earlier != detail::AddressMap::kNone) {
            out.replaced = m_blocks[earlier];
            release(earlier);
            note(m_atLiveAddress, [&] {
                return "memory event " + std::to_string(index) + ": alloc at address " + std::to_string(m.address[i])
                    + " which is still live since event " + std::to_string(out.replaced->allocEvent)
                    + "; the earlier block is treated as never freed";
            });
        }
        break;
    }
    case EventKind::Free: {
        const std::uint64_t k = key(m.device[i], m.address[i]);
        const std::uint32_t slot = m_live.take(k);
        if (slot == detail::AddressMap::kNone) {
            out.pairing = Pairing::Unmatched;
            note(m_unmatchedFree, [&] {
                return "memory event " + std::to_string(index) + ": free of address " + std::to_string(m.address[i])
                    + " with no alloc in the trace (allocated before the recording began)";
            });
            break;
        }
        out.pairing = Pairing::Closed;
        out.block = m_blocks[slot];
        // A free's size is the block's (0: not known); another size means one of the two is wrong.
        if (m.size[i] != 0 && m.size[i] != out.block.size)
            note(m_sizeMismatch, [&] {
                return "memory event " + std::to_string(index) + ": free of " + std::to_string(m.size[i]) + " bytes at address "
                    + std::to_string(m.address[i]) + ", whose alloc (event " + std::to_string(out.block.allocEvent)
                    + ") was of " + std::to_string(out.block.size) + " bytes";
            });
        if (m_trackCompletions) {
            m_inUse[slot] = kAwaiting;
            if (const std::uint32_t older = m_awaiting.exchange(k, slot); older != detail::AddressMap::kNone)
                release(older);
        } else {
            release(slot);
        }
        if (m_byAddress)
            m_byAddress->erase({ m.device[i], m.address[i] });
        break;
    }
    case EventKind::SegmentFree: {
        // A live block inside the segment means a missing free, or a segment_free that did not happen
        // (the reasoning is at TraceBody::pair).
        if (!m_byAddress) {
            m_byAddress.emplace();
            forEachLive([&](const Block& b) { m_byAddress->emplace(b.device, b.address); });
        }
        const Address end = m.address[i] + std::min(m.size[i], ~Address(0) - m.address[i]);
        auto inside = m_byAddress->lower_bound({ m.device[i], m.address[i] });
        if (inside == m_byAddress->end() || inside->first != m.device[i] || !(inside->second < end || inside->second == m.address[i]))
            break;
        note(m_segmentFreeWithLive, [&] {
            const std::uint32_t block = m_live.find(key(inside->first, inside->second));
            const Bytes blockSize = block == detail::AddressMap::kNone ? 0 : m_blocks[block].size;
            return "memory event " + std::to_string(index) + ": segment_free of " + std::to_string(m.size[i]) + " bytes at address "
                + std::to_string(m.address[i]) + " while the block of " + std::to_string(blockSize) + " bytes at address "
                + std::to_string(inside->second) + " in it is live (allocated, not freed)";
        });
        break;
    }
    case EventKind::FreeCompleted: {
        out.pairing = Pairing::Uncompleted;
        if (!m_trackCompletions)
            break;
        const std::uint32_t slot = m_awaiting.take(key(m.device[i], m.address[i]));
        if (slot == detail::AddressMap::kNone)
            break; // completion of a free before the window: the unmatched free was already counted
        out.pairing = Pairing::Completed;
        out.block = m_blocks[slot];
        release(slot);
        break;
    }
    default:
        break;
    }
    return out;
}

} // namespace gpumem
