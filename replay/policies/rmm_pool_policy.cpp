#include "replay/policies/rmm_pool_policy.h"

#include "core/error.h"
#include "replay/detail/free_ranges.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>

// Section numbers refer to allocators.md §3; names in quotes are RMM's (pool_memory_resource.hpp,
// detail/stream_ordered_memory_resource.hpp, detail/coalescing_free_list.hpp).

namespace gpumem::replay {

namespace {
    Bytes align256(Bytes n) { return detail::roundUpToMultiple(n, RmmPoolPolicy::kAlignment); }
}

// "coalescing_free_list::insert": merge with the next block unless it is a head, and onto the
// previous block unless this one is a head.
void RmmPoolPolicy::FreeList::insert(Address a, Block b)
{
    auto next = blocks.lower_bound(a);
    if (next != blocks.end() && a + b.size == next->first && !next->second.head) {
        b.size += next->second.size;
        bySize.erase({ next->second.size, next->first });
        next = blocks.erase(next);
    }
    if (next != blocks.begin() && !b.head) {
        auto prev = std::prev(next);
        if (prev->first + prev->second.size == a) {
            bySize.erase({ prev->second.size, prev->first });
            prev->second.size += b.size;
            bySize.insert({ prev->second.size, prev->first });
            return;
        }
    }
    blocks.emplace_hint(next, a, b);
    bySize.insert({ b.size, a });
}

void RmmPoolPolicy::FreeList::absorb(FreeList&& other)
{
    for (const auto& [a, b] : other.blocks)
        insert(a, b);
    other.blocks.clear();
    other.bySize.clear();
}

// "coalescing_free_list::get_block": the smallest block that fits, the lowest address among equals.
std::optional<std::pair<Address, RmmPoolPolicy::Block>> RmmPoolPolicy::FreeList::bestFit(Bytes size)
{
    auto best = bySize.lower_bound({ size, 0 });
    if (best == bySize.end())
        return std::nullopt;
    auto it = blocks.find(best->second);
    auto out = *it;
    bySize.erase(best);
    blocks.erase(it);
    return out;
}

void RmmPoolPolicy::FreeList::eraseRange(Address lo, Address hi)
{
    for (auto it = blocks.lower_bound(lo); it != blocks.end() && it->first < hi; it = blocks.erase(it))
        bySize.erase({ it->second.size, it->first });
}

RmmPoolPolicy::RmmPoolPolicy(SimulatedDevice& device, RmmPoolConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
    , m_maximum(config.maximumPoolSize)
{
    Bytes initial = 0;
    if (config.initialPoolSize)
        initial = *config.initialPoolSize;
    else if (config.version != RmmPoolVersion::Main) // min(free, total / 2), aligned to 256 [RMM-23.02]
        initial = detail::roundDownToMultiple(std::min(device.freeBytes(), device.totalMemory() / 2), kAlignment);
    // 0.15: "maximum_pool_size_ = (maximum_pool_size == default_maximum_size) ? free : maximum_pool_size".
    if (config.version == RmmPoolVersion::V0_15 && !m_maximum)
        m_maximum = detail::roundDownToMultiple(std::min(device.freeBytes(), device.totalMemory()), kAlignment);
    if (m_maximum && initial > *m_maximum)
        throw UsageError("rmm-pool: initial_pool_size (" + std::to_string(initial) + " B) exceeds maximum_pool_size ("
            + std::to_string(*m_maximum) + " B)");
    if (initial > 0) {
        // "initialize_pool": one upstream allocation on the default stream, into its free list.
        auto a = tryToExpand(initial, initial, 0);
        if (!a)
            throw UsageError("rmm-pool: the device cannot hold the initial pool of " + std::to_string(initial) + " B ("
                + std::to_string(device.freeBytes())
                + " B free); give a smaller initial_pool_size or a "
                  "larger --capacity");
        m_lists.of(0).insert(*a, Block { initial, true });
    }
    m_stats.reserved = m_poolSize;
}

std::string RmmPoolPolicy::name() const
{
    std::string opts;
    auto add = [&](const std::string& s) { opts += (opts.empty() ? ":" : ",") + s; };
    if (m_config.initialPoolSize)
        add("initial_pool_size:" + std::to_string(*m_config.initialPoolSize));
    if (m_config.maximumPoolSize)
        add("maximum_pool_size:" + std::to_string(*m_config.maximumPoolSize));
    const char* base = m_config.version == RmmPoolVersion::V23_02 ? "rmm-pool@23.02"
        : m_config.version == RmmPoolVersion::V0_15                ? "rmm-pool@0.15"
                                                                   : "rmm-pool";
    return base + opts;
}

// "size_to_grow" (§3.2).
Bytes RmmPoolPolicy::sizeToGrow(Bytes size) const
{
    if (m_maximum) {
        Bytes remaining = align256(*m_maximum - std::min(m_poolSize, *m_maximum));
        Bytes aligned = align256(size);
        if (m_config.version == RmmPoolVersion::V0_15) // branch-0.15 size_to_grow (after PR #498)
            return aligned <= remaining / 2 ? remaining / 2 : aligned <= remaining ? aligned : 0;
        return aligned <= remaining ? std::max(aligned, remaining / 2) : 0;
    }
    return std::max(size, m_poolSize);
}

// "try_to_expand": halve the attempt on failure, never below minSize.
std::optional<Address> RmmPoolPolicy::tryToExpand(Bytes trySize, Bytes minSize, StreamKey stream)
{
    if (m_config.version == RmmPoolVersion::V0_15) // 0.15 expand_pool: one block_from_upstream, no halving
        minSize = trySize;
    while (trySize >= minSize && trySize > 0) {
        if (auto a = device().malloc(trySize, stream)) {
            m_poolSize += trySize;
            m_upstream.emplace(*a, Upstream { trySize, stream });
            return a;
        }
        if (trySize == minSize)
            break;
        trySize = std::max(minSize, trySize / 2);
    }
    return std::nullopt;
}

// "allocate_and_insert_remainder" with pool_memory_resource::allocate_from_block: the front of the
// block is handed out (keeping its head flag), any remainder goes into `into`.
Address RmmPoolPolicy::carve(Address a, Block b, Bytes size, Bytes requested, FreeList& into)
{
    m_live.emplace(a, Live { size, requested, b.head });
    if (b.size > size)
        into.insert(a + size, Block { b.size - size, false });
    m_stats.allocated += size;
    m_stats.requested += requested;
    return a;
}

std::optional<Address> RmmPoolPolicy::allocateBlock(Bytes size, StreamKey stream, Bytes requested)
{
    auto take = [&](FreeList& list) -> std::optional<Address> {
        auto found = list.bestFit(size);
        if (!found)
            return std::nullopt;
        return carve(found->first, found->second, size, requested, list);
    };
    auto expand = [&](FreeList& own) -> std::optional<Address> {
        Bytes grow = sizeToGrow(size);
        auto a = tryToExpand(grow, size, stream);
        if (!a)
            return std::nullopt;
        return carve(*a, Block { m_upstream.at(*a).size, true }, size, requested, own);
    };
    auto a = m_lists.getBlock(stream, take, expand);
    // RMM's reserved is pool_size(), the sum of the upstream sizes it asked for; the simulated device rounds
    // each to 512 B, which is not memory RMM counts (issue 19: rmm-pool read up to 256 B high per growth).
    m_stats.reserved = m_poolSize;
    return a;
}

void RmmPoolPolicy::deallocateBlock(Address address, StreamKey stream)
{
    auto it = m_live.find(address);
    if (it == m_live.end())
        throw Error("rmm-pool policy: free of address " + std::to_string(address) + " that is not allocated");
    m_stats.allocated -= it->second.size;
    m_stats.requested -= it->second.requested;
    m_lists.of(stream).insert(address, Block { it->second.size, it->second.head });
    m_live.erase(it);
}

std::optional<Address> RmmPoolPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes size = detail::alignedRequest(bytes, kAlignment);
    auto a = size != 0 ? allocateBlock(size, stream, bytes) : std::nullopt;
    if (!a) {
        ++m_stats.ooms;
        device().reportOom(size, stream);
    }
    return a;
}

void RmmPoolPolicy::doDeallocate(Address address, Bytes, StreamKey stream) { deallocateBlock(address, stream); }

// The pool's release() per upstream allocation: one without an allocated block leaves every free list
// and goes back to the device.
void RmmPoolPolicy::doReleaseCached()
{
    for (auto up = m_upstream.begin(); up != m_upstream.end();) {
        Address base = up->first;
        Address end = base + up->second.size;
        auto live = m_live.lower_bound(base);
        if (live != m_live.end() && live->first < end) {
            ++up;
            continue;
        }
        m_lists.forEach([&](StreamKey, FreeList& l) { l.eraseRange(base, end); });
        m_poolSize -= up->second.size;
        device().free(base);
        up = m_upstream.erase(up);
    }
    m_stats.reserved = m_poolSize;
}

std::vector<std::pair<Address, Bytes>> RmmPoolPolicy::freeBlocks(StreamKey stream) const
{
    std::vector<std::pair<Address, Bytes>> out;
    m_lists.forEach([&](StreamKey s, const FreeList& l) {
        if (s == stream)
            for (const auto& [a, b] : l.blocks)
                out.emplace_back(a, b.size);
    });
    return out;
}

std::vector<std::pair<Address, Bytes>> RmmPoolPolicy::upstreamAllocations() const
{
    std::vector<std::pair<Address, Bytes>> out;
    for (const auto& [a, u] : m_upstream)
        out.emplace_back(a, u.size);
    return out;
}

PolicyState RmmPoolPolicy::describeState() const
{
    std::map<Address, BlockInfo> blocks;
    for (const auto& [a, l] : m_live)
        blocks.emplace(a, BlockInfo { a, l.size, l.requested, BlockState::Allocated });
    m_lists.forEach([&](StreamKey, const FreeList& l) {
        for (const auto& [a, b] : l.blocks)
            blocks.emplace(a, BlockInfo { a, b.size, 0, BlockState::Free });
    });
    PolicyState state;
    for (const auto& [base, up] : m_upstream) {
        SegmentInfo seg { base, up.size, up.stream, false, false, {} };
        for (auto it = blocks.lower_bound(base); it != blocks.end() && it->first < base + up.size; ++it)
            seg.blocks.push_back(it->second);
        state.segments.push_back(std::move(seg));
    }
    return state;
}

} // namespace gpumem::replay
