#pragma once
// Pieces the replay policies share: a free-range map that coalesces on insert (rmm-arena, cuda-async),
// and the table of live blocks that keeps PolicyStats and reports failed requests (LiveBlocks).
// Header-only, not thread-safe.
#include "core/error.h"
#include "replay/allocator_policy.h"
#include "replay/detail/address_map.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>
#include <map>
#include <string>

namespace gpumem::replay::detail {

// `bytes` (0 counts as 1) rounded up to a multiple of `alignment`; 0 when above kMaxDeviceBytes (the one
// limit of the replay engine, simulated_device.h: the RequestFeeder refuses such requests before any policy
// sees them; below it the rounding cannot wrap).
inline Bytes alignedRequest(Bytes bytes, Bytes alignment)
{
    if (bytes > kMaxDeviceBytes)
        return 0;
    return roundUpToMultiple(std::max<Bytes>(bytes, 1), alignment);
}

// Inserts the free range [a, a+n) into `ranges` (address → size, no two adjacent) and merges it with
// its free neighbours; onMerge(address, size) is called for each neighbour absorbed before it is
// erased. Returns the merged range.
template <typename OnMerge>
std::pair<Address, Bytes> insertCoalescing(std::map<Address, Bytes>& ranges, Address a, Bytes n, OnMerge&& onMerge)
{
    auto next = ranges.lower_bound(a);
    if (next != ranges.end() && a + n == next->first) {
        onMerge(next->first, next->second);
        n += next->second;
        next = ranges.erase(next);
    }
    if (next != ranges.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == a) {
            onMerge(prev->first, prev->second);
            prev->second += n;
            return *prev;
        }
    }
    ranges.emplace_hint(next, a, n);
    return { a, n };
}

// No per-block data beyond size and requested bytes (the default of LiveBlocks).
struct NoBlockTag { };

// The blocks a policy handed out, by address, with the stats that go with them: the one place where
// allocated/requested/ooms change for the policies whose live blocks are a table beside their free
// structures (direct, ideal, optimal, rmm-arena, rmm-binning, cuda-async). `Tag` is what else a
// policy keeps per block (a stream, the bin it came from); it costs nothing when empty.
template <typename Tag = NoBlockTag> class LiveBlocks {
public:
    struct Block {
        Bytes size = 0; // after the policy's rounding
        Bytes requested = 0;
        [[no_unique_address]] Tag tag {};
    };
    // The outcome of one request: a block of `size` bytes at *a (allocated and requested grow), or a
    // failure (ooms grows and the device reports the OOM of `size` bytes). Returns a.
    std::optional<Address> settle(std::optional<Address> a, Bytes size, Bytes requested, StreamKey stream,
        PolicyStats& stats, SimulatedDevice& device, Tag tag = {})
    {
        if (!a) {
            ++stats.ooms;
            device.reportOom(size, stream);
            return a;
        }
        m_blocks.insert(*a, Block { size, requested, tag });
        stats.allocated += size;
        stats.requested += requested;
        return a;
    }
    // Removes the block at `address` and takes it out of the stats. Throws gpumem::Error naming
    // `policy` ("<policy> policy: free of address N that is not allocated") when no block starts there.
    Block release(Address address, PolicyStats& stats, const std::string& policy)
    {
        const Block* found = m_blocks.find(address);
        if (!found)
            throw Error(policy + " policy: free of address " + std::to_string(address) + " that is not allocated");
        Block b = *found;
        stats.allocated -= b.size;
        stats.requested -= b.requested;
        m_blocks.erase(address);
        return b;
    }
    // The live block at `address`, or nullptr.
    const Block* find(Address address) const { return m_blocks.find(address); }
    // f(address, block) for every live block, in no particular order.
    template <typename F> void forEach(F&& f) const { m_blocks.forEach(f); }
    // Every live block in address order (for describeState; linear in the live blocks).
    std::map<Address, Block> sorted() const
    {
        std::map<Address, Block> out;
        m_blocks.forEach([&](Address a, const Block& b) { out.emplace(a, b); });
        return out;
    }
    bool empty() const { return m_blocks.size() == 0; }

private:
    AddressMap<Block> m_blocks; // a hash table: the lookup on every free is the hot path
};

} // namespace gpumem::replay::detail
