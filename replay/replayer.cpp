#include "replay/replayer.h"

#include "core/error.h"
#include "core/importer.h"
#include "core/outside_memory.h"
#include "replay/adaptors/pending_free_adaptor.h"
#include "replay/detail/foresight.h"
#include "replay/fidelity.h"
#include "replay/policy_registry.h"
#include "replay/request_feeder.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <unordered_map>

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

    // The free memory of the policy right after a failed request (ReplayResult::failureDetails).
    FailureDetail failureDetail(const AllocatorPolicy& top, bool byPolicy)
    {
        FailureDetail d;
        const PolicyState state = top.describeState();
        for (const SegmentInfo& seg : state.segments)
            for (const BlockInfo& b : seg.blocks)
                if (b.state == BlockState::Free) {
                    d.freeCached += b.size;
                    d.largestFree = std::max(d.largestFree, b.size);
                    d.freeBlocks.push_back(b.size);
                    ++d.freeBlockCount;
                }
        std::sort(d.freeBlocks.begin(), d.freeBlocks.end(), std::greater<>());
        if (d.freeBlocks.size() > kFailureFreeBlocks)
            d.freeBlocks.resize(kFailureFreeBlocks);
        d.streams = streamMemory(state);
        d.refusedByPolicy = byPolicy;
        return d;
    }

    // The plan of an offline policy: accepts every request at a fresh address and records it
    // (RequestPlan); positions count allocate() and deallocate() calls.
    class PlanRecorder final : public AllocatorPolicy {
    public:
        PlanRecorder(SimulatedDevice& device, const ReplayClock& clock, RequestPlan& out)
            : AllocatorPolicy(device)
            , m_clock(clock)
            , m_out(out)
        {
        }
        std::string name() const override { return "plan recorder"; }
        PolicyState describeState() const override { return {}; }
        bool initial = false; // the Replayer says whether the current event is before the window

    private:
        std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override
        {
            Address a = m_nextAddress;
            m_nextAddress += 512;
            m_index.insert(a, m_out.requests.size());
            m_out.requests.push_back({ bytes, stream, m_out.calls++, kNoIndex, m_clock.event, initial });
            return a;
        }
        void doDeallocate(Address address, Bytes, StreamKey) override
        {
            if (const std::size_t* k = m_index.find(address)) {
                m_out.requests[*k].freeAt = m_out.calls++;
                m_index.erase(address);
            }
        }
        const ReplayClock& m_clock;
        RequestPlan& m_out;
        Address m_nextAddress = Address(1) << 40;
        detail::AddressMap<std::size_t> m_index;
    };

    bool isRequest(EventKind kind)
    {
        return kind == EventKind::Alloc || kind == EventKind::Free || kind == EventKind::FreeCompleted;
    }

    // The instants something is due at, sorted, with a cursor: the first request event of the window at
    // or after an instant is due (the instants an annotation gives: its chosen start and/or end times).
    // Asked at every request event of the window in trace order (their times do not decrease), so it
    // holds one entry per instant, not a byte per event. Shared by the compaction points and the added
    // empty_cache calls.
    class AnnotationPoints {
    public:
        template <typename Instants> AnnotationPoints(const Trace& trace, Instants instants)
        {
            for (const Annotation& an : trace.annotations())
                instants(an, m_at);
            std::sort(m_at.begin(), m_at.end());
        }
        AnnotationPoints() = default;
        // Whether an instant lies after the previous request event's time and at or before `time`.
        bool dueAt(TimeNs time)
        {
            bool due = false;
            while (m_next < m_at.size() && m_at[m_next] <= time) {
                ++m_next;
                due = true;
            }
            return due;
        }
        void restart() { m_next = 0; }

    private:
        std::vector<TimeNs> m_at;
        std::size_t m_next = 0;
    };

    // Compaction points of a compacting policy and the remapping of the trace's blocks after a pass.
    class Compactor {
    public:
        Compactor(const Trace& trace, const CompactionSchedule* schedule)
            : m_schedule(schedule)
        {
            if (!schedule || schedule->annotationGlob.empty())
                return;
            m_before = AnnotationPoints(trace, [&](const Annotation& an, std::vector<TimeNs>& at) {
                if (globMatch(schedule->annotationGlob, trace.str(an.name)))
                    at.insert(at.end(), { an.start, an.end });
            });
        }
        bool active() const { return m_schedule != nullptr; }
        // Whether to compact before a window event of the replayed device at `time`.
        bool due(TimeNs time, EventKind kind)
        {
            if (!m_schedule || !isRequest(kind))
                return false;
            bool now = m_before.dueAt(time);
            if (m_schedule->everyRequests != 0 && m_requests > 0 && m_requests % m_schedule->everyRequests == 0)
                now = true;
            ++m_requests;
            return now;
        }
        void placed(std::uint32_t allocation, Address address)
        {
            if (m_schedule)
                m_owner.insert(address, allocation);
        }
        void freed(Address address)
        {
            if (m_schedule)
                m_owner.erase(address);
        }
        void newPass()
        {
            m_requests = 0;
            m_before.restart();
        }
        // One pass: the moves remap simAddress; a block that could not be placed again is an OOM.
        void run(AllocatorPolicy& top, RequestFeeder& feeder, ReplayResult& result, const ReplayClock& clock,
            StreamKey stream)
        {
            CompactionPass pass = top.compact();
            ++result.compactions;
            result.bytesMoved += pass.bytesMoved;
            std::vector<std::pair<std::uint32_t, Address>> updates;
            for (const BlockMove& mv : pass.moves) {
                if (mv.to != 0)
                    ++result.blocksMoved;
                else {
                    ++result.ooms;
                    const auto& st = top.stats();
                    result.failures.push_back({ clock.time, clock.event, mv.requested, mv.stream ? mv.stream : stream, st.reserved,
                        st.allocated, top.device().freeBytes(), false, "compaction: no room for a moved block" });
                    if (result.failureDetails.size() < kDetailedFailures)
                        result.failureDetails.push_back(failureDetail(top, false));
                }
                if (const std::uint32_t* a = m_owner.find(mv.from)) {
                    updates.emplace_back(*a, mv.to);
                    m_owner.erase(mv.from);
                }
            }
            for (const auto& [a, to] : updates) {
                feeder.setSimulatedAddress(a, to);
                if (to != 0)
                    m_owner.insert(to, a);
            }
        }

    private:
        const CompactionSchedule* m_schedule;
        AnnotationPoints m_before; // compact before the first request event at or after each
        std::uint64_t m_requests = 0; // request events of the window seen in this pass
        detail::AddressMap<std::uint32_t> m_owner; // simulated address → allocation
    };

    // The empty_cache() calls a what-if replay adds (ReplayOptions::addEmptyCache).
    class CacheEmptier {
    public:
        CacheEmptier(const Trace& trace, const EmptyCacheSchedule& schedule)
            : m_schedule(schedule)
        {
            if (!schedule.stepEnd && schedule.annotationGlob.empty())
                return;
            m_before = AnnotationPoints(trace, [&](const Annotation& an, std::vector<TimeNs>& at) {
                if ((schedule.stepEnd && an.kind == AnnotationKind::Step)
                    || (!schedule.annotationGlob.empty() && globMatch(schedule.annotationGlob, trace.str(an.name))))
                    at.push_back(an.end);
            });
        }
        // Whether to empty the cache before a window event of the replayed device at `time`.
        bool due(TimeNs time, EventKind kind)
        {
            if (!m_schedule.any() || !isRequest(kind))
                return false;
            bool now = m_before.dueAt(time);
            if (m_schedule.everyRequests != 0 && m_requests > 0 && m_requests % m_schedule.everyRequests == 0)
                now = true;
            ++m_requests;
            return now;
        }
        void newPass()
        {
            m_requests = 0;
            m_before.restart();
        }

    private:
        const EmptyCacheSchedule& m_schedule;
        AnnotationPoints m_before;
        std::uint64_t m_requests = 0;
    };

} // namespace

std::string EmptyCacheSchedule::text() const
{
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
    if (stepEnd)
        add("step-end");
    if (!annotationGlob.empty())
        add("annotation " + annotationGlob);
    if (everyRequests != 0)
        add("every " + std::to_string(everyRequests));
    return s;
}

EmptyCacheSchedule parseEmptyCacheSchedule(std::string_view text)
{
    const std::string given(text);
    auto usage = [&]() -> UsageError {
        return UsageError("--empty-cache-at '" + given
            + "': give step-end (after every step annotation), annotation GLOB (after every annotation whose name "
              "matches, * and ? as wildcards) or every N (before every N-th request event)");
    };
    EmptyCacheSchedule s;
    auto rest = [&](std::string_view word) -> std::optional<std::string_view> {
        if (text.size() <= word.size() || text.substr(0, word.size()) != word
            || (text[word.size()] != ' ' && text[word.size()] != ':' && text[word.size()] != '='))
            return std::nullopt;
        std::string_view r = text.substr(word.size() + 1);
        while (!r.empty() && r.front() == ' ')
            r.remove_prefix(1);
        return r;
    };
    if (text == "step-end")
        s.stepEnd = true;
    else if (auto glob = rest("annotation"); glob && !glob->empty())
        s.annotationGlob = std::string(*glob);
    else if (auto n = rest("every"); n && !n->empty()) {
        for (char c : *n)
            if (c < '0' || c > '9')
                throw usage();
        if (n->size() > 18)
            throw usage();
        s.everyRequests = std::stoull(std::string(*n));
        if (s.everyRequests == 0)
            throw usage();
    } else
        throw usage();
    return s;
}

std::vector<StreamMemory> streamMemory(const PolicyState& state)
{
    std::vector<StreamMemory> out;
    for (const SegmentInfo& seg : state.segments) {
        auto it = std::lower_bound(out.begin(), out.end(), seg.stream,
            [](const StreamMemory& s, StreamKey k) { return s.stream < k; });
        if (it == out.end() || it->stream != seg.stream)
            it = out.insert(it, StreamMemory { seg.stream, 0, 0 });
        for (const BlockInfo& b : seg.blocks) {
            if (b.state == BlockState::Unmapped)
                continue;
            it->reserved += b.size;
            if (b.state == BlockState::Free)
                it->free += b.size;
        }
    }
    return out;
}

bool globMatch(std::string_view pattern, std::string_view name)
{
    // Iterative wildcard match with one backtrack point (the last '*').
    std::size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
    while (n < name.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
            ++p;
            ++n;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = n;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            n = ++mark;
        } else
            return false;
    }
    while (p < pattern.size() && pattern[p] == '*')
        ++p;
    return p == pattern.size();
}

namespace {
    // The busiest device, as `gpumem analyze` and the viewer choose it: the largest peak of allocated
    // bytes (alloc +size, free −size), GPUs before the CPU, the lowest index on ties. Fed the memory
    // events in trace order, whole or chunk by chunk.
    class BusiestDevice {
    public:
        explicit BusiestDevice(const Trace& tables)
            : m_tables(tables)
            , m_live(tables.devices().size(), 0)
            , m_peak(tables.devices().size(), 0)
            , m_allocates(tables.devices().size(), false)
        {
        }
        void add(const MemoryEventColumns& m, std::size_t i)
        {
            const DeviceId d = m.device[i];
            if (!m_first)
                m_first = d;
            if (m.kind[i] == EventKind::Alloc) {
                m_allocates[d] = true;
                m_live[d] += std::int64_t(m.size[i]);
                m_peak[d] = std::max(m_peak[d], m_live[d]);
            } else if (m.kind[i] == EventKind::Free)
                m_live[d] -= std::int64_t(m.size[i]);
        }
        std::optional<DeviceId> result() const
        {
            std::optional<DeviceId> best;
            auto better = [&](DeviceId d) {
                if (!best)
                    return true;
                const bool cpu = m_tables.devices()[d].type == DeviceType::Cpu,
                           bestCpu = m_tables.devices()[*best].type == DeviceType::Cpu;
                return cpu != bestCpu ? bestCpu : m_peak[d] > m_peak[*best];
            };
            for (DeviceId d = 0; d < m_allocates.size(); ++d)
                if (m_allocates[d] && better(d))
                    best = d;
            return best ? best : m_first;
        }

    private:
        const Trace& m_tables;
        std::vector<std::int64_t> m_live, m_peak;
        std::vector<bool> m_allocates;
        std::optional<DeviceId> m_first;
    };
} // namespace

std::optional<DeviceId> defaultReplayDevice(const Trace& trace) { return defaultReplayDevice(*traceView(trace)); }

std::optional<DeviceId> defaultReplayDevice(const MemoryEventSource& source)
{
    // One device: it is the busiest wherever the trace has an event (BusiestDevice's first), without a pass
    // over the events (a tenth of a streamed replay of a 10 M-event .gmt; issue 22).
    if (source.skeleton().devices().size() == 1)
        return source.eventCount() > 0 ? std::optional<DeviceId>(0) : std::nullopt;
    BusiestDevice busiest(source.skeleton());
    source.forEachChunk([&](const MemoryEventColumns& chunk, std::uint64_t) {
        for (std::size_t j = 0; j < chunk.count(); ++j)
            busiest.add(chunk, j);
    });
    return busiest.result();
}

Bytes outsideBytesFor(const Trace& trace, DeviceId device, std::optional<Bytes> given)
{
    if (given)
        return *given;
    auto outside = outsideMemory(trace, device);
    return outside ? outside->bytes() : 0;
}

Bytes outsideBytesFor(const MemoryEventSource& source, DeviceId device, std::optional<Bytes> given)
{
    const Trace& tables = source.skeleton();
    if (given || source.wholeTrace() || !outsideMemoryNeedsEvents(tables))
        return outsideBytesFor(tables, device, given);
    AllocationSourcePeak peak(tables, device);
    source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) {
        for (std::size_t j = 0; j < m.count(); ++j)
            peak.add(m, j);
    });
    auto outside = outsideMemory(tables, device, &peak);
    return outside ? outside->bytes() : 0;
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

namespace {

// The limit that refused a request (FailedRequest::refusedBy). The device refused it: its capacity,
// or the simulator's 4 EiB limit when the capacity is 0 or above it (docs/policies.md).
// `given`: the capacity the replay was asked for, before `outside` was taken from it (the simulated device keeps at
// least 1 B: the trace's outside_allocator figure may be the whole capacity or more, where the text said "17.00 GiB
// less 17.00 GiB" for a 16 GiB capacity; review finding).
std::string deviceLimitText(const SimulatedDevice& sim, Bytes outside, Bytes given)
{
    if (given != 0 && outside >= given)
        return "the device capacity, " + formatBytes(given) + ", all of it taken by the " + formatBytes(outside)
            + " outside the allocator";
    if (sim.capacity() != 0 && sim.capacity() <= kMaxDeviceBytes && outside != 0)
        return "the device capacity, " + formatBytes(given) + " less " + formatBytes(outside) + " outside the allocator";
    if (sim.capacity() != 0 && sim.capacity() <= kMaxDeviceBytes)
        return "the device capacity, " + formatBytes(sim.capacity());
    return "the simulator's device limit, " + formatBytes(kMaxDeviceBytes);
}

// The policy refused it without a failed device call: its own limit. The heap policies keep 1 TiB of
// address space per stream heap; the others size their pools or reservations from the device's total
// memory (docs/policies.md), which is assumed when neither the trace nor --capacity gives it.
std::string policyLimitText(const PolicySpec& spec, const SimulatedDevice& sim, bool totalAssumed)
{
    static constexpr std::array<std::string_view, 5> kHeapPolicies = { "first-fit", "next-fit", "best-fit", "worst-fit",
        "size-class" };
    if (std::find(kHeapPolicies.begin(), kHeapPolicies.end(), spec.policy) != kHeapPolicies.end())
        return spec.policy + "'s own limit, " + formatBytes(Bytes(1) << 40) + " of address space per stream heap";
    // A limit the spec sets itself is named with its value (issue 15: "the device's total memory" was
    // printed when maximum_pool_size or memory_limit refused).
    const PolicySpec* base = &spec;
    while (base->inner)
        base = base->inner.get();
    for (const auto& [key, value] : base->options) {
        if (key == "maximum_pool_size" && (base->policy == "rmm-pool" || base->policy == "rmm-binning"))
            return base->policy + "'s maximum_pool_size, " + formatBytes(parseBytes(value, key));
        if (key == "memory_limit" && base->policy == "tf-bfc" && parseBytes(value, key) != 0)
            return "tf-bfc's memory_limit, " + formatBytes(parseBytes(value, key));
        if (key == "per_process_memory_fraction" && (base->policy == "pytorch" || base->policy == "gmlake")) {
            const double f = std::strtod(value.c_str(), nullptr);
            if (f < 1.0)
                return base->policy + "'s per_process_memory_fraction " + value + ", "
                    + formatBytes(Bytes(f * double(sim.totalMemory()))) + " of the device's "
                    + formatBytes(sim.totalMemory());
        }
    }
    std::string total = formatBytes(sim.totalMemory());
    if (totalAssumed && sim.capacity() == 0)
        total += " (assumed: the trace records no memory size and no capacity was given)";
    return spec.policy + "'s own limit, sized from the device's total memory, " + total;
}

// What the look-ahead pass of a replay of `source` under `options` on `dev` depends on besides the events: the
// memo's key (ForesightMemo), and the pairing a whole trace brings.
struct LookAhead {
    std::uint64_t rebuiltEvents = 0; // initialStateEventCount
    std::span<const std::uint32_t> allocationOf; // a whole trace's own pairing by event; empty for a streamed source
    ForesightMemo::Key key;
};
LookAhead lookAheadOf(const MemoryEventSource& source, const ReplayOptions& options, DeviceId dev)
{
    const Trace& trace = source.skeleton();
    LookAhead la;
    la.rebuiltEvents = initialStateEventCount(trace, dev);
    la.allocationOf = detail::EventPairing::allocationOfEvents(source);
    const bool needSourcePeak = options.capacity != 0 && !options.outsideBytes && outsideMemoryNeedsEvents(trace);
    la.key = { dev, options.initialState == InitialStateMode::Ignore ? 0 : la.rebuiltEvents, options.followRecorded,
        options.openingAllocated, needSourcePeak, !la.allocationOf.empty() };
    return la;
}

// Thrown by a pass's visitor to end the pass early (a stop): forEachChunk leaves the source usable.
struct PassStopped { };

// maxRequest: see RequestFeeder (0 = the device's limit).
ReplayResult replayTrace(const MemoryEventSource& source, const PolicySpec& spec, const ReplayOptions& options,
    RequestPlan* record, Bytes maxRequest = 0)
{
    const Trace& trace = source.skeleton(); // the tables: devices, streams, pools, annotations, metadata
    ReplayResult result;
    auto device = options.device ? options.device : defaultReplayDevice(source);
    if (options.device && *options.device >= trace.devices().size())
        // No "replay:" prefix: the CLI names the verb (gpumem replay:, gpumem fit:) before the message.
        throw UsageError("device " + std::to_string(*options.device) + " does not exist; the trace has "
            + std::to_string(trace.devices().size()) + " device" + (trace.devices().size() == 1 ? "" : "s")
            + " (--device 0.." + std::to_string(trace.devices().size() == 0 ? 0 : trace.devices().size() - 1) + ")");
    const DeviceId dev = device.value_or(0);
    result.device = dev;

    // The initial state of the window.
    const LookAhead la = lookAheadOf(source, options, dev);
    const std::uint64_t rebuiltEvents = la.rebuiltEvents;
    std::uint64_t initialEvents = la.key.preWindow;
    const bool emptyStart = options.initialState == InitialStateMode::Empty; // the rebuilt events are not fed
    const std::span<const std::uint32_t> allocationOf = la.allocationOf;
    auto look = [&] { return detail::foresee(source, allocationOf, dev, initialEvents, options, la.key.needSourcePeak); };
    const std::shared_ptr<const detail::Foresight> foresight
        = options.foresight ? options.foresight->of(la.key, look) : std::make_shared<const detail::Foresight>(look());
    const detail::Foresight& ahead = *foresight;
    const std::uint64_t n = ahead.events;

    Bytes totalMemory = options.totalMemory;
    if (totalMemory == 0 && dev < trace.devices().size())
        totalMemory = trace.devices()[dev].totalMemory;
    // The layer outside the allocator takes its bytes from the capacity (at least 1 B stays, since 0
    // would mean unlimited: an outside figure as large as the capacity leaves no room for any request).
    Bytes capacity = options.capacity;
    if (capacity != 0) {
        if (ahead.sourcePeak) {
            auto outside = outsideMemory(trace, dev, &*ahead.sourcePeak);
            result.outsideBytes = outside ? outside->bytes() : 0;
        } else
            result.outsideBytes = outsideBytesFor(trace, dev, options.outsideBytes);
        capacity = std::max<Bytes>(1, capacity - std::min(capacity, result.outsideBytes));
    }
    SimulatedDevice sim(capacity, 512, totalMemory != 0 ? totalMemory : options.capacity);

    const auto& meta = trace.metadata();
    const PolicyContext context = policyContextOf(meta);
    result.approximation = approximationOf(spec);
    ReplayClock clock;
    std::unique_ptr<AllocatorPolicy> policy;
    PlanRecorder* recorder = nullptr;
    if (record) {
        auto r = std::make_unique<PlanRecorder>(sim, clock, *record);
        recorder = r.get();
        policy = std::move(r);
    } else
        policy = makePolicy(spec, sim, context);
    result.policy = policy->name();
    if (policy->needsPlan()) {
        // The same replay with a recorder that accepts everything gives the exact call sequence.
        RequestPlan plan;
        ReplayOptions dry = options;
        dry.capacity = 0;
        dry.onOom = OnOom::Skip;
        dry.recordTimeline = dry.recordAllocAddresses = dry.recordSegmentEvents = dry.keepFinalState = false;
        replayTrace(source, spec, dry, &plan, options.capacity);
        policy->plan(plan);
    }

    SegmentRecorder segmentRecorder(clock, result.segmentEvents);
    if (options.recordSegmentEvents)
        sim.setObserver(&segmentRecorder);

    // A wrapper (compaction:INNER) adopts as its innermost policy would, so that INNER alone is its baseline.
    const PolicySpec* base = &spec;
    while (base->inner)
        base = base->inner.get();
    bool adopt = options.initialState == InitialStateMode::Adopt
        || (options.initialState == InitialStateMode::Auto && base->policy == "pytorch" && base->options.empty()
            && base->version.empty() && context.recordedSettings != nullptr);

    // One pending-free rule for every policy (PendingFreeAdaptor): requested/allocated bytes drop at the
    // free_requested, the memory stays occupied until the free_completed. Only where the trace has such
    // frees, so that other replays pay nothing for it.
    const bool freesPend = !record && ((adopt && initialEvents > 0) || ahead.requestsFrees);
    std::unique_ptr<PendingFreeAdaptor> pending;
    StatisticsAdaptor stats(withPendingFreeRule(*policy, freesPend, pending), clock);
    std::unique_ptr<TimelineAdaptor> timeline;
    if (options.recordTimeline)
        timeline = std::make_unique<TimelineAdaptor>(stats, clock);
    AllocatorPolicy& top = timeline ? static_cast<AllocatorPolicy&>(*timeline) : stats;

    // A dry run (the plan of an offline policy) runs unlimited but refuses what the real run will.
    RequestFeeder feeder(top, maxRequest);
    if (const Trace* whole = source.wholeTrace())
        feeder.useDenseAddresses(whole->allocations().size());
    // PyTorch before PR #71745: one global queue of cross-stream end-of-life events (request_feeder.h).
    if (base->policy == "pytorch" && !record)
        feeder.setGlobalEventQueue(pytorchConfigFor(*base, context).globalEventQueue);
    std::vector<StreamKey> streamKey(trace.streams().size());
    for (std::size_t s = 0; s < streamKey.size(); ++s)
        streamKey[s] = trace.streams()[s].handle;

    Compactor compactor(trace, policy->compactionSchedule());
    CacheEmptier emptier(trace, options.addEmptyCache);
    // Pools: each private pool of the trace is declared, and every alloc served from its event's pool,
    // unless they are merged into the default one.
    const bool tracePools = trace.pools().size() > 1;
    result.poolsMerged = options.mergePools && tracePools;
    if (!options.mergePools)
        for (PoolId p = 1; p < trace.pools().size(); ++p)
            top.declarePool(p, trace.pools()[p].useOnOom);
    PoolId currentPool = 0;

    for (const auto& [address, size] : ahead.hints)
        sim.addAddressHint(address, size);

    // Bytes live before the window that the trace does not itemise (a profiler trace's opening Total
    // Allocated): one opaque block that stays live [choice].
    if (recorder)
        recorder->initial = true;
    // The blocks the window frees without an alloc were among them: each is its own block until its
    // free (ReplayOptions::openingAllocated); the event → simulated block of each.
    std::unordered_map<std::size_t, Address> openingBlocks;
    // The first opening block refused: the run cannot start (FailedRequest::beforeWindow), whatever onOom says.
    std::optional<FailedRequest> openingFailure;
    auto refuseOpening = [&](Bytes size, std::uint64_t event, TimeNs time) {
        ++result.ooms;
        if (openingFailure)
            return;
        const auto& st = top.stats();
        openingFailure = FailedRequest { n ? time : 0, event, size, 0, st.reserved, st.allocated,
            sim.limit() - std::min(sim.limit(), st.reserved), true, {} };
        openingFailure->refusedBy = !feeder.admits(size) || sim.counters().failedCalls > 0
            ? deviceLimitText(sim, result.outsideBytes, options.capacity)
            : policyLimitText(spec, sim, totalMemory == 0);
    };
    if (options.openingAllocated > 0) {
        // The frees the trace paired with no alloc: each is its own opening block until that free.
        Bytes freedBytes = 0;
        for (const auto& f : ahead.unmatchedFrees)
            freedBytes += f.request;
        Bytes opaque = options.openingAllocated;
        const bool itemised = freedBytes <= opaque;
        if (itemised)
            opaque -= freedBytes;
        // (else the counter and the frees disagree: hold the counter's bytes as one block)
        if (opaque > 0 && (!feeder.admits(opaque) || !top.allocate(opaque, 0)))
            refuseOpening(opaque, ahead.firstDeviceEvent, ahead.firstDeviceTime);
        for (const auto& f : itemised ? ahead.unmatchedFrees : std::vector<detail::Foresight::OpeningFree> {}) {
            std::optional<Address> addr;
            if (f.request > 0 && feeder.admits(f.request))
                addr = top.allocate(f.request, f.stream);
            if (addr)
                openingBlocks.emplace(f.event, *addr);
            else if (f.request > 0)
                refuseOpening(f.request, f.event, f.time);
        }
    }
    bool stop = false;
    std::uint64_t deviceEvents = 0;
    // The pre-window events happen once: a later pass starts at the window, with the initial state
    // still in place (it is not freed between passes).
    const std::uint64_t preWindow = initialEvents;
    // The adopted state's peaks restart at the window (resetPeaks below); none are sampled before it.
    if (adopt && initialEvents > 0)
        stats.pausePeaks();
    std::uint64_t skip = 0;
    bool stateDoesNotFit = false; // the state before the window exceeds the capacity
    if (openingFailure) {
        result.failures.push_back(*openingFailure);
        result.stopped = true;
        stateDoesNotFit = true;
    }
    auto pass = [&](bool measured) {
        detail::EventPairing pairing(allocationOf, ahead.completions);
        // The kind of the device's previous event (a release burst starts after an event of another kind).
        std::optional<EventKind> previousKind;
        auto event = [&](const MemoryEventColumns& m, std::size_t j, std::uint64_t i) {
            const auto paired = pairing.step(m, j, i);
            if ((i & 0xFFFF) == 0 && options.cancel && options.cancel->load(std::memory_order_relaxed))
                throw Cancelled();
            if (m.device[j] != dev)
                return;
            const std::optional<EventKind> previous = previousKind;
            previousKind = m.kind[j];
            if (measured && i > options.stopAfterEvent) {
                stop = true;
                return;
            }
            if (measured && options.stopAtPeakReserved != 0 && !stats.peaksPaused()
                && stats.peakReserved().bytes >= options.stopAtPeakReserved) {
                result.stoppedAtPeak = true;
                stop = true;
                return;
            }
            if (skip > 0) {
                --skip;
                return;
            }
            const bool initial = deviceEvents < initialEvents;
            if (++deviceEvents == initialEvents + 1 && initialEvents > 0 && adopt) {
                // Adopted segments were really reserved before the window. Above the capacity, the first
                // cudaMalloc of the window would fail and PyTorch would release its cached segments and
                // retry (allocators.md §1.10): release the wholly free ones now, before the peaks start
                // [choice: at the window start rather than at that first malloc, so the peak never
                // exceeds the capacity]. What cannot be released (segments with live blocks) does not fit:
                // the run cannot fit, and saying "no OOM" would answer the what-if wrongly.
                if (options.capacity != 0 && top.stats().reserved > options.capacity)
                    top.releaseCached();
                stats.resetPeaks();
                const auto& st = top.stats();
                if (options.capacity != 0 && st.reserved > options.capacity) {
                    ++result.ooms;
                    FailedRequest f { m.time[j], i, st.allocated, streamKey[m.stream[j]], st.reserved, st.allocated, 0, false, {} };
                    f.beforeWindow = true;
                    result.failures.push_back(f);
                    result.failureDetails.push_back(failureDetail(top, false));
                    // Not a request that --on-oom skip could drop: the run cannot start, whatever the
                    // option says (a warm-up pass stops too, and no later pass runs).
                    result.stopped = true;
                    stop = true;
                    stateDoesNotFit = true;
                    return;
                }
            }
            if (initial && emptyStart)
                return;
            const EventKind kind = m.kind[j];
            const StreamKey stream = streamKey[m.stream[j]];
            clock.time = m.time[j];
            clock.event = i;
            const std::uint32_t a = paired.pairing == ChunkPairing::Pairing::Opened
                    || paired.pairing == ChunkPairing::Pairing::Closed || paired.pairing == ChunkPairing::Pairing::Completed
                ? paired.allocation
                : RequestFeeder::kNoAllocation;
            if (recorder)
                recorder->initial = initial;
            if (!initial && emptier.due(m.time[j], kind)) {
                top.releaseCached();
                ++result.emptyCacheAdded;
            }
            if (!initial && compactor.due(m.time[j], kind)) {
                compactor.run(top, feeder, result, clock, stream);
                if (measured && options.onOom == OnOom::Stop && !result.failures.empty()) {
                    result.stopped = true;
                    stop = true;
                    return;
                }
            }
            if (initial && adopt) {
                switch (kind) {
                case EventKind::SegmentAlloc: {
                    SegmentInfo seg { m.address[j], m.size[j], stream, isSmallSegment(trace, dev, m.address[j], m.size[j]),
                        false, {}, options.mergePools ? 0 : m.pool[j] };
                    bool adopted = false;
                    try {
                        adopted = top.adoptSegment(seg);
                    } catch (const FormatError&) {
                        throw;
                    } catch (const Error& e) { // SimulatedDevice::adopt: overlapping segments in the trace
                        throw FormatError((options.source.empty() ? std::string() : options.source + ": ") + e.what()
                            + "; the trace's segments before the window overlap (damaged or hand-edited)");
                    }
                    if (adopted) {
                        ++result.initialSegments;
                        result.initialAdopted = true;
                    } else
                        ++result.initialNotAdopted;
                    break;
                }
                case EventKind::Alloc:
                    if (a != RequestFeeder::kNoAllocation
                        && top.adoptBlock(m.address[j], m.size[j], m.requestedSize[j] ? m.requestedSize[j] : m.size[j], stream)) {
                        feeder.setSimulatedAddress(a, m.address[j]);
                        compactor.placed(a, m.address[j]);
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
                return;
            }
            if (kind == EventKind::Alloc && tracePools) {
                const PoolId p = options.mergePools ? 0 : m.pool[j];
                if (p != currentPool) {
                    top.selectPool(p);
                    currentPool = p;
                }
            }
            switch (kind) {
            case EventKind::Alloc:
            case EventKind::Free:
            case EventKind::FreeCompleted: {
                ++result.requestEvents;
                const std::uint64_t failedCallsBefore = sim.counters().failedCalls;
                RequestFeeder::Event e { kind, m.requestedSize[j] ? m.requestedSize[j] : m.size[j], stream, a, false, false };
                if (kind == EventKind::Free && a != RequestFeeder::kNoAllocation) {
                    e.laterCompletion = ahead.laterCompletionOf(a);
                    e.completionFollows = ahead.completionFollowsOf(a);
                }
                const auto step = feeder.feed(e);
                for (Address freed : step.alsoFreed) // the global event queue (request_feeder.h)
                    compactor.freed(freed);
                if (step.outcome == RequestFeeder::Outcome::ZeroSize)
                    ++result.zeroSizeRequests;
                else if (step.outcome == RequestFeeder::Outcome::UnmatchedFree) {
                    ++result.unmatchedFrees;
                    if (auto it = openingBlocks.find(i); it != openingBlocks.end()) {
                        top.deallocate(it->second, step.request, step.stream);
                        openingBlocks.erase(it);
                    }
                }
                else if (step.outcome == RequestFeeder::Outcome::Freed)
                    compactor.freed(*step.address);
                else if (step.outcome == RequestFeeder::Outcome::Allocated) {
                    ++result.allocations;
                    if (a != RequestFeeder::kNoAllocation)
                        compactor.placed(a, *step.address);
                    if (options.recordAllocAddresses)
                        result.allocAddresses.emplace_back(i, *step.address);
                } else if (step.outcome == RequestFeeder::Outcome::Failed) {
                    ++result.ooms;
                    const auto& st = top.stats();
                    // (None where the memory outside the allocator takes the whole capacity: the device keeps 1 B.)
                    const Bytes free = options.capacity != 0 && result.outsideBytes >= options.capacity
                        ? 0
                        : sim.limit() - std::min(sim.limit(), st.reserved);
                    const bool deviceRefused = sim.counters().failedCalls > failedCallsBefore || !feeder.admits(step.request);
                    FailedRequest f { m.time[j], i, step.request, step.stream, st.reserved, st.allocated, free, false, {} };
                    f.refusedBy = deviceRefused ? deviceLimitText(sim, result.outsideBytes, options.capacity) : policyLimitText(spec, sim, totalMemory == 0);
                    // A block of the state before the window (allocated as a request) that does not fit: the
                    // run could not have started, whatever --on-oom says (as for an adopted state).
                    f.beforeWindow = initial;
                    result.failures.push_back(std::move(f));
                    if (result.failureDetails.size() < kDetailedFailures)
                        result.failureDetails.push_back(failureDetail(top, !deviceRefused));
                    if (initial) {
                        result.stopped = true;
                        stop = true;
                        stateDoesNotFit = true;
                    } else if (measured && options.onOom == OnOom::Stop) {
                        result.stopped = true;
                        stop = true;
                    }
                }
                break;
            }
            case EventKind::SegmentFree:
            case EventKind::SegmentUnmap: {
                if (!options.followRecorded)
                    break;
                // One empty_cache() per burst of recorded releases. An OOM recovery (release_cached_blocks
                // before the retry) and an explicit empty_cache() release the same segments (§1.10), so
                // both are reproduced by releasing at the first event of the burst.
                // A burst that a recorded empty_cache event announces was released by that event.
                if (previous
                    && (*previous == EventKind::SegmentFree || *previous == EventKind::SegmentUnmap
                        || (*previous == EventKind::EmptyCache && options.emptyCache == EmptyCacheMode::Keep)))
                    break;
                top.releaseCached();
                ++result.emptyCacheDirectives;
                break;
            }
            case EventKind::EmptyCache: {
                const PoolId p = m.pool[j];
                if (options.emptyCache == EmptyCacheMode::Drop || (p != 0 && options.mergePools)) {
                    ++result.emptyCacheDropped;
                    break;
                }
                if (p == 0)
                    top.releaseCached();
                else
                    top.releasePool(p);
                ++result.emptyCacheCalls;
                break;
            }
            default:
                break;
            }
        };
        if (stop)
            return;
        try {
            source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) {
                for (std::size_t j = 0; j < m.count(); ++j) {
                    event(m, j, first + j);
                    if (stop)
                        throw PassStopped {};
                }
            });
        } catch (const PassStopped&) {
        }
    };
    for (int w = 0; w < options.warmupPasses && !stateDoesNotFit; ++w) {
        // A warm-up pass fills the cache the way earlier iterations did; what it leaves live is freed.
        pass(false);
        if (stateDoesNotFit)
            break;
        for (const auto& [a, addr] : feeder.simulatedBlocks())
            if (a >= ahead.allocationsBeforeWindow) {
                top.deallocate(addr, 0, 0);
                compactor.freed(addr);
                feeder.setSimulatedAddress(a, 0);
            }
        deviceEvents = 0;
        initialEvents = 0; // the initial state is adopted once
        skip = preWindow;
        compactor.newPass();
        emptier.newPass();
        stop = false;
        std::string name = std::move(result.policy);
        std::string approximation = std::move(result.approximation);
        const Bytes outside = result.outsideBytes;
        result = ReplayResult {};
        result.policy = std::move(name);
        result.approximation = std::move(approximation);
        result.outsideBytes = outside;
        result.device = dev;
        stats.resetPeaks();
        if (timeline)
            timeline->takePoints();
        result.segmentEvents.clear();
    }
    if (!stateDoesNotFit)
        pass(true);
    if (stats.peaksPaused())
        stats.resetPeaks(); // a trace with no event after its pre-window state: the peaks are that state's

    result.openingAllocated = options.openingAllocated;
    result.reservedIsLowerBound = options.openingAllocated > 0 || (emptyStart && rebuiltEvents > 0)
        || (!record && openingAllocated(trace, dev, ahead.firstRequest) > 0);
    result.peakReserved = stats.peakReserved();
    result.peakAllocated = stats.peakAllocated();
    result.peakRequested = stats.peakRequested();
    result.atPeak = stats.atPeakReserved();
    result.finalReserved = top.stats().reserved;
    result.finalAllocated = top.stats().allocated;
    result.allocRetries = top.stats().allocRetries;
    result.deviceCounters = sim.counters();
    if (tracePools && !options.mergePools)
        result.pools = top.poolMemory();
    if (timeline)
        result.timeline = timeline->takePoints();
    if (options.keepFinalState) {
        result.finalState = top.describeState();
        result.finalStreams = streamMemory(*result.finalState);
        result.liveAllocations = feeder.simulatedBlocks();
    } else if (!record)
        result.finalStreams = streamMemory(top.describeState());
    sim.setObserver(nullptr);
    if (compactor.active() && spec.inner && !record) {
        ReplayOptions alone = options;
        alone.recordTimeline = alone.recordAllocAddresses = alone.recordSegmentEvents = alone.keepFinalState = false;
        result.peakReservedWithoutCompaction = replayTrace(source, *spec.inner, alone, nullptr).peakReserved.bytes;
    }
    return result;
}

} // namespace

std::shared_ptr<ForesightMemo> makeForesightMemo() { return std::make_shared<ForesightMemo>(); }

bool foreseeWith(const MemoryEventSource& source, const ReplayOptions& options,
    const std::function<void(const MemoryEventColumns&, std::uint64_t first)>& chunk, const std::function<void()>& restarted)
{
    if (!options.foresight)
        throw std::logic_error("foreseeWith: options.foresight is not set");
    // The device replayTrace takes (a device past the end is its error to give, at the replay).
    const DeviceId dev = options.device ? *options.device : defaultReplayDevice(source).value_or(0);
    if (dev >= source.skeleton().devices().size())
        return false;
    const LookAhead la = lookAheadOf(source, options, dev);
    bool shown = false;
    const detail::PassVisitor visitor { chunk, restarted };
    options.foresight->of(la.key, [&] {
        shown = true;
        return detail::foresee(source, la.allocationOf, dev, la.key.preWindow, options, la.key.needSourcePeak, &visitor);
    });
    return shown;
}

ReplayResult Replayer::run(const MemoryEventSource& source, const PolicySpec& spec) const
{
    return replayTrace(source, spec, m_options, nullptr);
}

ReplayResult Replayer::run(const Trace& trace, const PolicySpec& spec) const
{
    return replayTrace(*traceView(trace), spec, m_options, nullptr);
}

} // namespace gpumem::replay
