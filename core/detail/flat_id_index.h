#pragma once
// Internal to core: the interning tables of StringTable and TraceBuilder (strings, frames, call
// stacks) as one flat open-addressing index of dense ids, and the byte hash they use.
//
// FlatIdIndex stores (hash, id) pairs only; the keys live in the caller's own tables (the string
// arena, the frame and site columns), so a lookup allocates nothing and an insert allocates only when
// the index doubles. Linear probing in a power-of-two table kept at most half full; the caller
// supplies an equality test that compares its key with the row of a candidate id. The stored hash
// (its low 32 bits) filters candidates before that test is called.
//
// hashBytes is a wyhash-style hash (Wang Yi's wyhash: 64×64→128-bit multiply-and-fold per 16 bytes,
// three independent lanes for long inputs). Interning hashes every distinct frame name of a trace,
// and C++ frame names run to kilobytes, so this reads 48 bytes per step instead of std::hash's 8.
//
// Value types; not thread-safe.
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace gpumem::detail {

__extension__ typedef unsigned __int128 Uint128;

inline std::uint64_t mulFold(std::uint64_t a, std::uint64_t b)
{
    Uint128 r = static_cast<Uint128>(a) * b;
    return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

inline std::uint64_t load64(const char* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline std::uint64_t load32(const char* p)
{
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

inline std::uint64_t hashBytes(std::string_view text)
{
    constexpr std::uint64_t k0 = 0xa0761d6478bd642fULL, k1 = 0xe7037ed1a0b428dbULL, k2 = 0x8ebc6af09c88c6e3ULL,
                            k3 = 0x589965cc75374cc3ULL;
    const char* p = text.data();
    std::size_t n = text.size();
    std::uint64_t seed = k0 ^ mulFold(n ^ k1, k2);
    std::uint64_t a = 0, b = 0;
    if (n <= 16) {
        if (n >= 4) {
            // Two overlapping 4-byte reads at each end cover 4..16 bytes.
            a = (load32(p) << 32) | load32(p + ((n >> 3) << 2));
            b = (load32(p + n - 4) << 32) | load32(p + n - 4 - ((n >> 3) << 2));
        } else if (n > 0) {
            a = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16)
                | (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n >> 1])) << 8)
                | static_cast<unsigned char>(p[n - 1]);
        }
    } else {
        std::size_t i = n;
        if (i > 48) {
            std::uint64_t s1 = seed, s2 = seed;
            do {
                seed = mulFold(load64(p) ^ k1, load64(p + 8) ^ seed);
                s1 = mulFold(load64(p + 16) ^ k2, load64(p + 24) ^ s1);
                s2 = mulFold(load64(p + 32) ^ k3, load64(p + 40) ^ s2);
                p += 48;
                i -= 48;
            } while (i > 48);
            seed ^= s1 ^ s2;
        }
        while (i > 16) {
            seed = mulFold(load64(p) ^ k1, load64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = load64(p + i - 16);
        b = load64(p + i - 8);
    }
    return mulFold(k1 ^ n, mulFold(a ^ k1, b ^ seed));
}

// Mixes a 64-bit key into a well-spread hash (the finaliser of MurmurHash3, fmix64).
inline std::uint64_t mix64(std::uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

class FlatIdIndex {
public:
    // The id whose row `equal(id)` accepts among those inserted with this hash, or `none`.
    template <typename Equal> std::uint32_t find(std::uint64_t hash, std::uint32_t none, Equal&& equal) const
    {
        if (m_slots.empty())
            return none;
        const std::size_t mask = m_slots.size() - 1;
        const auto tag = static_cast<std::uint32_t>(hash);
        for (std::size_t i = static_cast<std::size_t>(hash >> 32 ^ hash) & mask;; i = (i + 1) & mask) {
            const Slot& s = m_slots[i];
            if (s.idPlusOne == 0)
                return none;
            if (s.tag == tag && equal(s.idPlusOne - 1))
                return s.idPlusOne - 1;
        }
    }
    // Adds `id` under `hash` (the caller has checked that its key is absent).
    void insert(std::uint64_t hash, std::uint32_t id)
    {
        if (2 * (m_count + 1) > m_slots.size())
            grow();
        place(Slot { static_cast<std::uint32_t>(hash), static_cast<std::uint32_t>(hash >> 32), id + 1 });
        ++m_count;
    }
    void reserve(std::size_t ids)
    {
        while (2 * ids > m_slots.size())
            grow();
    }
    void clear()
    {
        m_slots.clear();
        m_count = 0;
    }
    std::size_t size() const { return m_count; }

private:
    struct Slot {
        std::uint32_t tag = 0; // low half of the hash
        std::uint32_t high = 0; // high half: with the tag, rebuilds the probe start when growing
        std::uint32_t idPlusOne = 0; // 0 = empty
    };
    void place(const Slot& s)
    {
        const std::size_t mask = m_slots.size() - 1;
        const std::uint64_t hash = (static_cast<std::uint64_t>(s.high) << 32) | s.tag;
        std::size_t i = static_cast<std::size_t>(hash >> 32 ^ hash) & mask;
        while (m_slots[i].idPlusOne != 0)
            i = (i + 1) & mask;
        m_slots[i] = s;
    }
    void grow()
    {
        std::vector<Slot> old(m_slots.empty() ? 64 : m_slots.size() * 2);
        old.swap(m_slots);
        for (const Slot& s : old)
            if (s.idPlusOne != 0)
                place(s);
    }
    std::vector<Slot> m_slots;
    std::size_t m_count = 0;
};

} // namespace gpumem::detail
