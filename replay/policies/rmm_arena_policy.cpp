#include "replay/policies/rmm_arena_policy.h"

#include "core/error.h"

#include <algorithm>

// Section numbers refer to allocators.md §3.3; names in quotes are RMM's (arena_memory_resource.hpp,
// detail/arena.hpp: global_arena, arena, superblock).

namespace gpumem::replay {

bool RmmArenaPolicy::Superblock::fits(Bytes n) const
{
    return std::any_of(free.begin(), free.end(), [n](const auto& b) { return b.second >= n; });
}

// "superblock::first_fit": the first free block (address order) that fits, its remainder kept.
Address RmmArenaPolicy::Superblock::firstFit(Bytes n)
{
    auto it = std::find_if(free.begin(), free.end(), [n](const auto& b) { return b.second >= n; });
    Address a = it->first;
    Bytes blockSize = it->second;
    free.erase(it);
    if (blockSize > n)
        free.emplace(a + n, blockSize - n);
    return a;
}

// "superblock::coalesce": the block rejoins its free neighbours.
void RmmArenaPolicy::Superblock::coalesce(Address a, Bytes n)
{
    detail::insertCoalescing(free, a, n, [](Address, Bytes) {});
}

RmmArenaPolicy::RmmArenaPolicy(SimulatedDevice& device, RmmArenaConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
{
    // "global_arena::default_size": half the free device memory (the capacity, or the total memory
    // when the device is unlimited).
    Bytes free = device.capacity() != 0 ? device.capacity() : device.totalMemory();
    m_arenaSize = (config.arenaSize != 0 ? config.arenaSize : free / 2) / kAlignment * kAlignment;
    if (m_arenaSize < kSuperblockMinimum)
        throw UsageError("rmm-arena: arena_size must be at least 1 MiB (one superblock)");
    acquireUpstream();
}

std::string RmmArenaPolicy::name() const
{
    return m_config.arenaSize != 0 ? "rmm-arena:arena_size:" + std::to_string(m_config.arenaSize) : "rmm-arena";
}

bool RmmArenaPolicy::acquireUpstream()
{
    if (m_upstream)
        return true;
    m_upstream = device().malloc(m_arenaSize, 0);
    if (m_upstream) {
        m_superblocks.emplace(*m_upstream, Superblock { m_arenaSize, kGlobal, { { *m_upstream, m_arenaSize } } });
        m_global.insert(*m_upstream);
    }
    m_stats.reserved = device().counters().reserved;
    return m_upstream.has_value();
}

// "global_arena::first_fit": the first superblock (address order) with a fitting block leaves the
// global set; an empty one of at least max(1 MiB, size) + 1 MiB is split and its tail stays.
std::optional<Address> RmmArenaPolicy::globalFirstFit(Bytes size)
{
    auto it = std::find_if(m_global.begin(), m_global.end(), [&](Address a) { return m_superblocks.at(a).fits(size); });
    if (it == m_global.end())
        return std::nullopt;
    Address a = *it;
    m_global.erase(it);
    Superblock& sb = m_superblocks.at(a);
    Bytes minSize = std::max(kSuperblockMinimum, size);
    if (sb.empty() && sb.size >= minSize + kSuperblockMinimum) {
        Bytes tail = sb.size - minSize;
        sb.size = minSize;
        sb.free = { { a, minSize } };
        m_superblocks.emplace(a + minSize, Superblock { tail, kGlobal, { { a + minSize, tail } } });
        m_global.insert(a + minSize);
    }
    return a;
}

// "global_arena::coalesce": an empty superblock merges with contiguous empty neighbours of the set.
void RmmArenaPolicy::globalCoalesce(Address a)
{
    Superblock* sb = &m_superblocks.at(a);
    sb->owner = kGlobal;
    auto next = m_global.lower_bound(a);
    if (next != m_global.end() && sb->empty()) {
        Superblock& n = m_superblocks.at(*next);
        if (a + sb->size == *next && n.empty()) {
            sb->size += n.size;
            sb->free = { { a, sb->size } };
            m_superblocks.erase(*next);
            next = m_global.erase(next);
        }
    }
    if (next != m_global.begin() && sb->empty()) {
        Address pa = *std::prev(next);
        Superblock& p = m_superblocks.at(pa);
        if (pa + p.size == a && p.empty()) {
            p.size += sb->size;
            p.free = { { pa, p.size } };
            m_superblocks.erase(a);
            return;
        }
    }
    m_global.insert(next, a);
}

// "arena::allocate" for one stream: > 1 MiB in the global arena, else first fit over the stream's
// superblocks, then a superblock acquired from the global arena.
std::optional<Address> RmmArenaPolicy::tryAllocate(Bytes size, StreamKey stream)
{
    if (size > kSuperblockMinimum) {
        auto sb = globalFirstFit(size);
        if (!sb)
            return std::nullopt;
        Address a = m_superblocks.at(*sb).firstFit(size);
        m_global.insert(*sb);
        return a;
    }
    auto& arena = m_arenas[stream];
    for (Address sa : arena) {
        Superblock& sb = m_superblocks.at(sa);
        if (sb.fits(size))
            return sb.firstFit(size);
    }
    auto sb = globalFirstFit(size);
    if (!sb)
        return std::nullopt;
    Superblock& s = m_superblocks.at(*sb);
    s.owner = stream;
    arena.insert(*sb);
    return s.firstFit(size);
}

// "arena_memory_resource::defragment": every arena gives all its superblocks back ("arena::clean").
void RmmArenaPolicy::defragment()
{
    ++m_defragmentations;
    for (auto& [stream, set] : m_arenas) {
        for (Address a : set)
            globalCoalesce(a);
        set.clear();
    }
}

std::optional<Address> RmmArenaPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes size = detail::alignedRequest(bytes, kAlignment);
    std::optional<Address> a;
    if (size != 0 && acquireUpstream()) {
        a = tryAllocate(size, stream);
        if (!a) {
            defragment();
            a = tryAllocate(size, stream);
        }
    }
    return m_live.settle(a, size, bytes, stream, m_stats, device());
}

// A freed block coalesces into the superblock that holds it, wherever that superblock is now (RMM
// looks in the global arena, the stream's arena, then every other arena); an empty superblock of the
// global arena merges with its empty neighbours.
void RmmArenaPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    auto block = m_live.release(address, m_stats, "rmm-arena");
    auto it = std::prev(m_superblocks.upper_bound(address));
    it->second.coalesce(address, block.size);
    if (it->second.owner == kGlobal && it->second.empty()) {
        m_global.erase(it->first);
        globalCoalesce(it->first);
    }
}

// Not an RMM call: the replay's empty_cache directive defragments, and with nothing allocated gives
// the arena back to the device (the resource's destruction); the next request takes a new one.
void RmmArenaPolicy::doReleaseCached()
{
    defragment();
    if (m_live.empty() && m_upstream) {
        device().free(*m_upstream);
        m_upstream.reset();
        m_superblocks.clear();
        m_global.clear();
        m_arenas.clear();
    }
    m_stats.reserved = device().counters().reserved;
}

std::vector<std::pair<Address, Bytes>> RmmArenaPolicy::globalSuperblocks() const
{
    std::vector<std::pair<Address, Bytes>> out;
    for (Address a : m_global)
        out.emplace_back(a, m_superblocks.at(a).size);
    return out;
}

std::vector<std::pair<Address, Bytes>> RmmArenaPolicy::streamSuperblocks(StreamKey stream) const
{
    std::vector<std::pair<Address, Bytes>> out;
    if (auto it = m_arenas.find(stream); it != m_arenas.end())
        for (Address a : it->second)
            out.emplace_back(a, m_superblocks.at(a).size);
    return out;
}

PolicyState RmmArenaPolicy::describeState() const
{
    PolicyState state;
    if (!m_upstream)
        return state;
    SegmentInfo seg { *m_upstream, m_arenaSize, 0, false, false, {} };
    std::map<Address, BlockInfo> blocks;
    for (const auto& [a, l] : m_live.blocks())
        blocks.emplace(a, BlockInfo { a, l.size, l.requested, BlockState::Allocated });
    for (const auto& [sa, sb] : m_superblocks)
        for (const auto& [a, n] : sb.free)
            blocks.emplace(a, BlockInfo { a, n, 0, BlockState::Free });
    for (auto& [a, b] : blocks)
        seg.blocks.push_back(b);
    state.segments.push_back(std::move(seg));
    return state;
}

} // namespace gpumem::replay
