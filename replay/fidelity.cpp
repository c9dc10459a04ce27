#include "replay/fidelity.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "importers/snapshot_importer.h"
#include "replay/snapshot_state.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace gpumem::replay {

namespace {

    bool isDeviceCall(EventKind k)
    {
        return k == EventKind::SegmentAlloc || k == EventKind::SegmentFree || k == EventKind::SegmentMap
            || k == EventKind::SegmentUnmap;
    }
    bool grows(EventKind k) { return k == EventKind::SegmentAlloc || k == EventKind::SegmentMap; }

    std::string lower(std::string s)
    {
        std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        return s;
    }

    std::optional<std::uint32_t> counterNamed(const Trace& trace, DeviceId device, const std::string& word)
    {
        const auto series = trace.counterSeries();
        for (std::uint32_t s = 0; s < series.size(); ++s)
            if (series[s].device == device
                && lower(std::string(trace.str(series[s].name))).find(word) != std::string::npos)
                return s;
        return std::nullopt;
    }

    std::optional<CounterComparison> compareReservedCounter(
        const Trace& trace, DeviceId device, const std::vector<TimelinePoint>& timeline, Bytes simulatedPeak)
    {
        auto chosen = counterNamed(trace, device, "reserved");
        if (!chosen)
            return std::nullopt;
        const auto series = trace.counterSeries();
        CounterComparison c;
        c.series = std::string(trace.str(series[*chosen].name));
        double sumAbs = 0;
        std::vector<std::pair<TimeNs, Bytes>> samples;
        for (const auto& smp : trace.counterSamples())
            if (smp.series == *chosen)
                samples.emplace_back(smp.time, Bytes(std::max<std::int64_t>(0, smp.value)));
        if (samples.empty())
            return std::nullopt;
        for (const auto& [t, v] : samples)
            c.recordedPeak = std::max(c.recordedPeak, v);
        c.recordedFirst = samples.front().second;
        std::size_t p = 0;
        Bytes sim = 0;
        std::uint64_t within = 0;
        for (const auto& [t, v] : samples) {
            while (p < timeline.size() && timeline[p].time <= t)
                sim = timeline[p++].reserved;
            Bytes err = sim > v ? sim - v : v - sim;
            sumAbs += double(err);
            if (err > c.maxAbsError) {
                c.maxAbsError = err;
                c.maxAbsErrorTime = t;
            }
            within += double(err) <= 0.01 * double(c.recordedPeak);
            ++c.samples;
        }
        c.simulatedPeak = simulatedPeak;
        c.peakError = std::int64_t(simulatedPeak) - std::int64_t(c.recordedPeak);
        c.peakErrorRatio = c.recordedPeak ? double(std::llabs(c.peakError)) / double(c.recordedPeak) : 0.0;
        c.meanAbsError = sumAbs / double(c.samples);
        c.withinOnePercent = double(within) / double(c.samples);
        return c;
    }

} // namespace

// Bytes allocated before the first event of `device`: the first "allocated" counter sample minus
// that event's own change (profiler counters are taken after the event).
Bytes openingAllocated(const Trace& trace, DeviceId device)
{
    if (!counterNamed(trace, device, "allocated"))
        return 0; // (without the scan below)
    const auto& m = trace.memory();
    std::size_t first = 0;
    while (first < m.count() && (m.device[first] != device || !isRequestLevel(m.kind[first])))
        ++first;
    return openingAllocated(trace, device, first < m.count() ? std::optional(FirstRequest { m.kind[first], m.size[first] }) : std::nullopt);
}

Bytes openingAllocated(const MemoryEventSource& source, DeviceId device)
{
    const Trace& tables = source.skeleton();
    if (!counterNamed(tables, device, "allocated"))
        return 0; // (without the pass below)
    std::optional<FirstRequest> first;
    struct Found { };
    try {
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) {
            for (std::size_t j = 0; j < m.count(); ++j)
                if (m.device[j] == device && isRequestLevel(m.kind[j])) {
                    first = FirstRequest { m.kind[j], m.size[j] };
                    throw Found {};
                }
        });
    } catch (const Found&) {
    }
    return openingAllocated(tables, device, first);
}

Bytes openingAllocated(const Trace& trace, DeviceId device, std::optional<FirstRequest> first)
{
    auto series = counterNamed(trace, device, "allocated");
    if (!series)
        return 0;
    for (const auto& smp : trace.counterSamples()) {
        if (smp.series != *series)
            continue;
        std::int64_t v = smp.value;
        if (first)
            v += first->kind == EventKind::Alloc ? -std::int64_t(first->size) : std::int64_t(first->size);
        return Bytes(std::max<std::int64_t>(0, v));
    }
    return 0;
}

FidelityReport checkFidelity(const Trace& trace, const PolicySpec& spec, ReplayOptions options)
{
    options.followRecorded = true;
    options.recordTimeline = true;
    options.recordAllocAddresses = true;
    options.recordSegmentEvents = true;
    options.keepFinalState = true;
    if (options.initialState == InitialStateMode::Auto)
        options.initialState = InitialStateMode::Adopt;
    ReplayResult res = Replayer(options).run(trace, spec);

    FidelityReport rep;
    rep.policy = res.policy;
    rep.device = res.device;
    rep.traceStart = trace.memory().count() ? trace.memory().time.front() : 0;
    rep.emptyCacheDirectives = res.emptyCacheDirectives;
    rep.emptyCacheCalls = res.emptyCacheCalls;
    rep.initialSegments = res.initialSegments;
    rep.initialBlocks = res.initialBlocks;
    rep.initialNotAdopted = res.initialNotAdopted;
    rep.ooms = res.ooms;
    rep.simulatedPeakReserved = res.peakReserved.bytes;

    // The recorded segment events after the initial state, and the recorded reserved curve.
    const auto& m = trace.memory();
    const std::uint64_t initialEvents = initialStateEventCount(trace, res.device);
    std::vector<SegmentEventSide> recorded;
    Bytes reserved = 0;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < m.count(); ++i) {
        if (m.device[i] != res.device)
            continue;
        const bool initial = seen++ < initialEvents;
        if (!isDeviceCall(m.kind[i]))
            continue;
        reserved = grows(m.kind[i]) ? reserved + m.size[i] : reserved - std::min(reserved, m.size[i]);
        rep.recordedPeakReserved = std::max(rep.recordedPeakReserved, reserved);
        if (!initial)
            recorded.push_back({ true, m.kind[i], m.address[i], m.size[i], m.time[i], i });
    }
    std::vector<SegmentEventSide> simulated;
    for (const auto& s : res.segmentEvents)
        if (isDeviceCall(s.call.kind))
            simulated.push_back({ true, s.call.kind, s.call.address, s.call.size, s.time, s.event });
    rep.recordedSegmentEvents = recorded.size();
    rep.simulatedSegmentEvents = simulated.size();
    const std::size_t common = std::min(recorded.size(), simulated.size());
    for (std::size_t i = 0; i < std::max(recorded.size(), simulated.size()); ++i) {
        bool same = i < common && recorded[i].kind == simulated[i].kind && recorded[i].size == simulated[i].size;
        rep.matched += same;
        if (!same && !rep.firstMismatch)
            rep.firstMismatch = SegmentEventMismatch { i, i < recorded.size() ? recorded[i] : SegmentEventSide {},
                i < simulated.size() ? simulated[i] : SegmentEventSide {} };
    }
    rep.peakReservedError = std::int64_t(rep.simulatedPeakReserved) - std::int64_t(rep.recordedPeakReserved);

    for (const auto& [event, address] : res.allocAddresses) {
        ++rep.allocAddressesCompared;
        if (m.address[event] == address)
            ++rep.allocAddressesMatched;
        else if (!rep.firstAddressMismatchEvent)
            rep.firstAddressMismatchEvent = event;
    }
    rep.reservedCounter = compareReservedCounter(trace, res.device, res.timeline, res.peakReserved.bytes);
    rep.segmentLevel = initialEvents > 0 || !recorded.empty() || !rep.reservedCounter;
    rep.comparable = initialEvents > 0 || !recorded.empty() || rep.reservedCounter;
    if (!rep.segmentLevel) {
        // A profiler trace records reserved only as a counter: that is the recorded peak, and the
        // segment events and addresses have nothing to be compared with.
        rep.recordedPeakReserved = rep.reservedCounter->recordedPeak;
        rep.peakReservedError = rep.reservedCounter->peakError;
        rep.firstMismatch.reset();
        rep.matched = 0;
        rep.allocAddressesCompared = rep.allocAddressesMatched = 0;
        rep.firstAddressMismatchEvent.reset();
        ReplayOptions warm = options;
        warm.openingAllocated = openingAllocated(trace, res.device);
        warm.warmupPasses = 1;
        warm.recordAllocAddresses = false;
        ReplayResult w = Replayer(warm).run(trace, spec);
        rep.openingAllocated = warm.openingAllocated;
        rep.reservedCounterWarm = compareReservedCounter(trace, w.device, w.timeline, w.peakReserved.bytes);
    }
    rep.finalState = std::move(*res.finalState);
    return rep;
}

FidelityReport checkFidelityFile(const std::string& path, const PolicySpec& spec, ReplayOptions options)
{
    Trace trace = loadTrace(path);
    if (trace.metadata().value("source_format", std::string()) == "pytorch-snapshot") {
        // A snapshot converted to .gmt/.jsonl keeps its source_format but not the recorded blocks
        // (only the segments_at_dump columns); the end-state comparison needs the pickle itself.
        const Importer* file = detectFormat(path);
        if (!file || file->name() != "pytorch-snapshot") {
            const std::string kind = !file ? "not a PyTorch snapshot"
                : file->name() == "gmt" || file->name() == "jsonl" ? "a gpumem trace (." + std::string(file->name()) + ")"
                                                                    : "a " + std::string(file->name()) + " file";
            throw UsageError("--fidelity compares the replay with the snapshot's recorded segments and blocks; " + path + " is "
                + kind + ": run it on the original snapshot file");
        }
    }
    FidelityReport rep = checkFidelity(trace, spec, options);
    if (trace.metadata().value("source_format", std::string()) == "pytorch-snapshot") {
        std::int32_t ordinal = trace.devices().empty() ? 0 : trace.devices()[rep.device].ordinal;
        std::vector<SnapshotSegment> segments;
        for (auto& s : snapshotSegments(readSnapshotDocument(path)))
            if (s.device == ordinal)
                segments.push_back(std::move(s));
        auto recorded = fromSnapshotSegments(segments);
        rep.endSegmentsRecorded = recorded.size();
        rep.endStateDifferences = compareStates(recorded, rep.finalState.segments);
    }
    return rep;
}

std::vector<std::string> compareStates(
    const std::vector<SegmentInfo>& recorded, const std::vector<SegmentInfo>& simulated, std::size_t maxDifferences)
{
    std::vector<std::string> out;
    std::size_t total = 0;
    auto diff = [&](std::string line) {
        if (++total <= maxDifferences)
            out.push_back(std::move(line));
    };
    std::map<Address, const SegmentInfo*> sim;
    for (const auto& s : simulated)
        sim[s.address] = &s;
    for (const auto& r : recorded) {
        auto it = sim.find(r.address);
        if (it == sim.end()) {
            diff("segment " + std::to_string(r.address) + " (" + std::to_string(r.size)
                + " B) is recorded but not simulated");
            continue;
        }
        const SegmentInfo& s = *it->second;
        sim.erase(it);
        if (s.size != r.size)
            diff("segment " + std::to_string(r.address) + ": size " + std::to_string(r.size) + " recorded, "
                + std::to_string(s.size) + " simulated");
        std::size_t n = std::max(r.blocks.size(), s.blocks.size());
        for (std::size_t b = 0; b < n; ++b) {
            if (b >= r.blocks.size() || b >= s.blocks.size()) {
                diff("segment " + std::to_string(r.address) + ": " + std::to_string(r.blocks.size())
                    + " blocks recorded, " + std::to_string(s.blocks.size()) + " simulated");
                break;
            }
            const auto& rb = r.blocks[b];
            const auto& sb = s.blocks[b];
            if (rb.address != sb.address || rb.size != sb.size || rb.state != sb.state)
                diff("segment " + std::to_string(r.address) + " block " + std::to_string(b) + ": recorded "
                    + std::to_string(rb.address) + " " + std::to_string(rb.size) + " " + std::string(toString(rb.state))
                    + ", simulated " + std::to_string(sb.address) + " " + std::to_string(sb.size) + " "
                    + std::string(toString(sb.state)));
        }
    }
    for (const auto& [addr, s] : sim)
        diff("segment " + std::to_string(addr) + " (" + std::to_string(s->size) + " B) is simulated but not recorded");
    if (total > maxDifferences)
        out.push_back("… " + std::to_string(total - maxDifferences) + " more");
    return out;
}

} // namespace gpumem::replay
