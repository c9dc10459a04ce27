#include "analyze/trace_summary.h"

#include "core/byte_total.h"
#include "core/chunk_pairing.h"
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

namespace {
    // The earliest start and latest end of the records given to see(); {} when none was.
    struct SpanFinder {
        TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
        void see(TimeNs a, TimeNs b)
        {
            lo = std::min(lo, a);
            hi = std::max(hi, b);
        }
        void seeKernels(std::span<const Kernel> kernels)
        {
            for (const auto& k : kernels)
                see(k.start, k.end);
        }
        // Annotations and counter samples (sorted by time in a Trace).
        void seeRecords(const Trace& trace)
        {
            for (const auto& a : trace.annotations())
                see(a.start, a.end);
            if (!trace.counterSamples().empty())
                see(trace.counterSamples().front().time, trace.counterSamples().back().time);
        }
        TimeSpan span() const { return lo <= hi ? TimeSpan { lo, hi } : TimeSpan {}; }
    };
} // namespace

TimeSpan traceSpan(const Trace& trace)
{
    SpanFinder f;
    const auto& m = trace.memory();
    if (m.count())
        f.see(m.time.front(), m.time.back());
    f.seeKernels(trace.kernels());
    f.seeRecords(trace);
    return f.span();
}

TimeSpan traceSpan(const MemoryEventSource& source)
{
    SpanFinder f;
    if (auto times = source.firstAndLastTime())
        f.see(times->first, times->second);
    source.forEachKernelChunk([&](std::span<const Kernel> kernels) { f.seeKernels(kernels); });
    f.seeRecords(source.skeleton());
    return f.span();
}

namespace {
    // What summarize() computes, fed the trace in parts: the tables (a Trace or a source's skeleton),
    // the kernels, the memory events in trace order (whole or chunk by chunk) with which frees close a
    // paired allocation, and the blocks never freed. One code for the in-memory and the streaming
    // summary, so the two cannot drift apart.
    class SummaryAccumulator {
    public:
        explicit SummaryAccumulator(const Trace& tables)
            : m_tables(tables)
        {
            const auto& meta = tables.metadata();
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
            s.annotations = tables.annotations().size();
            s.counterSamples = tables.counterSamples().size();
            s.devices.resize(tables.devices().size());
            for (std::size_t d = 0; d < tables.devices().size(); ++d) {
                const auto& dev = tables.devices()[d];
                auto& ds = s.devices[d];
                ds.device = static_cast<DeviceId>(d);
                ds.label = deviceLabel(dev);
                ds.name = std::string(tables.str(dev.name));
                ds.totalMemory = dev.totalMemory;
            }
            for (const auto& a : tables.annotations())
                if (static_cast<std::size_t>(a.kind) < s.annotationsByKind.size())
                    ++s.annotationsByKind[static_cast<std::size_t>(a.kind)];
            for (const auto& st : tables.streams())
                if (st.device < s.devices.size())
                    ++s.devices[st.device].streams;
            m_used.assign(tables.streams().size(), 0);
            m_allocated.resize(s.devices.size());
            m_reserved.resize(s.devices.size());
            m_liveAtEnd.resize(s.devices.size());
            m_firstRequest.resize(s.devices.size());
            m_span.seeRecords(tables);
        }

        void addKernels(std::span<const Kernel> kernels)
        {
            s.kernels += kernels.size();
            for (const auto& k : kernels) {
                if (k.device < s.devices.size())
                    ++s.devices[k.device].kernels;
                if (k.stream < m_used.size())
                    m_used[k.stream] |= 1;
            }
            m_span.seeKernels(kernels);
        }

        // Events [0, m.count()) of `m`, the next of the trace; closes[i] != 0 when event i is a free that
        // closes a paired allocation.
        void addEvents(const MemoryEventColumns& m, const std::uint8_t* closes)
        {
            if (m.count() == 0)
                return;
            if (s.memoryEvents == 0)
                m_span.see(m.time.front(), m.time.front());
            m_span.see(m.time.back(), m.time.back());
            s.memoryEvents += m.count();
            for (StreamId st : m.stream)
                if (st < m_used.size())
                    m_used[st] |= 2;
            // Exact running sums, reported clamped at kSaturatedBytes (core/byte_total.h): they never wrap.
            auto raise = [](std::optional<Peak>& peak, Bytes value, TimeNs time) {
                if (!peak || value > peak->bytes)
                    peak = Peak { value, time };
            };
            for (std::size_t i = 0; i < m.count(); ++i) {
                const auto d = m.device[i];
                auto& ds = s.devices[d];
                ++ds.eventsByKind[static_cast<std::size_t>(m.kind[i])];
                if (!m_firstRequest[d] && isRequestLevel(m.kind[i]))
                    m_firstRequest[d] = replay::FirstRequest { m.kind[i], m.size[i] };
                switch (m.kind[i]) {
                case EventKind::Alloc:
                    m_allocated[d] += m.size[i];
                    raise(ds.peakAllocated, m_allocated[d].value(), m.time[i]);
                    break;
                case EventKind::Free:
                    if (closes[i])
                        m_allocated[d] -= m.size[i];
                    break;
                case EventKind::SegmentAlloc:
                case EventKind::SegmentMap:
                    m_reserved[d] += m.size[i];
                    raise(ds.peakReserved, m_reserved[d].value(), m.time[i]);
                    break;
                case EventKind::SegmentFree:
                case EventKind::SegmentUnmap:
                    m_reserved[d] -= m.size[i];
                    break;
                case EventKind::Oom:
                    if (!ds.firstOom)
                        ds.firstOom = DeviceSummary::Oom { m.size[i], m.time[i] };
                    break;
                default:
                    break;
                }
            }
        }

        // An allocation never freed within the trace: its alloc's device and size.
        void addLiveAtEnd(DeviceId device, Bytes size)
        {
            ++s.devices[device].liveAtEnd;
            m_liveAtEnd[device] += size;
        }

        // `outside` gives each device's OutsideMemory; `allocations` is Trace::allocations().size() and
        // `stats` Trace::stats() (or what a streaming pairing found).
        template <typename Outside> TraceSummary finish(std::uint64_t allocations, const ImportStats& stats, Outside&& outside)
        {
            const Trace& trace = m_tables;
            s.allocations = allocations;
            for (std::size_t i = 0; i < m_used.size(); ++i) {
                const DeviceId d = trace.streams()[i].device;
                if (d >= s.devices.size())
                    continue;
                s.devices[d].kernelStreams += (m_used[i] & 1) != 0;
                s.devices[d].memoryStreams += (m_used[i] & 2) != 0;
            }
            s.start = m_span.span().start;
            s.end = m_span.span().end;
            for (std::size_t d = 0; d < s.devices.size(); ++d) {
                s.devices[d].liveBytesAtEnd = m_liveAtEnd[d].value();
                s.devices[d].outside = outside(static_cast<DeviceId>(d));
            }
            auto raise = [](std::optional<Peak>& peak, Bytes value, TimeNs time) {
                if (!peak || value > peak->bytes)
                    peak = Peak { value, time };
            };
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
                    ds.allocatedBeforeTrace = replay::openingAllocated(trace, ds.device, m_firstRequest[ds.device]);
            s.anomalies = stats.anomalies();
            return std::move(s);
        }

    private:
        const Trace& m_tables;
        TraceSummary s;
        std::vector<std::uint8_t> m_used; // per stream: carries kernels (bit 1), memory events (bit 2)
        std::vector<ByteTotal> m_allocated, m_reserved, m_liveAtEnd;
        std::vector<std::optional<replay::FirstRequest>> m_firstRequest;
        SpanFinder m_span;
    };
} // namespace

TraceSummary summarize(const Trace& trace)
{
    SummaryAccumulator acc(trace);
    acc.addKernels(trace.kernels());
    // Which free events close an allocation paired inside the trace, and which blocks stay live.
    const auto& m = trace.memory();
    auto allocations = trace.allocations();
    std::vector<std::uint8_t> closesAllocation(m.count(), 0);
    for (const auto& a : allocations) {
        if (a.freeEvent != kNoIndex)
            closesAllocation[a.freeEvent] = 1;
        else if (a.allocEvent != kNoIndex)
            acc.addLiveAtEnd(m.device[a.allocEvent], m.size[a.allocEvent]);
    }
    acc.addEvents(m, closesAllocation.data());
    return acc.finish(allocations.size(), trace.stats(), [&](DeviceId d) { return outsideMemory(trace, d); });
}

TraceSummary summarize(const MemoryEventSource& source, ImportStats* statsOut)
{
    const Trace& skeleton = source.skeleton();
    SummaryAccumulator acc(skeleton);
    source.forEachKernelChunk([&](std::span<const Kernel> kernels) { acc.addKernels(kernels); });
    ImportStats stats = skeleton.importStats();
    ChunkPairing pairing(stats);
    std::vector<AllocationSourcePeak> outside;
    if (outsideMemoryNeedsEvents(skeleton))
        for (std::size_t d = 0; d < skeleton.devices().size(); ++d)
            outside.emplace_back(skeleton, static_cast<DeviceId>(d));
    std::vector<std::uint8_t> closes;
    source.forEachChunk([&](const MemoryEventColumns& chunk, std::uint64_t first) {
        closes.assign(chunk.count(), 0);
        for (std::size_t i = 0; i < chunk.count(); ++i) {
            const ChunkPairing::Outcome o = pairing.step(chunk, i, first + i);
            closes[i] = o.pairing == ChunkPairing::Pairing::Closed;
            if (o.replaced)
                acc.addLiveAtEnd(o.replaced->device, o.replaced->size);
            for (auto& peak : outside)
                peak.add(chunk, i);
        }
        acc.addEvents(chunk, closes.data());
    });
    pairing.forEachLive([&](const ChunkPairing::Block& b) { acc.addLiveAtEnd(b.device, b.size); });
    pairing.finish();
    if (statsOut)
        *statsOut = stats;
    return acc.finish(pairing.allocations(), stats, [&](DeviceId d) {
        return outsideMemory(skeleton, d, outside.empty() ? nullptr : &outside[d]);
    });
}

} // namespace gpumem::analyze
