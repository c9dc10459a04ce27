#include "core/importers/snapshot_state.h"

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

std::map<Address, SegmentBlockMap::Segment>::iterator SegmentBlockMap::containing(Address address)
{
    auto it = std::as_const(*this).containing(address);
    return m_segments.erase(it, it); // the mutable iterator to the same element (erases nothing)
}

SegmentBlockMap::SegmentBlockMap(const SegmentBlockMap& other)
    : m_segments(other.m_segments)
{
}
SegmentBlockMap& SegmentBlockMap::operator=(const SegmentBlockMap& other)
{
    m_segments = other.m_segments;
    forgetSegments();
    return *this;
}
SegmentBlockMap::SegmentBlockMap(SegmentBlockMap&& other) noexcept
    : m_segments(std::move(other.m_segments))
{
    other.forgetSegments();
}
SegmentBlockMap& SegmentBlockMap::operator=(SegmentBlockMap&& other) noexcept
{
    m_segments = std::move(other.m_segments);
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
    Segment seg { size, expandable, {} };
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
    Segment left { address - segStart, true, {} };
    Segment right { segEnd - (address + size), true, {} };
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
    auto seg = containing(address);
    if (seg == m_segments.end() || address + size > seg->first + seg->second.size) {
        detail = "block " + range(address, size) + " is not inside a segment";
        return "alloc_outside_segment";
    }
    auto& active = seg->second.active;
    std::string code;
    auto it = active.lower_bound(address);
    if (it != active.begin() && std::prev(it)->first + std::prev(it)->second.size > address)
        --it;
    while (it != active.end() && it->first < address + size) {
        detail = "block " + range(address, size) + " overlaps the active block " + range(it->first, it->second.size);
        code = "alloc_overlaps_block";
        it = active.erase(it);
    }
    active.emplace(address, SnapshotBlock { address, size, requested, SnapshotBlockState::ActiveAllocated });
    return code;
}

std::string SegmentBlockMap::freeRequested(Address address, std::string& detail)
{
    auto seg = containing(address);
    if (seg != m_segments.end()) {
        auto it = seg->second.active.find(address);
        if (it != seg->second.active.end() && it->second.state == SnapshotBlockState::ActiveAllocated) {
            it->second.state = SnapshotBlockState::ActivePendingFree;
            return {};
        }
    }
    detail = "free_requested of address " + std::to_string(address) + ", which is not an allocated block";
    return "free_of_unknown_block";
}

std::string SegmentBlockMap::freeCompleted(Address address, std::string& detail)
{
    auto seg = containing(address);
    if (seg != m_segments.end()) {
        auto it = seg->second.active.find(address);
        if (it != seg->second.active.end()) {
            seg->second.active.erase(it);
            return {};
        }
    }
    detail = "free_completed of address " + std::to_string(address) + ", which is not an active block";
    return "free_of_unknown_block";
}

std::optional<Bytes> SegmentBlockMap::freeBlockAt(Address address) const
{
    auto seg = containing(address);
    if (seg == m_segments.end())
        return std::nullopt;
    const auto& active = seg->second.active;
    auto next = active.lower_bound(address);
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
    auto seg = containing(address);
    if (seg == m_segments.end())
        return nullptr;
    auto it = seg->second.active.find(address);
    return it == seg->second.active.end() ? nullptr : &it->second;
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
