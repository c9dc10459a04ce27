#include "replay/policies/tf_bfc_policy.h"

#include "core/error.h"
#include "replay/detail/free_ranges.h"

#include <algorithm>
#include <bit>

// Section numbers refer to allocators.md §2; names in quotes are BFCAllocator's
// (xla/tsl/framework/bfc_allocator.cc) whose behaviour the code reproduces.

namespace gpumem::replay {

namespace {
    constexpr Bytes kTwoMiB = Bytes(2) << 20;
    constexpr Bytes kMaxRegionBytes = Bytes(1) << 62; // keeps the doubling from overflowing
    constexpr Bytes kDefaultMaxInternalFragmentation = Bytes(128) << 20;
}

TfBfcPolicy::TfBfcPolicy(SimulatedDevice& device, TfBfcConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
{
    // memory_limit: what the GPU process may use; the capacity here, else the device's total memory.
    m_memoryLimit = config.memoryLimit != 0 ? config.memoryLimit
                                            : (device.capacity() != 0 ? device.capacity() : device.totalMemory());
    m_maxInternalFragmentation = config.fragmentationFraction > 0.0
        ? Bytes(config.fragmentationFraction * double(m_memoryLimit))
        : config.maxInternalFragmentation;
    // "curr_region_allocation_bytes_" (§2.4).
    m_currRegionBytes = roundedBytes(config.allowGrowth ? std::min(m_memoryLimit, kTwoMiB) : m_memoryLimit);
}

int TfBfcPolicy::binFor(Bytes size)
{
    Bytes units = std::max(size, kMinAllocationSize) / kMinAllocationSize;
    return std::min(kNumBins - 1, int(std::bit_width(units)) - 1);
}

int TfBfcPolicy::binOf(Address address) const
{
    auto it = m_chunks.find(address);
    if (it == m_chunks.end() || it->second.inUse)
        return -1;
    return binFor(it->second.size);
}

std::string TfBfcPolicy::name() const
{
    std::string opts;
    auto add = [&](const std::string& s) { opts += (opts.empty() ? ":" : ",") + s; };
    if (!m_config.allowGrowth)
        add("allow_growth:false");
    if (!m_config.garbageCollection)
        add("garbage_collection:false");
    if (m_config.fragmentationFraction > 0.0)
        add("fragmentation_fraction:" + std::to_string(m_config.fragmentationFraction));
    else if (m_config.maxInternalFragmentation != kDefaultMaxInternalFragmentation)
        add("max_internal_fragmentation_bytes:" + std::to_string(m_config.maxInternalFragmentation));
    if (m_config.memoryLimit != 0)
        add("memory_limit:" + std::to_string(m_config.memoryLimit));
    return "tf-bfc" + opts;
}

void TfBfcPolicy::insertFree(ChunkIt it) { m_bins[binFor(it->second.size)].insert({ it->second.size, it->first }); }
void TfBfcPolicy::removeFree(ChunkIt it) { m_bins[binFor(it->second.size)].erase({ it->second.size, it->first }); }
void TfBfcPolicy::updateReserved() { m_stats.reserved = device().counters().reserved; }

// "FindChunkPtr" (§2.2 steps 2–3).
std::optional<Address> TfBfcPolicy::findChunk(Bytes rounded, Bytes requested)
{
    for (int b = binFor(rounded); b < kNumBins; ++b) {
        auto& bin = m_bins[b];
        auto hit = bin.lower_bound({ rounded, 0 });
        if (hit == bin.end())
            continue;
        Address a = hit->second;
        bin.erase(hit);
        auto it = m_chunks.find(a);
        Chunk& c = it->second;
        // Split when the chunk is at least twice the request or the leftover would exceed the limit.
        if (c.size >= 2 * rounded || c.size - rounded >= m_maxInternalFragmentation) {
            auto rest
                = m_chunks.emplace_hint(std::next(it), a + rounded, Chunk { c.size - rounded, 0, c.region, false });
            c.size = rounded;
            insertFree(rest);
        }
        c.inUse = true;
        c.requested = requested;
        m_stats.allocated += c.size; // bytes_in_use counts the whole chunk
        m_stats.requested += requested;
        return a;
    }
    return std::nullopt;
}

// "Extend" (§2.4).
bool TfBfcPolicy::extend(Bytes rounded, StreamKey stream)
{
    Bytes available = m_memoryLimit > m_poolBytes ? detail::roundDownToMultiple(m_memoryLimit - m_poolBytes, kMinAllocationSize) : 0;
    if (rounded > available)
        return false;
    bool increased = false;
    while (rounded > m_currRegionBytes) {
        m_currRegionBytes = std::min(m_currRegionBytes * 2, kMaxRegionBytes);
        increased = true;
    }
    Bytes bytes = std::min(m_currRegionBytes, available);
    auto mem = device().malloc(bytes, stream);
    if (!mem && !m_startedBackpedal) {
        // "Only backpedal once" per allocator: shrink by kBackpedalFactor (a float, 0.9f) until the
        // device accepts or the size drops below the request. [choice] A shrink that rounding undoes
        // steps down by 256 B instead, so that the loop ends (upstream would spin).
        m_startedBackpedal = true;
        while (!mem) {
            Bytes smaller = roundedBytes(static_cast<Bytes>(static_cast<float>(bytes) * 0.9f));
            bytes = smaller < bytes ? smaller : bytes - kMinAllocationSize;
            if (bytes < rounded)
                break;
            ++m_counters.backoffs;
            mem = device().malloc(bytes, stream);
        }
    }
    if (!mem)
        return false;
    if (!increased)
        m_currRegionBytes = std::min(m_currRegionBytes * 2, kMaxRegionBytes);
    m_poolBytes += bytes;
    m_regions.emplace(*mem, bytes);
    insertFree(m_chunks.emplace(*mem, Chunk { bytes, 0, *mem, false }).first);
    ++m_counters.extends;
    return true;
}

bool TfBfcPolicy::regionInUse(Address region) const
{
    Bytes size = m_regions.at(region);
    for (auto it = m_chunks.find(region); it != m_chunks.end() && it->first < region + size; ++it)
        if (it->second.inUse)
            return true;
    return false;
}

void TfBfcPolicy::freeRegion(Address region)
{
    Bytes size = m_regions.at(region);
    auto it = m_chunks.find(region);
    while (it != m_chunks.end() && it->first < region + size) {
        removeFree(it);
        it = m_chunks.erase(it);
    }
    m_regions.erase(region);
    m_poolBytes -= size;
    device().free(region);
}

// "DeallocateFreeRegions" (§2.5): frees every region without an in-use chunk when that could let the
// request fit.
bool TfBfcPolicy::deallocateFreeRegions(Bytes rounded)
{
    std::vector<Address> empty;
    Bytes freeBytes = 0;
    for (const auto& [base, size] : m_regions)
        if (!regionInUse(base)) {
            empty.push_back(base);
            freeBytes += size;
        }
    if (freeBytes == 0)
        return false;
    Bytes available = (m_memoryLimit > m_poolBytes ? m_memoryLimit - m_poolBytes : 0) + freeBytes;
    if (rounded > available)
        return false;
    for (Address base : empty)
        freeRegion(base);
    m_counters.gcRegionsFreed += empty.size();
    return true;
}

// "AllocateRawInternal" (§2.2 step 4).
std::optional<Address> TfBfcPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes rounded = detail::alignedRequest(bytes, kMinAllocationSize);
    std::optional<Address> a;
    if (rounded != 0) {
        a = findChunk(rounded, bytes);
        if (!a && extend(rounded, stream))
            a = findChunk(rounded, bytes);
        if (!a && m_config.garbageCollection && deallocateFreeRegions(rounded) && extend(rounded, stream))
            a = findChunk(rounded, bytes);
    }
    updateReserved();
    if (!a) {
        ++m_stats.ooms;
        device().reportOom(rounded, stream);
    }
    return a;
}

// "FreeAndMaybeCoalesce" (§2.3): merge with the next chunk, then with the previous one, inside the region.
void TfBfcPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    auto it = m_chunks.find(address);
    if (it == m_chunks.end() || !it->second.inUse)
        throw Error("tf-bfc policy: free of address " + std::to_string(address) + " that is not allocated");
    Chunk& c = it->second;
    m_stats.allocated -= c.size;
    m_stats.requested -= c.requested;
    c.inUse = false;
    c.requested = 0;
    auto next = std::next(it);
    if (next != m_chunks.end() && next->second.region == c.region && !next->second.inUse) {
        removeFree(next);
        c.size += next->second.size;
        m_chunks.erase(next);
    }
    if (it != m_chunks.begin()) {
        auto prev = std::prev(it);
        if (prev->second.region == c.region && !prev->second.inUse) {
            removeFree(prev);
            prev->second.size += c.size;
            m_chunks.erase(it);
            it = prev;
        }
    }
    insertFree(it);
}

// Not a BFC call (BFC releases only through garbage collection): the replay's empty_cache directive
// frees every region without an in-use chunk, as DeallocateFreeRegions would.
void TfBfcPolicy::doReleaseCached()
{
    std::vector<Address> empty;
    for (const auto& [base, size] : m_regions)
        if (!regionInUse(base))
            empty.push_back(base);
    for (Address base : empty)
        freeRegion(base);
    updateReserved();
}

PolicyState TfBfcPolicy::describeState() const
{
    PolicyState state;
    for (const auto& [base, size] : m_regions) {
        SegmentInfo seg { base, size, 0, false, false, {} };
        for (auto it = m_chunks.find(base); it != m_chunks.end() && it->first < base + size; ++it)
            seg.blocks.push_back(BlockInfo { it->first, it->second.size, it->second.requested,
                it->second.inUse ? BlockState::Allocated : BlockState::Free });
        state.segments.push_back(std::move(seg));
    }
    return state;
}

} // namespace gpumem::replay
