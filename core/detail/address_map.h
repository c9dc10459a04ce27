#pragma once
// Internal to core: the map from a live block's key ((device, address) folded into 64 bits) to its
// allocation index that Trace pairing (TraceBody::pair) keeps while it walks the memory events.
//
// Why not std::unordered_map: pairing does one insert and one erase per block, and a node-based map
// allocates and frees a node for each (half of `gpumem analyze`'s time on a 10 M-event trace went
// there). Addresses recur — an allocator hands the same few thousand addresses out again and again —
// so the table stays as small as the set of blocks live at once, not the event count.
//
// Linear probing in a power-of-two table kept at most a 32nd full while it is at most 32 KiB, an eighth while
// at most 1 MiB, a quarter beyond (short runs: the erase walks its run to the end); erase shifts the
// following entries back (Knuth's algorithm R, TAOCP vol. 3 §6.4), so there are no tombstones and a long run
// of alloc/free pairs never degrades the probes. 16 bytes a slot (64 to 128 bytes a live key past 64 live
// keys; the table of fewer is at most 32 KiB); grows by doubling, never shrinks.
// heaptrack (src/util/pointermap.h) splits pointers into a page and a 16-bit offset to save memory
// per live pointer, and keeps each pointer's allocation-info index beside it (src/util/indices.h), so a
// free needs nothing but the map; gpumem keeps one flat table because it holds only the live blocks,
// and likewise keeps beside each key a 32-bit tag (pairing: the block's size), so a free does not read
// the allocation's row, a random access into columns of millions of events.
//
// Values are 32-bit (TraceBuilder::build refuses traces of 2^32 events or more); 0xffffffff is the
// empty slot. Value type; not thread-safe.
#include <cstddef>

#include <cstdint>
#include <vector>

namespace gpumem::detail {

// A live block's key: (device, address) folded into 64 bits, device in the top 12. The one fold every
// pairing uses (Trace::allocations, ChunkPairing, the bounded analysis), so their tables agree.
inline std::uint64_t blockKey(std::uint64_t device, std::uint64_t address) { return (device << 52) ^ address; }

class AddressMap {
public:
    static constexpr std::uint32_t kNone = 0xffffffffu;
    // A value and the tag stored with it; value kNone: the key was absent.
    struct Entry {
        std::uint32_t value = kNone;
        std::uint32_t tag = 0;
    };

    // Room for `entries` live keys without growing (the table is four or eight times that, a power of two).
    void reserve(std::size_t entries)
    {
        std::size_t capacity = 16;
        while (capacity < kSpread(capacity) * entries)
            capacity *= 2;
        if (capacity > m_slots.size())
            rehash(capacity);
    }

    // The value stored under `key`, or kNone.
    std::uint32_t find(std::uint64_t key) const
    {
        if (m_slots.empty())
            return kNone;
        for (std::size_t i = home(key);; i = (i + 1) & m_mask) {
            const Slot& s = m_slots[i];
            if (s.value == kNone || s.key == key)
                return s.value;
        }
    }

    // Stores `value` (and `tag`) under `key` when the key is absent and returns kNone; otherwise returns the
    // value already stored and replaces it (and its tag) with `value` and `tag`.
    std::uint32_t exchange(std::uint64_t key, std::uint32_t value, std::uint32_t tag = 0)
    {
        if (kSpread(m_slots.size()) * (m_count + 1) > m_slots.size())
            rehash(m_slots.empty() ? 16 : 2 * m_slots.size());
        for (std::size_t i = home(key);; i = (i + 1) & m_mask) {
            Slot& s = m_slots[i];
            if (s.value == kNone) {
                s = Slot { key, value, tag };
                ++m_count;
                return kNone;
            }
            if (s.key == key) {
                const std::uint32_t old = s.value;
                s.value = value;
                s.tag = tag;
                return old;
            }
        }
    }

    // Removes `key` and returns its value, or kNone when it is absent.
    std::uint32_t take(std::uint64_t key) { return takeEntry(key).value; }

    // Removes `key` and returns its value and tag; value kNone when it is absent.
    Entry takeEntry(std::uint64_t key)
    {
        if (m_slots.empty())
            return {};
        std::size_t i = home(key);
        while (m_slots[i].value != kNone && m_slots[i].key != key)
            i = (i + 1) & m_mask;
        const Entry entry { m_slots[i].value, m_slots[i].tag };
        if (entry.value == kNone)
            return {};
        // Shift back every later entry of the run whose home does not lie cyclically in (i, j].
        for (std::size_t j = (i + 1) & m_mask; m_slots[j].value != kNone; j = (j + 1) & m_mask) {
            const std::size_t h = home(m_slots[j].key);
            const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
            if (!stays) {
                m_slots[i] = m_slots[j];
                i = j;
            }
        }
        m_slots[i].value = kNone;
        --m_count;
        return entry;
    }

    std::size_t size() const { return m_count; }

private:
    struct Slot {
        std::uint64_t key = 0;
        std::uint32_t value = kNone;
        std::uint32_t tag = 0; // in what would be padding: the slot stays 16 bytes
    };
    static_assert(sizeof(Slot) == 16);
    // Fibonacci hashing (Knuth, TAOCP vol. 3 §6.4): one multiply, the top bits. Block addresses are
    // aligned and close together, and the product's top bits spread them as well as a full mix (fmix64)
    // did here, at a third of its latency — the erase's shift-back computes the home of every entry it
    // passes.
    // Slots per entry at most: a 32nd full while the table fits any L1 data cache (2 Ki slots, 32 KiB: up to 64
    // keys), an eighth full while it fits the L2 cache (64 Ki slots, 1 MiB), where a probe or a shift-back that
    // finds its neighbour taken is a mispredicted branch in every pairing; a quarter full beyond, where the
    // memory matters more (a trace with millions of blocks live at once). Issue 22: on the 64-live-block
    // malloc/free stream of bench/heaptrack_vs_gpumem.sh an eighth full left a taken neighbour at 23 % of the
    // frees' shift-backs (6 % a 32nd full), and `analyze --format json` took 12 % more CPU.
    static constexpr std::size_t kSpread(std::size_t slots)
    {
        return slots < (std::size_t(1) << 12) ? 32 : slots < (std::size_t(1) << 16) ? 8 : 4;
    }
    std::size_t home(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> m_shift); }
    void rehash(std::size_t capacity)
    {
        std::vector<Slot> old(capacity);
        old.swap(m_slots);
        m_mask = capacity - 1;
        m_shift = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
        for (const Slot& s : old) {
            if (s.value == kNone)
                continue;
            std::size_t i = home(s.key);
            while (m_slots[i].value != kNone)
                i = (i + 1) & m_mask;
            m_slots[i] = s;
        }
    }

    std::vector<Slot> m_slots;
    std::size_t m_mask = 0;
    unsigned m_shift = 64; // 64 - log2(capacity)
    std::size_t m_count = 0;
};

} // namespace gpumem::detail
