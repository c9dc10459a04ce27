#include "analyze/analysis.h"

#include "analyze/category_rules.h"

#include "analyze/trace_summary.h"
#include "core/byte_total.h"
#include "core/error.h"
#include "core/importer.h"
#include "core/units.h"
#include "replay/capacity_fit.h"
#include "replay/fidelity.h"
#include "replay/start_state.h"

#include <algorithm>

namespace gpumem::analyze {

namespace {
    void statFromColumn(MemoryStats::Stat& s, std::span<const Bytes> c)
    {
        if (c.empty())
            return;
        s.current = c.back();
        s.peak = *std::max_element(c.begin(), c.end());
        // Cumulative rises and falls of the series; they saturate (core/byte_total.h) rather than wrap on a
        // long trace of huge blocks. A column that sits at kSaturatedBytes neither rises nor falls there.
        Bytes prev = 0;
        for (auto v : c) {
            if (v > prev)
                s.allocated = addSaturated(s.allocated, v - prev);
            else
                s.freed = addSaturated(s.freed, prev - v);
            prev = v;
        }
    }

    MemoryStats computeStats(const Trace& trace, const DeviceTimeline& dev)
    {
        MemoryStats st;
        statFromColumn(st.allocatedBytes, dev.allocated);
        statFromColumn(st.activeBytes, dev.active);
        statFromColumn(st.requestedBytes, dev.requested);
        statFromColumn(st.reservedBytes, dev.reserved);
        statFromColumn(st.inactiveSplitBytes, dev.inactiveSplit);
        st.hasSegments = !dev.inactiveSplit.empty();
        // Counts: walk the device's events with the pairing roles.
        const auto& m = trace.memory();
        std::vector<std::uint8_t> role(m.count(), 0); // 1 closes allocated, 2 closes active
        for (const auto& a : trace.allocations()) {
            if (a.allocEvent == kNoIndex || m.device[a.allocEvent] != dev.device)
                continue;
            if (a.freeEvent != kNoIndex)
                role[a.freeEvent] |= 1;
            const auto activeEnd = a.freeCompletedEvent != kNoIndex ? a.freeCompletedEvent : a.freeEvent;
            if (activeEnd != kNoIndex)
                role[activeEnd] |= 2;
        }
        std::uint64_t live = 0, active = 0, segs = 0;
        for (auto e : dev.eventIndex) {
            if (e == kNoIndex)
                continue;
            switch (m.kind[e]) {
            case EventKind::Alloc:
                ++live;
                ++active;
                ++st.allocations.allocated;
                ++st.activeAllocations.allocated;
                break;
            case EventKind::Free:
            case EventKind::FreeCompleted:
                if (role[e] & 1) {
                    --live;
                    ++st.allocations.freed;
                }
                if (role[e] & 2) {
                    --active;
                    ++st.activeAllocations.freed;
                }
                break;
            case EventKind::SegmentAlloc:
                ++segs;
                ++st.segments.allocated;
                break;
            case EventKind::SegmentFree:
                segs -= std::min<std::uint64_t>(segs, 1);
                ++st.segments.freed;
                break;
            case EventKind::Oom:
                ++st.ooms;
                break;
            default:
                break;
            }
            st.allocations.peak = std::max(st.allocations.peak, live);
            st.activeAllocations.peak = std::max(st.activeAllocations.peak, active);
            st.segments.peak = std::max(st.segments.peak, segs);
        }
        st.allocations.current = live;
        st.activeAllocations.current = active;
        st.segments.current = segs;
        return st;
    }

    FragmentationSummary computeFragmentation(const Trace& trace, const DeviceTimeline& dev, const MemoryStats& st)
    {
        FragmentationSummary f;
        f.peakAllocated = st.allocatedBytes.peak;
        f.peakActive = st.activeBytes.peak;
        f.peakRequested = st.requestedBytes.peak;
        // One lower bound everywhere, from one place (replay::livePeak): the maximum over time of the
        // REQUESTED bytes of the blocks held from alloc to free_completed (unknown requested sizes count as
        // the block size), the figure `replay` prints for `ideal:alignment:1` and `fit` as "live peak"
        // (allocators.md §6.1). It is not peakRequested: that drops at free_requested (PyTorch's rule),
        // while a block pending its free still holds its memory. Rounded block sizes (peakAllocated)
        // already include the allocator's own rounding, so a policy rounding less could hold less.
        // The memory from before a profiler trace is live from the start (the rule every comparison uses,
        // replay/start_state.h), so the overhead divides the recorded reserved, which holds it, by a bound
        // that holds it too (the earlier rule left the ratio out instead).
        f.openingAllocated = replay::openingAllocated(trace, dev.device);
        f.lowerBound = replay::livePeak(trace, dev.device, f.openingAllocated);
        if (auto p = dev.peakPoint(SeriesKind::Allocated))
            f.internalAtPeakAllocated = dev.internal(*p);
        // The reserved peak as the breakdown sees it: after every event of that nanosecond (resolveInstant).
        std::optional<std::size_t> p;
        if (auto at = resolveInstant(dev, InstantSpec { InstantSpec::Kind::PeakReserved, 0 }))
            p = at->point;
        if (p && dev.reserved[*p] > 0) {
            const double r = static_cast<double>(dev.reserved[*p]);
            f.peakReserved = dev.reserved[*p];
            // With a recorded reserved counter, compare it with the recorded allocated counter (both count
            // blocks allocated before the window); otherwise with the tracked peaks.
            const bool recorded = dev.has(SeriesKind::RecordedAllocated);
            const Bytes peakRecorded = recorded ? *std::max_element(dev.recordedAllocated.begin(), dev.recordedAllocated.end()) : 0;
            f.utilizationActive = static_cast<double>(recorded ? peakRecorded : f.peakActive) / r;
            f.utilizationAllocated = static_cast<double>(recorded ? peakRecorded : f.peakAllocated) / r;
            if (recorded)
                f.peakRecordedAllocated = peakRecorded;
            f.wasteAtPeakReserved = dev.waste(*p);
            f.externalAtPeakReserved = dev.external(*p);
            // From the two printed figures, so the row divides as the reader expects.
            if (f.lowerBound)
                f.overheadVsLowerBound = r / static_cast<double>(f.lowerBound);
            // Time-weighted mean waste over the span where reserved > 0.
            double area = 0, span = 0;
            for (std::size_t i = 0; i + 1 < dev.size(); ++i) {
                const double dt = static_cast<double>(dev.time[i + 1]) - static_cast<double>(dev.time[i]); // no int64 overflow
                if (auto w = dev.waste(i); w && dt > 0) {
                    area += *w * dt;
                    span += dt;
                }
            }
            if (span > 0)
                f.timeWeightedWaste = area / span;
        }
        if (!dev.inactiveSplit.empty())
            f.maxInactiveSplit = *std::max_element(dev.inactiveSplit.begin(), dev.inactiveSplit.end());
        return f;
    }
    // FragmentationSummary::headline: the first OOM event of the device, else the reserved peak over the
    // points after the rebuilt pre-window state (replay::initialStateEventCount), at its fullest instant.
    std::optional<FragmentationSummary::Headline> headlineOf(const Trace& trace, const DeviceTimeline& dev)
    {
        if (!dev.has(SeriesKind::Reserved) || dev.size() == 0)
            return std::nullopt;
        const auto& m = trace.memory();
        FragmentationSummary::Headline h;
        std::optional<std::size_t> point;
        for (std::size_t i = 0; i < m.count() && !point; ++i)
            if (m.device[i] == dev.device && m.kind[i] == EventKind::Oom) {
                point = dev.pointAt(m.time[i]);
                h.moment = "first OOM";
            }
        if (!point) {
            const std::uint64_t rebuilt = replay::initialStateEventCount(trace, dev.device);
            const std::size_t firstWindow = replay::firstWindowEvent(trace, dev.device);
            std::size_t from = 0;
            if (rebuilt > 0)
                while (from < dev.size() && (dev.eventIndex[from] == kNoIndex || dev.eventIndex[from] < firstWindow))
                    ++from;
            if (from == dev.size()) // nothing after the opening state: it is the only moment
                from = 0;
            // While reserved stays at its peak, the fullest instant (the most allocated, as ReplayResult::atPeak):
            // a cache reserved before the window and never grown is at its peak from t = 0 on.
            for (std::size_t i = from; i < dev.size(); ++i)
                if (!point || dev.reserved[i] > dev.reserved[*point]
                    || (dev.reserved[i] == dev.reserved[*point] && dev.allocated[i] > dev.allocated[*point]))
                    point = i;
            h.moment = rebuilt > 0 && from > 0 ? "peak after opening state" : "reserved peak";
        }
        if (!point || dev.reserved[*point] == 0)
            return std::nullopt;
        h.point = *point;
        h.time = dev.time[*point];
        h.reserved = dev.reserved[*point];
        // A recorded allocated counter counts the blocks from before a profiler trace, as its reserved does.
        h.live = dev.has(SeriesKind::RecordedAllocated) ? dev.recordedAllocated[*point] : dev.allocated[*point];
        return h;
    }
} // namespace

namespace {
Analysis analyzeOnTimeline(const Trace& trace, const AnalysisOptions& options)
{
    auto step = [&](double done) {
        if (options.progress && !options.progress(done))
            throw Cancelled();
    };
    Analysis a;
    step(0.0);
    a.timeline = Timeline::build(trace);
    a.origin = traceSpan(trace).start;
    step(0.45);
    const DeviceTimeline* dev = nullptr;
    if (options.device) {
        dev = a.timeline.device(*options.device);
        if (!dev)
            throw UsageError("--device " + std::to_string(*options.device) + " is not a device of this trace (it has "
                + std::to_string(trace.devices().size()) + ")");
    } else {
        dev = a.timeline.busiest();
    }
    a.countersOnly = trace.memory().count() == 0 && !trace.counterSamples().empty();
    if (a.countersOnly) {
        DeviceId d = options.device.value_or(kNoDevice);
        if (!options.device) { // the device with the most counter samples
            std::vector<std::size_t> samples(trace.devices().size(), 0);
            for (const auto& c : trace.counterSamples())
                if (c.series < trace.counterSeries().size() && trace.counterSeries()[c.series].device < samples.size())
                    ++samples[trace.counterSeries()[c.series].device];
            if (auto it = std::max_element(samples.begin(), samples.end()); it != samples.end() && *it > 0)
                d = static_cast<DeviceId>(it - samples.begin());
        }
        if (d < trace.devices().size()) {
            a.device = d;
            a.deviceLabel = deviceLabel(trace.devices()[d]);
        }
        return a;
    }
    if (!dev || dev->size() == 0) {
        if (dev) {
            a.device = dev->device;
            a.deviceLabel = dev->label;
        }
        return a;
    }
    a.empty = false;
    a.device = dev->device;
    a.deviceLabel = dev->label;

    a.stats = computeStats(trace, *dev);
    a.fragmentation = computeFragmentation(trace, *dev, a.stats);
    a.fragmentation.headline = headlineOf(trace, *dev);
    a.steps = detectSteps(trace, *dev);
    a.leaks = detectLeaks(trace, *dev, a.steps);
    step(0.6);
    a.inferred = inferCategories(trace, a.steps);
    step(0.8);
    a.categoriesRecorded = hasRecordedCategories(trace);
    a.categories = a.categoriesRecorded ? recordedCategories(trace) : a.inferred;
    const std::vector<Category> recorded = a.categoriesRecorded ? a.categories : std::vector<Category> {};
    std::vector<Category> said = a.inferred; // what gpumem says without the recording: the rules, then inference
    if (options.categoryRules) {
        a.categorySources = applyCategoryRules(trace, *options.categoryRules, a.categories, a.categoriesRecorded);
        for (std::size_t i = 0; i < said.size() && i < a.categorySources.size(); ++i)
            if (a.categorySources[i] == CategorySource::Rule)
                said[i] = a.categories[i];
    }

    auto instants = options.instants;
    const bool defaults = instants.empty();
    if (defaults)
        instants.push_back({ InstantSpec::Kind::PeakAllocated, 0 });
    for (const auto& spec : instants)
        if (auto instant = resolveInstant(*dev, spec))
            a.breakdowns.push_back(breakdownAt(trace, *instant, a.categories, !a.categoriesRecorded));
    // The default second breakdown: at the headline's moment, when it is another moment than the allocated
    // peak and holds a live set worth breaking down (at least 1 % of the allocated peak [choice]).
    if (defaults && a.fragmentation.headline) {
        const auto& h = *a.fragmentation.headline;
        const auto peak = resolveInstant(*dev, { InstantSpec::Kind::PeakAllocated, 0 });
        if (peak && (peak->point == h.point || dev->time[peak->point] == h.time))
            a.reservedBreakdownOmitted = "the " + h.moment + " is the moment of the allocated peak";
        else if (peak && peak->allocated == dev->allocated[h.point] && peak->reserved == dev->reserved[h.point])
            a.reservedBreakdownOmitted = "the " + h.moment + " holds the same live bytes and reserved as the allocated peak";
        else if (h.live * 100 < a.fragmentation.peakAllocated)
            a.reservedBreakdownOmitted = "only " + formatBytes(h.live) + " is live at the " + h.moment
                + ", under 1 % of the allocated peak";
        else {
            Instant at;
            at.label = h.moment == "first OOM" ? "first OOM" : "peak reserved";
            at.device = dev->device;
            at.point = h.point;
            at.eventIndex = dev->eventIndex[h.point];
            at.time = h.time;
            at.allocated = dev->allocated[h.point];
            at.active = dev->active[h.point];
            at.reserved = dev->reserved[h.point];
            a.breakdowns.push_back(breakdownAt(trace, at, a.categories, !a.categoriesRecorded));
        }
    }

    if (options.categoryRules)
        for (auto& b : a.breakdowns) {
            b.groups[static_cast<std::size_t>(GroupBy::Category)] = categoryRowsBySource(b.liveAllocations, trace, a.categories, a.categorySources);
            b.categoriesInferred = false; // each row says its source
        }
    if (a.categoriesRecorded) {
        if (auto peak = resolveInstant(*dev, { InstantSpec::Kind::PeakAllocated, 0 })) {
            auto b = breakdownAt(trace, *peak, a.categories, false);
            a.agreementAtPeak = compareCategories(trace, recorded, said, b.liveAllocations);
        }
        std::vector<std::size_t> all;
        const auto& m = trace.memory();
        auto allocations = trace.allocations();
        for (std::size_t i = 0; i < allocations.size(); ++i)
            if (allocations[i].allocEvent != kNoIndex && m.device[allocations[i].allocEvent] == a.device)
                all.push_back(i);
        a.agreementAll = compareCategories(trace, recorded, said, all);
    }
    step(1.0);
    return a;
}

} // namespace

Analysis analyzeTrace(const Trace& trace, const AnalysisOptions& options)
{
    Analysis a = analyzeOnTimeline(trace, options);
    a.firstEventTime = a.timeline.start();
    a.lastEventTime = a.timeline.end();
    if (const auto* dev = a.timeline.device(a.device)) {
        a.deviceFirstTime = dev->size() ? dev->time.front() : 0;
        a.hasReserved = dev->has(SeriesKind::Reserved);
        a.reservedSource = dev->reservedSource;
    }
    return a;
}

} // namespace gpumem::analyze
