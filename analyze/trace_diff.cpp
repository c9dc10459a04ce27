#include "analyze/trace_diff.h"

#include "analyze/analysis_report.h"
#include "analyze/comparison.h" // shortenMiddle
#include "core/display_width.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <ostream>

namespace gpumem::analyze {

std::vector<DiffRow> TraceDiff::changed(GroupBy g) const
{
    std::vector<DiffRow> out;
    for (const auto& r : rows)
        if (r.group == g)
            out.push_back(r);
    return out;
}

std::vector<DiffRow> diffGroupRows(GroupBy g, std::span<const GroupRow> before, std::span<const GroupRow> after)
{
    const bool self = g == GroupBy::Module;
    std::map<std::string, DiffRow> rows;
    for (const auto& r : before) {
        auto& x = rows[r.key];
        x.group = g, x.key = r.key, x.label = r.label;
        x.before = self ? r.selfBytes : r.totalBytes;
    }
    for (const auto& r : after) {
        auto& x = rows[r.key];
        x.group = g, x.key = r.key, x.label = r.label;
        x.after = self ? r.selfBytes : r.totalBytes;
    }
    std::vector<DiffRow> changed;
    for (auto& [key, r] : rows)
        if (r.before != r.after)
            changed.push_back(std::move(r));
    std::stable_sort(changed.begin(), changed.end(), [](const DiffRow& x, const DiffRow& y) {
        // By the exact size of the change (|delta()| of INT64_MIN would overflow).
        return std::max(x.before, x.after) - std::min(x.before, x.after) > std::max(y.before, y.after) - std::min(y.before, y.after);
    });
    return changed;
}

TraceDiff diffAnalyses(const Analysis& before, const Analysis& after)
{
    if (before.breakdowns.empty() || after.breakdowns.empty())
        throw Error("nothing to compare: " + std::string(before.breakdowns.empty() ? "the first" : "the second")
            + " trace has no memory events on the analyzed device");
    const auto& a = before.breakdowns.front();
    const auto& b = after.breakdowns.front();
    TraceDiff d;
    d.instant = a.instant.label;
    d.liveBefore = a.liveBytes;
    d.liveAfter = b.liveBytes;
    d.peakAllocatedBefore = before.fragmentation.peakAllocated;
    d.peakAllocatedAfter = after.fragmentation.peakAllocated;
    d.peakReservedBefore = before.fragmentation.peakReserved;
    d.peakReservedAfter = after.fragmentation.peakReserved;
    d.stepsBefore = before.steps.steps.size();
    d.stepsAfter = after.steps.steps.size();
    for (int gi = 0; gi < kGroupByCount; ++gi) {
        const auto g = static_cast<GroupBy>(gi);
        auto changed = diffGroupRows(g, a.by(g), b.by(g));
        d.rows.insert(d.rows.end(), changed.begin(), changed.end());
    }
    return d;
}

namespace {
    std::string change(Bytes x, Bytes y) { return formatByteTotalShort(x) + " -> " + formatByteTotalShort(y) + " (" + formatByteChange(x, y) + ")"; }
} // namespace

std::string diffAnswer(const TraceDiff& d)
{
    // The peak the sentence leads with: reserved where both traces record it (what the device had to hold),
    // else allocated.
    const bool reserved = d.peakReservedBefore && d.peakReservedAfter;
    const Bytes a = reserved ? *d.peakReservedBefore : d.peakAllocatedBefore;
    const Bytes b = reserved ? *d.peakReservedAfter : d.peakAllocatedAfter;
    const std::string what = reserved ? " reserved" : " allocated";
    std::string s;
    if (a == b)
        s = "B peaks at the same " + formatByteTotalShort(a) + what + " as A";
    else {
        // A saturated side (a byte total of 2^64 - 1 or more, core/byte_total.h) has no gap to state: the
        // figures say "≥ 16 EiB"; a gap too small to show in the unit of the figures is given in bytes.
        const bool saturated = a == kSaturatedBytes || b == kSaturatedBytes;
        const Bytes gap = a > b ? a - b : b - a;
        const double share = a > 0 ? double(gap) / double(a) : 0.0;
        std::string versus = formatByteTotalShort(b) + what + " against " + formatByteTotalShort(a);
        if (formatByteTotalShort(a) == formatByteTotalShort(b))
            versus += " (" + std::to_string(b) + " B against " + std::to_string(a) + " B)";
        s = "B peaks " + (saturated ? std::string() : formatByteTotalShort(gap) + " ")
            + (a > 0 && !saturated ? "(" + (share < 0.0005 ? std::string("< 0.1 %") : percent(share)) + ") " : std::string())
            + (b < a ? "lower" : "higher") + " than A: " + versus;
    }
    if (reserved && d.peakAllocatedBefore != d.peakAllocatedAfter)
        s += " (allocated " + formatByteTotalShort(d.peakAllocatedAfter) + " against " + formatByteTotalShort(d.peakAllocatedBefore)
            + ")";
    // The largest change of what was live: by module where the change has a named module, else by category.
    const DiffRow* largest = nullptr;
    for (const GroupBy g : { GroupBy::Module, GroupBy::Category }) {
        for (const auto& r : d.rows)
            if (r.group == g) {
                if (g == GroupBy::Module && r.key == "(no scope)")
                    break;
                largest = &r;
                break;
            }
        if (largest)
            break;
    }
    if (largest)
        s += "; the largest change at " + d.instant + " is " + std::string(toString(largest->group)) + " "
            + (largest->group == GroupBy::Module ? largest->key : largest->label) + ", "
            + formatByteChange(largest->before, largest->after);
    else if (d.rows.empty())
        s += "; nothing live at " + d.instant + " changed";
    return s + ".";
}

void writeDiffText(const TraceDiff& d, std::string_view labelBefore, std::string_view labelAfter, std::size_t top, std::ostream& out)
{
    out << wrapText(textForTerminal(diffAnswer(d)), 100);
    out << "  A: " << textForTerminal(labelBefore) << "\n  B: " << textForTerminal(labelAfter) << '\n';
    out << "  peak allocated   " << change(d.peakAllocatedBefore, d.peakAllocatedAfter) << '\n';
    if (d.peakReservedBefore && d.peakReservedAfter)
        out << "  peak reserved    " << change(*d.peakReservedBefore, *d.peakReservedAfter) << '\n';
    out << "  live at " << textForTerminal(d.instant) << ": " << change(d.liveBefore, d.liveAfter) << '\n';
    out << "  steps            " << d.stepsBefore << " -> " << d.stepsAfter << '\n';
    for (int gi = 0; gi < kGroupByCount; ++gi) {
        const auto g = static_cast<GroupBy>(gi);
        auto rows = d.changed(g);
        out << "\n  by " << toString(g) << (g == GroupBy::Module ? " (self bytes)" : "") << ": ";
        if (rows.empty()) {
            out << "no change\n";
            continue;
        }
        out << rows.size() << (rows.size() == 1 ? " row changed\n" : " rows changed\n");
        for (std::size_t i = 0; i < rows.size() && i < top; ++i) {
            // The module path reads well; a site's key is its whole stack (lines over 1,000 characters):
            // print the label people read in analyze, with the key in the JSON and CSV. Within 100 columns: the
            // label is shortened in the middle, keeping its end (a stack of three frames made a 109-column row).
            const std::string change = formatByteChange(rows[i].before, rows[i].after);
            const std::string tail = "(" + formatByteTotalShort(rows[i].before) + " -> " + formatByteTotalShort(rows[i].after) + ")";
            std::string label = textForTerminal(g == GroupBy::Module ? rows[i].key : rows[i].label);
            const std::size_t fixed = 4 + displayWidth(change) + 2 + 2 + displayWidth(tail);
            if (fixed + 20 <= 100)
                label = shortenMiddle(label, 100 - fixed);
            out << "    " << change << "  " << label << "  " << tail << '\n';
        }
    }
}

nlohmann::json diffToJson(const TraceDiff& d, std::string_view labelBefore, std::string_view labelAfter)
{
    using nlohmann::json;
    auto opt = [](const std::optional<Bytes>& o) { return o ? json(*o) : json(); };
    json rows = json::array();
    for (const auto& r : d.rows)
        rows.push_back({ { "group", toString(r.group) }, { "key", r.key }, { "label", r.label }, { "before_bytes", r.before },
            { "after_bytes", r.after }, { "delta_bytes", r.delta() } });
    return { { "a", labelBefore }, { "b", labelAfter }, { "instant", d.instant }, { "live_before", d.liveBefore },
        { "live_after", d.liveAfter }, { "peak_allocated_before", d.peakAllocatedBefore }, { "peak_allocated_after", d.peakAllocatedAfter },
        { "peak_reserved_before", opt(d.peakReservedBefore) }, { "peak_reserved_after", opt(d.peakReservedAfter) },
        { "steps_before", d.stepsBefore }, { "steps_after", d.stepsAfter },
        // Byte fields at 18446744073709551615 mean "at least" (core/byte_total.h).
        { "bytes_saturated",
            isSaturated(d.liveBefore) || isSaturated(d.liveAfter) || isSaturated(d.peakAllocatedBefore) || isSaturated(d.peakAllocatedAfter)
                || (d.peakReservedBefore && isSaturated(*d.peakReservedBefore)) || (d.peakReservedAfter && isSaturated(*d.peakReservedAfter)) },
        { "changed", rows } };
}

void writeDiffCsv(const TraceDiff& d, std::ostream& out)
{
    out << "group,key,label,before_bytes,after_bytes,delta_bytes\n";
    for (const auto& r : d.rows)
        out << toString(r.group) << ',' << csvField(r.key) << ',' << csvField(r.label) << ',' << r.before << ',' << r.after << ','
            << r.delta() << '\n';
}

} // namespace gpumem::analyze
