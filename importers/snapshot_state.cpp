#include "importers/snapshot_state.h"

#include "core/detail/round_to_multiple.h"

#include <algorithm>
#include <utility>

namespace gpumem {

std::string_view toString(SnapshotBlockState state)
{
    switch (state) {
    case SnapshotBlockState::ActiveAllocated:
        return "active_allocated";
    case SnapshotBlockState::ActivePendingFree:
        return "active_pending_free";
    case SnapshotBlockState::Inactive:
        return "inactive";
    }
    return "invalid";
}

namespace {
    std::string range(Address a, Bytes size) { return "[" + std::to_string(a) + ", +" + std::to_string(size) + ")"; }
} // namespace

std::map<Address, SegmentBlockMap::Segment>::const_iterator SegmentBlockMap::containing(Address address) const
{
    if (m_last != m_segments.end() && address - m_last->first < m_last->second.size)
        return m_last;
    const std::uint64_t granule = address >> 21;
    CachedSegment& cached = m_cache[(granule ^ (granule >> 8) ^ (granule >> 16)) & (m_cache.size() - 1)];
    if (cached.generation == m_generation && address - cached.it->first < cached.it->second.size)
        return m_last = cached.it;
    auto it = m_segments.upper_bound(address);
    if (it == m_segments.begin())
        return m_segments.end();
    --it;
    if (address - it->first >= it->second.size)
        return m_segments.end();
    cached = CachedSegment { it, m_generation };
    m_last = it;
    return it;
}

SegmentBlockMap::Lookup SegmentBlockMap::lookup(Address address) const
{
    if (m_hint.version == m_version && m_hint.address == address)
        return m_hint.found;
    Lookup found { containing(address), {} };
    if (found.seg != m_segments.end())
        found.lower = found.seg->second.active.lower_bound(address);
    m_hint = Hint { address, found, m_version };
    return found;
}

std::map<Address, SegmentBlockMap::Segment>::iterator SegmentBlockMap::containing(Address address)
{
    auto it = std::as_const(*this).containing(address);
    return m_segments.erase(it, it); // the mutable iterator to the same element (erases nothing)
}

namespace detail {
    void* BlockNodePool::allocate(std::size_t bytes)
    {
        constexpr std::size_t kAlign = alignof(std::max_align_t);
        if (m_nodeBytes == 0)
            m_nodeBytes = roundUpToMultiple(std::max(bytes, sizeof(FreeNode)), kAlign);
        if (bytes > m_nodeBytes) // the decision depends on `bytes` only, so deallocate makes the same one
            return ::operator new(bytes);
        if (!m_free) {
            constexpr std::size_t kNodes = 64;
            std::byte* chunk = m_chunks.emplace_back(std::make_unique<std::byte[]>(kNodes * m_nodeBytes)).get();
            for (std::size_t i = kNodes; i-- > 0;)
                m_free = ::new (chunk + i * m_nodeBytes) FreeNode { m_free };
        }
        FreeNode* node = m_free;
        m_free = node->next;
        return node;
    }
    void BlockNodePool::deallocate(void* p, std::size_t bytes) noexcept
    {
        if (bytes > m_nodeBytes) {
            ::operator delete(p);
            return;
        }
        m_free = ::new (p) FreeNode { m_free };
    }
} // namespace detail

SegmentBlockMap::Segment SegmentBlockMap::newSegment(Bytes size, bool expandable)
{
    if (!m_pool)
        m_pool = std::make_unique<detail::BlockNodePool>();
    return Segment { size, expandable, ActiveBlocks(ActiveBlocks::allocator_type(m_pool.get())) };
}

void SegmentBlockMap::copySegments(const SegmentBlockMap& other)
{
    // Node by node into this map's own pool: a copy must not share a pool (or a cache) with the original.
    for (const auto& [start, seg] : other.m_segments) {
        Segment copy = newSegment(seg.size, seg.expandable);
        copy.active.insert(seg.active.begin(), seg.active.end());
        m_segments.emplace_hint(m_segments.end(), start, std::move(copy));
    }
}

SegmentBlockMap::SegmentBlockMap(const SegmentBlockMap& other) { copySegments(other); }
SegmentBlockMap& SegmentBlockMap::operator=(const SegmentBlockMap& other)
{
    if (this != &other) {
        m_segments.clear();
        copySegments(other);
    }
    forgetSegments();
    return *this;
}
SegmentBlockMap::SegmentBlockMap(SegmentBlockMap&& other) noexcept
    : m_pool(std::move(other.m_pool))
    , m_segments(std::move(other.m_segments))
{
    other.forgetSegments();
}
SegmentBlockMap& SegmentBlockMap::operator=(SegmentBlockMap&& other) noexcept
{
    if (this != &other) {
        m_segments = std::move(other.m_segments); // frees this map's nodes into its pool first
        m_pool = std::move(other.m_pool);
    }
    forgetSegments();
    other.forgetSegments();
    return *this;
}

std::string SegmentBlockMap::addSegment(Address address, Bytes size, bool expandable, std::string& detail)
{
    forgetSegments();
    if (size == 0) {
        detail = "segment " + range(address, size) + " has no bytes";
        return "empty_segment";
    }
    auto next = m_segments.lower_bound(address);
    bool overlap = next != m_segments.end() && next->first - address < size;
    if (next != m_segments.begin()) {
        auto prev = std::prev(next);
        overlap = overlap || address - prev->first < prev->second.size;
    }
    if (overlap) {
        detail = "segment " + range(address, size) + " overlaps a segment that is still mapped";
        return "segment_overlap";
    }
    Segment seg = newSegment(size, expandable);
    Address start = address;
    if (expandable) {
        // snapshot() reports one segment per contiguous mapped range of an expandable segment.
        if (next != m_segments.end() && next->second.expandable && next->first == address + size) {
            seg.size += next->second.size;
            seg.active.merge(next->second.active);
            m_segments.erase(next);
        }
        auto it = m_segments.lower_bound(address);
        if (it != m_segments.begin()) {
            auto prev = std::prev(it);
            if (prev->second.expandable && prev->first + prev->second.size == address) {
                start = prev->first;
                prev->second.size += seg.size;
                prev->second.active.merge(seg.active);
                return {};
            }
        }
    }
    m_segments.emplace(start, std::move(seg));
    return {};
}

std::string SegmentBlockMap::removeSegment(Address address, Bytes size, bool expandable, std::string& detail)
{
    forgetSegments();
    if (!expandable) {
        auto it = m_segments.find(address);
        if (it == m_segments.end() || it->second.expandable) {
            detail = "segment_free of " + range(address, size) + ", which is not a segment";
            return "segment_free_of_unknown_segment";
        }
        std::string code;
        if (!it->second.active.empty()) {
            detail = "segment_free of " + range(address, size) + " while " + std::to_string(it->second.active.size())
                + " of its blocks are active";
            code = "segment_free_with_live_blocks";
        } else if (it->second.size != size) {
            detail = "segment_free of " + range(address, size) + " but the segment has "
                + std::to_string(it->second.size) + " bytes";
            code = "segment_size_mismatch";
        }
        m_segments.erase(it);
        return code;
    }
    auto it = containing(address);
    if (it == m_segments.end() || !it->second.expandable || address + size > it->first + it->second.size) {
        detail = "segment_unmap of " + range(address, size) + ", which is not mapped";
        return "segment_unmap_of_unmapped_range";
    }
    Segment seg = std::move(it->second);
    const Address segStart = it->first;
    const Address segEnd = segStart + seg.size;
    m_segments.erase(it);
    forgetSegments();
    std::string code;
    Segment left = newSegment(address - segStart, true);
    Segment right = newSegment(segEnd - (address + size), true);
    for (auto& [a, block] : seg.active) {
        if (a + block.size <= address)
            left.active.emplace(a, block);
        else if (a >= address + size)
            right.active.emplace(a, block);
        else {
            detail = "segment_unmap of " + range(address, size) + " drops the active block at " + std::to_string(a);
            code = "segment_free_with_live_blocks";
        }
    }
    if (left.size > 0)
        m_segments.emplace(segStart, std::move(left));
    if (right.size > 0)
        m_segments.emplace(address + size, std::move(right));
    return code;
}

std::string SegmentBlockMap::allocate(Address address, Bytes size, Bytes requested, std::string& detail)
{
    const Lookup found = lookup(address);
    if (found.seg == m_segments.end() || address + size > found.seg->first + found.seg->second.size) {
        detail = "block " + range(address, size) + " is not inside a segment";
        return "alloc_outside_segment";
    }
    auto& active = m_segments.erase(found.seg, found.seg)->second.active; // the mutable segment
    ++m_version;
    std::string code;
    auto it = active.erase(found.lower, found.lower); // lower_bound(address), mutable
    if (it != active.begin() && std::prev(it)->first + std::prev(it)->second.size > address)
        --it;
    while (it != active.end() && it->first < address + size) {
        detail = "block " + range(address, size) + " overlaps the active block " + range(it->first, it->second.size);
        code = "alloc_overlaps_block";
        it = active.erase(it);
    }
    // `it` is the first block at or after address + size: where the new block goes.
    active.emplace_hint(it, address, SnapshotBlock { address, size, requested, SnapshotBlockState::ActiveAllocated });
    return code;
}

std::string SegmentBlockMap::freeRequested(Address address, std::string& detail)
{
    const Lookup found = lookup(address);
    if (found.seg != m_segments.end() && found.lower != found.seg->second.active.end()
        && found.lower->first == address && found.lower->second.state == SnapshotBlockState::ActiveAllocated) {
        auto& active = m_segments.erase(found.seg, found.seg)->second.active;
        active.erase(found.lower, found.lower)->second.state = SnapshotBlockState::ActivePendingFree;
        return {};
    }
    detail = "free_requested of address " + std::to_string(address) + ", which is not an allocated block";
    return "free_of_unknown_block";
}

std::string SegmentBlockMap::freeCompleted(Address address, std::string& detail)
{
    const Lookup found = lookup(address);
    if (found.seg != m_segments.end() && found.lower != found.seg->second.active.end()
        && found.lower->first == address) {
        m_segments.erase(found.seg, found.seg)->second.active.erase(found.lower);
        ++m_version;
        return {};
    }
    detail = "free_completed of address " + std::to_string(address) + ", which is not an active block";
    return "free_of_unknown_block";
}

std::optional<Bytes> SegmentBlockMap::freeBlockAt(Address address) const
{
    const auto [seg, next] = lookup(address);
    if (seg == m_segments.end())
        return std::nullopt;
    const auto& active = seg->second.active;
    if (next != active.end() && next->first == address)
        return std::nullopt; // an active block starts here
    if (next != active.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second.size != address)
            return std::nullopt; // inside a block, or in the middle of free space
    } else if (address != seg->first) {
        return std::nullopt;
    }
    Address end = next != active.end() ? next->first : seg->first + seg->second.size;
    return end - address;
}

std::optional<Bytes> SegmentBlockMap::slackAfter(Address address) const
{
    auto seg = containing(address);
    if (seg == m_segments.end())
        return std::nullopt;
    const auto& active = seg->second.active;
    auto it = active.find(address);
    if (it == active.end())
        return std::nullopt;
    auto next = std::next(it);
    Address end = next != active.end() ? next->first : seg->first + seg->second.size;
    return end - (address + it->second.size);
}

const SnapshotBlock* SegmentBlockMap::activeBlock(Address address) const
{
    const auto [seg, lower] = lookup(address);
    if (seg == m_segments.end() || lower == seg->second.active.end() || lower->first != address)
        return nullptr;
    return &lower->second;
}

bool SegmentBlockMap::inExpandable(Address address) const
{
    auto seg = containing(address);
    return seg != m_segments.end() && seg->second.expandable;
}

void SegmentBlockMap::growBlock(Address address, Bytes extra)
{
    auto seg = containing(address);
    if (seg == m_segments.end())
        return;
    auto it = seg->second.active.find(address);
    if (it != seg->second.active.end())
        it->second.size += extra;
}

std::size_t SegmentBlockMap::activeBlockCount() const
{
    std::size_t n = 0;
    for (const auto& [a, seg] : m_segments)
        n += seg.active.size();
    return n;
}

std::vector<SnapshotSegment> SegmentBlockMap::dump(std::int32_t device) const
{
    std::vector<SnapshotSegment> out;
    out.reserve(m_segments.size());
    for (const auto& [start, seg] : m_segments) {
        SnapshotSegment s;
        s.device = device;
        s.address = start;
        s.totalSize = seg.size;
        s.expandable = seg.expandable;
        Address cursor = start;
        for (const auto& [a, block] : seg.active) {
            if (a > cursor)
                s.blocks.push_back(SnapshotBlock { cursor, a - cursor, 0, SnapshotBlockState::Inactive });
            s.blocks.push_back(block);
            cursor = a + block.size;
        }
        if (cursor < start + seg.size)
            s.blocks.push_back(SnapshotBlock { cursor, start + seg.size - cursor, 0, SnapshotBlockState::Inactive });
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<SnapshotSegment> replaySnapshotState(const Trace& trace, DeviceId device, ImportStats* stats)
{
    SegmentBlockMap map;
    const auto& m = trace.memory();
    std::string detail;
    for (std::size_t i = 0; i < m.count(); ++i) {
        if (m.device[i] != device)
            continue;
        std::string code;
        switch (m.kind[i]) {
        case EventKind::SegmentAlloc:
            code = map.addSegment(m.address[i], m.size[i], false, detail);
            break;
        case EventKind::SegmentMap:
            code = map.addSegment(m.address[i], m.size[i], true, detail);
            break;
        case EventKind::SegmentFree:
            code = map.removeSegment(m.address[i], m.size[i], false, detail);
            break;
        case EventKind::SegmentUnmap:
            code = map.removeSegment(m.address[i], m.size[i], true, detail);
            break;
        case EventKind::Alloc:
            code = map.allocate(m.address[i], m.size[i], m.requestedSize[i], detail);
            break;
        case EventKind::Free:
            code = map.freeRequested(m.address[i], detail);
            break;
        case EventKind::FreeCompleted:
            code = map.freeCompleted(m.address[i], detail);
            break;
        default:
            break;
        }
        if (!code.empty() && stats)
            stats->add(code, Severity::Warning, "memory event " + std::to_string(i) + ": " + detail);
    }
    std::int32_t ordinal = device < trace.devices().size() ? trace.devices()[device].ordinal : 0;
    return map.dump(ordinal);
}

std::vector<std::string> compareSnapshotState(const std::vector<SnapshotSegment>& expected,
    const std::vector<SnapshotSegment>& actual, std::size_t maxDifferences)
{
    std::vector<std::string> diffs;
    std::size_t total = 0;
    auto note = [&](std::string line) {
        if (++total <= maxDifferences)
            diffs.push_back(std::move(line));
    };
    std::map<std::pair<std::int32_t, Address>, const SnapshotSegment*> byAddress;
    for (const auto& s : actual)
        byAddress[{ s.device, s.address }] = &s;
    for (const auto& e : expected) {
        auto it = byAddress.find({ e.device, e.address });
        if (it == byAddress.end()) {
            note("device " + std::to_string(e.device) + ": segment " + range(e.address, e.totalSize) + " is missing");
            continue;
        }
        const SnapshotSegment& a = *it->second;
        byAddress.erase(it);
        if (a.totalSize != e.totalSize) {
            note("segment at " + std::to_string(e.address) + ": " + std::to_string(a.totalSize) + " bytes, expected "
                + std::to_string(e.totalSize));
            continue;
        }
        std::size_t n = std::max(e.blocks.size(), a.blocks.size());
        for (std::size_t i = 0; i < n; ++i) {
            const SnapshotBlock* eb = i < e.blocks.size() ? &e.blocks[i] : nullptr;
            const SnapshotBlock* ab = i < a.blocks.size() ? &a.blocks[i] : nullptr;
            if (eb && ab && eb->address == ab->address && eb->size == ab->size && eb->state == ab->state)
                continue;
            auto show = [](const SnapshotBlock* b) {
                return b ? range(b->address, b->size) + " " + std::string(toString(b->state)) : std::string("nothing");
            };
            note("segment at " + std::to_string(e.address) + ", block " + std::to_string(i) + ": " + show(ab)
                + ", expected " + show(eb));
            break; // later blocks of this segment are shifted; one line per segment is enough
        }
    }
    for (const auto& [key, s] : byAddress)
        note("device " + std::to_string(key.first) + ": unexpected segment " + range(s->address, s->totalSize));
    if (total > maxDifferences)
        diffs.push_back("… " + std::to_string(total - maxDifferences) + " more differences");
    return diffs;
}

} // namespace gpumem
