#include "analyze/html_report.h"
#include "analyze/outside_layer.h"

#include "analyze/job_view.h"

#include "analyze/analysis_report.h"
#include "analyze/flame_graph.h"
#include "analyze/replay_report.h"
#include "core/byte_total.h"
#include "core/counter_units.h"
#include "core/message_quote.h"
#include "core/units.h"
#include "replay/fidelity.h"

#include <algorithm>
#include <limits>
#include <cstdio>
#include <ostream>
#include <sstream>

namespace gpumem::analyze {

std::string htmlEscape(std::string_view text)
{
    std::string s;
    s.reserve(text.size());
    // Controls and bidi overrides are escaped as on a terminal (textForTerminal): a browser honours U+202E.
    for (char c : textForTerminal(text)) {
        switch (c) {
        case '&': s += "&amp;"; break;
        case '<': s += "&lt;"; break;
        case '>': s += "&gt;"; break;
        case '"': s += "&quot;"; break;
        case '\'': s += "&#39;"; break;
        default: s += c;
        }
    }
    return s;
}

namespace {
    constexpr const char* kStyle = R"(body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}h3{font-size:15px;margin-bottom:6px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 14px}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.bar{background:#4c78a8;height:10px;display:inline-block}
.muted{color:#777}.leak{color:#b00;font-weight:bold}.ok{color:#080}svg{background:#fff;border:1px solid #ddd}
.legend span{display:inline-block;margin-right:16px;font-size:13px}.sw{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
code{font-size:12px})";

    std::string num(double v)
    {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }

    // One past the last event and at least 2 ns after the start, without overflowing at INT64_MAX.
    TimeNs axisEnd(TimeNs t0, TimeNs end)
    {
        constexpr TimeNs kMax = std::numeric_limits<TimeNs>::max();
        TimeNs t1 = std::max(end, t0 < kMax ? t0 + 1 : t0);
        return t1 < kMax ? t1 + 1 : t1;
    }
    struct Frame {
        double w = 1000, h = 260, left = 80, right = 16, top = 12, bottom = 34;
        TimeNs t0 = 0, t1 = 1;
        TimeNs origin = 0; // axis labels are offsets from it (the trace start, Analysis::origin)
        double ymax = 1;
        // Differences of int64 times in unsigned 64-bit (they can exceed INT64_MAX).
        static double between(TimeNs a, TimeNs b)
        {
            return b >= a ? static_cast<double>(nsBetween(a, b)) : -static_cast<double>(nsBetween(b, a));
        }
        double x(TimeNs t) const { return left + between(t0, t) / std::max(1.0, between(t0, t1)) * (w - left - right); }
        double y(double v) const { return top + (1.0 - std::min(v, ymax) / ymax) * (h - top - bottom); }
    };

    void axes(std::ostream& out, const Frame& f, bool bytes)
    {
        out << "<line x1='" << num(f.left) << "' y1='" << num(f.h - f.bottom) << "' x2='" << num(f.w - f.right) << "' y2='"
            << num(f.h - f.bottom) << "' stroke='#888'/>";
        out << "<line x1='" << num(f.left) << "' y1='" << num(f.top) << "' x2='" << num(f.left) << "' y2='" << num(f.h - f.bottom)
            << "' stroke='#888'/>";
        for (int k = 0; k <= 4; ++k) {
            const double v = f.ymax * k / 4.0;
            const double y = f.y(v);
            out << "<line x1='" << num(f.left) << "' y1='" << num(y) << "' x2='" << num(f.w - f.right) << "' y2='" << num(y)
                << "' stroke='#eee'/><text x='" << num(f.left - 6) << "' y='" << num(y + 4)
                << "' font-size='11' text-anchor='end'>" << (bytes ? formatBytes(static_cast<Bytes>(v)) : num(v) + " %") << "</text>";
        }
        for (int k = 0; k <= 5; ++k) {
            const std::uint64_t span = nsBetween(f.t0, f.t1);
            const TimeNs t = static_cast<TimeNs>(std::uint64_t(f.t0) + span / 5 * std::uint64_t(k) + span % 5 * std::uint64_t(k) / 5);
            out << "<text x='" << num(f.x(t)) << "' y='" << num(f.h - f.bottom + 16) << "' font-size='11' text-anchor='"
                << (k == 0 ? "start" : k == 5 ? "end" : "middle") << "'>+"
                << htmlEscape(formatSecondsBetween(f.origin, t)) << "</text>";
        }
    }

    void stepShading(std::ostream& out, const Frame& f, const StepSet& steps)
    {
        for (std::size_t i = 0; i < steps.steps.size(); ++i) {
            const auto& s = steps.steps[i];
            const double x0 = f.x(std::max(s.start, f.t0)), x1 = f.x(std::min(s.end, f.t1));
            if (x1 <= x0)
                continue;
            out << "<rect x='" << num(x0) << "' y='" << num(f.top) << "' width='" << num(x1 - x0) << "' height='"
                << num(f.h - f.top - f.bottom) << "' fill='" << (i % 2 ? "#f4f6fa" : "#e9eef6") << "'><title>step " << s.number
                << "</title></rect>";
        }
    }

    // A band between the bucket minima and maxima, and a line through the bucket's last values.
    void band(std::ostream& out, const Frame& f, const std::vector<Bucket>& b, const char* color, const char* name)
    {
        std::ostringstream upper, lower, line;
        bool any = false;
        for (const auto& k : b) {
            if (!k.valid)
                continue;
            any = true;
            upper << num(f.x(k.begin)) << ',' << num(f.y(static_cast<double>(k.max))) << ' ' << num(f.x(k.end)) << ','
                  << num(f.y(static_cast<double>(k.max))) << ' ';
            line << num(f.x(k.end)) << ',' << num(f.y(static_cast<double>(k.last))) << ' ';
        }
        if (!any)
            return;
        for (auto it = b.rbegin(); it != b.rend(); ++it)
            if (it->valid)
                lower << num(f.x(it->end)) << ',' << num(f.y(static_cast<double>(it->min))) << ' ' << num(f.x(it->begin)) << ','
                      << num(f.y(static_cast<double>(it->min))) << ' ';
        out << "<polygon points='" << upper.str() << lower.str() << "' fill='" << color << "' fill-opacity='0.25' stroke='none'/>";
        out << "<polyline points='" << line.str() << "' fill='none' stroke='" << color << "' stroke-width='1.5'><title>" << name
            << "</title></polyline>";
    }

    void legend(std::ostream& out, std::initializer_list<std::pair<const char*, const char*>> items)
    {
        out << "<div class='legend'>";
        for (const auto& [color, name] : items)
            out << "<span><i class='sw' style='background:" << color << "'></i>" << name << "</span>";
        out << "</div>";
    }

    // The charts' buckets from the in-memory timeline: n over [start, axisEnd(start, end)).
    ChartBuckets chartsOf(const Analysis& a, const DeviceTimeline& d, std::size_t n)
    {
        ChartBuckets c;
        c.start = a.timeline.start();
        c.end = a.timeline.end();
        const TimeNs t1 = axisEnd(c.start, c.end);
        for (auto kind : { SeriesKind::Allocated, SeriesKind::Active, SeriesKind::Reserved, SeriesKind::LargestFree, SeriesKind::RecordedAllocated })
            if (d.has(kind))
                c.series[static_cast<std::size_t>(kind)] = d.buckets(kind, c.start, t1, n);
        return c;
    }

    void memoryChart(std::ostream& out, const Analysis& a, const ChartBuckets& d, std::string_view reservedSource, std::size_t n)
    {
        Frame f;
        f.t0 = d.start;
        f.origin = a.origin;
        f.t1 = axisEnd(f.t0, d.end);
        const Bytes top = std::max({ a.stats.allocatedBytes.peak, a.stats.activeBytes.peak, a.stats.reservedBytes.peak,
            a.fragmentation.peakRecordedAllocated.value_or(0), Bytes { 1 } });
        f.ymax = static_cast<double>(top) * 1.05;
        out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << f.w << "' height='" << f.h << "' role='img'><title>memory over time</title>";
        stepShading(out, f, a.steps);
        axes(out, f, true);
        if (d.has(SeriesKind::Reserved))
            band(out, f, d.of(SeriesKind::Reserved), "#d62728", "reserved");
        band(out, f, d.of(SeriesKind::Active), "#2ca02c", "active");
        band(out, f, d.of(SeriesKind::Allocated), "#1f77b4", "allocated");
        if (d.has(SeriesKind::RecordedAllocated))
            band(out, f, d.of(SeriesKind::RecordedAllocated), "#8c564b", "recorded allocated counter");
        for (std::size_t i = 0; i < a.breakdowns.size(); ++i) {
            const auto& b = a.breakdowns[i];
            const double x = f.x(b.instant.time);
            out << "<line x1='" << num(x) << "' y1='" << num(f.top) << "' x2='" << num(x) << "' y2='" << num(f.h - f.bottom)
                << "' stroke='#444' stroke-dasharray='4 3'/><text x='" << num(x + 3) << "' y='" << num(f.top + 10 + 12.0 * static_cast<double>(i))
                << "' font-size='11'>" << htmlEscape(b.instant.label) << "</text>";
        }
        out << "</svg>";
        if (d.has(SeriesKind::RecordedAllocated))
            legend(out, { { "#1f77b4", "allocated" }, { "#2ca02c", "active" }, { "#8c564b", "recorded allocated counter" },
                            { "#d62728", "reserved" }, { "#e9eef6", "steps" } });
        else if (d.has(SeriesKind::Reserved))
            legend(out, { { "#1f77b4", "allocated" }, { "#2ca02c", "active" }, { "#d62728", "reserved" }, { "#e9eef6", "steps" } });
        else
            legend(out, { { "#1f77b4", "allocated" }, { "#2ca02c", "active" }, { "#e9eef6", "steps" } });
        out << "<p class='muted'>Bands span the minimum and maximum within each of " << n
            << " columns; lines follow the value at each column's end. Reserved from " << htmlEscape(reservedSource.empty() ? "nowhere (not recorded)" : reservedSource)
            << ".</p>";
    }

    void fragmentationChart(std::ostream& out, const Analysis& a, const ChartBuckets& d, std::size_t n)
    {
        if (!d.has(SeriesKind::Reserved)) {
            out << "<p class='muted'>No reserved series (no segment events or reserved counter): fragmentation over time needs one; "
                   "replay the trace with a policy to simulate it.</p>";
            return;
        }
        Frame f;
        f.t0 = d.start;
        f.origin = a.origin;
        f.t1 = axisEnd(f.t0, d.end);
        f.ymax = 100;
        f.h = 200;
        auto alloc = d.of(d.allocatedForRatiosKind());
        auto res = d.of(SeriesKind::Reserved);
        std::vector<Bucket> largest;
        if (d.has(SeriesKind::LargestFree))
            largest = d.of(SeriesKind::LargestFree);
        std::ostringstream waste, external;
        for (std::size_t i = 0; i < n; ++i) {
            if (!alloc[i].valid || !res[i].valid || res[i].last == 0)
                continue;
            const double r = static_cast<double>(res[i].last), al = static_cast<double>(std::min(alloc[i].last, res[i].last));
            waste << num(f.x(alloc[i].end)) << ',' << num(f.y(100.0 * (1.0 - al / r))) << ' ';
            if (!largest.empty() && res[i].last > alloc[i].last)
                external << num(f.x(alloc[i].end)) << ','
                         << num(f.y(100.0 * std::max(0.0, 1.0 - static_cast<double>(largest[i].last) / (r - al)))) << ' ';
        }
        out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << f.w << "' height='" << f.h << "' role='img'><title>fragmentation over time</title>";
        stepShading(out, f, a.steps);
        axes(out, f, false);
        out << "<polyline points='" << waste.str() << "' fill='none' stroke='#9467bd' stroke-width='1.5'/>";
        if (!largest.empty())
            out << "<polyline points='" << external.str() << "' fill='none' stroke='#ff7f0e' stroke-width='1.5'/>";
        out << "</svg>";
        if (!largest.empty())
            legend(out, { { "#9467bd", "1 − allocated/reserved (PyTorch)" }, { "#ff7f0e", "1 − largest free/free (TF BFC)" } });
        else
            legend(out, { { "#9467bd", "1 − allocated/reserved (PyTorch)" } });
    }

    void kvRow(std::ostream& out, std::string_view k, std::string_view v)
    {
        out << "<tr><td>" << htmlEscape(k) << "</td><td class='n'>" << htmlEscape(v) << "</td></tr>";
    }

    // before: bytes allocated before a profiler trace began (replay::openingAllocated), 0 if none.
    void summaryTable(std::ostream& out, const Analysis& a, Bytes before, const Trace* trace)
    {
        const auto& f = a.fragmentation;
        // The same warning `gpumem analyze` prints (review finding: the page left it out and showed
        // "Peak reserved / lower bound 10917.070 x" for a counter holding a preallocated KV cache).
        if (auto note = memoryBeforeTheTraceNote(before))
            out << "<p class='note'>Note: " << htmlEscape(*note)
                << ": peak allocated, peak active and the breakdowns cover what was allocated inside the trace; "
                   "the recorded counters (peak reserved, the recorded allocated counter) and the lower bound "
                   "include it.</p>";
        out << "<table>";
        kvRow(out, "Peak allocated", formatByteTotalShort(f.peakAllocated));
        kvRow(out, "Peak active", formatByteTotalShort(f.peakActive));
        for (const auto& [label, value] : fragmentationRows(f))
            kvRow(out, label, value);
        kvRow(out, "Allocations / OOMs", std::to_string(a.stats.allocations.allocated) + " / " + std::to_string(a.stats.ooms));
        // The layer outside the allocator (core/outside_memory.h), only when the trace records it.
        if (auto outside = trace ? outsideMemory(*trace, a.device) : std::nullopt) {
            kvRow(out, "Outside the allocator", outsideMemoryText(*outside));
            const Bytes total = a.device < trace->devices().size() ? trace->devices()[a.device].totalMemory : 0;
            kvRow(out, "Layers at the peaks",
                memoryLayersText(a.stats.allocatedBytes.peak,
                    a.fragmentation.peakReserved ? std::optional<Bytes>(a.stats.reservedBytes.peak) : std::nullopt,
                    *outside, total));
        }
        out << "</table>";
        if (bytesSaturated(a))
            out << "<p class='note'>" << htmlEscape(kSaturatedNote)
                << "</p>";
    }

    void breakdownTables(std::ostream& out, const Breakdown& b, const Analysis& a, std::size_t top, const Trace* trace)
    {
        out << "<h3>Live at " << htmlEscape(b.instant.label) << ", +" << htmlEscape(formatSecondsBetween(a.origin, b.instant.time)) << ": "
            << htmlEscape(formatByteTotalShort(b.liveBytes)) << " in " << counted(b.liveBlocks, "block", "blocks");
        if (b.instant.reserved)
            out << " (reserved " << htmlEscape(formatByteTotalShort(*b.instant.reserved)) << ")";
        out << "</h3>";
        // The flame graph of the code tree where the trace has stacks (docs/stacks.md): no script, hover = <title>.
        if (trace && trace->siteCount() > 1 && b.liveBlocks > 0) {
            out << "<p class='muted'>Live bytes by call stack (allocator and interpreter frames folded; hover a frame for "
                   "its bytes, blocks and file:line).</p>";
            writeFlameGraphSvg(*trace, b.blocks.empty() ? buildCodeTree(*trace, b.liveAllocations) : buildCodeTree(*trace, b.blocks), {}, out);
        }
        for (int gi = 0; gi < kGroupByCount; ++gi) {
            const auto g = static_cast<GroupBy>(gi);
            const bool module = g == GroupBy::Module;
            out << "<table><tr><th>by " << toString(g)
                << (g == GroupBy::Category && b.categoriesInferred ? " (inferred)" : "") << "</th>" << (module ? "<th class='n'>self</th>" : "")
                << "<th class='n'>total</th><th class='n'>blocks</th><th>share</th></tr>";
            for (const auto* r : topRows(b, g, top)) {
                const double share = b.liveBytes ? static_cast<double>(r->totalBytes) / static_cast<double>(b.liveBytes) : 0;
                // A stack's tooltip is its folded stack (docs/stacks.md), not the allocator's frames of the key.
                const std::string tip = g == GroupBy::Site && r->site && trace ? foldedStackText(*trace, r->site) : r->key;
                out << "<tr><td title='" << htmlEscape(tip) << "' style='padding-left:" << 8 + 14 * r->depth << "px'>" << htmlEscape(r->label)
                    << "</td>";
                if (module)
                    out << "<td class='n'>" << htmlEscape(formatByteTotalShort(r->selfBytes)) << "</td>";
                out << "<td class='n'>" << htmlEscape(formatByteTotalShort(r->totalBytes)) << "</td><td class='n'>" << r->totalBlocks
                    << "</td><td><span class='bar' style='width:" << num(share * 200) << "px'></span> " << percent(share) << "</td></tr>";
            }
            out << "</table>";
        }
    }

    void stepsSection(std::ostream& out, const Analysis& a, std::size_t top)
    {
        if (a.steps.steps.empty()) {
            auto note = stepSearchNote(a.steps);
            note[0] = 'N';
            out << "<p class='muted'>" << htmlEscape(note) << ".</p>";
            return;
        }
        out << "<p>Found by " << htmlEscape(toString(a.steps.source)) << ": " << htmlEscape(a.steps.detail) << ".</p>";
        if (auto note = stepSearchNote(a.steps); !note.empty())
            out << "<p class='muted'>" << htmlEscape(note) << ".</p>";
        Bytes maxPeak = 1;
        for (const auto& s : a.steps.steps)
            maxPeak = std::max(maxPeak, s.peakAllocated);
        out << "<table><tr><th class='n'>step</th><th class='n'>start</th><th class='n'>duration</th><th>peak allocated</th>"
               "<th class='n'>growth</th><th>backward from</th></tr>";
        for (const auto& s : a.steps.steps) {
            out << "<tr><td class='n'>" << s.number << "</td><td class='n'>+" << htmlEscape(formatSecondsBetween(a.origin, s.start))
                << "</td><td class='n'>" << htmlEscape(formatSecondsBetween(s.start, s.end)) << "</td><td><span class='bar' style='width:"
                << num(200.0 * static_cast<double>(s.peakAllocated) / static_cast<double>(maxPeak)) << "px'></span> "
                << htmlEscape(formatByteTotalShort(s.peakAllocated)) << "</td><td class='n'>"
                << htmlEscape(formatByteChange(s.allocatedAtStart, s.allocatedAtEnd)) << "</td><td>"
                << htmlEscape(backwardSource(a.steps, s)) << "</td></tr>";
        }
        out << "</table>";
        if (!a.categoriesRecorded)
            out << "<p class='muted'>Categories inferred; " << htmlEscape(phaseNote(a.steps)) << ".</p>";
        const auto& l = a.leaks;
        out << "<p class='" << (l.leaking ? "leak" : "ok") << "'>" << (l.leaking ? "Leak: " : "No leak: ") << htmlEscape(l.reason) << ".</p>";
        if (l.leaking) {
            out << "<p>Growth per step: " << htmlEscape(formatBytes(static_cast<Bytes>(l.growthPerStep))) << ". Sites whose blocks from "
                   "several steps are still live at the end of the last step:</p><table><tr><th>site</th><th class='n'>bytes</th>"
                   "<th class='n'>blocks</th><th class='n'>steps</th></tr>";
            for (std::size_t i = 0; i < l.sites.size() && i < top; ++i)
                out << "<tr><td>" << htmlEscape(l.sites[i].label) << "</td><td class='n'>" << htmlEscape(formatByteTotalShort(l.sites[i].bytes))
                    << "</td><td class='n'>" << l.sites[i].blocks << "</td><td class='n'>" << l.sites[i].stepsWithSurvivors << "</td></tr>";
            out << "</table>";
        }
    }
    // A trace with memory counters only (Analysis::countersOnly): its counters on the analyzed device as step
    // lines over time, their peaks, and why nothing else is shown.
    void countersOnlySection(std::ostream& out, const Trace& trace, const Analysis& a)
    {
        out << "<p>Counters only: this trace predates the PyTorch profiler's <code>Addr</code> field (PyTorch &lt;= 1.9 "
               "records each <code>[memory]</code> event with its size and no address), so blocks cannot be paired or placed. "
               "There is no block-level analysis (breakdowns, steps, leaks, fragmentation) and no replay; below are the "
               "memory counters it recorded for "
            << htmlEscape(a.deviceLabel) << ".</p>\n";
        const auto series = trace.counterSeries();
        std::vector<std::uint32_t> shown;
        for (std::uint32_t i = 0; i < series.size(); ++i)
            if (series[i].device == a.device && isByteCounter(trace.str(series[i].name)))
                shown.push_back(i);
        std::vector<std::vector<CounterSample>> samples(series.size());
        TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
        std::int64_t top = 1;
        for (const auto& c : trace.counterSamples())
            if (std::find(shown.begin(), shown.end(), c.series) != shown.end()) {
                samples[c.series].push_back(c);
                first = std::min(first, c.time);
                last = std::max(last, c.time);
                top = std::max(top, c.value);
            }
        if (first > last) {
            out << "<p class='muted'>No memory counter was recorded for this device.</p>";
            return;
        }
        Frame f;
        f.t0 = first;
        f.origin = a.origin;
        f.t1 = axisEnd(f.t0, last);
        f.ymax = static_cast<double>(top) * 1.05;
        static constexpr const char* kColors[] = { "#1f77b4", "#d62728", "#2ca02c", "#8c564b", "#9467bd", "#ff7f0e" };
        out << "<h3>Recorded memory counters over time</h3><svg xmlns='http://www.w3.org/2000/svg' width='" << f.w << "' height='" << f.h
            << "' role='img'><title>recorded memory counters over time</title>";
        axes(out, f, true);
        for (std::size_t k = 0; k < shown.size(); ++k) {
            std::ostringstream line;
            double y = f.y(0);
            for (const auto& c : samples[shown[k]]) {
                const double x = f.x(c.time), ny = f.y(static_cast<double>(std::max<std::int64_t>(c.value, 0)));
                line << num(x) << ',' << num(y) << ' ' << num(x) << ',' << num(ny) << ' ';
                y = ny;
            }
            line << num(f.x(f.t1)) << ',' << num(y);
            out << "<polyline points='" << line.str() << "' fill='none' stroke='" << kColors[k % std::size(kColors)]
                << "' stroke-width='1.5'><title>" << htmlEscape(trace.str(series[shown[k]].name)) << "</title></polyline>";
        }
        out << "</svg><div class='legend'>";
        for (std::size_t k = 0; k < shown.size(); ++k)
            out << "<span><i class='sw' style='background:" << kColors[k % std::size(kColors)] << "'></i>"
                << htmlEscape(trace.str(series[shown[k]].name)) << "</span>";
        out << "</div>\n<table><tr><th>counter</th><th class='n'>samples</th><th class='n'>peak</th><th class='n'>at</th></tr>";
        for (auto i : shown) {
            if (samples[i].empty())
                continue;
            const auto peak = std::max_element(samples[i].begin(), samples[i].end(),
                [](const CounterSample& x, const CounterSample& y) { return x.value < y.value; });
            out << "<tr><td>" << htmlEscape(trace.str(series[i].name)) << "</td><td class='n'>" << samples[i].size() << "</td><td class='n'>"
                << htmlEscape(formatBytes(static_cast<Bytes>(std::max<std::int64_t>(peak->value, 0)))) << "</td><td class='n'>+"
                << htmlEscape(formatSecondsBetween(a.origin, peak->time)) << "</td></tr>";
        }
        out << "</table>\n";
    }
} // namespace

TimeNs reportChartEnd(TimeNs start, TimeNs end) { return axisEnd(start, end); }

void writeHtmlReport(std::span<const HtmlReportInput> inputs, std::span<const PolicyRow> policies, const HtmlOptions& options, std::ostream& out)
{
    out << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>" << htmlEscape(options.title)
        << "</title><style>" << kStyle << "</style></head><body>\n<h1>" << htmlEscape(options.title) << "</h1>\n";
    out << "<p class='muted'>Definitions of every figure: docs/analysis.md. Times are offsets from each trace's start, its earliest record of any kind, as in gpumem info.</p>\n";
    if (options.jobView)
        writeJobViewHtml(*options.jobView, options.top, out);
    for (const auto& in : inputs) {
        const Analysis& a = *in.analysis;
        out << "<h2>" << htmlEscape(in.label) << " — " << htmlEscape(a.deviceLabel) << "</h2>\n";
        if (const std::size_t k = std::size_t(&in - inputs.data()); k < options.verdicts.size() && !options.verdicts[k].empty())
            out << "<p class='verdict'><strong>Verdict:</strong> " << htmlEscape(options.verdicts[k]) << "</p>\n";
        const auto* d = a.timeline.device(a.device);
        if (a.countersOnly && in.trace) {
            countersOnlySection(out, *in.trace, a);
            continue;
        }
        if (a.empty || (!d && !in.charts)) {
            out << "<p class='muted'>No memory events on this device.</p>\n";
            continue;
        }
        const ChartBuckets charts = in.charts ? *in.charts : chartsOf(a, *d, options.buckets);
        out << "<h3>Memory over time</h3>";
        memoryChart(out, a, charts, in.charts ? std::string_view(a.reservedSource) : std::string_view(d->reservedSource), options.buckets);
        out << "\n<h3>Fragmentation over time</h3>";
        fragmentationChart(out, a, charts, options.buckets);
        out << "\n<h3>Summary</h3>";
        // A streamed trace's skeleton holds no memory event to find the opening request in: the analysis has it.
        summaryTable(out, a, in.charts ? a.fragmentation.openingAllocated : in.trace ? replay::openingAllocated(*in.trace, a.device) : 0, in.trace);
        out << "\n<h3>Steps and leaks</h3>";
        stepsSection(out, a, options.top);
        out << "\n<h3>Peak breakdown</h3>";
        if (a.agreementAtPeak)
            out << "<p class='muted'>Categories recorded by the trace; inference would agree on " << percent(a.agreementAtPeak->share())
                << " of bytes at the peak.</p>";
        for (const auto& b : a.breakdowns)
            breakdownTables(out, b, a, options.top, in.trace);
        if (!a.reservedBreakdownOmitted.empty())
            out << "<p class='muted'>No breakdown at the reserved peak: " << htmlEscape(a.reservedBreakdownOmitted) << ".</p>";
        out << '\n';
    }
    out << "<h2>Policy comparison</h2>\n";
    if (policies.empty() && options.policySkipped.empty()) {
        out << "<p class='muted'>" << htmlEscape(options.policyNote) << "</p>\n";
    } else if (policies.empty()) {
    } else {
        out << "<table><tr><th>trace</th><th>policy</th><th class='n'>peak reserved</th><th class='n'>peak allocated</th>"
               "<th class='n'>reserved / lower bound</th><th class='n'>device calls</th><th class='n'>failed requests</th><th class='n'>rank</th><th>note</th></tr>";
        for (const auto& p : policies) {
            std::string overhead = "–";
            if (p.overheadVsLowerBound) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%.3f", *p.overheadVsLowerBound);
                overhead = buf;
            }
            out << "<tr><td>" << htmlEscape(p.trace) << "</td><td><code>" << htmlEscape(p.policy) << "</code></td><td class='n'>"
                << htmlEscape((p.reservedIsLowerBound ? "≥ " : "") + formatBytes(p.peakReserved)) << "</td><td class='n'>"
                << (p.recorded && p.peakAllocated == 0 ? std::string("–") : htmlEscape(formatBytes(p.peakAllocated)))
                << "</td><td class='n'>" << overhead << "</td><td class='n'>"
                << (p.recorded ? std::string("–") : std::to_string(p.deviceCalls)) << "</td><td class='n'>"
                << (p.recorded ? std::string("–") : std::to_string(p.failedRequests)) << "</td><td class='n'>"
                << (p.rank ? std::to_string(p.rank) : std::string("–")) << "</td><td>" << htmlEscape(p.note) << "</td></tr>";
        }
        out << "</table>\n";
        for (const auto& note : options.policyNotes)
            out << "<p class='muted'>" << htmlEscape(note) << "</p>\n";
    }
    for (const auto& note : options.policySkipped)
        out << "<p class='muted'>" << htmlEscape(note) << "</p>\n";
    out << "</body></html>\n";
}

} // namespace gpumem::analyze
