#include "analyze/analysis_report.h"
#include "analyze/outside_layer.h"

#include "analyze/frame_folding.h"
#include "analyze/trace_summary.h"

#include "core/byte_total.h"
#include "core/counter_units.h"
#include "core/display_width.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <ostream>
#include <vector>

namespace gpumem::analyze {

namespace {
    constexpr std::size_t kWidth = 75; // inside the box, as torch.cuda.memory_summary()

    // Display columns of UTF-8 text (core/display_width.h: CJK and emoji take two, combining marks none).
    std::size_t columns(std::string_view s) { return displayWidth(s); }

    // Raw text as the escaped characters it prints as (textForTerminal of each character), so that a cut
    // falls between characters of the input and never inside an escape such as "\x0d" (brief esc item 3).
    struct Printed {
        std::string text;
        std::size_t columns = 0;
    };
    std::vector<Printed> printed(std::string_view raw)
    {
        std::vector<Printed> out;
        for (std::size_t i = 0; i < raw.size();) {
            const std::size_t n = characterLength(raw, i);
            std::string t = textForTerminal(raw.substr(i, n));
            const std::size_t w = columns(t);
            out.push_back({ std::move(t), w });
            i += n;
        }
        return out;
    }

    // Every cell and line of the box goes through fit(): names, labels and paths come from the trace or
    // the command line, so they are made fit for a terminal line here, at the output (textForTerminal).
    std::string fit(std::string_view raw, std::size_t width)
    {
        const std::vector<Printed> chars = printed(raw);
        std::size_t total = 0;
        std::string whole;
        for (const auto& c : chars) {
            total += c.columns;
            whole += c.text;
        }
        if (total <= width)
            return whole + std::string(width - total, ' ');
        // Cut in display columns between printed characters (never inside a UTF-8 sequence or an escape):
        // the first characters that fill keep/3 columns, "...", and the last characters that fill the rest.
        const std::size_t keep = width - 3;
        std::string head;
        std::size_t cols = 0, h = 0;
        for (; h < chars.size() && cols + chars[h].columns <= keep / 3; ++h) {
            cols += chars[h].columns;
            head += chars[h].text;
        }
        std::string tail;
        for (std::size_t t = chars.size(); t > h && cols + chars[t - 1].columns <= keep;) {
            --t;
            cols += chars[t].columns;
            tail.insert(0, chars[t].text);
        }
        return head + "..." + tail + std::string(width - 3 - cols, ' ');
    }
    std::string right(std::string_view s, std::size_t width) { return padLeft(s, width); }
    std::string center(std::string_view raw, std::size_t width)
    {
        const std::string safe = textForTerminal(raw);
        const std::string_view s = safe;
        if (columns(s) >= width)
            return fit(raw, width);
        const std::size_t left = (width - columns(s)) / 2;
        return std::string(left, ' ') + std::string(s) + std::string(width - columns(s) - left, ' ');
    }
    void rule(std::ostream& out, char c) { out << '|' << std::string(kWidth, c) << "|\n"; }
    // Long lines wrap at spaces (continuations indented); a single word longer than the box is cut.
    // `escaped` says `raw` was escaped already (center()'s output), so it is not escaped twice.
    void line(std::ostream& out, std::string_view raw, bool escaped = false)
    {
        std::vector<Printed> chars;
        if (escaped)
            for (std::size_t i = 0; i < raw.size();) {
                const std::size_t n = characterLength(raw, i);
                chars.push_back({ std::string(raw.substr(i, n)), columns(raw.substr(i, n)) });
                i += n;
            }
        else
            chars = printed(raw);
        auto emit = [&](std::size_t from, std::size_t to, std::string_view indent) {
            std::string text(indent);
            std::size_t cols = indent.size();
            for (std::size_t k = from; k < to; ++k) {
                text += chars[k].text;
                cols += chars[k].columns;
            }
            out << '|' << text << std::string(cols < kWidth ? kWidth - cols : 0, ' ') << "|\n";
        };
        std::size_t from = 0;
        std::string_view indent;
        for (;;) {
            const std::size_t room = kWidth - indent.size();
            std::size_t cols = 0, to = from;
            while (to < chars.size() && cols + chars[to].columns <= room)
                cols += chars[to++].columns;
            if (to == chars.size()) {
                emit(from, to, indent);
                return;
            }
            // Break at the last space that fits (a single word longer than the box is cut where it ends).
            std::size_t cut = to;
            while (cut > from + 1 && chars[cut].text != " ")
                --cut;
            if (cut <= from + 1)
                cut = to;
            emit(from, cut, indent);
            from = cut;
            while (from < chars.size() && chars[from].text == " ")
                ++from;
            indent = "   ";
        }
    }

    // torch/cuda/memory.py _format_size/_format_count: divide while the reference is large enough.
    std::string scaled(std::uint64_t n, double reference, double divisor, double threshold, std::initializer_list<const char*> prefixes, const char* format)
    {
        auto p = prefixes.begin();
        while (p + 1 != prefixes.end() && reference >= threshold) {
            n = static_cast<std::uint64_t>(static_cast<double>(n) / divisor);
            reference /= divisor;
            ++p;
        }
        char buf[40];
        std::snprintf(buf, sizeof buf, format, static_cast<unsigned long long>(n), *p);
        return buf;
    }
    std::string torchCount(std::uint64_t n, std::uint64_t reference)
    {
        return scaled(n, static_cast<double>(reference), 1000, 750 * 1000, { " ", "K", "M" }, "%7llu %s");
    }
    std::string offset(const Analysis& a, TimeNs t) { return formatOffsetBetween(a.origin, t); }

    // A size cell; a saturated total (core/byte_total.h) reads "≥ 16 EiB".
    std::string sizeCell(Bytes v, Bytes reference) { return isSaturated(v) ? formatByteTotalShort(v) : torchSize(v, reference); }
    void statRow(std::ostream& out, std::string_view name, const MemoryStats::Stat& s, bool bytes)
    {
        // torch/cuda/memory.py: current is scaled by the peak, the others by themselves.
        // A shared unit never turns a nonzero value into "0" (1 KiB after a saturated peak read "0 PiB";
        // brief esc item 3): such a value takes its own unit.
        auto cell = [&](std::uint64_t v, std::uint64_t ref) {
            std::string c = bytes ? sizeCell(v, ref) : torchCount(v, ref);
            const std::size_t digit = c.find_first_not_of(' ');
            if (v != 0 && digit != std::string::npos && c.compare(digit, 2, "0 ") == 0)
                c = bytes ? sizeCell(v, v) : torchCount(v, v);
            return c;
        };
        out << "| " << fit(name, 21) << " | " << right(cell(s.current, s.peak), 10) << " | " << right(cell(s.peak, s.peak), 10)
            << " | " << right(cell(s.allocated, s.allocated), 10) << " | " << right(cell(s.freed, s.freed), 10) << " |\n";
    }
    void kv(std::ostream& out, std::string_view key, std::string_view value)
    {
        out << "| " << fit(key, 45) << " | " << right(value, 25) << " |\n";
    }
} // namespace

std::string torchSize(Bytes bytes, Bytes reference)
{
    return scaled(bytes, static_cast<double>(reference), 1024, 768 * 1024, { "B  ", "KiB", "MiB", "GiB", "TiB", "PiB" }, "%6llu %s");
}

bool bytesSaturated(const Analysis& a)
{
    const auto& st = a.stats;
    for (const auto* s : { &st.allocatedBytes, &st.activeBytes, &st.requestedBytes, &st.reservedBytes, &st.inactiveSplitBytes })
        if (isSaturated(s->current) || isSaturated(s->peak) || isSaturated(s->allocated) || isSaturated(s->freed))
            return true;
    for (const auto& b : a.breakdowns)
        if (isSaturated(b.liveBytes))
            return true;
    return false;
}

std::vector<std::pair<std::string, std::string>> fragmentationRows(const FragmentationSummary& f, bool details)
{
    std::vector<std::pair<std::string, std::string>> rows;
    if (f.headline) {
        rows.emplace_back("Reserved beyond live (the headline)",
            formatBytes(f.headline->beyond()) + " (" + percent(f.headline->share()) + ")");
        rows.emplace_back("  at the", f.headline->moment);
    }
    rows.emplace_back(f.openingAllocated ? "Lower bound: max live, with pre-trace bytes" : "Lower bound: max live requested bytes",
        formatByteTotalShort(f.lowerBound));
    if (f.peakRecordedAllocated)
        rows.emplace_back("Peak of the recorded allocated counter", formatBytes(*f.peakRecordedAllocated));
    if (f.peakReserved) {
        rows.emplace_back("Peak reserved", formatByteTotalShort(*f.peakReserved));
        if (f.overheadVsLowerBound) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.3f x", *f.overheadVsLowerBound);
            rows.emplace_back("Peak reserved / lower bound", buf);
        }
        if (!details) {
            rows.emplace_back("Internal: allocated - requested at peak", formatByteTotalShort(f.internalAtPeakAllocated));
            return rows;
        }
        rows.emplace_back("peak_active / peak_reserved (GMLake)", percent(*f.utilizationActive));
        rows.emplace_back("max_allocated / max_reserved (STAlloc)", percent(*f.utilizationAllocated));
        if (f.wasteAtPeakReserved)
            rows.emplace_back("1 - allocated/reserved at reserved peak", percent(*f.wasteAtPeakReserved));
        if (f.timeWeightedWaste)
            rows.emplace_back("1 - allocated/reserved, time-weighted mean", percent(*f.timeWeightedWaste));
        if (f.externalAtPeakReserved)
            rows.emplace_back("1 - largest_free/free at reserved peak (TF)", percent(*f.externalAtPeakReserved));
        if (f.maxInactiveSplit)
            rows.emplace_back("Max inactive split bytes (PyTorch)", formatByteTotalShort(*f.maxInactiveSplit));
    }
    rows.emplace_back("Internal: allocated - requested at peak", formatByteTotalShort(f.internalAtPeakAllocated));
    return rows;
}

std::string percent(double fraction)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %%", fraction * 100.0);
    return buf;
}

std::string csvField(std::string_view raw)
{
    const std::string safe = textForTerminal(raw);
    const std::string_view text = safe;
    if (text.find_first_of(",\"\n\r") == std::string_view::npos)
        return std::string(text);
    std::string s = "\"";
    for (char c : text) {
        if (c == '"')
            s += '"';
        s += c;
    }
    return s + "\"";
}

std::vector<const GroupRow*> topRows(const Breakdown& b, GroupBy g, std::size_t top)
{
    const auto& rows = b.by(g);
    std::vector<const GroupRow*> out;
    if (g == GroupBy::SizeClass) {
        // Size classes are in ascending size: keep the N holding the most bytes (the smaller class first
        // on a tie), shown in size order. The first N rows were the N smallest classes, often 0 %.
        std::vector<std::size_t> order(rows.size());
        for (std::size_t i = 0; i < rows.size(); ++i)
            order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return rows[x].totalBytes > rows[y].totalBytes; });
        order.resize(std::min(top, order.size()));
        std::sort(order.begin(), order.end());
        for (auto i : order)
            out.push_back(&rows[i]);
        return out;
    }
    if (g != GroupBy::Module) {
        for (std::size_t i = 0; i < rows.size() && i < top; ++i)
            out.push_back(&rows[i]);
        return out;
    }
    if (rows.empty() || top == 0)
        return out;
    std::vector<Bytes> totals;
    for (const auto& r : rows)
        totals.push_back(r.totalBytes);
    std::sort(totals.begin(), totals.end(), std::greater<>());
    const Bytes threshold = totals[std::min(top, totals.size()) - 1];
    for (const auto& r : rows)
        if (r.totalBytes >= threshold && out.size() < top)
            out.push_back(&r);
    return out;
}

void writeAnalysisText(const Trace& trace, const Analysis& a, std::string_view label, const ReportOptions& options, std::ostream& out)
{
    rule(out, '=');
    line(out, center(a.deviceLabel.empty() ? std::string("gpumem memory summary")
                                           : "gpumem memory summary, device " + a.deviceLabel,
             kWidth),
        true);
    rule(out, '-');
    line(out, " " + std::string(label));
    if (a.empty) {
        if (a.countersOnly) {
            // A PyTorch <= 1.9 profiler trace (sizes without addresses, imported as counters), or the figures
            // of an out-of-memory report such as a memory_summary() table (importers/oom_text_importer.h).
            line(out, " no memory events with addresses: this trace records memory counters only");
            line(out, trace.stats().find("no_addresses") ? " (PyTorch <= 1.9 profiler); nothing to break down. Recorded peaks:"
                                                         : " nothing to break down. Recorded peaks:");
            const auto series = trace.counterSeries();
            std::vector<Bytes> peak(series.size(), 0);
            for (const auto& s : trace.counterSamples())
                if (s.series < peak.size() && s.value > 0)
                    peak[s.series] = std::max(peak[s.series], static_cast<Bytes>(s.value));
            for (std::size_t i = 0; i < series.size(); ++i) {
                const auto name = trace.str(series[i].name);
                if (peak[i] == 0 || !isByteCounter(name))
                    continue;
                const DeviceId d = series[i].device;
                line(out, "   " + (d < trace.devices().size() ? deviceLabel(trace.devices()[d]) + " " : std::string())
                        + std::string(name) + ": " + formatBytes(peak[i]));
            }
            if (auto outside = outsideMemory(trace, a.device))
                line(out, " outside the allocator: " + outsideMemoryText(*outside));
        } else
            line(out, " no memory events on this device");
        rule(out, '=');
        return;
    }
    // The one origin of every "+x s" below, the one `gpumem info` uses (trace_summary.h, traceSpan).
    line(out, " times: +s from the trace start @" + std::to_string(a.origin) + " ns, as in gpumem info");
    const auto& st = a.stats;
    line(out, center("OOMs: " + std::to_string(st.ooms), 37) + "|"
            + center("steps: " + std::to_string(a.steps.steps.size()), 37),
        true);
    rule(out, '=');
    out << "|        Metric         |   At end   | Peak Usage | Tot Alloc  | Tot Freed  |\n";
    rule(out, '-');
    statRow(out, "Allocated memory", st.allocatedBytes, true);
    statRow(out, "Active memory", st.activeBytes, true);
    statRow(out, "Requested memory", st.requestedBytes, true);
    if (a.hasReserved)
        statRow(out, "GPU reserved memory", st.reservedBytes, true);
    if (st.hasSegments)
        statRow(out, "Non-releasable memory", st.inactiveSplitBytes, true);
    rule(out, '-');
    statRow(out, "Allocations", st.allocations, false);
    statRow(out, "Active allocs", st.activeAllocations, false);
    if (st.hasSegments)
        statRow(out, "GPU reserved segments", st.segments, false);
    rule(out, '=');
    if (bytesSaturated(a))
        line(out, " " + std::string(kSaturatedNote));
    if (!a.reservedSource.empty())
        line(out, " reserved from " + a.reservedSource);
    // The layer outside the allocator (core/outside_memory.h), only when the trace records it.
    if (auto outside = outsideMemory(trace, a.device)) {
        line(out, " outside the allocator: " + outsideMemoryText(*outside));
        const Bytes total = a.device < trace.devices().size() ? trace.devices()[a.device].totalMemory : 0;
        line(out, " layers at the peaks: "
                + memoryLayersText(st.allocatedBytes.peak,
                    a.hasReserved ? std::optional<Bytes>(st.reservedBytes.peak) : std::nullopt,
                    *outside, total));
    }

    const auto& f = a.fragmentation;
    line(out, center("Fragmentation (definitions: docs/analysis.md)", kWidth), true);
    rule(out, '-');
    for (const auto& [name, value] : fragmentationRows(f, options.details))
        kv(out, name, value);
    if (!options.details && f.peakReserved)
        line(out, " more definitions (GMLake, STAlloc, TF, inactive split): --details");
    if (!a.reservedBreakdownOmitted.empty())
        line(out, " no breakdown at the reserved peak: " + a.reservedBreakdownOmitted);
    if (!f.peakReserved)
        line(out, " no reserved series (no segment events or reserved counter): replay to get one");
    rule(out, '=');

    line(out, center("Steps", kWidth), true);
    rule(out, '-');
    if (a.steps.steps.empty()) {
        line(out, " " + stepSearchNote(a.steps));
    } else {
        line(out, " found by " + std::string(toString(a.steps.source)) + ": " + a.steps.detail);
        if (auto note = stepSearchNote(a.steps); !note.empty())
            line(out, " " + note);
        out << "|  step |     start     |  peak allocated  |   growth    | backward from    |\n";
        for (const auto& s : a.steps.steps) {
            const std::string growth = formatByteChange(s.allocatedAtStart, s.allocatedAtEnd);
            out << "| " << right(std::to_string(s.number), 5) << " | " << right(offset(a, s.start), 13) << " | "
                << right(formatByteTotalShort(s.peakAllocated), 16) << " | " << right(growth, 11) << " | "
                << fit(backwardSource(a.steps, s), 16) << " |\n";
        }
        rule(out, '-');
        line(out, std::string(a.leaks.leaking ? " LEAK: " : " no leak: ") + a.leaks.reason);
        if (a.leaks.leaking) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.0f", a.leaks.growthPerStep);
            line(out, " growth per step: " + formatBytes(static_cast<Bytes>(a.leaks.growthPerStep)) + " (" + buf + " B)");
            for (std::size_t i = 0; i < a.leaks.sites.size() && i < options.top; ++i) {
                const auto& s = a.leaks.sites[i];
                out << "| " << fit(s.label, 45) << " | " << right(formatBytes(s.bytes), 11) << " | "
                    << right(counted(s.stepsWithSurvivors, "step", "steps"), 11) << " |\n";
            }
        }
    }
    rule(out, '=');

    if (!a.categorySources.empty()) {
        // --categories: the rows below say "rule", "recorded" or "inferred" for each category (docs/stacks.md).
        line(out, std::string(" categories: rules first (--categories), then ") + (a.categoriesRecorded ? "recorded" : "inferred")
                + (a.agreementAtPeak ? "; rules and inference agree with the recording on " + percent(a.agreementAtPeak->share())
                            + " of bytes at peak, " + percent(a.agreementAll->share()) + " overall"
                                     : std::string()));
    } else if (a.agreementAtPeak) {
        line(out, " categories: recorded; inference agrees on " + percent(a.agreementAtPeak->share()) + " of bytes at peak, "
                + percent(a.agreementAll->share()) + " overall");
    } else {
        line(out, " categories: inferred from lifetimes and phases (none recorded)");
        if (auto note = phaseNote(a.steps); !note.empty())
            line(out, " " + note);
    }
    for (const auto& b : a.breakdowns) {
        rule(out, '=');
        std::string head = " Live at " + b.instant.label + " " + offset(a, b.instant.time) + ": " + formatByteTotal(b.liveBytes) + " in "
            + counted(b.liveBlocks, "block", "blocks");
        if (b.instant.reserved)
            head += ", reserved " + formatByteTotalShort(*b.instant.reserved);
        line(out, head);
        for (auto g : options.groups) {
            rule(out, '-');
            const bool module = g == GroupBy::Module;
            std::string title = "By " + std::string(toString(g)) + (g == GroupBy::Category && b.categoriesInferred ? " (inferred)" : "");
            out << "| " << fit(title, 37) << " | " << (module ? "   Self   " : "          ") << " |   Total    |  Share  |\n";
            for (const auto* r : topRows(b, g, options.top)) {
                std::string name = std::string(module ? r->depth * 2 : 0, ' ') + r->label;
                const double share = b.liveBytes ? static_cast<double>(r->totalBytes) / static_cast<double>(b.liveBytes) : 0;
                out << "| " << fit(name, 37) << " | " << right(module ? sizeCell(r->selfBytes, b.liveBytes) : "", 10) << " | "
                    << right(sizeCell(r->totalBytes, b.liveBytes), 10) << " | " << right(percent(share), 7) << " |\n";
            }
        }
    }
    rule(out, '=');
}

nlohmann::json analysisToJson(const Trace& trace, const Analysis& a, std::string_view label, const ReportOptions& options)
{
    using nlohmann::json;
    json j;
    j["trace"] = label;
    j["device"] = a.deviceLabel;
    j["empty"] = a.empty;
    j["bytes_saturated"] = bytesSaturated(a); // byte fields at 18446744073709551615 mean "at least" (core/byte_total.h)
    j["origin_ns"] = a.origin; // the text's "+x s" offsets are from here (the trace start, as gpumem info)
    if (auto outside = outsideMemory(trace, a.device))
        j["outside_allocator"] = outsideMemoryToJson(*outside);
    j["start_ns"] = a.firstEventTime;
    j["end_ns"] = a.lastEventTime;
    auto stat = [](const MemoryStats::Stat& s) {
        return json { { "current", s.current }, { "peak", s.peak }, { "allocated", s.allocated }, { "freed", s.freed } };
    };
    const auto& st = a.stats;
    j["stats"] = { { "allocated_bytes", stat(st.allocatedBytes) }, { "active_bytes", stat(st.activeBytes) },
        { "requested_bytes", stat(st.requestedBytes) }, { "reserved_bytes", stat(st.reservedBytes) },
        { "inactive_split_bytes", stat(st.inactiveSplitBytes) }, { "allocation", stat(st.allocations) },
        { "active", stat(st.activeAllocations) }, { "segment", stat(st.segments) }, { "num_ooms", st.ooms } };
    j["reserved_source"] = a.reservedSource;
    const auto& f = a.fragmentation;
    auto opt = [](const auto& o) { return o ? json(*o) : json(); };
    j["fragmentation"] = { { "lower_bound_bytes", f.lowerBound }, { "peak_allocated", f.peakAllocated }, { "peak_active", f.peakActive },
        { "peak_requested", f.peakRequested }, { "peak_reserved", opt(f.peakReserved) },
        { "peak_recorded_allocated", opt(f.peakRecordedAllocated) },
        { "utilization_active_gmlake", opt(f.utilizationActive) }, { "utilization_allocated_stalloc", opt(f.utilizationAllocated) },
        { "waste_at_peak_reserved", opt(f.wasteAtPeakReserved) }, { "waste_time_weighted", opt(f.timeWeightedWaste) },
        { "external_at_peak_reserved", opt(f.externalAtPeakReserved) }, { "max_inactive_split_bytes", opt(f.maxInactiveSplit) },
        { "internal_at_peak_allocated", f.internalAtPeakAllocated }, { "overhead_vs_lower_bound", opt(f.overheadVsLowerBound) },
        { "opening_allocated", f.openingAllocated },
        { "headline",
            f.headline ? json { { "moment", f.headline->moment }, { "time_ns", f.headline->time - a.origin },
                { "reserved", f.headline->reserved }, { "live", f.headline->live },
                { "reserved_beyond_live", f.headline->beyond() }, { "share", f.headline->share() } }
                       : json() },
        { "reserved_breakdown_omitted", a.reservedBreakdownOmitted.empty() ? json() : json(a.reservedBreakdownOmitted) } };
    json steps = json::array();
    for (const auto& s : a.steps.steps)
        steps.push_back({ { "number", s.number }, { "start_ns", s.start }, { "end_ns", s.end }, { "backward_start_ns", s.backwardStart },
            { "optimizer_start_ns", opt(s.optimizerStart) }, { "phases_annotated", s.phasesAnnotated },
            { "allocated_at_start", s.allocatedAtStart }, { "allocated_at_end", s.allocatedAtEnd }, { "growth", s.growth() },
            { "peak_allocated", s.peakAllocated }, { "peak_time_ns", s.peakTime } });
    j["steps"] = { { "source", toString(a.steps.source) }, { "detail", a.steps.detail }, { "note", stepSearchNote(a.steps) },
        { "autograd_evidence", a.steps.autogradEvidence }, { "phases", phaseNote(a.steps) }, { "steps", steps } };
    json sites = json::array();
    for (const auto& s : a.leaks.sites)
        sites.push_back({ { "label", s.label }, { "site", s.site }, { "scope", s.scope }, { "bytes", s.bytes }, { "blocks", s.blocks },
            { "steps_with_survivors", s.stepsWithSurvivors } });
    j["leaks"] = { { "leaking", a.leaks.leaking }, { "reason", a.leaks.reason }, { "live_at_step_start", a.leaks.liveAtStepStart },
        { "growth_per_step", a.leaks.growthPerStep }, { "sites", sites } };
    j["categories"] = !a.categorySources.empty() ? (a.categoriesRecorded ? "rules, then recorded" : "rules, then inferred")
        : a.categoriesRecorded                    ? "recorded"
                                                  : "inferred";
    if (a.agreementAtPeak) {
        auto agree = [](const CategoryAgreement& c) {
            return json { { "compared_bytes", c.comparedBytes }, { "agreeing_bytes", c.agreeingBytes }, { "share", c.share() },
                { "recorded_unknown_bytes", c.recordedUnknownBytes } };
        };
        j["inference_agreement"] = { { "at_peak", agree(*a.agreementAtPeak) }, { "all", agree(*a.agreementAll) } };
    }
    json bds = json::array();
    for (const auto& b : a.breakdowns) {
        json bj = { { "instant", b.instant.label }, { "time_ns", b.instant.time }, { "event_index", b.instant.eventIndex },
            { "live_bytes", b.liveBytes }, { "live_blocks", b.liveBlocks }, { "reserved", opt(b.instant.reserved) },
            { "categories_inferred", b.categoriesInferred } };
        for (auto g : options.groups) {
            json rows = json::array();
            for (const auto* r : topRows(b, g, options.top)) {
                rows.push_back({ { "key", r->key }, { "label", r->label }, { "depth", r->depth }, { "self_bytes", r->selfBytes },
                    { "total_bytes", r->totalBytes }, { "self_blocks", r->selfBlocks }, { "total_blocks", r->totalBlocks } });
                // A site row's folded stack, outermost first (docs/stacks.md); the key keeps every recorded frame.
                if (g == GroupBy::Site && r->site && r->site < trace.siteCount()) {
                    json stack = json::array();
                    for (FrameId frame : foldStack(trace, trace.siteFrames(r->site)))
                        stack.push_back(stackFrameLabel(trace, trace.frames()[frame]));
                    rows.back()["stack"] = std::move(stack);
                }
            }
            bj["by_" + std::string(toString(g))] = rows;
        }
        bds.push_back(std::move(bj));
    }
    j["breakdowns"] = bds;
    return j;
}

void writeAnalysisCsv(const Analysis& a, std::string_view label, const ReportOptions& options, std::ostream& out, bool header)
{
    if (header)
        out << "trace,instant,time_ns,group,depth,key,label,self_bytes,total_bytes,self_blocks,total_blocks\n";
    for (const auto& b : a.breakdowns)
        for (auto g : options.groups)
            for (const auto* r : topRows(b, g, options.top))
                out << csvField(label) << ',' << csvField(b.instant.label) << ',' << b.instant.time << ',' << toString(g) << ','
                    << r->depth << ',' << csvField(r->key) << ',' << csvField(r->label) << ',' << r->selfBytes << ','
                    << r->totalBytes << ',' << r->selfBlocks << ',' << r->totalBlocks << '\n';
}

} // namespace gpumem::analyze
