#include "analyze/summary_report.h"

#include "analyze/outside_layer.h"

#include "analyze/comparison.h" // wrapText
#include "core/byte_total.h"
#include "core/counter_units.h"
#include "core/display_width.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ostream>

namespace gpumem::analyze {

namespace {
    std::string kindCounts(const DeviceSummary& d)
    {
        std::string s;
        for (int k = 0; k < kEventKindCount; ++k) {
            if (d.eventsByKind[k] == 0)
                continue;
            s += (s.empty() ? "" : ", ") + std::string(toString(static_cast<EventKind>(k))) + " "
                + std::to_string(d.eventsByKind[k]);
        }
        return s.empty() ? "none" : s;
    }
    std::string peakText(const Peak& p, TimeNs start)
    {
        // A saturated peak (core/byte_total.h) says so instead of printing 2^64 − 1 as a byte count; briefly, so
        // that the line with its time fits 100 columns (formatByteTotal's sentence made it 102).
        return (isSaturated(p.bytes) ? formatByteTotalShort(p.bytes) + " (saturated at 2^64 - 1 B)"
                                     : formatBytes(p.bytes) + " (" + std::to_string(p.bytes) + " B)")
            + " at +" + formatSecondsBetween(start, p.time);
    }
    // Counters are bytes unless their name ends in "(ppm)", a ratio in parts per million (the xplane
    // importer's "Fragmentation (ppm)"), or "(count)", a number of things (memory_summary's
    // "num_alloc_retries (count)"): core/counter_units.h, docs/trace-format.md §4.7.
    std::string counterPeakText(std::string_view name, const Peak& p, TimeNs start)
    {
        if (counterUnit(name) == CounterUnit::Count)
            return std::to_string(p.bytes) + " at +" + formatSecondsBetween(start, p.time);
        if (counterUnit(name) == CounterUnit::PartsPerMillion) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.2f %% (%llu ppm) at +", double(p.bytes) / 1e4,
                static_cast<unsigned long long>(p.bytes));
            return buf + formatSecondsBetween(start, p.time);
        }
        return peakText(p, start);
    }
    // A torch.cuda.memory_stats() total since the process started, not a level: "<stat>.<pool>.allocated" and
    // ".freed" count every byte (or block) ever allocated or freed (PyTorch CUDACachingAllocator.h, Stat:
    // current, peak, allocated, freed). Its largest sample is no peak of memory (review finding: "recorded peak
    // allocated_bytes.all.allocated: 749.75 TiB").
    bool isCumulativeMemoryStat(std::string_view name)
    {
        const auto dot = name.find('.');
        if (dot == std::string_view::npos || dot == 0 || name.find('.', dot + 1) == std::string_view::npos)
            return false; // "<stat>.<pool>.<kind>"
        return name.ends_with(".allocated") || name.ends_with(".freed");
    }
    // `prefix` and the items of `list` ("alloc 2, free 2, …"), within 100 columns: broken only between items,
    // continuations under the first item.
    std::string listLines(const std::string& prefix, const std::string& list)
    {
        std::string out, line = prefix;
        bool first = true;
        for (std::size_t start = 0; start <= list.size();) {
            std::size_t end = list.find(", ", start);
            if (end == std::string::npos)
                end = list.size();
            const std::string item = list.substr(start, end - start) + (end < list.size() ? "," : "");
            if (!first && displayWidth(line) + 1 + displayWidth(item) > 100) {
                out += line + '\n';
                line = std::string(displayWidth(prefix), ' ') + item;
            } else
                line += (first ? "" : " ") + item;
            first = false;
            start = end + 2;
        }
        return out + line + '\n';
    }
    // "0", "1 range", "2035 (2030 ranges, 5 steps)".
    std::string annotationCounts(const TraceSummary& s)
    {
        static constexpr std::pair<const char*, const char*> kNames[] = { { "range", "ranges" }, { "step", "steps" },
            { "instant", "instants" } };
        std::string kinds;
        int present = 0;
        for (std::size_t k = 0; k < s.annotationsByKind.size(); ++k) {
            if (s.annotationsByKind[k] == 0)
                continue;
            kinds += (kinds.empty() ? "" : ", ") + counted(s.annotationsByKind[k], kNames[k].first, kNames[k].second);
            ++present;
        }
        if (present == 0)
            return std::to_string(s.annotations);
        return present == 1 ? kinds : std::to_string(s.annotations) + " (" + kinds + ")";
    }
    // ", 2 kernel streams, memory events on 1 stream": the streams that carry each, not the stream table.
    std::string streamCounts(const DeviceSummary& d)
    {
        std::string s;
        if (d.kernelStreams)
            s += ", " + counted(d.kernelStreams, "kernel stream", "kernel streams");
        if (d.memoryStreams)
            s += ", memory events on " + counted(d.memoryStreams, "stream", "streams");
        return s;
    }
} // namespace

void writeSummaryText(const TraceSummary& s, std::string_view label, std::string_view reader, std::ostream& out)
{
    out << textForTerminal(label) << '\n';
    out << "  format          " << textForTerminal(reader);
    if (!s.sourceFormat.empty() && s.sourceFormat != reader)
        out << " (recorded from " << textForTerminal(s.sourceFormat) << ")";
    out << '\n';
    if (!s.tool.empty())
        out << wrapText("  tool            " + textForTerminal(s.tool), 100, std::string(18, ' '));
    out << "  time span       " << formatSecondsBetween(s.start, s.end) << " (start " << s.start << " ns)\n";
    out << "  memory events   " << s.memoryEvents << '\n';
    out << "  allocations     " << s.allocations << '\n';
    out << "  kernels         " << s.kernels << '\n';
    out << "  annotations     " << annotationCounts(s) << '\n';
    out << "  counter samples " << s.counterSamples << '\n';
    for (const auto& d : s.devices) {
        out << "  device " << textForTerminal(d.label);
        if (!d.name.empty())
            out << " \"" << textForTerminal(d.name) << "\"";
        if (d.totalMemory)
            out << " (" << formatBytes(d.totalMemory) << ")";
        out << streamCounts(d) << '\n';
        out << listLines("    events          ", kindCounts(d));
        if (d.kernels)
            out << "    kernels         " << d.kernels << '\n';
        out << "    live at end     " << counted(d.liveAtEnd, "block", "blocks") << ", " << formatByteTotal(d.liveBytesAtEnd) << '\n';
        if (d.peakAllocated)
            out << "    peak allocated  " << peakText(*d.peakAllocated, s.start) << '\n';
        if (d.peakReserved)
            out << "    peak reserved   " << peakText(*d.peakReserved, s.start) << " (from segment events)\n";
        for (const auto& [name, peak] : d.recordedPeaks)
            out << wrapText((isCumulativeMemoryStat(name) ? "    recorded total  " : "    recorded peak   ")
                    + textForTerminal(name) + ": " + counterPeakText(name, peak, s.start),
                100, std::string(20, ' '));
        if (d.allocatedBeforeTrace)
            out << wrapText("    before trace    " + formatBytes(d.allocatedBeforeTrace)
                    + " already allocated when the trace began: in the recorded peaks, not in peak allocated",
                100, std::string(20, ' '));
        if (d.outside)
            out << wrapText("    outside         " + outsideMemoryText(*d.outside), 100, std::string(20, ' '));
    }
    if (s.anomalies.empty()) {
        out << "  anomalies       none\n";
    } else {
        out << "  anomalies\n";
        for (const auto& a : s.anomalies)
            out << wrapText("    " + std::string(toString(a.severity)) + ' ' + textForTerminal(a.code) + " ×" + std::to_string(a.count) + ": "
                    + messageForTerminal(a.detail),
                100, "      ");
    }
}

nlohmann::json summaryToJson(const TraceSummary& s, std::string_view label, std::string_view reader)
{
    auto peak = [&](const Peak& p) { return nlohmann::json { { "bytes", p.bytes }, { "time_ns", p.time }, { "offset_ns", nsBetween(s.start, p.time) } }; }; // p.time ≥ start: exact where int64 overflows
    nlohmann::json j;
    j["file"] = label;
    j["reader"] = reader;
    j["source_format"] = s.sourceFormat;
    j["tool"] = s.tool;
    j["start_ns"] = s.start;
    j["end_ns"] = s.end;
    j["memory_events"] = s.memoryEvents;
    j["allocations"] = s.allocations;
    j["kernels"] = s.kernels;
    j["annotations"] = s.annotations;
    j["annotations_by_kind"] = { { "range", s.annotationsByKind[0] }, { "step", s.annotationsByKind[1] },
        { "instant", s.annotationsByKind[2] } };
    j["counter_samples"] = s.counterSamples;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : s.devices) {
        nlohmann::json dj;
        dj["label"] = d.label;
        dj["name"] = d.name;
        dj["total_memory"] = d.totalMemory;
        dj["streams"] = d.streams;
        dj["kernel_streams"] = d.kernelStreams;
        dj["memory_streams"] = d.memoryStreams;
        dj["kernels"] = d.kernels;
        nlohmann::json kinds = nlohmann::json::object();
        for (int k = 0; k < kEventKindCount; ++k)
            kinds[std::string(toString(static_cast<EventKind>(k)))] = d.eventsByKind[k];
        dj["events"] = kinds;
        dj["live_at_end"] = { { "blocks", d.liveAtEnd }, { "bytes", d.liveBytesAtEnd } };
        dj["peak_allocated"] = d.peakAllocated ? peak(*d.peakAllocated) : nlohmann::json();
        dj["peak_reserved"] = d.peakReserved ? peak(*d.peakReserved) : nlohmann::json();
        nlohmann::json recorded = nlohmann::json::object();
        for (const auto& [name, p] : d.recordedPeaks)
            recorded[name] = peak(p);
        dj["recorded_peaks"] = recorded;
        dj["allocated_before_trace"] = d.allocatedBeforeTrace;
        if (d.outside)
            dj["outside_allocator"] = outsideMemoryToJson(*d.outside);
        // True when a byte total of this device reached 2^64 − 1 (core/byte_total.h): those fields hold
        // 18446744073709551615 and mean "at least".
        dj["bytes_saturated"] = isSaturated(d.liveBytesAtEnd) || (d.peakAllocated && isSaturated(d.peakAllocated->bytes))
            || (d.peakReserved && isSaturated(d.peakReserved->bytes));
        j["devices"].push_back(std::move(dj));
    }
    j["anomalies"] = nlohmann::json::array();
    for (const auto& a : s.anomalies)
        j["anomalies"].push_back({ { "code", a.code }, { "severity", toString(a.severity) }, { "count", a.count }, { "detail", a.detail } });
    return j;
}

} // namespace gpumem::analyze
