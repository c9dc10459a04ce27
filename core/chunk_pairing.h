#pragma once
// Pairing alloc → free → free_completed over the chunks of a MemoryEventSource (core/event_source.h),
// by the rules of Trace::allocations() (core/trace.cpp, TraceBody::pair) and with the same pairing
// anomalies, word for word: alloc_at_live_address, unmatched_free, free_size_mismatch,
// segment_free_with_live_block. What a streaming verb keeps instead of the whole trace's
// allocations: one record per block live at once, not per event.
//
// Memory: the live blocks (a 40-byte record and 16-byte AddressMap slots at most a quarter full, ~104 bytes
// each); with completions tracked, the freed blocks whose free_completed is still to come as well; after
// the first segment_free, one std::set node (~48 bytes) per live block too (the segment check needs
// the live blocks in address order). Value type; not thread-safe.
#include "core/detail/address_map.h"
#include "core/import_stats.h"
#include "core/trace.h"

#include <optional>
#include <set>
#include <vector>

namespace gpumem {

class ChunkPairing {
public:
    struct Block {
        std::uint64_t allocEvent = 0; // the alloc's index in the trace (Trace::memory())
        std::uint32_t allocation = 0; // the block's index in Trace::allocations() (allocs in trace order)
        DeviceId device = 0;
        Address address = 0;
        Bytes size = 0; // the alloc's size
    };
    enum class Pairing : std::uint8_t {
        None,        // not an alloc, free or free_completed (segment events, markers, …)
        Opened,      // an alloc: `block` is the new live block
        Closed,      // a free of a live block: `block` (it is no longer live)
        Unmatched,   // a free with no live block (allocated before the trace began)
        Completed,   // a free_completed of a freed block: `block` (tracked completions only)
        Uncompleted, // a free_completed with no freed block awaiting it (or completions not tracked)
    };
    struct Outcome {
        Pairing pairing = Pairing::None;
        Block block;
        // An alloc at the address of a live block: that earlier block, which the trace then treats as
        // never freed (Allocation::freeEvent stays kNoIndex).
        std::optional<Block> replaced;
    };

    // Anomalies are added to `stats`, which must outlive the pairing (start from the skeleton's
    // importStats() to get what Trace::stats() holds). `trackCompletions`: pair free_completed events
    // with their frees (Allocation::freeCompletedEvent); off, they are all Uncompleted and no freed
    // block is kept.
    explicit ChunkPairing(ImportStats& stats, bool trackCompletions = false);

    // Pairs event i of `chunk`, whose index in the trace is `index`. Events must come in trace order.
    // Inline, with every rare case (an anomaly, a segment_free, the address-ordered set) out of line in
    // chunk_pairing.cpp: the call, its register saves and the Outcome's trip through memory were a third of
    // the pairing's instructions where every streamed pass pairs (issue 22).
    Outcome step(const MemoryEventColumns& chunk, std::size_t i, std::uint64_t index)
    {
        Outcome out;
        switch (chunk.kind[i]) {
        case EventKind::Alloc: {
            const DeviceId device = chunk.device[i];
            const Address address = chunk.address[i];
            if (m_byAddress) [[unlikely]]
                m_byAddress->emplace(device, address);
            out.pairing = Pairing::Opened;
            const auto allocation = static_cast<std::uint32_t>(m_allocations++);
            const Bytes size = chunk.size[i];
            // Field by field, into the slot and into the outcome: a Block built on the stack by narrow stores and
            // copied by 16-byte loads stalled every alloc on a failed store forwarding (a quarter of the pairing).
            const std::uint32_t slot = openSlot(kLive);
            Block& stored = m_blocks[slot];
            stored.allocEvent = out.block.allocEvent = index;
            stored.allocation = out.block.allocation = allocation;
            stored.device = out.block.device = device;
            stored.address = out.block.address = address;
            stored.size = out.block.size = size;
            if (const std::uint32_t earlier = m_live.exchange(key(device, address), slot); earlier != detail::AddressMap::kNone) [[unlikely]]
                replaced(out, earlier, index);
            break;
        }
        case EventKind::Free: {
            const DeviceId device = chunk.device[i];
            const Address address = chunk.address[i];
            const std::uint64_t k = key(device, address);
            const std::uint32_t slot = m_live.take(k);
            if (slot == detail::AddressMap::kNone) [[unlikely]] {
                out.pairing = Pairing::Unmatched;
                unmatchedFree(address, index);
                break;
            }
            out.pairing = Pairing::Closed;
            out.block = m_blocks[slot];
            // A free's size is the block's (0: not known); another size means one of the two is wrong.
            if (const Bytes size = chunk.size[i]; size != 0 && size != out.block.size) [[unlikely]]
                sizeMismatch(out.block, address, size, index);
            if (m_trackCompletions) {
                m_inUse[slot] = kAwaiting;
                if (const std::uint32_t older = m_awaiting.exchange(k, slot); older != detail::AddressMap::kNone)
                    release(older);
            } else {
                release(slot);
            }
            if (m_byAddress) [[unlikely]]
                m_byAddress->erase({ device, address });
            break;
        }
        case EventKind::SegmentFree:
            segmentFree(chunk, i, index);
            break;
        case EventKind::FreeCompleted: {
            out.pairing = Pairing::Uncompleted;
            if (!m_trackCompletions)
                break;
            const std::uint32_t slot = m_awaiting.take(key(chunk.device[i], chunk.address[i]));
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
    // Adds the repeats of each anomaly to the stats: the first occurrence is added with its detail at
    // once, the others only counted until here (building a detail per event cost a tenth of pairing,
    // as in TraceBody::pair). Call after the last chunk, before reading the stats.
    void finish();

    std::uint64_t allocations() const { return m_allocations; } // allocs so far: Trace::allocations().size()
    std::size_t liveCount() const { return m_live.size(); }
    // Calls f(const Block&) for each block live now, in no particular order.
    template <typename F> void forEachLive(F&& f) const
    {
        for (std::size_t s = 0; s < m_blocks.size(); ++s)
            if (m_inUse[s] == kLive)
                f(m_blocks[s]);
    }

private:
    static constexpr std::uint8_t kFree = 0, kLive = 1, kAwaiting = 2;
    static std::uint64_t key(DeviceId device, Address address) { return detail::blockKey(device, address); }
    // A slot for a new block in `state`, whose fields the caller writes.
    std::uint32_t openSlot(std::uint8_t state)
    {
        std::uint32_t slot;
        if (!m_freeSlots.empty()) {
            slot = m_freeSlots.back();
            m_freeSlots.pop_back();
            m_inUse[slot] = state;
        } else {
            slot = static_cast<std::uint32_t>(m_blocks.size());
            m_blocks.emplace_back();
            m_inUse.push_back(state);
        }
        return slot;
    }
    void release(std::uint32_t slot)
    {
        m_inUse[slot] = kFree;
        m_freeSlots.push_back(slot);
    }
    // The rare cases of step(), out of line.
    [[gnu::cold]] void replaced(Outcome& out, std::uint32_t earlier, std::uint64_t index);
    [[gnu::cold]] void unmatchedFree(Address address, std::uint64_t index);
    // `freeAddress`: the free's own (the block's may differ where keys collide: detail::blockKey).
    [[gnu::cold]] void sizeMismatch(const Block& block, Address freeAddress, Bytes freeSize, std::uint64_t index);
    [[gnu::cold]] void segmentFree(const MemoryEventColumns& chunk, std::size_t i, std::uint64_t index);

    // One anomaly code: its first occurrence is in the stats, `pending` more are counted here.
    struct Tally {
        const char* code;
        Severity severity;
        bool seen = false;
        std::uint64_t pending = 0;
    };
    template <typename Detail> void note(Tally& tally, Detail&& detail)
    {
        if (tally.seen)
            ++tally.pending;
        else {
            tally.seen = true;
            m_stats.add(tally.code, tally.severity, detail());
        }
    }

    ImportStats& m_stats;
    Tally m_atLiveAddress { "alloc_at_live_address", Severity::Warning };
    Tally m_unmatchedFree { "unmatched_free", Severity::Info };
    Tally m_sizeMismatch { "free_size_mismatch", Severity::Warning };
    Tally m_segmentFreeWithLive { "segment_free_with_live_block", Severity::Warning };
    bool m_trackCompletions;
    std::uint64_t m_allocations = 0;
    detail::AddressMap m_live; // key → slot of the live block
    detail::AddressMap m_awaiting; // key → slot of the freed block awaiting its free_completed
    std::vector<Block> m_blocks; // slots
    std::vector<std::uint8_t> m_inUse; // kFree, kLive or kAwaiting per slot
    std::vector<std::uint32_t> m_freeSlots;
    // The live blocks by (device, address), built at the first segment_free and kept from then on.
    std::optional<std::set<std::pair<DeviceId, Address>>> m_byAddress;
};

} // namespace gpumem
