#include "replay/policies/rmm_arena_policy.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>

// Section numbers refer to allocators.md §3.3; names in quotes are RMM's (arena_memory_resource.hpp,
// detail/arena.hpp: global_arena, arena, superblock).

namespace gpumem::replay {

void RmmArenaPolicy::Superblock::reset(Bytes newSize)
{
    size = newSize;
    free = { { address, newSize } };
    maxFree = newSize;
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
    if (blockSize == maxFree) {
        maxFree = 0;
        for (const auto& [fa, fn] : free)
            maxFree = std::max(maxFree, fn);
    }
    return a;
}

// "superblock::coalesce": the block rejoins its free neighbours.
void RmmArenaPolicy::Superblock::coalesce(Address a, Bytes n)
{
    maxFree = std::max(maxFree, detail::insertCoalescing(free, a, n, [](Address, Bytes) {}).second);
}

RmmArenaPolicy::Superblock* RmmArenaPolicy::newSuperblock(Address a, Bytes size)
{
    Superblock& sb = m_superblocks[a];
    sb.address = a;
    sb.owner = kGlobal;
    sb.reset(size);
    return &sb;
}

RmmArenaPolicy::RmmArenaPolicy(SimulatedDevice& device, RmmArenaConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
{
    // "global_arena::default_size": half the free device memory (the capacity, or the total memory
    // when the device is unlimited).
    Bytes free = device.capacity() != 0 ? device.capacity() : device.totalMemory();
    m_arenaSize = detail::roundDownToMultiple(config.arenaSize != 0 ? config.arenaSize : free / 2, kAlignment);
    if (m_arenaSize < kSuperblockMinimum)
        throw UsageError("rmm-arena: arena_size must be at least 1 MiB (one superblock)");
    if (!acquireUpstream())
        throw UsageError("rmm-arena: the device cannot hold an arena of " + std::to_string(m_arenaSize) + " B ("
            + std::to_string(device.freeBytes()) + " B free); give a smaller arena_size or a larger --capacity");
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
    if (m_upstream)
        putGlobal(newSuperblock(*m_upstream, m_arenaSize));
    m_stats.reserved = device().counters().reserved;
    return m_upstream.has_value();
}

// "global_arena::first_fit": the first superblock (address order) with a fitting block leaves the
// global set; an empty one of at least max(1 MiB, size) + 1 MiB is split and its tail stays.
RmmArenaPolicy::Superblock* RmmArenaPolicy::globalFirstFit(Bytes size)
{
    // The scan skips full superblocks (they cannot fit anything), so it only visits m_globalWithFree.
    auto it = std::find_if(
        m_globalWithFree.begin(), m_globalWithFree.end(), [&](const auto& e) { return e.second->fits(size); });
    if (it == m_globalWithFree.end())
        return nullptr;
    Superblock* sb = it->second;
    m_globalWithFree.erase(it);
    m_global.erase(sb->address);
    Bytes minSize = std::max(kSuperblockMinimum, size);
    if (sb->empty() && sb->size >= minSize + kSuperblockMinimum) {
        Bytes tail = sb->size - minSize;
        sb->reset(minSize);
        putGlobal(newSuperblock(sb->address + minSize, tail));
    }
    return sb;
}

void RmmArenaPolicy::putGlobal(Superblock* sb)
{
    sb->owner = kGlobal;
    m_global.emplace(sb->address, sb);
    if (sb->maxFree > 0)
        m_globalWithFree.emplace(sb->address, sb);
}

// "global_arena::coalesce": an empty superblock merges with contiguous empty neighbours of the set.
void RmmArenaPolicy::globalCoalesce(Superblock* sb)
{
    auto next = m_global.lower_bound(sb->address);
    if (next != m_global.end() && sb->empty() && next->second->empty() && sb->address + sb->size == next->first) {
        Address gone = next->first;
        sb->reset(sb->size + next->second->size);
        m_global.erase(next);
        m_globalWithFree.erase(gone);
        m_superblocks.erase(gone);
        next = m_global.lower_bound(sb->address);
    }
    if (next != m_global.begin() && sb->empty()) {
        Superblock* prev = std::prev(next)->second;
        if (prev->empty() && prev->address + prev->size == sb->address) {
            prev->reset(prev->size + sb->size);
            m_superblocks.erase(sb->address);
            return;
        }
    }
    putGlobal(sb);
}

// "arena::allocate" for one stream: > 1 MiB in the global arena, else first fit over the stream's
// superblocks, then a superblock acquired from the global arena.
std::optional<Address> RmmArenaPolicy::tryAllocate(Bytes size, StreamKey stream)
{
    if (size > kSuperblockMinimum) {
        Superblock* sb = globalFirstFit(size);
        if (!sb)
            return std::nullopt;
        Address a = sb->firstFit(size);
        putGlobal(sb);
        return a;
    }
    auto& arena = m_arenas[stream];
    for (auto& [sa, sb] : arena)
        if (sb->fits(size))
            return sb->firstFit(size);
    Superblock* sb = globalFirstFit(size);
    if (!sb)
        return std::nullopt;
    sb->owner = stream;
    arena.emplace(sb->address, sb);
    return sb->firstFit(size);
}

// "arena_memory_resource::defragment": every arena gives all its superblocks back ("arena::clean").
void RmmArenaPolicy::defragment()
{
    ++m_defragmentations;
    for (auto& [stream, set] : m_arenas) {
        for (auto& [a, sb] : set)
            globalCoalesce(sb);
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
    Superblock* sb = &std::prev(m_superblocks.upper_bound(address))->second;
    sb->coalesce(address, block.size);
    if (sb->owner != kGlobal)
        return;
    m_global.erase(sb->address);
    m_globalWithFree.erase(sb->address);
    if (sb->empty())
        globalCoalesce(sb);
    else
        putGlobal(sb);
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
        m_globalWithFree.clear();
        m_arenas.clear();
    }
    m_stats.reserved = device().counters().reserved;
}

std::vector<std::pair<Address, Bytes>> RmmArenaPolicy::globalSuperblocks() const
{
    std::vector<std::pair<Address, Bytes>> out;
    for (const auto& [a, sb] : m_global)
        out.emplace_back(a, sb->size);
    return out;
}

std::vector<std::pair<Address, Bytes>> RmmArenaPolicy::streamSuperblocks(StreamKey stream) const
{
    std::vector<std::pair<Address, Bytes>> out;
    if (auto it = m_arenas.find(stream); it != m_arenas.end())
        for (const auto& [a, sb] : it->second)
            out.emplace_back(a, sb->size);
    return out;
}

PolicyState RmmArenaPolicy::describeState() const
{
    PolicyState state;
    if (!m_upstream)
        return state;
    SegmentInfo seg { *m_upstream, m_arenaSize, 0, false, false, {} };
    std::map<Address, BlockInfo> blocks;
    for (const auto& [a, l] : m_live.sorted())
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
