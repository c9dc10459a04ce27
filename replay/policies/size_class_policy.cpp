#include "replay/policies/size_class_policy.h"

#include "core/error.h"
#include "core/units.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

namespace gpumem::replay {

namespace {
    constexpr StreamKey kReserveStream = std::numeric_limits<StreamKey>::max();
    constexpr Bytes kSlabUnit = Bytes(2) << 20;
    constexpr std::uint32_t kRegionsPerSlab = 8;
}

Bytes SizeClassPolicy::classSize(Bytes bytes)
{
    bytes = std::max<Bytes>(bytes, 1);
    if (bytes <= 2048)
        return detail::roundUpToMultiple(bytes, 512);
    // 2^g < bytes ≤ 2^(g+1): the four classes of this doubling are 2^g + j·2^(g−2), j = 1..4.
    unsigned g = unsigned(std::bit_width(bytes - 1)) - 1;
    return detail::roundUpToMultiple(bytes, Bytes(1) << (g - 2));
}

Bytes SizeClassPolicy::slabSize(Bytes classBytes) { return detail::roundUpToMultiple(classBytes * kRegionsPerSlab, kSlabUnit); }

SizeClassPolicy::SizeClassPolicy(SimulatedDevice& device, SizeClassConfig config)
    : AllocatorPolicy(device)
    , m_config(std::move(config))
    , m_heap(device, detail::FreeListConfig {})
{
    for (const auto& [size, count] : m_config.reserve) {
        Bytes c = classSize(size);
        if (!newSlab(c, kReserveStream, c * count, true))
            throw UsageError("size-class option reserve: " + std::to_string(count) + " blocks of " + formatBytes(c)
                + " do not fit on the device (capacity " + formatBytes(device.capacity())
                + "); reserve fewer or raise --capacity");
    }
    syncReserved();
}

std::string SizeClassPolicy::name() const
{
    std::string options;
    if (m_config.maxSmall != (Bytes(1) << 20))
        options = "max_small:" + std::to_string(m_config.maxSmall);
    if (!m_config.reserve.empty()) {
        std::string list;
        for (const auto& [size, count] : m_config.reserve)
            list += (list.empty() ? "" : ",") + std::to_string(classSize(size)) + ":" + std::to_string(count);
        options += (options.empty() ? "" : ",") + std::string("reserve:[") + list + "]";
    }
    return options.empty() ? "size-class" : "size-class:" + options;
}

void SizeClassPolicy::syncReserved() { m_stats.reserved = device().counters().reserved; }

SizeClassPolicy::Slab* SizeClassPolicy::newSlab(Bytes classBytes, StreamKey stream, Bytes size, bool reserved)
{
    auto ptr = device().malloc(size, stream == kReserveStream ? 0 : stream);
    if (!ptr)
        return nullptr;
    Slab& s = m_slabs[*ptr];
    s.base = *ptr;
    s.size = size;
    s.region = classBytes;
    s.stream = stream;
    s.regions = std::uint32_t(size / classBytes);
    s.reserved = reserved;
    s.freeBits.assign((s.regions + 63) / 64, ~std::uint64_t(0));
    if (s.regions % 64 != 0)
        s.freeBits.back() = (std::uint64_t(1) << (s.regions % 64)) - 1;
    s.requested.assign(s.regions, 0);
    m_partial[{ stream, classBytes }].insert(s.base);
    return &s;
}

std::optional<Address> SizeClassPolicy::takeRegion(const ClassKey& key)
{
    auto p = m_partial.find(key);
    if (p == m_partial.end() || p->second.empty())
        return std::nullopt;
    Slab& s = m_slabs.at(*p->second.begin());
    std::size_t word = 0;
    while (s.freeBits[word] == 0)
        ++word;
    unsigned bit = unsigned(std::countr_zero(s.freeBits[word]));
    s.freeBits[word] &= ~(std::uint64_t(1) << bit);
    if (++s.used == s.regions)
        p->second.erase(p->second.begin());
    Address a = s.base + (word * 64 + bit) * s.region;
    m_live.insert(a, Live { s.base });
    return a;
}

std::optional<Address> SizeClassPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes c = classSize(bytes);
    std::optional<Address> a;
    if (!m_config.reserve.empty())
        a = takeRegion({ kReserveStream, c });
    if (!a && c <= m_config.maxSmall) {
        a = takeRegion({ stream, c });
        if (!a) {
            bool grown = newSlab(c, stream, slabSize(c), false) != nullptr;
            if (!grown) {
                ++m_stats.allocRetries; // give the heap's free top back and try once more
                m_heap.release();
                grown = newSlab(c, stream, slabSize(c), false) != nullptr;
            }
            if (grown)
                a = takeRegion({ stream, c });
        }
        if (!a) {
            syncReserved();
            ++m_stats.ooms;
            device().reportOom(c, stream);
            return std::nullopt;
        }
    }
    if (a) {
        Slab& s = m_slabs.at(m_live.find(*a)->slab);
        s.requested[(*a - s.base) / s.region] = bytes;
        m_stats.allocated += c;
        m_stats.requested += bytes;
        syncReserved();
        return a;
    }
    return m_heap.allocateFor(bytes, stream, m_stats);
}

void SizeClassPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    const Live* live = m_live.find(address);
    if (!live) {
        m_heap.freeFor(address, m_stats);
        return;
    }
    auto it = m_slabs.find(live->slab);
    Slab& s = it->second;
    m_live.erase(address);
    std::size_t i = (address - s.base) / s.region;
    s.freeBits[i / 64] |= std::uint64_t(1) << (i % 64);
    m_stats.allocated -= s.region;
    m_stats.requested -= std::exchange(s.requested[i], 0);
    ClassKey key { s.stream, s.region };
    if (s.used-- == s.regions)
        m_partial[key].insert(s.base);
    if (s.used == 0 && !s.reserved) {
        // An empty slab goes back to the device at once.
        m_partial[key].erase(s.base);
        device().free(s.base, s.stream);
        m_slabs.erase(it);
        syncReserved();
    }
}

void SizeClassPolicy::doReleaseCached()
{
    m_heap.release();
    syncReserved();
}

PolicyState SizeClassPolicy::describeState() const
{
    PolicyState state;
    for (const auto& [base, s] : m_slabs) {
        SegmentInfo seg { base, s.size, s.stream == kReserveStream ? 0 : s.stream, true, false, {} };
        for (std::uint32_t i = 0; i < s.regions; ++i) {
            bool isFree = (s.freeBits[i / 64] >> (i % 64)) & 1;
            seg.blocks.push_back(BlockInfo {
                base + i * s.region, s.region, s.requested[i], isFree ? BlockState::Free : BlockState::Allocated });
        }
        Bytes used = Bytes(s.regions) * s.region;
        if (used < s.size) // the slab's tail that no region fits in
            seg.blocks.push_back(BlockInfo { base + used, s.size - used, 0, BlockState::Free });
        state.segments.push_back(std::move(seg));
    }
    m_heap.describe(state);
    std::sort(state.segments.begin(), state.segments.end(),
        [](const auto& x, const auto& y) { return x.address < y.address; });
    return state;
}

FragmentationSample SizeClassPolicy::fragmentation() const
{
    FragmentationSample f;
    f.reserved = m_stats.reserved;
    f.allocated = m_stats.allocated;
    for (const auto& [base, s] : m_slabs) {
        Bytes tail = s.size - Bytes(s.regions) * s.region;
        Bytes freeBytes = Bytes(s.regions - s.used) * s.region + tail;
        f.freeBytes += freeBytes;
        f.largestFree = std::max(f.largestFree, std::max(s.used < s.regions ? s.region : 0, tail));
        if (s.used > 0)
            f.inactiveSplit += freeBytes;
    }
    m_heap.addFree(f);
    return f;
}

} // namespace gpumem::replay
