#include "analyze/peak_breakdown.h"

#include "analyze/steps.h"
#include "analyze/trace_summary.h"
#include "core/byte_total.h"
#include "core/error.h"
#include "core/units.h"
#include "replay/replayer.h"
#include "replay/start_state.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

namespace gpumem::analyze {

std::string_view toString(GroupBy by)
{
    switch (by) {
    case GroupBy::Module: return "module";
    case GroupBy::Category: return "category";
    case GroupBy::Site: return "site";
    case GroupBy::SizeClass: return "size";
    case GroupBy::Stream: return "stream";
    }
    return "?";
}

std::optional<GroupBy> groupByFromString(std::string_view name)
{
    for (int i = 0; i < kGroupByCount; ++i)
        if (toString(static_cast<GroupBy>(i)) == name)
            return static_cast<GroupBy>(i);
    return std::nullopt;
}

InstantSpec InstantSpec::parse(std::string_view text, TimeNs traceStart)
{
    InstantSpec s;
    if (text == "peak")
        return s;
    if (text == "reserved-peak") {
        s.kind = Kind::PeakReserved;
        return s;
    }
    s.kind = Kind::Time;
    const std::string_view original = text;
    auto bad = [&]() {
        return UsageError("--at '" + std::string(original) + "' is not peak, reserved-peak, a time after the trace start "
                                                             "(1.5s, 250ms, 40us, 1200ns) or @<absolute ns>");
    };
    bool absolute = false;
    if (!text.empty() && text.front() == '@') {
        absolute = true;
        text.remove_prefix(1);
    } else if (!text.empty() && text.front() == '+')
        text.remove_prefix(1); // "+0.001937 s", as every verb prints a time from the trace start
    // Exact decimal arithmetic (a double has 53 bits: @1752829952237228068 came back as …8032):
    // [-]digits[.digits]unit, the fraction rounded half up to whole nanoseconds.
    __extension__ typedef __int128 Int128;
    bool negative = false;
    if (absolute && !text.empty() && text.front() == '-') {
        negative = true;
        text.remove_prefix(1);
    }
    std::size_t i = 0;
    Int128 whole = 0, fraction = 0, fractionScale = 1;
    const Int128 limit = Int128(1) << 80; // far beyond any int64 ns after scaling; stops runaway digits
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
        if ((whole = whole * 10 + (text[i] - '0')) > limit)
            throw bad();
    const std::size_t wholeDigits = i;
    std::size_t fractionDigits = 0;
    if (i < text.size() && text[i] == '.') {
        for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++fractionDigits)
            if (fractionDigits < 18) { // finer than 1e-18 of the unit never reaches a nanosecond
                fraction = fraction * 10 + (text[i] - '0');
                fractionScale *= 10;
            }
    }
    if (wholeDigits + fractionDigits == 0)
        throw bad();
    std::string_view unit = text.substr(i);
    if (unit.size() > 1 && unit.front() == ' ')
        unit.remove_prefix(1); // one blank before the unit, as printed: "+0.001937 s"
    const bool zero = whole == 0 && fraction == 0;
    Int128 scale = 0;
    if (unit == "ns" || (unit.empty() && (absolute || zero)))
        scale = 1; // a relative time needs its unit: "0.35" alone was read as 0.35 ns
    else if (!absolute && unit == "us")
        scale = 1000;
    else if (!absolute && unit == "ms")
        scale = 1000000;
    else if (!absolute && unit == "s")
        scale = 1000000000;
    if (scale == 0)
        throw bad();
    Int128 ns = whole * scale + (2 * fraction * scale + fractionScale) / (2 * fractionScale);
    if (negative)
        ns = -ns;
    if (!absolute)
        ns += traceStart;
    if (ns > std::numeric_limits<TimeNs>::max() || ns < std::numeric_limits<TimeNs>::min())
        throw UsageError("--at '" + std::string(original) + "' is beyond the trace clock (signed 64-bit nanoseconds)");
    s.time = static_cast<TimeNs>(ns);
    return s;
}

std::optional<Instant> resolveInstant(const DeviceTimeline& dev, const InstantSpec& spec)
{
    std::optional<std::size_t> point;
    std::string label;
    switch (spec.kind) {
    case InstantSpec::Kind::PeakAllocated:
        point = dev.peakPoint(SeriesKind::Allocated);
        label = "peak allocated";
        break;
    case InstantSpec::Kind::PeakReserved:
        point = dev.peakPoint(SeriesKind::Reserved);
        label = "peak reserved";
        // Events with the same timestamp are simultaneous: a segment_alloc and the blocks carved from it
        // (a snapshot's rebuilt pre-window state shares one nanosecond) belong to one instant, so look at
        // the state after the last of them while reserved stays at its peak.
        while (point && *point + 1 < dev.size() && dev.time[*point + 1] == dev.time[*point]
            && dev.reserved[*point + 1] == dev.reserved[*point])
            ++*point;
        break;
    case InstantSpec::Kind::Time:
        point = dev.pointAt(spec.time);
        label = "t=" + std::to_string(spec.time) + " ns";
        break;
    }
    if (!point)
        return std::nullopt;
    Instant i;
    i.label = label;
    i.device = dev.device;
    i.point = *point;
    i.eventIndex = dev.eventIndex[*point];
    // A --at time names the instant itself (the state after the last event at or before it), so the
    // label and the offset printed beside it are one time.
    i.time = spec.kind == InstantSpec::Kind::Time ? spec.time : dev.time[*point];
    i.allocated = dev.allocated[*point];
    i.active = dev.active[*point];
    if (dev.has(SeriesKind::Reserved))
        i.reserved = dev.reserved[*point];
    return i;
}

std::string sizeClassLabel(Bytes size)
{
    if (size == 0)
        return "0 B";
    const int k = std::bit_width(size) - 1;
    const Bytes lo = Bytes { 1 } << k;
    return "[" + formatBytes(lo) + ", " + (k >= 63 ? std::string("16.00 EiB") : formatBytes(lo << 1)) + ")";
}

namespace {
    GroupRow flatRow(std::string key, std::string label, Bytes bytes, std::uint64_t blocks)
    {
        GroupRow r;
        r.key = std::move(key);
        r.label = std::move(label);
        r.selfBytes = r.totalBytes = bytes;
        r.selfBlocks = r.totalBlocks = blocks;
        return r;
    }
    // Adds r's bytes and blocks to `into` (two rows that become one).
    void addInto(GroupRow& into, const GroupRow& r)
    {
        into.selfBytes = addSaturated(into.selfBytes, r.selfBytes);
        into.totalBytes = addSaturated(into.totalBytes, r.totalBytes);
        into.selfBlocks += r.selfBlocks;
        into.totalBlocks += r.totalBlocks;
    }
    void sortByBytes(std::vector<GroupRow>& rows)
    {
        std::sort(rows.begin(), rows.end(), [](const GroupRow& a, const GroupRow& b) {
            return a.totalBytes != b.totalBytes ? a.totalBytes > b.totalBytes : a.key < b.key;
        });
    }
    // Distinct stacks whose labels agree ("einsum (_backends.py:288)" nine times) get their callers
    // appended, one more frame at a time (up to kMaxCallers), " ← caller (file:line)"; stacks still
    // alike after that (they differ only in frames a label leaves out) become one row with the count.
    void disambiguateSiteLabels(const Trace& trace, std::vector<GroupRow>& rows, const std::vector<SiteId>& rowSite)
    {
        constexpr std::size_t kMaxCallers = 3;
        auto duplicated = [&] {
            std::map<std::string, std::size_t> count;
            for (const auto& r : rows)
                ++count[r.label];
            std::vector<bool> dup(rows.size());
            for (std::size_t i = 0; i < rows.size(); ++i)
                dup[i] = count[rows[i].label] > 1;
            return dup;
        };
        for (std::size_t callers = 1; callers <= kMaxCallers; ++callers) {
            const auto dup = duplicated();
            if (std::find(dup.begin(), dup.end(), true) == dup.end())
                return;
            for (std::size_t i = 0; i < rows.size(); ++i)
                if (dup[i] && rowSite[i] != 0)
                    if (auto longer = siteLabel(trace, rowSite[i], callers); !longer.empty())
                        rows[i].label = std::move(longer);
        }
        std::map<std::string, std::size_t> first; // label → row kept
        std::vector<GroupRow> merged;
        std::vector<std::size_t> stacks; // per merged row: how many rows it holds
        for (auto& r : rows) {
            auto [it, inserted] = first.emplace(r.label, merged.size());
            if (inserted) {
                merged.push_back(std::move(r));
                stacks.push_back(1);
                continue;
            }
            addInto(merged[it->second], r);
            ++stacks[it->second];
        }
        for (std::size_t i = 0; i < merged.size(); ++i)
            if (stacks[i] > 1) {
                auto& m = merged[i];
                m.key = m.label + " (" + std::to_string(stacks[i]) + " stacks)"; // diff matches merged rows by label
                m.label = m.key;
                m.site = 0;
            }
        rows = std::move(merged);
    }
} // namespace

Breakdown breakdownAt(const Trace& trace, const Instant& instant, std::span<const Category> categories, bool inferred)
{
    const auto& m = trace.memory();
    auto allocations = trace.allocations();
    const auto e = instant.eventIndex;
    std::vector<LiveBlock> live;
    if (e != kNoIndex) {
        // Blocks a snapshot importer rebuilt from before the window are the first initialStateEventCount
        // events of the device.
        const std::size_t firstWindow = replay::initialStateEventCount(trace, instant.device) > 0
            ? replay::firstWindowEvent(trace, instant.device)
            : 0;
        for (std::size_t i = 0; i < allocations.size(); ++i) {
            const auto& a = allocations[i];
            if (a.allocEvent == kNoIndex || a.allocEvent > e || m.device[a.allocEvent] != instant.device)
                continue;
            if (a.freeEvent != kNoIndex && a.freeEvent <= e)
                continue;
            const auto ev = a.allocEvent;
            LiveBlock b;
            b.allocation = i;
            b.size = m.size[ev];
            b.scope = m.scope[ev];
            b.site = m.site[ev];
            b.stream = m.stream[ev];
            b.category = i < categories.size() ? categories[i] : Category::Unknown;
            b.beforeWindow = ev < firstWindow;
            b.siteFromFree = a.freeEvent != kNoIndex && m.site[a.freeEvent] == m.site[ev] && m.site[ev] != 0;
            live.push_back(b);
        }
    }
    return breakdownOf(trace, instant, live, inferred);
}

Breakdown breakdownOf(const Trace& trace, const Instant& instant, std::span<const LiveBlock> live, bool inferred)
{
    Breakdown b;
    b.instant = instant;
    b.categoriesInferred = inferred;
    if (instant.eventIndex == kNoIndex)
        return b;

    const auto scopes = trace.scopes();
    std::vector<Bytes> scopeSelf(scopes.size(), 0), scopeTotal(scopes.size(), 0);
    std::vector<std::uint64_t> scopeSelfBlocks(scopes.size(), 0), scopeTotalBlocks(scopes.size(), 0);
    std::array<Bytes, kCategoryCount> catBytes {};
    std::array<std::uint64_t, kCategoryCount> catBlocks {};
    std::unordered_map<SiteId, std::pair<Bytes, std::uint64_t>> sites;
    std::array<std::pair<Bytes, std::uint64_t>, 65> sizes {};
    std::unordered_map<StreamId, std::pair<Bytes, std::uint64_t>> streams;
    // Blocks a snapshot importer rebuilt from before the window were not allocated at a stack the trace
    // shows: grouped by site as "allocated before the trace", with the stack the importer took from their
    // later free named as such (bcrafton: "step (optimizer.py:72)" was where 580 MiB were freed, not allocated).
    struct BeforeSite {
        SiteId site = 0;
        bool fromFree = false;
        bool operator==(const BeforeSite&) const = default;
    };
    std::vector<std::pair<BeforeSite, std::pair<Bytes, std::uint64_t>>> before;

    for (const auto& block : live) {
        const Bytes size = block.size;
        b.liveAllocations.push_back(block.allocation);
        // Sums saturate at kSaturatedBytes (core/byte_total.h): live blocks of a hostile trace can add up past 2^64.
        b.liveBytes = addSaturated(b.liveBytes, size);
        ++b.liveBlocks;
        ScopeId s = block.scope < scopes.size() ? block.scope : 0;
        scopeSelf[s] = addSaturated(scopeSelf[s], size);
        ++scopeSelfBlocks[s];
        for (std::size_t guard = 0; guard <= scopes.size(); ++guard) {
            scopeTotal[s] = addSaturated(scopeTotal[s], size);
            ++scopeTotalBlocks[s];
            if (s == 0)
                break;
            s = scopes[s].parent < scopes.size() ? scopes[s].parent : 0;
        }
        const auto c = static_cast<std::size_t>(block.category);
        catBytes[c] = addSaturated(catBytes[c], size);
        ++catBlocks[c];
        if (block.beforeWindow) {
            const BeforeSite key { block.site, block.siteFromFree };
            auto it = std::find_if(before.begin(), before.end(), [&](const auto& p) { return p.first == key; });
            if (it == before.end())
                it = before.insert(before.end(), { key, { 0, 0 } });
            it->second.first = addSaturated(it->second.first, size);
            ++it->second.second;
        } else {
            auto& st = sites[block.site];
            st.first = addSaturated(st.first, size);
            ++st.second;
        }
        auto& sz = sizes[size ? std::bit_width(size) : 0];
        sz.first = addSaturated(sz.first, size);
        ++sz.second;
        auto& sm = streams[block.stream];
        sm.first = addSaturated(sm.first, size);
        ++sm.second;
    }

    // Module tree: pre-order, children by total bytes.
    std::vector<std::vector<ScopeId>> children(scopes.size());
    for (ScopeId s = 1; s < scopes.size(); ++s)
        if (scopeTotal[s] > 0)
            children[scopes[s].parent < scopes.size() ? scopes[s].parent : 0].push_back(s);
    auto& modules = b.groups[static_cast<std::size_t>(GroupBy::Module)];
    auto walk = [&](auto&& self, ScopeId s, std::uint32_t depth) -> void {
        auto& kids = children[s];
        std::sort(kids.begin(), kids.end(), [&](ScopeId x, ScopeId y) { return scopeTotal[x] != scopeTotal[y] ? scopeTotal[x] > scopeTotal[y] : x < y; });
        for (auto k : kids) {
            GroupRow r;
            r.key = scopePath(trace, k);
            r.label = std::string(trace.str(scopes[k].name));
            r.depth = depth;
            r.selfBytes = scopeSelf[k];
            r.totalBytes = scopeTotal[k];
            r.selfBlocks = scopeSelfBlocks[k];
            r.totalBlocks = scopeTotalBlocks[k];
            modules.push_back(std::move(r));
            self(self, k, depth + 1);
        }
    };
    walk(walk, 0, 0);
    if (scopeSelf[0] > 0 || scopeSelfBlocks[0] > 0) {
        auto r = flatRow("(no scope)", "(no scope)", scopeSelf[0], scopeSelfBlocks[0]);
        // Keep the tree order: insert "(no scope)" among the depth-0 rows by its bytes.
        auto pos = modules.begin();
        while (pos != modules.end() && !(pos->depth == 0 && pos->totalBytes < r.totalBytes))
            ++pos;
        modules.insert(pos, std::move(r));
    }

    auto& cats = b.groups[static_cast<std::size_t>(GroupBy::Category)];
    for (int c = 0; c < kCategoryCount; ++c)
        if (catBlocks[c])
            cats.push_back(flatRow(std::string(toString(static_cast<Category>(c))), std::string(toString(static_cast<Category>(c))), catBytes[c], catBlocks[c]));
    sortByBytes(cats);

    auto& siteRows = b.groups[static_cast<std::size_t>(GroupBy::Site)];
    std::vector<SiteId> rowSite;
    std::optional<std::size_t> noStack; // site 0 and sites without frames: one row
    for (const auto& [site, t] : sites) {
        std::string key = siteKey(trace, site), label = siteLabel(trace, site);
        if (key.empty()) {
            if (noStack) {
                addInto(siteRows[*noStack], flatRow({}, {}, t.first, t.second));
                continue;
            }
            noStack = siteRows.size();
            key = label = "(no stack)";
        }
        rowSite.push_back(key == "(no stack)" ? SiteId { 0 } : site);
        siteRows.push_back(flatRow(std::move(key), std::move(label), t.first, t.second));
        siteRows.back().site = rowSite.back();
    }
    disambiguateSiteLabels(trace, siteRows, rowSite);
    for (const auto& [where, t] : before) {
        const std::string label = siteLabel(trace, where.site);
        const std::string key = "(allocated before the trace)" + (label.empty() ? std::string() : " " + siteKey(trace, where.site));
        siteRows.push_back(flatRow(key,
            label.empty()         ? std::string("allocated before the trace")
                : where.fromFree ? "allocated before the trace; freed at " + label
                                 : "allocated before the trace at " + label,
            t.first, t.second));
        siteRows.back().site = where.site;
    }
    sortByBytes(siteRows);

    auto& sizeRows = b.groups[static_cast<std::size_t>(GroupBy::SizeClass)];
    for (std::size_t k = 0; k < sizes.size(); ++k)
        if (sizes[k].second) {
            auto label = sizeClassLabel(k ? Bytes { 1 } << (k - 1) : 0);
            sizeRows.push_back(flatRow(label, label, sizes[k].first, sizes[k].second));
        }

    auto& streamRows = b.groups[static_cast<std::size_t>(GroupBy::Stream)];
    for (const auto& [stream, t] : streams) {
        std::string label = "stream " + std::to_string(stream);
        if (stream < trace.streams().size()) {
            const auto& st = trace.streams()[stream];
            label = (st.device < trace.devices().size() ? deviceLabel(trace.devices()[st.device]) : std::string("?")) + " stream " + std::to_string(st.handle);
            if (st.name)
                label += " (" + std::string(trace.str(st.name)) + ")";
        }
        streamRows.push_back(flatRow(label, label, t.first, t.second));
    }
    sortByBytes(streamRows);
    return b;
}

} // namespace gpumem::analyze
