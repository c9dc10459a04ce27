#include "analyze/trace_summary.h"

#include "core/byte_total.h"
#include "core/counter_units.h"
#include "replay/fidelity.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

namespace gpumem::analyze {

std::string deviceLabel(const Device& device)
{
    if (device.type == DeviceType::Cpu)
        return "cpu";
    return std::string(toString(device.type)) + ":" + std::to_string(device.ordinal);
}

std::optional<std::string> countersOnlyNote(const Trace& trace)
{
    if (trace.memory().count() != 0 || trace.counterSamples().empty())
        return std::nullopt;
    if (trace.stats().find("no_addresses"))
        return std::string("this trace has memory counters only: its memory events record sizes without addresses "
                           "(PyTorch <= 1.9 profiler) and cannot be paired into blocks with lifetimes");
    return std::string("this trace has memory counters only: it records no memory events, hence no blocks with lifetimes");
}

std::optional<DeviceId> busiestCounterDevice(const TraceSummary& summary)
{
    std::optional<DeviceId> best;
    Bytes bestPeak = 0;
    for (const auto& d : summary.devices)
        for (const auto& [name, peak] : d.recordedPeaks)
            if (isByteCounter(name) && peak.bytes > bestPeak) {
                best = d.device;
                bestPeak = peak.bytes;
            }
    return best;
}

TimeSpan traceSpan(const Trace& trace)
{
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    auto see = [&](TimeNs a, TimeNs b) {
        lo = std::min(lo, a);
        hi = std::max(hi, b);
    };
    const auto& m = trace.memory();
    if (m.count())
        see(m.time.front(), m.time.back());
    for (const auto& k : trace.kernels())
        see(k.start, k.end);
    for (const auto& a : trace.annotations())
        see(a.start, a.end);
    if (!trace.counterSamples().empty())
        see(trace.counterSamples().front().time, trace.counterSamples().back().time);
    return lo <= hi ? TimeSpan { lo, hi } : TimeSpan {};
}

TraceSummary summarize(const Trace& trace)
{
    TraceSummary s;
    const auto& meta = trace.metadata();
    if (meta.is_object()) {
        if (auto it = meta.find("tool"); it != meta.end() && it->is_string())
            s.tool = it->get<std::string>();
        if (auto it = meta.find("tool_version"); it != meta.end() && it->is_string())
        {
            if (!s.tool.empty())
                s.tool += ' ';
            s.tool += it->get<std::string>();
        }
        if (auto it = meta.find("source_format"); it != meta.end() && it->is_string())
            s.sourceFormat = it->get<std::string>();
    }
    const auto& m = trace.memory();
    s.memoryEvents = m.count();
    s.kernels = trace.kernels().size();
    s.annotations = trace.annotations().size();
    s.counterSamples = trace.counterSamples().size();

    s.devices.resize(trace.devices().size());
    for (std::size_t d = 0; d < trace.devices().size(); ++d) {
        const auto& dev = trace.devices()[d];
        auto& ds = s.devices[d];
        ds.device = static_cast<DeviceId>(d);
        ds.label = deviceLabel(dev);
        ds.name = std::string(trace.str(dev.name));
        ds.totalMemory = dev.totalMemory;
        ds.outside = outsideMemory(trace, static_cast<DeviceId>(d));
    }
    for (const auto& a : trace.annotations())
        if (static_cast<std::size_t>(a.kind) < s.annotationsByKind.size())
            ++s.annotationsByKind[static_cast<std::size_t>(a.kind)];
    for (const auto& st : trace.streams())
        if (st.device < s.devices.size())
            ++s.devices[st.device].streams;
    // Which streams carry kernels (bit 1) and memory events (bit 2).
    std::vector<std::uint8_t> used(trace.streams().size(), 0);
    for (const auto& k : trace.kernels()) {
        if (k.device < s.devices.size())
            ++s.devices[k.device].kernels;
        if (k.stream < used.size())
            used[k.stream] |= 1;
    }
    for (StreamId st : m.stream)
        if (st < used.size())
            used[st] |= 2;
    for (std::size_t i = 0; i < used.size(); ++i) {
        const DeviceId d = trace.streams()[i].device;
        if (d >= s.devices.size())
            continue;
        s.devices[d].kernelStreams += (used[i] & 1) != 0;
        s.devices[d].memoryStreams += (used[i] & 2) != 0;
    }

    const TimeSpan span = traceSpan(trace);
    s.start = span.start;
    s.end = span.end;

    // Which alloc events are paired with a free inside the trace, and which free events close one.
    auto allocations = trace.allocations();
    s.allocations = allocations.size();
    std::vector<std::uint8_t> closesAllocation(m.count(), 0);
    std::vector<ByteTotal> liveAtEnd(s.devices.size());
    for (const auto& a : allocations) {
        if (a.freeEvent != kNoIndex)
            closesAllocation[a.freeEvent] = 1;
        else if (a.allocEvent != kNoIndex) {
            auto& ds = s.devices[m.device[a.allocEvent]];
            ++ds.liveAtEnd;
            liveAtEnd[m.device[a.allocEvent]] += m.size[a.allocEvent];
        }
    }
    for (std::size_t d = 0; d < s.devices.size(); ++d)
        s.devices[d].liveBytesAtEnd = liveAtEnd[d].value();
    // Exact running sums, reported clamped at kSaturatedBytes (core/byte_total.h): they never wrap.
    std::vector<ByteTotal> allocated(s.devices.size()), reserved(s.devices.size());
    auto raise = [](std::optional<Peak>& peak, Bytes value, TimeNs time) {
        if (!peak || value > peak->bytes)
            peak = Peak { value, time };
    };
    for (std::size_t i = 0; i < m.count(); ++i) {
        const auto d = m.device[i];
        auto& ds = s.devices[d];
        ++ds.eventsByKind[static_cast<std::size_t>(m.kind[i])];
        switch (m.kind[i]) {
        case EventKind::Alloc:
            allocated[d] += m.size[i];
            raise(ds.peakAllocated, allocated[d].value(), m.time[i]);
            break;
        case EventKind::Free:
            if (closesAllocation[i])
                allocated[d] -= m.size[i];
            break;
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap:
            reserved[d] += m.size[i];
            raise(ds.peakReserved, reserved[d].value(), m.time[i]);
            break;
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap:
            reserved[d] -= m.size[i];
            break;
        default:
            break;
        }
    }
    std::vector<std::optional<Peak>> counterPeaks(trace.counterSeries().size());
    for (const auto& c : trace.counterSamples())
        if (c.series < counterPeaks.size() && c.value >= 0)
            raise(counterPeaks[c.series], static_cast<Bytes>(c.value), c.time);
    for (std::size_t i = 0; i < counterPeaks.size(); ++i) {
        const auto& series = trace.counterSeries()[i];
        const auto name = trace.str(series.name);
        // A byte counter that stays 0 for the whole trace was not recorded (XPlane writes bytes_reserved
        // 0 on every event of an allocator that does not report it); a ratio of 0 ppm is a real value.
        if (counterPeaks[i] && counterPeaks[i]->bytes == 0 && isByteCounter(name))
            continue;
        if (counterPeaks[i] && series.device < s.devices.size())
            s.devices[series.device].recordedPeaks.emplace_back(std::string(name), *counterPeaks[i]);
    }
    // What was allocated before the trace is the first counter sample minus its own event's change; a
    // device without request-level events (a counters-only PyTorch <= 1.9 trace, whose counter is the
    // running sum of the events' Bytes from 0) has no such event, and its first sample is not an opening.
    for (auto& ds : s.devices)
        if (!ds.recordedPeaks.empty()
            && ds.eventsByKind[static_cast<std::size_t>(EventKind::Alloc)] + ds.eventsByKind[static_cast<std::size_t>(EventKind::Free)] > 0)
            ds.allocatedBeforeTrace = replay::openingAllocated(trace, ds.device);
    s.anomalies = trace.stats().anomalies();
    return s;
}

} // namespace gpumem::analyze
