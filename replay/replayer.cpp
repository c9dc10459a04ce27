#include "replay/replayer.h"

#include "core/error.h"
#include "replay/policy_registry.h"
#include "replay/request_feeder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace gpumem::replay {

namespace {

    // Records every device call with the trace position it happened at.
    class SegmentRecorder final : public DeviceObserver {
    public:
        SegmentRecorder(const ReplayClock& clock, std::vector<SegmentEventRecord>& out)
            : m_clock(clock)
            , m_out(out)
        {
        }
        void onDeviceCall(const DeviceCall& call) override { m_out.push_back({ m_clock.event, m_clock.time, call }); }

    private:
        const ReplayClock& m_clock;
        std::vector<SegmentEventRecord>& m_out;
    };

    bool isSmallSegment(const Trace& trace, DeviceId device, Address address, Bytes size)
    {
        // segments_at_dump (snapshot importer) names the pool; otherwise only small segments are 2 MiB
        // (allocators.md §1.4: large segments are 20 MiB or >= 10 MiB).
        const auto& meta = trace.metadata();
        if (auto it = meta.find("segments_at_dump"); it != meta.end() && it->is_array()) {
            std::int32_t ordinal = trace.devices()[device].ordinal;
            for (const auto& s : *it) {
                if (s.value("address", Address(0)) == address && s.value("device", std::int32_t(0)) == ordinal)
                    return s.value("segment_type", std::string()) == "small";
            }
        }
        return size == kSmallBuffer;
    }

} // namespace

std::optional<DeviceId> defaultReplayDevice(const Trace& trace)
{
    const auto& m = trace.memory();
    std::optional<DeviceId> any;
    for (std::size_t i = 0; i < m.count(); ++i) {
        if (m.kind[i] != EventKind::Alloc)
            continue;
        DeviceId d = m.device[i];
        if (trace.devices()[d].type != DeviceType::Cpu)
            return d;
        if (!any)
            any = d;
    }
    if (!any && m.count() > 0)
        any = m.device[0];
    return any;
}

std::uint64_t initialStateEventCount(const Trace& trace, DeviceId device)
{
    const auto& meta = trace.metadata();
    auto it = meta.find("reconstruction");
    if (it == meta.end() || !it->is_array() || device >= trace.devices().size())
        return 0;
    std::int32_t ordinal = trace.devices()[device].ordinal;
    for (const auto& rec : *it)
        if (rec.is_object() && rec.value("device", std::int32_t(-1)) == ordinal)
            return rec.value("events_before_trace", std::uint64_t(0));
    return 0;
}

Replayer::Replayer(ReplayOptions options)
    : m_options(std::move(options))
{
}

ReplayResult Replayer::run(const Trace& trace, const PolicySpec& spec) const
{
    ReplayResult result;
    auto device = m_options.device ? m_options.device : defaultReplayDevice(trace);
    if (m_options.device && *m_options.device >= trace.devices().size())
        throw UsageError("replay: device " + std::to_string(*m_options.device) + " does not exist; the trace has "
            + std::to_string(trace.devices().size()) + " devices");
    const DeviceId dev = device.value_or(0);
    result.device = dev;

    Bytes totalMemory = m_options.totalMemory;
    if (totalMemory == 0 && dev < trace.devices().size())
        totalMemory = trace.devices()[dev].totalMemory;
    SimulatedDevice sim(m_options.capacity, 512, totalMemory);

    const auto& meta = trace.metadata();
    PolicyContext context;
    if (auto it = meta.find("allocator_settings"); it != meta.end() && it->is_object())
        context.recordedSettings = &*it;
    auto policy = makePolicy(spec, sim, context);
    result.policy = policy->name();

    ReplayClock clock;
    SegmentRecorder recorder(clock, result.segmentEvents);
    if (m_options.recordSegmentEvents)
        sim.setObserver(&recorder);
    StatisticsAdaptor stats(*policy, clock);
    std::unique_ptr<TimelineAdaptor> timeline;
    if (m_options.recordTimeline)
        timeline = std::make_unique<TimelineAdaptor>(stats, clock);
    AllocatorPolicy& top = timeline ? static_cast<AllocatorPolicy&>(*timeline) : stats;

    const auto& m = trace.memory();
    const std::size_t n = m.count();
    RequestFeeder feeder(trace, dev, top);
    const auto allocs = feeder.allocations();

    // The initial state of the window.
    std::uint64_t initialEvents
        = m_options.initialState == InitialStateMode::Ignore ? 0 : initialStateEventCount(trace, dev);
    bool adopt = m_options.initialState == InitialStateMode::Adopt
        || (m_options.initialState == InitialStateMode::Auto && spec.policy == "pytorch" && spec.options.empty()
            && spec.version.empty() && context.recordedSettings != nullptr);

    if (m_options.followRecorded) {
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (m.device[i] != dev)
                continue;
            if (seen++ >= initialEvents && m.kind[i] == EventKind::SegmentAlloc)
                sim.addAddressHint(m.address[i], m.size[i]);
        }
    }

    // Bytes live before the window that the trace does not itemise (a profiler trace's opening Total
    // Allocated): one opaque block that stays live [choice].
    if (m_options.openingAllocated > 0 && !top.allocate(m_options.openingAllocated, 0))
        ++result.ooms;
    bool stop = false;
    std::uint64_t deviceEvents = 0;
    auto pass = [&](bool measured) {
        for (std::size_t i = 0; i < n && !stop; ++i) {
            if (m.device[i] != dev)
                continue;
            const bool initial = deviceEvents < initialEvents;
            if (++deviceEvents == initialEvents + 1 && initialEvents > 0 && adopt) {
                stats.resetPeaks();
                // Adopted segments were really reserved before the window: if they alone exceed the
                // capacity, the run cannot fit, and saying "no OOM" would answer the what-if wrongly.
                const auto& st = top.stats();
                if (m_options.capacity != 0 && st.reserved > m_options.capacity) {
                    ++result.ooms;
                    result.failures.push_back({ m.time[i], i, st.reserved /* the pre-window state that does not fit */,
                        feeder.streamOf(i), st.reserved, st.allocated, 0 });
                    if (measured && m_options.onOom == OnOom::Stop) {
                        result.stopped = true;
                        stop = true;
                        break;
                    }
                }
            }
            const EventKind kind = m.kind[i];
            clock.time = m.time[i];
            clock.event = i;
            const std::uint32_t a = feeder.allocationOf(i);
            if (initial && adopt) {
                switch (kind) {
                case EventKind::SegmentAlloc: {
                    SegmentInfo seg { m.address[i], m.size[i], feeder.streamOf(i),
                        isSmallSegment(trace, dev, m.address[i], m.size[i]), false, {} };
                    if (top.adoptSegment(seg)) {
                        ++result.initialSegments;
                        result.initialAdopted = true;
                    } else
                        ++result.initialNotAdopted;
                    break;
                }
                case EventKind::Alloc:
                    if (a != RequestFeeder::kNoAllocation
                        && top.adoptBlock(m.address[i], m.size[i], m.requestedSize[i] ? m.requestedSize[i] : m.size[i],
                            feeder.streamOf(i))) {
                        feeder.setSimulatedAddress(a, m.address[i]);
                        ++result.initialBlocks;
                    } else
                        ++result.initialNotAdopted;
                    break;
                case EventKind::Free:
                    if (a != RequestFeeder::kNoAllocation && feeder.simulatedAddress(a) != 0)
                        top.requestFree(feeder.simulatedAddress(a));
                    break;
                case EventKind::SegmentMap:
                    ++result.initialNotAdopted; // expandable initial state is not adopted
                    break;
                default:
                    break;
                }
                continue;
            }
            switch (kind) {
            case EventKind::Alloc:
            case EventKind::Free:
            case EventKind::FreeCompleted: {
                ++result.requestEvents;
                const auto step = feeder.feed(i);
                if (step.outcome == RequestFeeder::Outcome::ZeroSize)
                    ++result.zeroSizeRequests;
                else if (step.outcome == RequestFeeder::Outcome::UnmatchedFree)
                    ++result.unmatchedFrees;
                else if (step.outcome == RequestFeeder::Outcome::Allocated) {
                    ++result.allocations;
                    if (m_options.recordAllocAddresses)
                        result.allocAddresses.emplace_back(i, *step.address);
                } else if (step.outcome == RequestFeeder::Outcome::Failed) {
                    ++result.ooms;
                    const auto& st = top.stats();
                    Bytes free = m_options.capacity == 0
                        ? ~Bytes(0)
                        : m_options.capacity - std::min(m_options.capacity, st.reserved);
                    result.failures.push_back(
                        { m.time[i], i, step.request, step.stream, st.reserved, st.allocated, free });
                    if (measured && m_options.onOom == OnOom::Stop) {
                        result.stopped = true;
                        stop = true;
                    }
                }
                break;
            }
            case EventKind::SegmentFree:
            case EventKind::SegmentUnmap: {
                if (!m_options.followRecorded)
                    break;
                // One empty_cache() per burst of recorded releases. An OOM recovery (release_cached_blocks
                // before the retry) and an explicit empty_cache() release the same segments (§1.10), so
                // both are reproduced by releasing at the first event of the burst.
                std::size_t prev = i;
                while (prev > 0 && m.device[prev - 1] != dev)
                    --prev;
                if (prev > 0
                    && (m.kind[prev - 1] == EventKind::SegmentFree || m.kind[prev - 1] == EventKind::SegmentUnmap))
                    break;
                top.releaseCached();
                ++result.emptyCacheDirectives;
                break;
            }
            default:
                break;
            }
        }
    };
    for (int w = 0; w < m_options.warmupPasses; ++w) {
        // A warm-up pass fills the cache the way earlier iterations did; what it leaves live is freed.
        pass(false);
        for (std::uint32_t a = 0; a < feeder.allocationCount(); ++a)
            if (feeder.simulatedAddress(a) != 0 && allocs[a].allocEvent >= initialEvents) {
                top.deallocate(feeder.simulatedAddress(a), 0, 0);
                feeder.setSimulatedAddress(a, 0);
            }
        deviceEvents = 0;
        initialEvents = 0; // the initial state is adopted once
        stop = false;
        std::string name = std::move(result.policy);
        result = ReplayResult {};
        result.policy = std::move(name);
        result.device = dev;
        stats.resetPeaks();
        if (timeline)
            timeline->takePoints();
        result.segmentEvents.clear();
    }
    pass(true);

    result.peakReserved = stats.peakReserved();
    result.peakAllocated = stats.peakAllocated();
    result.peakRequested = stats.peakRequested();
    result.atPeak = stats.atPeakReserved();
    result.finalReserved = top.stats().reserved;
    result.finalAllocated = top.stats().allocated;
    result.deviceCounters = sim.counters();
    if (timeline)
        result.timeline = timeline->takePoints();
    if (m_options.keepFinalState)
        result.finalState = top.describeState();
    sim.setObserver(nullptr);
    return result;
}

} // namespace gpumem::replay
