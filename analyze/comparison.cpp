#include "analyze/comparison.h"

#include "analyze/trace_summary.h"
#include "core/counter_units.h"
#include "core/display_width.h"
#include "core/units.h"
#include "replay/capacity_fit.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <functional>
#include <numeric>
#include <tuple>

namespace gpumem::analyze {

namespace {
    std::optional<RecordedReserved> recordedReservedOf(const TraceSummary& summary, DeviceId device);
} // namespace

std::optional<RecordedReserved> recordedReserved(const Trace& trace, DeviceId device)
{
    return recordedReservedOf(summarize(trace), device);
}

std::optional<RecordedReserved> recordedReserved(const MemoryEventSource& source, DeviceId device)
{
    return recordedReservedOf(summarize(source), device);
}

std::optional<Bytes> recordedReservedBytes(const Trace& tables, DeviceId device, Bytes segmentPeak)
{
    if (segmentPeak > 0) // segment events win over counters (recordedReservedOf)
        return segmentPeak;
    // The counters' peaks as TraceSummary's finish takes them: samples of 0 bytes or more; a byte counter that
    // stays 0 was not recorded.
    const auto& series = tables.counterSeries();
    std::vector<std::optional<Bytes>> peaks(series.size());
    for (const auto& c : tables.counterSamples())
        if (c.series < peaks.size() && c.value >= 0 && series[c.series].device == device)
            peaks[c.series] = std::max(peaks[c.series].value_or(0), static_cast<Bytes>(c.value));
    std::optional<Bytes> out;
    for (std::size_t i = 0; i < series.size(); ++i) {
        if (!peaks[i])
            continue;
        std::string name(tables.str(series[i].name));
        if (*peaks[i] == 0 && isByteCounter(name))
            continue;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
        if (name.find("reserved") != std::string::npos && (!out || *peaks[i] > *out))
            out = *peaks[i];
    }
    return out;
}

namespace {
std::optional<RecordedReserved> recordedReservedOf(const TraceSummary& summary, DeviceId device)
{
    for (const auto& d : summary.devices) {
        if (d.device != device)
            continue;
        std::optional<RecordedReserved> out;
        std::optional<Bytes> allocated;
        for (const auto& [name, peak] : d.recordedPeaks) {
            std::string lower = name;
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
            if (lower.find("reserved") != std::string::npos && (!out || peak.bytes > out->bytes))
                out = RecordedReserved { peak.bytes, peak.time, name, std::nullopt };
            if (lower.find("allocated") != std::string::npos)
                allocated = std::max(allocated.value_or(0), peak.bytes);
        }
        if (d.peakReserved && d.peakReserved->bytes > 0)
            out = RecordedReserved { d.peakReserved->bytes, d.peakReserved->time, "segment events", std::nullopt };
        if (out)
            out->allocatedPeak = allocated ? allocated : (d.peakAllocated ? std::optional<Bytes>(d.peakAllocated->bytes) : std::nullopt);
        return out;
    }
    return std::nullopt;
}
} // namespace

namespace {
    // The context once its figures are known (the trace's tables give the pool names).
    ComparisonContext contextOf(const Trace& tables, replay::StartState start, const replay::MemoryBeforeWindow& before,
        const std::function<Bytes(Bytes opening, bool withRebuilt)>& livePeak, const TraceSummary& summary,
        DeviceId device)
    {
        ComparisonContext c;
        c.start = start;
        c.before = before;
        const bool recordedStart = start == replay::StartState::Recorded;
        c.lowerBound = livePeak(recordedStart ? c.before.openingAllocated : 0, recordedStart);
        c.recorded = recordedReservedOf(summary, device);
        for (const auto& d : summary.devices) {
            if (d.device != device)
                continue;
            c.recordedOoms = d.eventsByKind[static_cast<std::size_t>(EventKind::Oom)];
            if (d.firstOom) {
                c.recordedOomRequest = d.firstOom->request;
                c.recordedFirstOom = d.firstOom->time;
            }
            c.deviceTotal = d.totalMemory;
        }
        for (PoolId p = 0; p < tables.pools().size(); ++p)
            c.poolNames.push_back(poolName(tables, p));
        return c;
    }
} // namespace

ComparisonContext comparisonContext(const Trace& trace, DeviceId device, replay::StartState start)
{
    return contextOf(trace, start, replay::memoryBeforeWindow(trace, device),
        [&](Bytes opening, bool withRebuilt) { return replay::livePeak(trace, device, opening, withRebuilt); },
        summarize(trace), device);
}

ComparisonContext comparisonContext(const MemoryEventSource& source, DeviceId device, replay::StartState start)
{
    return contextOf(source.skeleton(), start, replay::memoryBeforeWindow(source, device),
        [&](Bytes opening, bool withRebuilt) { return replay::livePeak(source, device, opening, withRebuilt); },
        summarize(source), device);
}

std::string poolName(const Trace& trace, PoolId pool)
{
    if (pool == 0 || pool >= trace.pools().size())
        return pool == 0 ? "default" : "pool " + std::to_string(pool);
    const MemoryPool& p = trace.pools()[pool];
    return std::string(toString(p.kind)) + " (" + std::to_string(p.idFirst) + "," + std::to_string(p.idSecond) + ")";
}

std::vector<std::size_t> rankReplays(const std::vector<const replay::ReplayResult*>& results)
{
    std::vector<std::size_t> order(results.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](std::size_t i) {
        const auto& r = *results[i];
        return std::make_tuple(r.ooms, r.peakReserved.bytes, r.deviceCalls());
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return order;
}

double overBound(Bytes reserved, Bytes lowerBound) { return lowerBound == 0 ? 0.0 : double(reserved) / double(lowerBound); }

std::string overBoundText(Bytes reserved, Bytes lowerBound)
{
    if (lowerBound == 0)
        return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f x", overBound(reserved, lowerBound));
    return buf;
}

std::string markedBytes(Bytes bytes, bool lowerBound) { return (lowerBound ? "≥ " : "") + formatBytes(bytes); }

std::string bytesInUnitOf(Bytes bytes, Bytes unitOf)
{
    if (unitOf < 1024)
        return std::to_string(bytes) + " B";
    static constexpr std::array<const char*, 6> kUnits = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double scale = 1024.0, top = double(unitOf) / 1024.0;
    std::size_t unit = 0;
    while (top >= 1024.0 && unit + 1 < kUnits.size()) {
        top /= 1024.0;
        scale *= 1024.0;
        ++unit;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f %s", double(bytes) / scale, kUnits[unit]);
    return buf;
}

std::string shortenSpec(const std::string& spec, std::size_t width)
{
    if (displayWidth(spec) <= width)
        return spec;
    // "policy:" then options "key:value" (or "key=value") separated by ','; a wrapper's inner spec is left whole.
    const std::size_t colon = spec.find(':');
    if (colon == std::string::npos)
        return shortenMiddle(spec, width);
    struct Option {
        std::string key, rest; // rest: ":value" (or "" for a bare word)
        std::size_t kept; // columns of the key shown; a shorter key than its own gets a "…" (keys are ASCII)
    };
    std::vector<Option> options;
    for (std::size_t start = colon + 1; start <= spec.size();) {
        std::size_t end = spec.find(',', start);
        if (end == std::string::npos)
            end = spec.size();
        const std::string part = spec.substr(start, end - start);
        const std::size_t sep = part.find_first_of(":=");
        const std::string key = part.substr(0, sep);
        options.push_back({ key, sep == std::string::npos ? "" : part.substr(sep), key.size() });
        start = end + 1;
    }
    auto joined = [&] {
        std::string out = spec.substr(0, colon + 1);
        for (std::size_t i = 0; i < options.size(); ++i) {
            const Option& o = options[i];
            out += (i ? "," : "") + (o.kept < o.key.size() ? o.key.substr(0, o.kept) + "…" : o.key) + o.rest;
        }
        return out;
    };
    constexpr std::size_t kShortestKey = 4; // columns kept before the "…"
    std::string out = joined();
    while (displayWidth(out) > width) {
        // The longest shown key that can still lose a column (a key shortened once shows kept + 1 columns).
        auto shown = [](const Option& o) { return o.kept < o.key.size() ? o.kept + 1 : o.kept; };
        Option* longest = nullptr;
        for (auto& o : options)
            if (!o.rest.empty() && shown(o) > kShortestKey + 1 && (!longest || shown(o) > shown(*longest)))
                longest = &o;
        if (!longest)
            return shortenMiddle(out, width);
        longest->kept = shown(*longest) - 2; // one column less, with the "…"
        out = joined();
    }
    return out;
}

std::string shortenMiddle(const std::string& text, std::size_t width)
{
    if (displayWidth(text) <= width)
        return text;
    // Code points, so that a cut never splits a UTF-8 sequence.
    std::vector<std::string> chars;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t len = std::max<std::size_t>(1, characterLength(text, i));
        chars.push_back(text.substr(i, len));
        i += len;
    }
    if (width < 5) {
        std::string out;
        for (const auto& c : chars) {
            if (displayWidth(out + c) > width)
                break;
            out += c;
        }
        return out;
    }
    const std::size_t keep = width - 1; // one column for "…"
    const std::size_t tailWidth = keep - keep / 3; // the end carries the file:line
    std::string tail, head;
    for (std::size_t i = chars.size(); i-- > 0;) {
        if (displayWidth(chars[i] + tail) > tailWidth)
            break;
        tail = chars[i] + tail;
    }
    for (const auto& c : chars) {
        if (displayWidth(head + c) + displayWidth(tail) > keep)
            break;
        head += c;
    }
    return head + "…" + tail;
}

std::string wrapText(const std::string& text, std::size_t width, const std::string& indent, bool longWordsStay)
{
    // The text's own leading blanks stay (an indented line of a report); words are split at single blanks,
    // so runs of blanks inside a line survive as they are.
    const std::size_t lead = std::min(text.find_first_not_of(' '), text.size());
    std::string out, line = text.substr(0, lead);
    bool atStart = true; // no word on `line` yet
    std::size_t start = lead;
    // A figure and its unit ("+0.000004 s", "20.00 MiB", "1.039 x") stay on one line (review finding L7).
    auto isUnit = [](std::string_view w) {
        for (std::string_view u : { "s", "ms", "µs", "ns", "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "x", "%" })
            if (w == u || (w.size() > u.size() && w.substr(0, u.size()) == u && std::ispunct(static_cast<unsigned char>(w[u.size()]))
                              && w[u.size()] != '_' && w[u.size()] != '-'))
                return true;
        return false;
    };
    while (start < text.size()) {
        std::size_t end = text.find(' ', start);
        if (end == std::string::npos)
            end = text.size();
        if (end > start && std::isdigit(static_cast<unsigned char>(text[end - 1])) && end < text.size()) {
            std::size_t next = text.find(' ', end + 1);
            if (next == std::string::npos)
                next = text.size();
            if (isUnit(std::string_view(text).substr(end + 1, next - end - 1)))
                end = next;
        }
        const std::string word = text.substr(start, end - start);
        if (!atStart && width != 0 && !word.empty() && displayWidth(line) + 1 + displayWidth(word) > width
            && !(longWordsStay && displayWidth(indent) + displayWidth(word) > width)) {
            while (!line.empty() && line.back() == ' ')
                line.pop_back();
            out += line + '\n';
            line = indent + word;
        } else
            line += (atStart ? "" : " ") + word;
        atStart = false;
        start = end + 1;
    }
    while (!line.empty() && line.back() == ' ')
        line.pop_back();
    if (!line.empty())
        out += line + '\n';
    return out;
}

std::string recordedRowNote(const ComparisonContext& c, Bytes bestSimulatedReserved)
{
    if (!c.recorded)
        return {};
    std::string s = "recorded: the peak reserved the run itself reached (" + c.recorded->source + "), "
        + formatBytes(c.recorded->bytes) + ". ";
    if (c.start == replay::StartState::Empty && c.before.any())
        return s + "The simulated rows leave out the memory from before the trace (--start empty), so they are below it.";
    if (c.before.openingAllocated > 0)
        return s + "The simulated rows hold the " + formatBytes(c.before.openingAllocated)
            + " allocated before the trace, but not the cache the allocator had reserved around it then, which the "
              "trace does not show: their reserved figures are lower bounds (≥)"
            + (bestSimulatedReserved < c.recorded->bytes ? ", and the run reserved "
                        + formatBytes(c.recorded->bytes - bestSimulatedReserved) + " more than the best of them."
                                                         : ".");
    if (c.before.rebuiltEvents > 0)
        return s + "The simulated rows start from the same live blocks, each laid out by its policy; the recorded "
                   "allocator's cache also held what it had kept from before the window.";
    return s + "The simulated rows replay the same requests from an empty device.";
}

} // namespace gpumem::analyze
