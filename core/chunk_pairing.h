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
    Outcome step(const MemoryEventColumns& chunk, std::size_t i, std::uint64_t index);
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
    std::uint32_t store(const Block& block, std::uint8_t state);
    void release(std::uint32_t slot);

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
