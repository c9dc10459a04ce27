#include "gui/models/memory_map_model.h"

#include "analyze/trace_summary.h"
#include "core/units.h"
#include "gui/models/byte_text.h"
#include "gui/models/latest_request.h"
#include "gui/models/palette.h"


#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <unordered_map>

namespace gpumem::gui {

namespace {
    constexpr int kModuleSlots = 10; // + 1 shared "other scopes" slot

    const QColor kOther(120, 120, 120);
    const QColor kAllocated(52, 110, 200);
    const QColor kPending(240, 150, 40);
    const QColor kSegmentFree(222, 226, 232);
    const QColor kBackground(255, 255, 255);

    // The palette's colours (palette.h), fixed per category.
    QColor categoryColour(Category c)
    {
        switch (c) {
        case Category::Parameter: return paletteColour(4);
        case Category::Gradient: return paletteColour(2);
        case Category::Activation: return paletteColour(0);
        case Category::OptimizerState: return paletteColour(1);
        case Category::Input: return paletteColour(5);
        case Category::Temporary: return paletteColour(6);
        case Category::AutogradDetail: return paletteColour(3);
        case Category::Unknown: break;
        }
        return QColor(150, 150, 150);
    }

    QString scopePath(const Trace& trace, ScopeId scope)
    {
        QStringList parts;
        const auto scopes = trace.scopes();
        for (int guard = 0; scope != 0 && scope < scopes.size() && guard < 256; ++guard) {
            parts.prepend(QString::fromUtf8(trace.str(scopes[scope].name)));
            scope = scopes[scope].parent;
        }
        return parts.isEmpty() ? QString("(no scope)") : parts.join(" › ");
    }

    // The innermost nn.Module scope holding `scope` (scope itself if none is a module): ops such as
    // aten::bmm repeat in every layer, so colouring by them would say little.
    ScopeId moduleScopeOf(const Trace& trace, ScopeId scope)
    {
        const auto scopes = trace.scopes();
        for (ScopeId s = scope; s != 0 && s < scopes.size(); s = scopes[s].parent)
            if (scopes[s].kind == ScopeKind::Module)
                return s;
        return scope;
    }

    // The last two parts of a scope path ("Owlv2EncoderLayer_1 › Owlv2Attention_1").
    QString shortScopePath(const Trace& trace, ScopeId scope)
    {
        const QStringList parts = scopePath(trace, scope).split(" › ");
        return parts.size() <= 2 ? parts.join(" › ") : "… › " + parts.mid(parts.size() - 2).join(" › ");
    }
} // namespace

QString toString(MapColouring colouring)
{
    switch (colouring) {
    case MapColouring::State: return "state";
    case MapColouring::Module: return "module";
    case MapColouring::Category: return "category";
    }
    return {};
}

std::optional<Bytes> MemoryMapIndex::offsetOf(Address address) const
{
    auto it = std::upper_bound(ranges.begin(), ranges.end(), address, [](Address a, const AddressRange& r) { return a < r.begin; });
    if (it == ranges.begin())
        return std::nullopt;
    --it;
    if (address >= it->end)
        return std::nullopt;
    return it->offset + (address - it->begin);
}

std::vector<LegendEntry> MemoryMapIndex::legend(MapColouring colouring) const
{
    switch (colouring) {
    case MapColouring::State: {
        std::vector<LegendEntry> l { { kAllocated, "allocated" }, { kPending, "freed, pending (free_completed later)" } };
        if (hasSegments)
            l.push_back({ kSegmentFree, "free inside a segment" });
        else
            l.push_back({ kBackground, "no block (the trace has no segment events)" });
        return l;
    }
    case MapColouring::Module:
        return moduleLegend;
    case MapColouring::Category: {
        std::vector<LegendEntry> l;
        for (int c = 1; c <= kCategoryCount; ++c) {
            auto cat = static_cast<Category>(c % kCategoryCount); // Unknown last
            l.push_back({ categoryColour(cat), QString::fromUtf8(gpumem::toString(cat)) });
        }
        return l;
    }
    }
    return {};
}

MemoryMapIndex buildMemoryMapIndex(const Trace& trace, DeviceId device, std::span<const Category> categories)
{
    MemoryMapIndex index;
    index.device = device;
    const auto& mem = trace.memory();
    const auto allocations = trace.allocations();
    index.blockOfAllocation.assign(allocations.size(), -1);
    if (device < trace.devices().size()) {
        const Device& d = trace.devices()[device];
        index.deviceLabel = QString::fromStdString(analyze::deviceLabel(d)); // "hip:7", as the other pages say
    }
    if (const QString countersOnly = countersOnlyText(trace,
            ", so no block can be placed on an address axis. The Timeline page draws the recorded counters.");
        !countersOnly.isEmpty()) {
        index.emptyReason = countersOnly;
    } else if (trace.stats().find("synthetic_addresses")) {
        index.emptyReason = "This trace has no addresses (a PyTorch memory-timeline export lists sizes and categories only; "
                            "gpumem invented addresses to pair its events), so there is no memory map to draw. "
                            "The Timeline and Peak breakdown pages still work.";
    }
    if (index.empty())
        return index;

    TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
    for (std::size_t i = 0; i < mem.count(); ++i) {
        if (mem.device[i] != device)
            continue;
        first = std::min(first, mem.time[i]);
        last = std::max(last, mem.time[i]);
    }
    if (first > last) {
        index.emptyReason = "This device has no memory events.";
        return index;
    }
    index.time = { first, last + 1 };

    // Segments: pair segment_alloc/segment_map with segment_free/segment_unmap by address.
    std::map<Address, std::size_t> open;
    for (std::size_t i = 0; i < mem.count(); ++i) {
        if (mem.device[i] != device || !isSegmentLevel(mem.kind[i]))
            continue;
        const EventKind k = mem.kind[i];
        if (k == EventKind::SegmentAlloc || k == EventKind::SegmentMap) {
            MemoryMapSegment s;
            s.address = mem.address[i];
            s.size = mem.size[i];
            s.start = mem.time[i];
            open[s.address] = index.segments.size();
            index.segments.push_back(s);
        } else if (k == EventKind::SegmentFree || k == EventKind::SegmentUnmap) {
            // The segment starting at the address, else the one containing it (a partial unmap of an
            // expandable segment closes the whole mapped range here: the map draws it unmapped).
            auto it = open.upper_bound(mem.address[i]);
            if (it == open.begin())
                continue;
            --it;
            MemoryMapSegment& s = index.segments[it->second];
            if (mem.address[i] >= s.address + s.size)
                continue;
            s.end = mem.time[i];
            open.erase(it);
        }
    }
    index.hasSegments = !index.segments.empty();

    // Blocks.
    for (std::size_t a = 0; a < allocations.size(); ++a) {
        const Allocation& al = allocations[a];
        const std::uint64_t ev = al.allocEvent != kNoIndex ? al.allocEvent : al.freeEvent;
        if (ev == kNoIndex || mem.device[ev] != device || mem.size[ev] == 0)
            continue;
        MemoryMapBlock b;
        b.address = mem.address[ev];
        b.size = mem.size[ev];
        b.requested = mem.requestedSize[ev];
        b.allocatedBeforeWindow = al.allocEvent == kNoIndex;
        b.allocTime = b.allocatedBeforeWindow ? index.time.start : mem.time[ev];
        if (al.freeEvent != kNoIndex)
            b.freeTime = mem.time[al.freeEvent];
        b.freeCompletedTime = al.freeCompletedEvent != kNoIndex ? mem.time[al.freeCompletedEvent] : b.freeTime;
        b.allocation = static_cast<std::uint32_t>(a);
        index.blocks.push_back(b);
    }
    std::sort(index.blocks.begin(), index.blocks.end(), [](const MemoryMapBlock& x, const MemoryMapBlock& y) {
        return x.allocTime != y.allocTime ? x.allocTime < y.allocTime : x.address < y.address;
    });
    std::sort(index.segments.begin(), index.segments.end(), [](const MemoryMapSegment& x, const MemoryMapSegment& y) {
        return x.start != y.start ? x.start < y.start : x.address < y.address;
    });

    // The packed axis: the union of all address ranges, laid end to end.
    std::vector<std::pair<Address, Address>> spans;
    spans.reserve(index.segments.size() + index.blocks.size());
    for (const auto& s : index.segments)
        spans.emplace_back(s.address, s.address + s.size);
    for (const auto& b : index.blocks)
        spans.emplace_back(b.address, b.address + b.size);
    std::sort(spans.begin(), spans.end());
    for (const auto& [begin, end] : spans) {
        if (!index.ranges.empty() && begin <= index.ranges.back().end)
            index.ranges.back().end = std::max(index.ranges.back().end, end);
        else
            index.ranges.push_back({ begin, end, 0 });
    }
    for (auto& r : index.ranges) {
        r.offset = index.axisBytes;
        index.axisBytes += r.end - r.begin;
    }
    for (auto& s : index.segments)
        s.offset = *index.offsetOf(s.address);

    // Offsets and colour slots.
    std::unordered_map<ScopeId, Bytes> scopeBytes;
    for (std::size_t i = 0; i < index.blocks.size(); ++i) {
        auto& b = index.blocks[i];
        b.offset = *index.offsetOf(b.address);
        index.blockOfAllocation[b.allocation] = static_cast<std::int32_t>(i);
        const Allocation& al = allocations[b.allocation];
        const std::uint64_t ev = al.allocEvent != kNoIndex ? al.allocEvent : al.freeEvent;
        scopeBytes[moduleScopeOf(trace, mem.scope[ev])] += b.size;
    }
    std::vector<std::pair<Bytes, ScopeId>> ranked;
    for (const auto& [scope, bytes] : scopeBytes)
        ranked.emplace_back(bytes, scope);
    std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
    std::unordered_map<ScopeId, std::uint8_t> slotOf;
    for (std::size_t r = 0; r < ranked.size() && r < kModuleSlots; ++r) {
        slotOf[ranked[r].second] = static_cast<std::uint8_t>(r);
        index.moduleLegend.push_back({ paletteColour(r), shortScopePath(trace, ranked[r].second) });
    }
    if (ranked.size() > kModuleSlots)
        index.moduleLegend.push_back({ kOther, QString("%1 other modules").arg(ranked.size() - kModuleSlots) });
    index.moduleSlot.resize(index.blocks.size());
    index.categorySlot.resize(index.blocks.size());
    for (std::size_t i = 0; i < index.blocks.size(); ++i) {
        const Allocation& al = allocations[index.blocks[i].allocation];
        const std::uint64_t ev = al.allocEvent != kNoIndex ? al.allocEvent : al.freeEvent;
        auto it = slotOf.find(moduleScopeOf(trace, mem.scope[ev]));
        index.moduleSlot[i] = it != slotOf.end() ? it->second : kModuleSlots;
        const Category c = index.blocks[i].allocation < categories.size() ? categories[index.blocks[i].allocation] : Category::Unknown;
        index.categorySlot[i] = static_cast<std::uint8_t>(c);
    }
    if (index.blocks.empty() && index.segments.empty())
        index.emptyReason = "This device has no blocks with addresses.";
    return index;
}

MemoryMapState memoryMapStateAt(const MemoryMapIndex& index, TimeNs t)
{
    MemoryMapState state;
    state.time = t;
    struct Live {
        Bytes offset, size;
    };
    std::vector<Live> live;
    for (const auto& b : index.blocks) {
        if (b.allocTime > t)
            break;
        if (b.allocatedAt(t)) {
            const std::size_t i = std::size_t(&b - index.blocks.data());
            // Prefer blocks allocated inside the window (their alloc and stack were recorded).
            auto rank = [&](const MemoryMapBlock& x) { return std::make_pair(x.allocTime > index.time.start, x.size); };
            if (!state.largestBlock || rank(b) > rank(index.blocks[*state.largestBlock]))
                state.largestBlock = i;
            live.push_back({ b.offset, b.size });
            state.allocated += b.size;
            ++state.blocks;
        }
    }
    std::sort(live.begin(), live.end(), [](const Live& x, const Live& y) { return x.offset < y.offset; });
    // Containers: segments live at t, or the packed ranges that hold a live block.
    std::vector<SegmentRow> rows;
    std::vector<Bytes> rowOffset;
    if (index.hasSegments) {
        std::vector<const MemoryMapSegment*> segs;
        for (const auto& s : index.segments)
            if (s.liveAt(t))
                segs.push_back(&s);
        std::sort(segs.begin(), segs.end(), [](auto* x, auto* y) { return x->offset < y->offset; });
        for (auto* s : segs) {
            rows.push_back({ s->address, s->size, 0, 0, 0 });
            rowOffset.push_back(s->offset);
        }
    } else {
        for (const auto& r : index.ranges) {
            rows.push_back({ r.begin, r.end - r.begin, 0, 0, 0 });
            rowOffset.push_back(r.offset);
        }
    }
    std::size_t k = 0;
    std::vector<Bytes> cursor(rows.size());
    for (std::size_t r = 0; r < rows.size(); ++r)
        cursor[r] = rowOffset[r];
    for (const auto& l : live) {
        while (k < rows.size() && rowOffset[k] + rows[k].size <= l.offset)
            ++k;
        if (k == rows.size())
            break;
        if (l.offset < rowOffset[k])
            continue; // a block outside every live segment (an inconsistent trace)
        SegmentRow& row = rows[k];
        row.allocated += l.size;
        ++row.blocks;
        row.largestFree = std::max(row.largestFree, l.offset > cursor[k] ? l.offset - cursor[k] : Bytes(0));
        cursor[k] = std::max(cursor[k], l.offset + l.size);
    }
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const Bytes end = rowOffset[r] + rows[r].size;
        rows[r].largestFree = std::max(rows[r].largestFree, end > cursor[r] ? end - cursor[r] : Bytes(0));
        if (index.hasSegments || rows[r].blocks > 0)
            state.segments.push_back(rows[r]);
    }
    return state;
}

std::optional<std::size_t> blockAt(const MemoryMapIndex& index, TimeNs t, Bytes offset, TimeNs nsTolerance, Bytes bytesTolerance)
{
    std::optional<std::size_t> best;
    const TimeNs latest = t > std::numeric_limits<TimeNs>::max() - nsTolerance ? t : t + nsTolerance;
    for (std::size_t i = 0; i < index.blocks.size(); ++i) {
        const auto& b = index.blocks[i];
        if (b.allocTime > latest)
            break;
        if (b.freeCompletedTime != kNeverFreed && b.freeCompletedTime + nsTolerance < t)
            continue;
        const Bytes lo = b.offset > bytesTolerance ? b.offset - bytesTolerance : 0;
        if (offset < lo || offset >= b.offset + b.size + bytesTolerance)
            continue;
        // Exact hits beat tolerance hits; among equals the smallest block (it is the hardest to click).
        auto exact = [&](const MemoryMapBlock& x) {
            return x.allocTime <= t && t < x.freeCompletedTime && x.offset <= offset && offset < x.offset + x.size;
        };
        if (!best || std::make_pair(!exact(b), b.size) < std::make_pair(!exact(index.blocks[*best]), index.blocks[*best].size))
            best = i;
    }
    return best;
}

QString describeBlock(const LoadedTrace& loaded, const MemoryMapIndex& index, std::size_t block)
{
    const Trace& trace = loaded.trace;
    const MemoryMapBlock& b = index.blocks.at(block);
    const auto& mem = trace.memory();
    const Allocation& al = trace.allocations()[b.allocation];
    const std::uint64_t ev = al.allocEvent != kNoIndex ? al.allocEvent : al.freeEvent;
    const TimeNs origin = loaded.analysis.origin;
    auto at = [&](TimeNs t) { return "+" + QString::fromStdString(formatSeconds(t - origin)); };
    QStringList lines;
    lines << QString("Block at 0x%1 (%2)").arg(b.address, 0, 16).arg(index.deviceLabel);
    lines << QString("size: %1 (%2 B)").arg(bytesText(b.size)).arg(b.size);
    lines << QString("requested: %1").arg(b.requested ? QString("%1 (%2 B)").arg(bytesText(b.requested)).arg(b.requested) : QString("unknown"));
    // Snapshot importers place blocks live before the recorded window at its start (one ns before the
    // first entry; importers/snapshot_importer.h), so say so rather than show a false alloc time.
    const bool rebuilt = !b.allocatedBeforeWindow && b.allocTime == index.time.start && trace.metadata().contains("reconstruction");
    lines << QString("allocated: %1").arg(b.allocatedBeforeWindow ? QString("before the trace window")
            : rebuilt ? at(b.allocTime) + " (the window start: allocated before the recording began, rebuilt from the snapshot's end state)"
                      : at(b.allocTime));
    lines << QString("freed: %1").arg(b.freeTime == kNeverFreed ? QString("never (live at the trace end)") : at(b.freeTime));
    if (b.freeCompletedTime != b.freeTime && b.freeCompletedTime != kNeverFreed)
        lines << QString("free completed: %1").arg(at(b.freeCompletedTime));
    if (b.freeTime != kNeverFreed && !b.allocatedBeforeWindow && !rebuilt)
        lines << QString("lifetime: %1").arg(QString::fromStdString(formatSeconds(b.freeTime - b.allocTime)));
    const StreamId stream = mem.stream[ev];
    if (stream < trace.streams().size())
        lines << QString("stream: %1").arg(trace.streams()[stream].handle);
    lines << QString("module: %1").arg(scopePath(trace, mem.scope[ev]));
    const Category c = b.allocation < loaded.analysis.categories.size() ? loaded.analysis.categories[b.allocation] : mem.category[ev];
    lines << QString("category: %1%2").arg(QString::fromUtf8(gpumem::toString(c)), loaded.analysis.categoriesRecorded ? "" : " (inferred)");
    const auto frames = trace.siteFrames(mem.site[ev]);
    if (frames.empty()) {
        lines << "stack: not recorded";
    } else {
        // A rebuilt block has the stack of its later free only where the importer inferred it from that
        // free (the two events share the site); one the snapshot's `segments` list carries its alloc's
        // stack, and one never freed cannot have a free's (issue 16 item 4).
        const auto allocs = trace.allocations();
        const std::uint64_t freeEvent = b.allocation < allocs.size() ? allocs[b.allocation].freeEvent : kNoIndex;
        const bool fromFree = rebuilt && freeEvent != kNoIndex && mem.site[freeEvent] == mem.site[ev];
        lines << QString(fromFree ? "stack of its free (%1 frames, innermost first; the alloc was not recorded):"
                : rebuilt         ? "stack of its alloc (%1 frames, innermost first; from the snapshot's segments):"
                                  : "stack of its alloc (%1 frames, innermost first):")
                     .arg(frames.size());
        for (FrameId f : frames) {
            const Frame& fr = trace.frames()[f];
            QString where = QString::fromUtf8(trace.str(fr.file));
            if (fr.line)
                where += ":" + QString::number(fr.line);
            lines << QString("  %1  %2").arg(QString::fromUtf8(trace.str(fr.name)), where);
        }
    }
    return lines.join('\n');
}

MemoryMapFrame rasterizeMemoryMap(const MemoryMapIndex& index, TimeRange range, QSize size, MapColouring colouring,
    std::optional<TimeNs> instant, OffsetWindow window)
{
    MemoryMapFrame frame;
    frame.range = range;
    frame.window = window;
    frame.size = size.expandedTo(QSize(1, 1));
    frame.colouring = colouring;
    frame.instant = instant;
    const int w = frame.size.width(), h = frame.size.height();
    frame.overTime = QImage(w, h, QImage::Format_RGB32);
    frame.overTime.fill(kBackground);
    if (index.empty() || index.axisBytes == 0 || range.length() <= 0)
        return frame;
    const double nsPerPx = double(range.length()) / w;
    const OffsetWindow shown = window.resolved(index.axisBytes);
    const double bytesPerPx = double(shown.length()) / h;
    auto* bits = reinterpret_cast<QRgb*>(frame.overTime.bits());
    const qsizetype stride = frame.overTime.bytesPerLine() / 4;
    auto xOf = [&](TimeNs t, bool up) {
        const double x = (double(std::clamp(t, range.start, range.end)) - double(range.start)) / nsPerPx;
        return std::clamp(int(up ? std::ceil(x) : std::floor(x)), 0, w);
    };
    auto yOf = [&](Bytes offset, bool up) {
        const double y = (double(offset) - double(shown.lo)) / bytesPerPx;
        return int(std::clamp(up ? std::ceil(y) : std::floor(y), 0.0, double(h)));
    };
    // Fills a block's pixels; blocks 3 or more pixels tall (wide) get a darker top (left) edge so
    // that neighbours stay apart, as memory_viz outlines them.
    auto fill = [&](int x0, int x1, Bytes offset, Bytes bytes, QRgb rgb) {
        if (offset >= shown.hi || offset + bytes <= shown.lo)
            return;
        if (x1 <= x0)
            x1 = std::min(x0 + 1, w), x0 = x1 - 1;
        int y0 = yOf(offset, false), y1 = yOf(offset + bytes, true);
        if (y1 <= y0)
            y1 = std::min(y0 + 1, h), y0 = y1 - 1;
        const QRgb edge = qRgb(qRed(rgb) * 3 / 4, qGreen(rgb) * 3 / 4, qBlue(rgb) * 3 / 4);
        for (int y = y0; y < y1; ++y) {
            QRgb* row = bits + qsizetype(h - 1 - y) * stride; // offset 0 at the bottom
            if (y1 - y0 >= 3 && y == y1 - 1) {
                std::fill(row + x0, row + x1, edge);
                continue;
            }
            std::fill(row + x0, row + x1, rgb);
            if (x1 - x0 >= 3)
                row[x0] = edge;
        }
    };
    const QRgb segRgb = kSegmentFree.rgb();
    for (const auto& s : index.segments) {
        if (s.start >= range.end || s.end <= range.start)
            continue;
        fill(xOf(s.start, false), xOf(s.end == kNeverFreed ? range.end : s.end, true), s.offset, s.size, segRgb);
    }
    const QRgb pendingRgb = kPending.rgb();
    // Colour lookups per palette slot, so the per-block loop makes no QColor.
    std::array<QRgb, 256> slotRgb {};
    for (std::size_t k = 0; k < slotRgb.size(); ++k)
        slotRgb[k] = colouring == MapColouring::Category ? categoryColour(static_cast<Category>(k % kCategoryCount)).rgb()
            : k < kModuleSlots                            ? paletteColour(k).rgb()
                                                          : kOther.rgb();
    const std::vector<std::uint8_t>* slotOfBlock = colouring == MapColouring::Category ? &index.categorySlot : &index.moduleSlot;
    const QRgb allocatedRgb = kAllocated.rgb();
    auto rgbOf = [&](std::size_t i) { return colouring == MapColouring::State ? allocatedRgb : slotRgb[(*slotOfBlock)[i]]; };
    for (std::size_t i = 0; i < index.blocks.size(); ++i) {
        const auto& b = index.blocks[i];
        if (b.allocTime >= range.end)
            break;
        const TimeNs free = b.freeTime == kNeverFreed ? range.end : b.freeTime;
        const TimeNs freeCompleted = b.freeCompletedTime == kNeverFreed ? range.end : b.freeCompletedTime;
        if (freeCompleted <= range.start)
            continue;
        if (free > range.start)
            fill(xOf(b.allocTime, false), xOf(free, true), b.offset, b.size, rgbOf(i));
        if (colouring == MapColouring::State && freeCompleted > free && freeCompleted > range.start)
            fill(xOf(free, false), xOf(freeCompleted, true), b.offset, b.size, pendingRgb);
    }
    if (instant) {
        frame.state = memoryMapStateAt(index, *instant);
        frame.atInstant = QImage(1, h, QImage::Format_RGB32);
        frame.atInstant.fill(kBackground);
        auto* col = reinterpret_cast<QRgb*>(frame.atInstant.bits());
        const qsizetype colStride = frame.atInstant.bytesPerLine() / 4;
        auto fillCol = [&](Bytes offset, Bytes bytes, QRgb rgb) {
            if (offset >= shown.hi || offset + bytes <= shown.lo)
                return;
            int y0 = yOf(offset, false), y1 = yOf(offset + bytes, true);
            if (y1 <= y0)
                y1 = std::min(y0 + 1, h), y0 = y1 - 1;
            for (int y = y0; y < y1; ++y)
                col[qsizetype(h - 1 - y) * colStride] = rgb;
        };
        for (const auto& s : index.segments)
            if (s.liveAt(*instant))
                fillCol(s.offset, s.size, segRgb);
        for (std::size_t i = 0; i < index.blocks.size(); ++i) {
            const auto& b = index.blocks[i];
            if (b.allocTime > *instant)
                break;
            if (b.allocatedAt(*instant))
                fillCol(b.offset, b.size, rgbOf(i));
            else if (colouring == MapColouring::State && b.pendingAt(*instant))
                fillCol(b.offset, b.size, pendingRgb);
        }
    }
    return frame;
}

MemoryMapModel::MemoryMapModel(QObject* parent)
    : QObject(parent)
{
}

void MemoryMapModel::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    ++*m_generation;
    m_trace = std::move(trace);
}

void MemoryMapModel::request(TimeRange range, QSize size, MapColouring colouring, std::optional<TimeNs> instant, OffsetWindow window)
{
    if (!m_trace || !m_trace->memoryMap)
        return;
    const std::uint64_t generation = ++*m_generation;
    auto trace = m_trace;
    runLatest(
        this, m_generation, generation,
        [=] {
            auto frame = std::make_shared<MemoryMapFrame>(rasterizeMemoryMap(*trace->memoryMap, range, size, colouring, instant, window));
            frame->generation = generation;
            return std::shared_ptr<const MemoryMapFrame>(std::move(frame));
        },
        [](MemoryMapModel* self, std::shared_ptr<const MemoryMapFrame> frame) { emit self->frameReady(std::move(frame)); });
}

void SegmentTableModel::setRows(std::vector<SegmentRow> rows, bool segments)
{
    beginResetModel();
    m_rows = std::move(rows);
    m_segments = segments;
    endResetModel();
}

void SegmentTableModel::setMarkedBlocks(std::vector<Address> addresses)
{
    beginResetModel();
    m_marked = std::move(addresses);
    endResetModel();
}

bool SegmentTableModel::marked(int row) const
{
    if (row < 0 || row >= int(m_rows.size()))
        return false;
    const SegmentRow& r = m_rows[std::size_t(row)];
    return std::any_of(m_marked.begin(), m_marked.end(), [&](Address a) { return a >= r.address && a - r.address < r.size; });
}

int SegmentTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int SegmentTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 5; }

QVariant SegmentTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= 5)
        return {};
    const SegmentRow& r = m_rows[std::size_t(index.row())];
    const Bytes values[] = { r.address, r.size, r.allocated, r.blocks, r.largestFree };
    const Bytes v = values[index.column()];
    if (role == Qt::UserRole)
        return QVariant::fromValue<qulonglong>(v);
    if (role == Qt::TextAlignmentRole)
        return QVariant::fromValue(Qt::Alignment(index.column() == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::BackgroundRole)
        return marked(index.row()) ? QVariant(QColor(245, 190, 245)) : QVariant();
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case 0: return QString("0x%1").arg(v, 0, 16);
    case 3: return QString::number(v);
    default: return bytesText(v);
    }
}

QVariant SegmentTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= 5)
        return {};
    const char* names[] = { m_segments ? "Segment" : "Address range", "Size", "Allocated", "Blocks", "Largest free" };
    return QString(names[section]);
}

} // namespace gpumem::gui
