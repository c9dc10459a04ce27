#include "analyze/bounded_analysis.h"

#include "analyze/detail/segment_layout.h"
#include "analyze/trace_summary.h"
#include "core/byte_total.h"
#include "core/detail/address_map.h"
#include "core/error.h"
#include "core/units.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>

namespace gpumem::analyze {

namespace {
    __extension__ typedef __int128 Wide; // the lower bound's exact running sum (replay::livePeak)

    using gpumem::detail::blockKey;

    // Blocks live by (device, address), with the rules of Trace::allocations() (core/trace.cpp, TraceBody::pair):
    // an alloc at a live address leaves the earlier block live for ever (never freed), a free with no live
    // block there closes nothing. Records sit in reused slots: no allocation per event once warm.
    template <class Record>
    class LiveBlocks {
    public:
        std::uint32_t open(std::uint64_t key, const Record& record)
        {
            std::uint32_t slot;
            if (m_freeCount > 0) {
                slot = m_free[--m_freeCount];
                m_records[slot] = record;
            } else {
                slot = static_cast<std::uint32_t>(m_records.size());
                m_records.push_back(record);
            }
            m_map.exchange(key, slot); // an earlier block there keeps its slot: live, never freed
            return slot;
        }
        // open() for a record written in place: the slot's record, valid until the next open, which the caller
        // must assign field by field, every field (a reused slot holds the record of a freed block). Filling a
        // record on the stack and copying it read back its narrow stores as wide loads (a store-forwarding
        // stall per alloc, a tenth of pass 1 on a malloc/free stream); resetting it first (`= Record {}`)
        // compiled to a `rep stos` at every alloc.
        Record& emplaceForOverwrite(std::uint64_t key)
        {
            std::uint32_t slot;
            if (m_freeCount > 0) {
                slot = m_free[--m_freeCount];
            } else {
                slot = static_cast<std::uint32_t>(m_records.size());
                m_records.emplace_back();
            }
            m_map.exchange(key, slot);
            return m_records[slot];
        }
        // The slot of the block a free at `key` closes, or AddressMap::kNone; the caller releases it.
        std::uint32_t close(std::uint64_t key) { return m_map.take(key); }
        // The free slots are a stack in m_free[0, m_freeCount): the vector only grows, so a release is a store
        // (push_back was a call per free in pass 1).
        void release(std::uint32_t slot)
        {
            if (m_freeCount == m_free.size()) [[unlikely]]
                m_free.push_back(slot);
            else
                m_free[m_freeCount] = slot;
            ++m_freeCount;
        }
        Record& operator[](std::uint32_t slot) { return m_records[slot]; }
        std::vector<Record>& records() { return m_records; }

    private:
        gpumem::detail::AddressMap m_map;
        std::vector<Record> m_records;
        std::vector<std::uint32_t> m_free;
        std::size_t m_freeCount = 0;
    };

    // The state of one device after one of its events: a point of its DeviceTimeline.
    struct Point {
        std::uint64_t ordinal = 0, event = 0; // the point's index in the device's timeline; its memory event
        TimeNs time = 0;
        Bytes allocated = 0, active = 0, requested = 0, reserved = 0, largestFree = 0;
        Bytes recordedAllocated = 0; // the recorded allocated counter, where reserved is a counter too
        Bytes ratioAllocated = 0;    // DeviceTimeline::allocatedForRatios: recordedAllocated where present, else allocated
    };

    // statFromColumn (analysis.cpp) one value at a time.
    struct SeriesStat {
        MemoryStats::Stat stat; // current: the value before this one
        // Without a branch on the direction: alloc and free events may interleave unpredictably.
        void see(Bytes v)
        {
            const Bytes previous = stat.current;
            const bool up = v > previous;
            stat.peak = std::max(stat.peak, v);
            stat.allocated = addSaturated(stat.allocated, up ? v - previous : 0);
            stat.freed = addSaturated(stat.freed, up ? 0 : previous - v);
            stat.current = v;
        }
        // see(v) where v is known not to be below / above the value before: an alloc raises allocated, active
        // and requested, a free lowers them (ByteTotal is monotone in each direction), so pass 1 updates those
        // three series in the event's case, not at every event (issue 22).
        void seeUp(Bytes v)
        {
            stat.peak = std::max(stat.peak, v);
            stat.allocated = addSaturated(stat.allocated, v - stat.current);
            stat.current = v;
        }
        void seeDown(Bytes v)
        {
            stat.freed = addSaturated(stat.freed, stat.current - v);
            stat.current = v;
        }
        // see(v) where the value may not have changed (reserved and inactive split: 0 throughout without segment
        // events or a counter; active: allocated's): see(v) after v changes nothing, so it is skipped.
        void seeIfChanged(Bytes v)
        {
            if (v != stat.current)
                see(v);
        }
    };

    // DeviceTimeline::waste and external at a point (allocators.md §5.4), with segment events only.
    std::optional<double> wasteAt(const Point& p)
    {
        if (p.reserved == 0)
            return std::nullopt;
        return 1.0 - static_cast<double>(std::min(p.ratioAllocated, p.reserved)) / static_cast<double>(p.reserved);
    }
    std::optional<double> externalAt(const Point& p)
    {
        if (p.reserved <= p.allocated)
            return std::nullopt;
        const double freeBytes = static_cast<double>(p.reserved - p.allocated);
        return std::max(0.0, 1.0 - static_cast<double>(p.largestFree) / freeBytes);
    }

    // Pass 1's running figures of one device (what analysis.cpp reads off its DeviceTimeline).
    struct DeviceRun {
        std::uint64_t events = 0;
        TimeNs firstTime = 0;
        ByteTotal allocated, active, requested, reserved;
        detail::SegmentLayout layout;
        bool segments = false; // any segment-level event: the device has reserved, inactive split and largest free
        // Without segment events, reserved (and recordedAllocated) sampled from recorded counters (Timeline::build).
        bool counter = false, recordedCounter = false;
        std::string counterName;
        std::int64_t counterReserved = -1, counterAllocated = -1;
        Bytes recordedPeak = 0;
        std::optional<replay::FirstRequest> firstRequest; // for replay::openingAllocated
        SeriesStat sAllocated, sActive, sRequested, sReserved, sInactive;
        std::uint64_t live = 0, activeCount = 0, segs = 0, ooms = 0;
        MemoryStats::Stat allocations, activeAllocations, segmentCount;
        std::optional<Point> peakAllocated, peakReserved;
        bool extendingReserved = false; // the reserved peak's instant still runs (resolveInstant)
        std::optional<Point> oom;
        Bytes oomRequest = 0; // the first oom event's size
        bool oomOpen = false;
        std::uint64_t rebuilt = 0; // replay::initialStateEventCount
        std::optional<Point> fullest, fullestInWindow; // headlineOf's reserved peak from point 0 / after the rebuilt ones
        double wasteArea = 0, wasteSpan = 0;
        std::optional<double> previousWaste;
        TimeNs previousTime = 0;
        // replay::livePeak: the requests held (paired blocks), its peak, and the same less the blocks freed without
        // an alloc (which leave the opening allocated bytes at their free, when they add up to no more than it).
        Wide lowLive = 0, lowPeak = 0, freedBefore = 0, lowPeakLessFreed = 0;
        std::vector<std::optional<Point>> atTime; // per --at TIME: the last point at or before it
        std::vector<TimeNs> markers;
        std::vector<std::uint32_t> allocSizes; // as codes (AllocSizeCodes): step detection compares them only
        AllocSizeCodes sizeCodes;
        // The blocks live at the allocated peak, taken when the live set first changes after it (a free), so a
        // trace without steps needs no third pass: valid unless the live set changed without lowering the
        // allocated bytes first (a zero-byte block) or the snapshots cost too much.
        bool peakPending = false, peakDirty = false, snapshotValid = false;
        std::uint32_t snapGeneration = 0;
        std::vector<LiveBlock> snapshot;
        std::vector<std::uint8_t> snapshotFreed;
        CategoryAgreement agreementWithoutSteps; // every block, inferred as if there were no steps
        std::vector<BucketSeries> charts; // with a ChartRequest: one per kChartKinds entry, from the device's first event
    };

    // The series `gpumem report` draws (html_report.cpp memoryChart, fragmentationChart).
    constexpr std::array<SeriesKind, 5> kChartKinds { SeriesKind::Allocated, SeriesKind::Active, SeriesKind::Reserved,
        SeriesKind::LargestFree, SeriesKind::RecordedAllocated };

    bool fuller(const Point& p, const Point& than)
    {
        return p.reserved > than.reserved || (p.reserved == than.reserved && p.allocated > than.allocated);
    }

    struct Pass1Block {
        LiveBlock block; // category: the recorded one
        Bytes request = 0;
        DeviceId device = 0;
        bool inUse = false;
        std::uint32_t snapGeneration = 0, snapPosition = 0; // in its device's peak snapshot, when generations match
    };
    // firstPass's openBlock assigns every field of a reused record (LiveBlocks::emplaceForOverwrite): a field
    // added here or to LiveBlock must be assigned there too, which these sizes make the compiler ask for.
    static_assert(sizeof(LiveBlock) == 32 && sizeof(Pass1Block) == 56, "assign the new field in firstPass's openBlock");

    // With no steps a block's inferred category depends only on whether it is ever freed (inferCategory).
    Category inferredWithoutSteps(bool freed)
    {
        BlockLife life;
        if (freed)
            life.freeTime = 0;
        return inferCategory(StepSet {}, life);
    }

    // What the passes cannot compute, from the tables alone; "" when nothing.
    std::string tablesNeedTrace(const Trace& skeleton, const AnalysisOptions& options, std::uint64_t events)
    {
        if (events == 0)
            return "no memory events";
        if (options.categoryRules)
            return "category rules (--categories)";
        const auto& meta = skeleton.metadata();
        if (meta.is_object() && !meta.contains("outside_allocator"))
            if (auto s = meta.find("allocation_source"); s != meta.end() && s->is_boolean() && s->get<bool>())
                return "the tracer's allocation sources (memory outside the allocator)";
        return {};
    }

    struct Pass1 {
        std::vector<DeviceRun> devices;
        TimeNs firstTime = 0, lastTime = 0;
        bool recordedCategories = false;
        std::string recordedAutograd; // autogradEvidence's memory part, "" when no alloc records such a category
        std::uint64_t allocations = 0;
        bool snapshots = true; // false once taking peak snapshots cost more than a pass, or where steps are sure
        std::uint64_t allocFreeChunks = 0; // chunks the alloc/free kernel took
    };

    // A chunk's columns as local pointers, as both loops of pass 1 read them: a narrow store (a flag, a category)
    // may alias anything, and the vectors' data pointers were reloaded at every use (issue 22).
    struct Columns {
        explicit Columns(const MemoryEventColumns& m)
            : time(m.time.data())
            , kind(m.kind.data())
            , device(m.device.data())
            , address(m.address.data())
            , size(m.size.data())
            , requestedSize(m.requestedSize.data())
            , scope(m.scope.data())
            , site(m.site.data())
            , stream(m.stream.data())
            , category(m.category.data())
        {
        }
        const TimeNs* time;
        const EventKind* kind;
        const DeviceId* device;
        const Address* address;
        const Bytes* size;
        const Bytes* requestedSize;
        const ScopeId* scope;
        const SiteId* site;
        const StreamId* stream;
        const Category* category;
    };

    // What pass 1's alloc/free kernel asks of a chunk before it takes it: the OR of its kinds (Alloc and Free
    // are kinds 0 and 1, so any other kind sets a higher bit), of its devices XOR `dev`, of its sizes and
    // requested sizes, and its number of allocs. Not inlined (a clone chosen by the loader never is): in the
    // kernel's lambda GCC left these reductions scalar (three loops of 5 instructions an event); alone it
    // vectorises them, with AVX2 where the CPU has it (the baseline's SSE2 takes two vectors where it takes one).
    struct ChunkShape {
        std::uint8_t kinds = 0;
        DeviceId otherDevice = 0;
        Bytes wide = 0;
        std::size_t allocs = 0;
    };
    [[gnu::target_clones("avx2", "default")]] ChunkShape chunkShape(const MemoryEventColumns& m, DeviceId dev)
    {
        static_assert(static_cast<int>(EventKind::Alloc) == 0 && static_cast<int>(EventKind::Free) == 1);
        const std::size_t n = m.count();
        const EventKind* const kind = m.kind.data();
        const DeviceId* const device = m.device.data();
        const Bytes* const size = m.size.data();
        const Bytes* const requested = m.requestedSize.data();
        ChunkShape s;
        for (std::size_t j = 0; j < n; ++j)
            s.kinds |= static_cast<std::uint8_t>(kind[j]);
        DeviceId other = 0;
        for (std::size_t j = 0; j < n; ++j)
            other |= static_cast<DeviceId>(device[j] ^ dev);
        s.otherDevice = other;
        Bytes wide = 0;
        for (std::size_t j = 0; j < n; ++j)
            wide |= size[j] | requested[j];
        s.wide = wide;
        std::size_t allocs = 0;
        for (std::size_t j = 0; j < n; ++j)
            allocs += kind[j] == EventKind::Alloc;
        s.allocs = allocs;
        return s;
    }

    // Thrown by the first pass at a free_completed event when it ran without pass 0.
    struct NeedsCompletions { };

    // Pass 0: what the first pass must know before it starts (Timeline::build's pre-scans).
    struct Prepass {
        std::vector<std::uint64_t> completed; // one bit per event: a free a free_completed later completes
        std::vector<bool> segments;           // per device: it has segment-level events
    };

    bool bitSet(const std::vector<std::uint64_t>& bits, std::uint64_t i) { return (bits[i >> 6] >> (i & 63)) & 1; }

    // Which frees a free_completed later completes (TraceBody::pair's awaitingCompletion), one bit per memory
    // event: a block so freed stays active (and holds its memory in the lower bound and the segment layout)
    // until its completion, which the first pass cannot know at the free.
    Prepass prePass(const MemoryEventSource& source)
    {
        Prepass pre;
        pre.segments.assign(source.skeleton().devices().size(), false);
        auto& bits = pre.completed;
        bits.assign((source.eventCount() + 63) / 64, 0);
        gpumem::detail::AddressMap live, awaiting;
        constexpr std::uint32_t kLive = 0; // live's values: only presence matters
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t firstIndex) {
            for (std::size_t j = 0; j < m.count(); ++j) {
                const std::uint64_t key = blockKey(m.device[j], m.address[j]), i = firstIndex + j;
                if (isSegmentLevel(m.kind[j]) && m.device[j] < pre.segments.size())
                    pre.segments[m.device[j]] = true;
                switch (m.kind[j]) {
                case EventKind::Alloc:
                    live.exchange(key, kLive);
                    break;
                case EventKind::Free:
                    if (live.take(key) != gpumem::detail::AddressMap::kNone)
                        awaiting.exchange(key, static_cast<std::uint32_t>(i));
                    break;
                case EventKind::FreeCompleted:
                    if (const std::uint32_t freed = awaiting.take(key); freed != gpumem::detail::AddressMap::kNone)
                        bits[freed >> 6] |= std::uint64_t(1) << (freed & 63);
                    break;
                default:
                    break;
                }
            }
        });
        return pre;
    }

    bool hasReservedCounter(const Trace& skeleton)
    {
        for (const auto& cs : skeleton.counterSeries())
            if (isReservedCounter(skeleton.str(cs.name)))
                return true;
        return false;
    }

    // `pre`: pass 0, or null for a first try that throws NeedsCompletions at the first free_completed event
        // (a trace with a reserved counter has pass 0 first: which devices have segment events decides
        // which sample their counters).
    Pass1 firstPass(const MemoryEventSource& source, const std::vector<TimeNs>& timeSpecs, const Prepass* pre, const ChartRequest* charts)
    {
        const Trace& skeleton = source.skeleton();
        const std::vector<std::uint64_t>* completed = pre ? &pre->completed : nullptr;
        Pass1 p;
        // ProfilerStep# annotations are steps whatever the events say: then pass 3 runs and the alloc sizes
        // (detection by periodicity) are not read.
        const bool annotatedSteps = findStepRanges(skeleton, {}, {}).set.source == StepSource::ProfilerStep;
        p.snapshots = !annotatedSteps;
        p.devices.resize(skeleton.devices().size());
        // Timeline::build: the recorded counters of devices without segment events.
        const std::size_t devCount = p.devices.size();
        const auto series = skeleton.counterSeries();
        std::vector<std::pair<int, int>> sampledSeries(series.size(), { -1, 0 }); // → (device, 0 reserved / 1 allocated)
        if (pre) {
            std::vector<int> reservedSeries(devCount, -1), allocatedSeries(devCount, -1);
            for (std::size_t k = 0; k < series.size(); ++k) {
                const auto& cs = series[k];
                if (cs.device >= devCount || pre->segments[cs.device])
                    continue;
                if (isReservedCounter(skeleton.str(cs.name)))
                    reservedSeries[cs.device] = static_cast<int>(k);
                else if (isAllocatedCounter(skeleton.str(cs.name)))
                    allocatedSeries[cs.device] = static_cast<int>(k);
            }
            for (std::size_t d = 0; d < devCount; ++d) {
                if (reservedSeries[d] < 0)
                    continue;
                auto& r = p.devices[d];
                r.counter = true;
                r.counterName = std::string(skeleton.str(series[static_cast<std::size_t>(reservedSeries[d])].name));
                sampledSeries[static_cast<std::size_t>(reservedSeries[d])] = { static_cast<int>(d), 0 };
                if (allocatedSeries[d] >= 0) {
                    r.recordedCounter = true;
                    sampledSeries[static_cast<std::size_t>(allocatedSeries[d])] = { static_cast<int>(d), 1 };
                }
            }
        }
        const auto samples = skeleton.counterSamples();
        std::size_t nextSample = 0;
        for (std::size_t d = 0; d < p.devices.size(); ++d) {
            p.devices[d].rebuilt = replay::initialStateEventCount(skeleton, static_cast<DeviceId>(d));
            p.devices[d].atTime.resize(timeSpecs.size());
        }
        const Category freedWithoutSteps = inferredWithoutSteps(true), liveWithoutSteps = inferredWithoutSteps(false);
        LiveBlocks<Pass1Block> blocks, awaiting; // awaiting: freed, active until their free_completed
        bool first = true;
        std::uint64_t snapshotWork = 0;
        const std::uint64_t snapshotBudget = 4 * source.eventCount() + (1u << 20);
        auto takeSnapshot = [&](DeviceRun& r, DeviceId dev) {
            r.snapshot.clear();
            r.snapshotFreed.clear();
            auto& records = blocks.records();
            snapshotWork += records.size();
            if (snapshotWork > snapshotBudget) {
                p.snapshots = false;
                return;
            }
            for (auto& b : records)
                if (b.inUse && b.device == dev) {
                    b.snapGeneration = r.snapGeneration;
                    b.snapPosition = static_cast<std::uint32_t>(r.snapshot.size());
                    r.snapshot.push_back(b.block);
                    r.snapshotFreed.push_back(0);
                }
            r.snapshotValid = true;
        };
        auto leaveActive = [&](DeviceRun& r, Address address, Bytes size, Bytes request) {
            r.active -= size;
            r.sActive.seeDown(r.active.value());
            r.layout.release(address, size);
            r.lowLive -= request;
            --r.activeCount;
            ++r.activeAllocations.freed;
        };
        // Room for every alloc up to 8 M at once: the pages are touched only as they fill, and doubling would
        // copy the sizes and hold both copies at its peak.
        auto reserveAllocSizes = [&](DeviceRun& r) {
            if (r.allocSizes.capacity() == 0)
                r.allocSizes.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(source.eventCount(), 1u << 23)));
        };
        // An alloc's block record and the recorded categories (both loops below).
        auto openBlock = [&](DeviceRun& r, DeviceId dev, Address address, Bytes size, Bytes request, ScopeId scope, SiteId site,
                             StreamId stream, Category category) __attribute__((always_inline)) {
            Pass1Block& b = blocks.emplaceForOverwrite(blockKey(dev, address)); // every field of Pass1Block below
            b.block.allocation = p.allocations;
            b.block.size = size;
            b.block.scope = scope;
            b.block.site = site;
            b.block.stream = stream;
            b.block.category = category;
            b.block.beforeWindow = r.events < r.rebuilt;
            b.block.siteFromFree = false;
            b.request = request;
            b.device = dev;
            b.inUse = true;
            b.snapGeneration = 0;
            b.snapPosition = 0;
            ++p.allocations;
            if (category != Category::Unknown) {
                p.recordedCategories = true;
                if (p.recordedAutograd.empty() && isAutogradCategory(category))
                    p.recordedAutograd = "recorded category " + std::string(toString(category));
            }
        };
        // A free that closes the block in `slot`, before the totals change (both loops below): the peak's blocks
        // are those live now when the live set first changes after it; the block's mark in the peak snapshot.
        // Returns the block's record.
        auto markClosed = [&](DeviceRun& r, DeviceId dev, std::uint32_t slot, SiteId freeSite) __attribute__((always_inline)) -> Pass1Block& {
            if (r.peakPending) {
                if (blocks[slot].block.size > 0) {
                    if (!r.peakDirty && p.snapshots)
                        takeSnapshot(r, dev);
                    r.peakPending = false;
                } else
                    r.peakDirty = true;
            }
            Pass1Block& b = blocks[slot];
            // The block's mark is in its own device's snapshot: where keys collide (detail::blockKey folds the
            // device into bits 52–63 of the address), a free on one device closes a block of another, and the
            // snapshot position indexed the freeing device's snapshot (a write past its end: heap corruption on
            // a fuzzed three-device trace with addresses of 2^52 and more).
            DeviceRun& owner = b.device == dev ? r : p.devices[b.device];
            if (owner.snapshotValid && b.snapGeneration == owner.snapGeneration) {
                owner.snapshotFreed[b.snapPosition] = 1;
                owner.snapshot[b.snapPosition].siteFromFree = freeSite == b.block.site && b.block.site != 0;
            }
            return b;
        };
        // markClosed and the inference agreement (the general loop below).
        auto closeBlock = [&](DeviceRun& r, DeviceId dev, std::uint32_t slot, SiteId freeSite) __attribute__((always_inline)) -> Pass1Block& {
            Pass1Block& b = markClosed(r, dev, slot, freeSite);
            addToAgreement(r.agreementWithoutSteps, b.block.size, b.block.category, freedWithoutSteps);
            return b;
        };
        // Active follows allocated (the same bytes, counts and series) wherever no free awaits a completion.
        const bool mirroredActive = !completed || std::none_of(completed->begin(), completed->end(), [](std::uint64_t w) { return w != 0; });
        const bool allocFreeKernel = mirroredActive && !charts && timeSpecs.empty();
        // The general loop below, for a chunk of allocs and frees on one device that has had no segment event, no
        // reserved counter, no snapshot-rebuilt events and no open OOM instant (issue 22: most chunks of a long
        // trace): what the general loop recomputes at every event but cannot change there — reserved, largest
        // free and inactive split (0), waste (none), the reserved peak, active (allocated's) — is left as it is,
        // and the running figures are 64-bit locals folded back at the chunk's end (saturating sums are
        // associative, so one addSaturated per chunk is the general loop's per-event ones). The same results
        // in the same order, bit for bit (tests/analyze/bounded_analysis_test.cpp compares both with the
        // in-memory analysis). False, with nothing changed, outside that case: no size or request of 2^40
        // bytes or more, totals under 2^62, so that no local can overflow.
        auto allocFreeChunk = [&](const MemoryEventColumns& m, std::uint64_t firstIndex) -> bool {
            const std::size_t n = m.count();
            const Columns c(m);
            const DeviceId dev = c.device[0];
            if (n >= (std::size_t(1) << 22) || dev >= p.devices.size())
                return false;
            DeviceRun& r = p.devices[dev];
            constexpr Bytes kRoom = Bytes(1) << 62;
            if (r.counter || r.segments || r.events == 0 || !r.firstRequest || r.extendingReserved || r.oomOpen || r.rebuilt != 0
                || r.previousWaste || !r.peakAllocated || !r.fullest || r.fullest->event != r.peakAllocated->event
                || r.sReserved.stat.current != 0 || r.sInactive.stat.current != 0 || r.active != r.allocated
                || r.activeCount != r.live || r.activeAllocations != r.allocations || r.sActive.stat != r.sAllocated.stat
                || r.allocated.value() >= kRoom || r.requested.value() >= kRoom || r.lowLive < 0 || r.lowLive >= Wide(kRoom))
                return false;
            const ChunkShape shape = chunkShape(m, dev);
            if (shape.kinds > 1 || shape.otherDevice != 0 || (shape.wide >> 40) != 0)
                return false;
            const std::size_t allocs = shape.allocs;
            // The alloc sizes (step detection by period) written in place: push_back was a call per alloc.
            std::uint32_t* allocSizes = nullptr;
            if (!annotatedSteps) {
                reserveAllocSizes(r);
                const std::size_t at = r.allocSizes.size();
                r.allocSizes.resize(at + allocs);
                allocSizes = r.allocSizes.data() + at;
            }

            Bytes allocated = r.allocated.value(), requested = r.requested.value();
            Bytes allocatedUp = 0, allocatedDown = 0, requestedUp = 0, requestedDown = 0;
            Bytes allocatedPeak = r.sAllocated.stat.peak, requestedPeak = r.sRequested.stat.peak;
            Bytes peakValue = r.peakAllocated->allocated;
            auto low = static_cast<std::int64_t>(r.lowLive), lowMax = std::int64_t(0);
            // lowLive − freedBefore exceeds lowPeakLessFreed exactly where lowLive exceeds their sum.
            auto lessFreedThreshold = [&r] {
                const Wide t = r.lowPeakLessFreed + r.freedBefore;
                return t >= Wide(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max()
                                                                            : static_cast<std::int64_t>(t);
            };
            std::int64_t threshold = lessFreedThreshold();
            std::uint64_t live = r.live, livePeak = r.allocations.peak, frees = 0;
            std::size_t opened = 0;
            // The inference agreement's bytes, by recorded category, folded in at the end (closeBlock's
            // addToAgreement at every free was a chain of read-modify-writes through memory, a tenth of this loop;
            // the saturating sums are associative, and these plain ones cannot wrap: under 2^22 frees of under
            // 2^40 bytes).
            Bytes freedUnknown = 0;
            std::array<Bytes, kCategoryCount> freedRecorded {};
            const std::uint64_t ordinal0 = r.events;
            for (std::size_t j = 0; j < n; ++j) {
                if (c.kind[j] == EventKind::Alloc) {
                    const Bytes size = c.size[j], request = c.requestedSize[j] ? c.requestedSize[j] : size;
                    allocated += size;
                    allocatedUp += size;
                    requested += request;
                    requestedUp += request;
                    allocatedPeak = std::max(allocatedPeak, allocated);
                    requestedPeak = std::max(requestedPeak, requested);
                    openBlock(r, dev, c.address[j], size, request, c.scope[j], c.site[j], c.stream[j], c.category[j]);
                    if (allocSizes)
                        allocSizes[opened] = r.sizeCodes.code(size);
                    ++opened;
                    low += static_cast<std::int64_t>(request);
                    ++live;
                    lowMax = std::max(lowMax, low);
                    if (low > threshold) {
                        r.lowPeakLessFreed = Wide(low) - r.freedBefore;
                        threshold = low;
                    }
                    livePeak = std::max(livePeak, live);
                    if (allocated > peakValue) { // the point after this event, as the general loop builds it
                        Point pt;
                        pt.ordinal = ordinal0 + j;
                        pt.event = firstIndex + j;
                        pt.time = c.time[j];
                        pt.allocated = pt.active = pt.ratioAllocated = allocated;
                        pt.requested = requested;
                        r.peakAllocated = pt;
                        r.fullest = pt;
                        peakValue = allocated;
                        r.peakPending = true;
                        r.peakDirty = false;
                        r.snapshotValid = false;
                        ++r.snapGeneration;
                    } else if (r.peakPending)
                        r.peakDirty = true;
                    continue;
                }
                const std::uint32_t slot = blocks.close(blockKey(dev, c.address[j]));
                if (slot == gpumem::detail::AddressMap::kNone) {
                    r.freedBefore += c.requestedSize[j] ? c.requestedSize[j] : c.size[j];
                    threshold = lessFreedThreshold();
                    continue;
                }
                Pass1Block& b = markClosed(r, dev, slot, c.site[j]);
                const Bytes size = b.block.size, request = b.request;
                if (b.block.category == Category::Unknown)
                    freedUnknown += size;
                else
                    freedRecorded[static_cast<std::size_t>(b.block.category)] += size;
                const Bytes allocatedDrop = std::min(allocated, size), requestedDrop = std::min(requested, request);
                allocated -= allocatedDrop;
                allocatedDown += allocatedDrop;
                requested -= requestedDrop;
                requestedDown += requestedDrop;
                low -= static_cast<std::int64_t>(request);
                --live;
                ++frees;
                b.inUse = false;
                blocks.release(slot);
            }
            auto fold = [](SeriesStat& s, Bytes current, Bytes peak, Bytes up, Bytes down) {
                s.stat.current = current;
                s.stat.peak = peak;
                s.stat.allocated = addSaturated(s.stat.allocated, up);
                s.stat.freed = addSaturated(s.stat.freed, down);
            };
            if (freedUnknown > 0)
                addToAgreement(r.agreementWithoutSteps, freedUnknown, Category::Unknown, freedWithoutSteps);
            for (std::size_t k = 0; k < freedRecorded.size(); ++k)
                if (freedRecorded[k] > 0)
                    addToAgreement(r.agreementWithoutSteps, freedRecorded[k], static_cast<Category>(k), freedWithoutSteps);
            r.allocated = ByteTotal(allocated);
            r.active = r.allocated;
            r.requested = ByteTotal(requested);
            fold(r.sAllocated, allocated, allocatedPeak, allocatedUp, allocatedDown);
            r.sActive = r.sAllocated;
            fold(r.sRequested, requested, requestedPeak, requestedUp, requestedDown);
            r.lowLive = low;
            r.lowPeak = std::max(r.lowPeak, Wide(lowMax));
            r.live = r.activeCount = live;
            r.allocations.allocated += opened;
            r.allocations.freed += frees;
            r.allocations.peak = livePeak;
            r.activeAllocations = r.allocations;
            r.events += n;
            r.previousTime = c.time[n - 1];
            return true;
        };
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t firstIndex) {
            const std::size_t n = m.count();
            if (n && first) {
                p.firstTime = m.time.front();
                first = false;
            }
            if (n)
                p.lastTime = m.time.back();
            if (n && allocFreeKernel && allocFreeChunk(m, firstIndex)) {
                ++p.allocFreeChunks;
                return;
            }
            const Columns c(m);
            DeviceRun* const runs = p.devices.data();
            const std::size_t runCount = p.devices.size(), timeSpecCount = timeSpecs.size();
            const bool withCharts = charts != nullptr;
            for (std::size_t j = 0; j < n; ++j) {
                const std::uint64_t i = firstIndex + j;
                const DeviceId dev = c.device[j];
                if (dev >= runCount)
                    throw FormatError("memory event " + std::to_string(i) + ": device " + std::to_string(dev)
                        + " is not in the trace's device table");
                DeviceRun& r = runs[dev];
                const EventKind kind = c.kind[j];
                switch (kind) {
                case EventKind::Alloc: {
                    const Bytes size = c.size[j], request = c.requestedSize[j] ? c.requestedSize[j] : size;
                    r.allocated += size;
                    r.active += size;
                    r.requested += request;
                    r.sAllocated.seeUp(r.allocated.value());
                    r.sActive.seeUp(r.active.value());
                    r.sRequested.seeUp(r.requested.value());
                    r.layout.allocate(c.address[j], size);
                    openBlock(r, dev, c.address[j], size, request, c.scope[j], c.site[j], c.stream[j], c.category[j]);
                    if (!annotatedSteps) {
                        reserveAllocSizes(r);
                        r.allocSizes.push_back(r.sizeCodes.code(size));
                    }
                    r.lowLive += request;
                    ++r.live;
                    ++r.activeCount;
                    ++r.allocations.allocated;
                    ++r.activeAllocations.allocated;
                    // Only an alloc raises the live requests and the block counts, so their peaks are taken here
                    // (a free lowers them, a free without an alloc raises freedBefore).
                    r.lowPeak = std::max(r.lowPeak, r.lowLive);
                    r.lowPeakLessFreed = std::max(r.lowPeakLessFreed, r.lowLive - r.freedBefore);
                    r.allocations.peak = std::max(r.allocations.peak, r.live);
                    r.activeAllocations.peak = std::max(r.activeAllocations.peak, r.activeCount);
                    break;
                }
                case EventKind::Free: {
                    const std::uint32_t slot = blocks.close(blockKey(dev, c.address[j]));
                    if (slot == gpumem::detail::AddressMap::kNone) { // allocated before the window: closes nothing
                        r.freedBefore += c.requestedSize[j] ? c.requestedSize[j] : c.size[j];
                        break;
                    }
                    // The fields read before the flag is cleared (a narrow store read back wide stalls), and not the
                    // whole record copied: only a free that awaits its completion needs it.
                    Pass1Block& b = closeBlock(r, dev, slot, c.site[j]);
                    const Bytes size = b.block.size, request = b.request;
                    r.allocated -= size;
                    r.requested -= request;
                    r.sAllocated.seeDown(r.allocated.value());
                    r.sRequested.seeDown(r.requested.value());
                    --r.live;
                    ++r.allocations.freed;
                    if (completed && bitSet(*completed, i)) {
                        Pass1Block awaited = b;
                        awaited.inUse = false;
                        awaiting.open(blockKey(dev, c.address[j]), awaited);
                    } else
                        leaveActive(r, c.address[j], size, request);
                    b.inUse = false;
                    blocks.release(slot);
                    break;
                }
                case EventKind::FreeCompleted: {
                    if (!completed)
                        throw NeedsCompletions {};
                    const std::uint32_t slot = awaiting.close(blockKey(dev, c.address[j]));
                    if (slot == gpumem::detail::AddressMap::kNone)
                        break; // the completion of a free before the window
                    const Pass1Block& b = awaiting[slot];
                    leaveActive(r, c.address[j], b.block.size, b.request);
                    awaiting.release(slot);
                    break;
                }
                case EventKind::SegmentAlloc:
                case EventKind::SegmentMap:
                    r.reserved += c.size[j];
                    r.layout.addSegment(c.address[j], c.size[j]);
                    if (kind == EventKind::SegmentAlloc) {
                        ++r.segs;
                        ++r.segmentCount.allocated;
                        r.segmentCount.peak = std::max(r.segmentCount.peak, r.segs);
                    }
                    break;
                case EventKind::SegmentFree:
                case EventKind::SegmentUnmap:
                    r.reserved -= c.size[j];
                    r.layout.removeSegment(c.address[j]);
                    if (kind == EventKind::SegmentFree) {
                        r.segs -= std::min<std::uint64_t>(r.segs, 1);
                        ++r.segmentCount.freed;
                    }
                    break;
                case EventKind::Oom:
                    ++r.ooms;
                    break;
                case EventKind::Marker:
                    r.markers.push_back(c.time[j]);
                    break;
                default:
                    break;
                }
                r.segments |= isSegmentLevel(kind);
                if (!r.firstRequest && isRequestLevel(kind))
                    r.firstRequest = replay::FirstRequest { kind, c.size[j] };

                // The point after this event.
                Point pt;
                pt.ordinal = r.events;
                pt.event = i;
                pt.time = c.time[j];
                pt.allocated = r.sAllocated.stat.current; // the series' values after this event (seeUp, seeDown)
                pt.active = r.sActive.stat.current;
                pt.requested = r.sRequested.stat.current;
                pt.reserved = r.reserved.value();
                pt.largestFree = r.layout.largestFree();
                if (r.counter) {
                    for (; nextSample < samples.size() && samples[nextSample].time <= pt.time; ++nextSample) {
                        const auto& smp = samples[nextSample];
                        if (smp.series >= sampledSeries.size() || sampledSeries[smp.series].first < 0)
                            continue;
                        auto& target = p.devices[static_cast<std::size_t>(sampledSeries[smp.series].first)];
                        (sampledSeries[smp.series].second == 0 ? target.counterReserved : target.counterAllocated) = smp.value;
                    }
                    pt.reserved = r.counterReserved < 0 ? 0 : static_cast<Bytes>(r.counterReserved);
                    if (r.recordedCounter) {
                        pt.recordedAllocated = r.counterAllocated < 0 ? 0 : static_cast<Bytes>(r.counterAllocated);
                        r.recordedPeak = std::max(r.recordedPeak, pt.recordedAllocated);
                    }
                }
                pt.ratioAllocated = r.recordedCounter ? pt.recordedAllocated : pt.allocated;
                if (r.events == 0)
                    r.firstTime = pt.time;
                ++r.events;
                r.sReserved.seeIfChanged(pt.reserved);
                r.sInactive.seeIfChanged(r.layout.inactiveSplit());
                if (!r.peakAllocated || pt.allocated > r.peakAllocated->allocated) {
                    r.peakAllocated = pt;
                    r.peakPending = true;
                    r.peakDirty = false;
                    r.snapshotValid = false;
                    ++r.snapGeneration;
                } else if (kind == EventKind::Alloc && r.peakPending)
                    r.peakDirty = true; // a block joined without raising the peak (zero bytes, or saturated)
                if (!r.peakReserved || pt.reserved > r.peakReserved->reserved) {
                    r.peakReserved = pt;
                    r.extendingReserved = true;
                } else if (r.extendingReserved && pt.time == r.peakReserved->time && pt.reserved == r.peakReserved->reserved)
                    r.peakReserved = pt; // the same instant: read after all of its events
                else
                    r.extendingReserved = false;
                if (r.oomOpen) {
                    if (pt.time == r.oom->time)
                        r.oom = pt; // DeviceTimeline::pointAt: the last point at the OOM's time
                    else
                        r.oomOpen = false;
                }
                if (kind == EventKind::Oom && !r.oom) {
                    r.oom = pt;
                    r.oomRequest = m.size[j];
                    r.oomOpen = true;
                }
                if (!r.fullest || fuller(pt, *r.fullest))
                    r.fullest = pt;
                if (r.rebuilt > 0 && pt.ordinal >= r.rebuilt && (!r.fullestInWindow || fuller(pt, *r.fullestInWindow)))
                    r.fullestInWindow = pt;
                if (r.events > 1 && r.previousWaste) {
                    const double dt = static_cast<double>(pt.time) - static_cast<double>(r.previousTime);
                    if (dt > 0) {
                        r.wasteArea += *r.previousWaste * dt;
                        r.wasteSpan += dt;
                    }
                }
                r.previousWaste = wasteAt(pt);
                r.previousTime = pt.time;
                if (withCharts) {
                    if (r.charts.empty())
                        for (std::size_t k = 0; k < kChartKinds.size(); ++k)
                            r.charts.emplace_back(charts->begin, charts->end, charts->n);
                    r.charts[0].add(pt.time, pt.allocated);
                    r.charts[1].add(pt.time, pt.active);
                    r.charts[2].add(pt.time, pt.reserved);
                    r.charts[3].add(pt.time, pt.largestFree);
                    r.charts[4].add(pt.time, pt.recordedAllocated);
                }
                for (std::size_t k = 0; k < timeSpecCount; ++k)
                    if (pt.time <= timeSpecs[k])
                        r.atTime[k] = pt;
            }
        });
        for (std::size_t d = 0; d < p.devices.size(); ++d)
            if (auto& r = p.devices[d]; r.peakPending && !r.peakDirty && p.snapshots)
                takeSnapshot(r, static_cast<DeviceId>(d));
        for (const auto& b : blocks.records())
            if (b.inUse)
                addToAgreement(p.devices[b.device].agreementWithoutSteps, b.block.size, b.block.category, liveWithoutSteps);
        return p;
    }

    Instant instantAt(const Point& p, std::string label, DeviceId device, bool hasReserved)
    {
        Instant i;
        i.label = std::move(label);
        i.device = device;
        i.point = static_cast<std::size_t>(p.ordinal);
        i.eventIndex = p.event;
        i.time = p.time;
        i.allocated = p.allocated;
        i.active = p.active;
        if (hasReserved)
            i.reserved = p.reserved;
        return i;
    }

    // Pass 2: the per-step figures of detectSteps (allocated just before start and end, the peak inside)
    // and the phase marks of the device's events, for steps sorted by start.
    void stepPass(const MemoryEventSource& source, DeviceId device, std::vector<Step>& steps)
    {
        const Trace& skeleton = source.skeleton();
        const auto scopes = skeleton.scopes();
        const std::vector<std::uint8_t> scopeFlag = scopePhaseFlags(skeleton);
        const bool anyScopeFlag = std::any_of(scopeFlag.begin(), scopeFlag.end(), [](std::uint8_t f) { return f != 0; });
        struct Threshold {
            TimeNs time;
            std::size_t step;
            bool end;
        };
        std::vector<Threshold> thresholds;
        for (std::size_t k = 0; k < steps.size(); ++k) {
            thresholds.push_back({ steps[k].start, k, false });
            thresholds.push_back({ steps[k].end, k, true });
        }
        std::stable_sort(thresholds.begin(), thresholds.end(), [](const Threshold& a, const Threshold& b) { return a.time < b.time; });
        std::vector<std::optional<TimeNs>> optimizerMark(steps.size()), backwardMark(steps.size());
        std::vector<bool> opened(steps.size(), false);
        std::vector<std::size_t> open; // steps holding the current time
        std::size_t nextThreshold = 0, nextStart = 0;
        LiveBlocks<Bytes> blocks;
        ByteTotal allocated;
        auto pass = [&](Bytes before) {
            for (; nextThreshold < thresholds.size(); ++nextThreshold) {
                const auto& t = thresholds[nextThreshold];
                (t.end ? steps[t.step].allocatedAtEnd : steps[t.step].allocatedAtStart) = before;
            }
        };
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) {
            for (std::size_t j = 0; j < m.count(); ++j) {
                if (m.device[j] != device)
                    continue;
                const TimeNs t = m.time[j];
                for (; nextThreshold < thresholds.size() && thresholds[nextThreshold].time <= t; ++nextThreshold) {
                    const auto& th = thresholds[nextThreshold];
                    (th.end ? steps[th.step].allocatedAtEnd : steps[th.step].allocatedAtStart) = allocated.value();
                }
                if (m.kind[j] == EventKind::Alloc) {
                    allocated += m.size[j];
                    blocks.open(blockKey(device, m.address[j]), m.size[j]);
                } else if (m.kind[j] == EventKind::Free) {
                    const std::uint32_t slot = blocks.close(blockKey(device, m.address[j]));
                    if (slot != gpumem::detail::AddressMap::kNone) {
                        allocated -= blocks[slot];
                        blocks.release(slot);
                    }
                }
                for (; nextStart < steps.size() && steps[nextStart].start <= t; ++nextStart) {
                    steps[nextStart].peakAllocated = steps[nextStart].allocatedAtStart;
                    steps[nextStart].peakTime = steps[nextStart].start;
                    opened[nextStart] = true;
                    open.push_back(nextStart);
                }
                std::erase_if(open, [&](std::size_t k) { return steps[k].end <= t; });
                const Bytes now = allocated.value();
                const std::uint8_t flag = anyScopeFlag && m.scope[j] < scopes.size() ? scopeFlag[m.scope[j]] : 0;
                for (auto k : open) {
                    if (now > steps[k].peakAllocated) {
                        steps[k].peakAllocated = now;
                        steps[k].peakTime = t;
                    }
                    if (flag == 1 && !optimizerMark[k])
                        optimizerMark[k] = t;
                    else if (flag == 2 && !backwardMark[k])
                        backwardMark[k] = t;
                }
            }
        });
        pass(allocated.value());
        for (std::size_t k = 0; k < steps.size(); ++k)
            if (!opened[k]) {
                steps[k].peakAllocated = steps[k].allocatedAtStart;
                steps[k].peakTime = steps[k].start;
            }
        // Phases: the first optimizer and the first backward mark inside each step, annotations and events
        // together (detectSteps walks them merged in time order).
        for (const auto& [time, optimizer] : annotationPhaseMarks(skeleton))
            for (std::size_t k = 0; k < steps.size(); ++k)
                if (time >= steps[k].start && time < steps[k].end) {
                    auto& mark = optimizer ? optimizerMark[k] : backwardMark[k];
                    if (!mark || time < *mark)
                        mark = time;
                }
        for (std::size_t k = 0; k < steps.size(); ++k) {
            Step& s = steps[k];
            s.optimizerStart = optimizerMark[k];
            s.phasesAnnotated = backwardMark[k].has_value();
            s.backwardStart = backwardMark[k].value_or(s.end);
        }
    }

    // The step holding an alloc at t for placeBackwardStarts (steps.cpp): the last that starts at or before t.
    std::optional<std::size_t> stepStartedBy(const std::vector<Step>& steps, TimeNs t)
    {
        auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs x, const Step& s) { return x < s.start; });
        if (it == steps.begin())
            return std::nullopt;
        return static_cast<std::size_t>(it - steps.begin()) - 1;
    }

    // Passes 2b and 2c: placeBackwardStarts (steps.cpp) for the steps without a backward mark, where the
    // trace shows autograd ran. 2b: each step's transient bytes (blocks allocated before the optimizer phase
    // and freed before it, op-local ones left out) turn at the backward start; a step's sum is complete once
    // the pass reaches its limit, so it is reduced then to its turn, and only the op-local blocks and the
    // blocks freed after the limit that could bound the turn are kept. 2c: the optimizer phase after the last
    // free of a block made in the forward phase.
    void guessPhasesPasses(const MemoryEventSource& source, DeviceId device, std::vector<Step>& steps)
    {
        struct Entry {
            std::uint64_t event;
            std::int64_t delta;
            TimeNs time;
        };
        struct Late {
            std::uint64_t event;
            TimeNs time;
        };
        struct Work {
            TimeNs limit = 0;
            std::vector<Entry> deltas;
            std::vector<Late> opLocal, zeros; // zeros: counted blocks freed at or after the limit
            bool finalized = false, turnFound = false;
            TimeNs turn = 0;
            std::uint64_t from = 0, next = std::numeric_limits<std::uint64_t>::max();
        };
        std::vector<Work> work(steps.size());
        std::vector<std::size_t> byLimit;
        for (std::size_t k = 0; k < steps.size(); ++k) {
            work[k].limit = steps[k].optimizerStart ? *steps[k].optimizerStart : steps[k].end;
            if (!steps[k].phasesAnnotated)
                byLimit.push_back(k);
        }
        std::stable_sort(byLimit.begin(), byLimit.end(), [&](std::size_t x, std::size_t y) { return work[x].limit < work[y].limit; });
        auto finalize = [&](Work& w) {
            std::sort(w.deltas.begin(), w.deltas.end(), [](const Entry& x, const Entry& y) { return x.event < y.event; });
            std::int64_t live = 0, best = 0;
            std::size_t turnIndex = w.deltas.size();
            for (std::size_t i = 0; i < w.deltas.size(); ++i) {
                live += w.deltas[i].delta;
                if (live > best) {
                    best = live;
                    w.turn = w.deltas[i].time;
                    turnIndex = i;
                }
            }
            w.turnFound = turnIndex < w.deltas.size();
            if (w.turnFound) {
                w.from = w.deltas[turnIndex].event;
                if (turnIndex + 1 < w.deltas.size())
                    w.next = w.deltas[turnIndex + 1].event;
            }
            std::vector<Entry>().swap(w.deltas);
            auto after = [&](std::vector<Late>& v) { std::erase_if(v, [&](const Late& l) { return !w.turnFound || l.event <= w.from; }); };
            after(w.opLocal);
            after(w.zeros);
            w.finalized = true;
        };
        std::vector<TimeNs> lastAlloc(steps.size(), 0);
        {
            struct Block {
                std::uint64_t event;
                TimeNs time;
                Bytes size;
                std::uint32_t allocsBefore;
                std::int64_t step; // -1: not counted
            };
            LiveBlocks<Block> blocks;
            std::uint32_t allocs = 0;
            std::size_t nextLimit = 0;
            source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t firstIndex) {
                for (std::size_t j = 0; j < m.count(); ++j) {
                    if (m.device[j] != device)
                        continue;
                    const TimeNs t = m.time[j];
                    for (; nextLimit < byLimit.size() && work[byLimit[nextLimit]].limit <= t; ++nextLimit)
                        finalize(work[byLimit[nextLimit]]);
                    if (m.kind[j] == EventKind::Alloc) {
                        const auto k = stepStartedBy(steps, t);
                        if (k && t < steps[*k].end)
                            lastAlloc[*k] = std::max(lastAlloc[*k], t);
                        const bool counted = k && !steps[*k].phasesAnnotated && t < steps[*k].end && t < work[*k].limit;
                        blocks.open(blockKey(device, m.address[j]),
                            Block { firstIndex + j, t, m.size[j], allocs++, counted ? static_cast<std::int64_t>(*k) : -1 });
                    } else if (m.kind[j] == EventKind::Free) {
                        const std::uint32_t slot = blocks.close(blockKey(device, m.address[j]));
                        if (slot == gpumem::detail::AddressMap::kNone)
                            continue;
                        const Block b = blocks[slot];
                        blocks.release(slot);
                        if (b.step < 0)
                            continue;
                        Work& w = work[static_cast<std::size_t>(b.step)];
                        if (allocs == b.allocsBefore + 1) {
                            if (!w.finalized || (w.turnFound && b.event > w.from))
                                w.opLocal.push_back({ b.event, b.time });
                        } else if (t >= w.limit) {
                            if (!w.finalized || (w.turnFound && b.event > w.from))
                                w.zeros.push_back({ b.event, b.time });
                        } else {
                            const auto size = static_cast<std::int64_t>(b.size);
                            w.deltas.push_back({ b.event, size, b.time });
                            w.deltas.push_back({ firstIndex + j, -size, t });
                        }
                    }
                }
            });
        }
        for (auto k : byLimit) {
            Work& w = work[k];
            if (!w.finalized)
                finalize(w);
            Step& s = steps[k];
            TimeNs turn = s.peakTime;
            if (w.turnFound) {
                turn = w.turn;
                std::uint64_t bound = w.next;
                for (const auto& z : w.zeros)
                    bound = std::min(bound, z.event);
                for (const auto& o : w.opLocal)
                    if (o.event > w.from && o.event < bound)
                        turn = std::max(turn, o.time);
            }
            s.backwardStart = turn + 1;
        }
        // 2c: the optimizer phase, where no mark gave one.
        std::vector<std::optional<TimeNs>> lastForwardFree(steps.size());
        LiveBlocks<TimeNs> blocks;
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) {
            for (std::size_t j = 0; j < m.count(); ++j) {
                if (m.device[j] != device)
                    continue;
                if (m.kind[j] == EventKind::Alloc)
                    blocks.open(blockKey(device, m.address[j]), m.time[j]);
                else if (m.kind[j] == EventKind::Free) {
                    const std::uint32_t slot = blocks.close(blockKey(device, m.address[j]));
                    if (slot == gpumem::detail::AddressMap::kNone)
                        continue;
                    const TimeNs t = blocks[slot], f = m.time[j];
                    blocks.release(slot);
                    const auto k = stepStartedBy(steps, t);
                    if (!k)
                        continue;
                    const Step& s = steps[*k];
                    if (s.phasesAnnotated || s.optimizerStart || t >= s.backwardStart || f >= lastAlloc[*k])
                        continue;
                    if (!lastForwardFree[*k] || f > *lastForwardFree[*k])
                        lastForwardFree[*k] = f;
                }
            }
        });
        for (std::size_t k = 0; k < steps.size(); ++k)
            if (lastForwardFree[k] && *lastForwardFree[k] >= steps[k].backwardStart && *lastForwardFree[k] + 1 < steps[k].end)
                steps[k].optimizerStart = *lastForwardFree[k] + 1;
    }

    // Pass 3: the blocks of `device` live at each capture's event, their categories (known once each
    // block's free is seen), the agreement with the recorded categories, and the leak survivors.
    struct Capture {
        std::uint64_t event = 0;
        std::vector<LiveBlock> blocks;
        std::vector<Category> inferred; // per block
    };
    struct Pass3Block {
        LiveBlock block; // as a breakdown takes it; category and siteFromFree are set at the free
        TimeNs allocTime = 0, origin = 0; // origin: of the first alloc of a continued lifetime (inferCategories)
        Category recorded = Category::Unknown;
        std::uint32_t allocsBefore = 0;
        bool inUse = false;
        std::int64_t firstRef = -1; // into the capture references
    };
    struct Pass3 {
        std::vector<Capture> captures;
        CategoryAgreement all;
        std::vector<LeakSurvivor> survivors;
    };

    Pass3 blockPass(const MemoryEventSource& source, DeviceId device, std::vector<std::uint64_t> events, const StepSet& steps,
        bool recorded, std::uint64_t rebuilt, bool survivors)
    {
        std::sort(events.begin(), events.end());
        events.erase(std::unique(events.begin(), events.end()), events.end());
        Pass3 out;
        for (auto e : events)
            out.captures.push_back({ e, {}, {} });
        struct Ref {
            std::uint32_t capture, position;
            std::int64_t next;
        };
        std::vector<Ref> refs;
        const TimeNs firstStart = steps.steps.empty() ? 0 : steps.steps.front().start;
        const TimeNs lastEnd = steps.steps.empty() ? 0 : steps.steps.back().end;
        struct RecentFree {
            Address address;
            Bytes size;
            TimeNs origin;
        };
        std::vector<RecentFree> recentFrees; // the device's matched frees at the current time, oldest first
        TimeNs recentTime = std::numeric_limits<TimeNs>::min();
        LiveBlocks<Pass3Block> blocks;
        std::uint64_t allocation = 0, ordinal = 0;
        std::uint32_t allocs = 0; // the device's allocs so far (allocsBeforeEachEvent)
        std::size_t nextCapture = 0;
        auto finish = [&](Pass3Block& b, std::optional<TimeNs> freeTime, SiteId freeSite) {
            BlockLife life;
            life.allocTime = b.origin;
            if (freeTime) {
                life.freeTime = *freeTime;
                life.opLocal = b.origin == b.allocTime && allocs == b.allocsBefore + 1;
            }
            const Category inferred = inferCategory(steps, life);
            const Category shown = recorded ? b.recorded : inferred;
            const bool fromFree = freeTime && freeSite == b.block.site && b.block.site != 0;
            for (auto r = b.firstRef; r >= 0; r = refs[static_cast<std::size_t>(r)].next) {
                const auto& ref = refs[static_cast<std::size_t>(r)];
                auto& c = out.captures[ref.capture];
                c.blocks[ref.position].category = shown;
                c.blocks[ref.position].siteFromFree = fromFree;
                c.inferred[ref.position] = inferred;
            }
            if (recorded)
                addToAgreement(out.all, b.block.size, b.recorded, inferred);
            if (survivors && b.allocTime >= firstStart && b.allocTime < lastEnd && (!freeTime || *freeTime >= lastEnd))
                out.survivors.push_back({ b.block.site, b.block.scope, b.block.size, b.allocTime });
            b.inUse = false;
        };
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t firstIndex) {
            for (std::size_t j = 0; j < m.count(); ++j) {
                const bool alloc = m.kind[j] == EventKind::Alloc;
                if (m.device[j] != device) {
                    allocation += alloc;
                    continue;
                }
                const TimeNs t = m.time[j];
                if (t != recentTime) {
                    recentFrees.clear();
                    recentTime = t;
                }
                if (alloc) {
                    Pass3Block b;
                    b.block.allocation = allocation++;
                    b.block.size = m.size[j];
                    b.allocTime = b.origin = t;
                    // A block allocated at the instant, address and size of a block just freed continues it.
                    for (auto f = recentFrees.rbegin(); f != recentFrees.rend(); ++f)
                        if (f->address == m.address[j] && f->size == m.size[j]) {
                            b.origin = f->origin;
                            break;
                        }
                    b.block.scope = m.scope[j];
                    b.block.site = m.site[j];
                    b.block.stream = m.stream[j];
                    b.block.beforeWindow = ordinal < rebuilt;
                    b.recorded = m.category[j];
                    b.allocsBefore = allocs++;
                    b.inUse = true;
                    blocks.open(blockKey(device, m.address[j]), b);
                } else if (m.kind[j] == EventKind::Free) {
                    const std::uint32_t slot = blocks.close(blockKey(device, m.address[j]));
                    if (slot != gpumem::detail::AddressMap::kNone) {
                        Pass3Block& b = blocks[slot];
                        recentFrees.push_back({ m.address[j], m.size[j], b.origin });
                        finish(b, t, m.site[j]);
                        blocks.release(slot);
                    }
                }
                ++ordinal;
                if (nextCapture < out.captures.size() && out.captures[nextCapture].event == firstIndex + j) {
                    auto& c = out.captures[nextCapture];
                    auto& records = blocks.records();
                    for (std::size_t s = 0; s < records.size(); ++s) {
                        auto& b = records[s];
                        if (!b.inUse)
                            continue;
                        refs.push_back({ static_cast<std::uint32_t>(nextCapture), static_cast<std::uint32_t>(c.blocks.size()), b.firstRef });
                        b.firstRef = static_cast<std::int64_t>(refs.size() - 1);
                        c.blocks.push_back(b.block);
                        c.inferred.push_back(Category::Unknown);
                    }
                    ++nextCapture;
                }
            }
        });
        for (auto& b : blocks.records())
            if (b.inUse)
                finish(b, std::nullopt, 0);
        // In trace.allocations() order, as breakdownAt walks them.
        for (auto& c : out.captures) {
            std::vector<std::size_t> order(c.blocks.size());
            for (std::size_t k = 0; k < order.size(); ++k)
                order[k] = k;
            std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return c.blocks[x].allocation < c.blocks[y].allocation; });
            std::vector<LiveBlock> blocksSorted;
            std::vector<Category> inferredSorted;
            for (auto k : order) {
                blocksSorted.push_back(c.blocks[k]);
                inferredSorted.push_back(c.inferred[k]);
            }
            c.blocks = std::move(blocksSorted);
            c.inferred = std::move(inferredSorted);
        }
        return out;
    }

    const Capture& captureAt(const Pass3& p, std::uint64_t event)
    {
        return *std::find_if(p.captures.begin(), p.captures.end(), [&](const Capture& c) { return c.event == event; });
    }
} // namespace

TimeNs sourceOrigin(const MemoryEventSource& source)
{
    const Trace& skeleton = source.skeleton();
    TimeSpan span = traceSpan(skeleton); // annotations, counter samples and the skeleton's kernels
    bool any = span.start != 0 || span.end != 0 || !skeleton.annotations().empty() || !skeleton.counterSamples().empty()
        || !skeleton.kernels().empty();
    TimeNs lo = any ? span.start : std::numeric_limits<TimeNs>::max(), hi = any ? span.end : std::numeric_limits<TimeNs>::min();
    if (skeleton.kernels().empty() && source.kernelCount() > 0)
        source.forEachKernelChunk([&](std::span<const Kernel> kernels) {
            for (const auto& k : kernels) {
                lo = std::min(lo, k.start);
                hi = std::max(hi, k.end);
            }
        });
    struct Stop { };
    try {
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) {
            if (m.count()) {
                lo = std::min(lo, m.time.front());
                hi = std::max(hi, m.time.front());
                throw Stop {};
            }
        });
    } catch (const Stop&) {
    }
    return lo <= hi ? lo : 0;
}

BoundedAnalysis analyzeSource(const MemoryEventSource& source, const AnalysisOptions& options, const ChartRequest* charts)
{
    auto progress = [&](double done) {
        if (options.progress && !options.progress(done))
            throw Cancelled();
    };
    BoundedAnalysis out;
    Analysis& a = out.analysis;
    const Trace& skeleton = source.skeleton();
    progress(0.0);
    if (options.device && *options.device >= skeleton.devices().size())
        throw UsageError("--device " + std::to_string(*options.device) + " is not a device of this trace (it has "
            + std::to_string(skeleton.devices().size()) + ")");
    if (out.needsTrace = tablesNeedTrace(skeleton, options, source.eventCount()); !out.needsTrace.empty())
        return out;

    auto instants = options.instants;
    const bool defaults = instants.empty();
    if (defaults)
        instants.push_back({ InstantSpec::Kind::PeakAllocated, 0 });
    std::vector<TimeNs> timeSpecs;
    std::vector<std::size_t> timeSpecOf(instants.size(), 0);
    for (std::size_t k = 0; k < instants.size(); ++k)
        if (instants[k].kind == InstantSpec::Kind::Time) {
            timeSpecOf[k] = timeSpecs.size();
            timeSpecs.push_back(instants[k].time);
        }

    Pass1 p1;
    const bool tooLongForBits = source.eventCount() > std::numeric_limits<std::uint32_t>::max();
    try {
        if (hasReservedCounter(skeleton)) {
            if (tooLongForBits)
                throw NeedsCompletions {};
            const Prepass pre = prePass(source);
            p1 = firstPass(source, timeSpecs, &pre, charts);
            out.passes = 2;
        } else {
            p1 = firstPass(source, timeSpecs, nullptr, charts);
            out.passes = 1;
        }
    } catch (const NeedsCompletions&) {
        if (tooLongForBits) {
            out.needsTrace = "free_completed events or memory counters in a trace of 2^32 events or more";
            return out;
        }
        const Prepass pre = prePass(source);
        p1 = firstPass(source, timeSpecs, &pre, charts);
        out.passes = 3;
    }
    progress(0.4);
    out.allocFreeChunks = p1.allocFreeChunks;
    a.firstEventTime = p1.firstTime;
    a.lastEventTime = p1.lastTime;
    {
        // The trace start: the first memory event, or an earlier kernel, annotation or counter sample.
        TimeSpan span = traceSpan(skeleton);
        TimeNs lo = p1.firstTime;
        if (!skeleton.annotations().empty() || !skeleton.kernels().empty() || !skeleton.counterSamples().empty())
            lo = std::min(lo, span.start);
        if (skeleton.kernels().empty() && source.kernelCount() > 0)
            source.forEachKernelChunk([&](std::span<const Kernel> kernels) {
                for (const auto& k : kernels)
                    lo = std::min(lo, k.start);
            });
        a.origin = lo;
    }

    // The device: the one asked for, else the one with the largest peak allocated (Timeline::busiest).
    const DeviceRun* dev = nullptr;
    DeviceId d = 0;
    if (options.device) {
        d = *options.device;
        dev = &p1.devices[d];
    } else {
        for (std::size_t k = 0; k < p1.devices.size(); ++k) {
            const auto& r = p1.devices[k];
            if (r.events && (!dev || r.sAllocated.stat.peak > dev->sAllocated.stat.peak)) {
                dev = &r;
                d = static_cast<DeviceId>(k);
            }
        }
    }
    a.device = d;
    if (dev) {
        a.deviceLabel = deviceLabel(skeleton.devices()[d]);
        a.hasReserved = dev->segments || dev->counter;
        a.reservedSource = dev->segments ? "segment events" : dev->counter ? "counter: " + dev->counterName : "";
        a.deviceFirstTime = dev->firstTime;
    }
    if (!dev || dev->events == 0)
        return out;
    a.empty = false;
    {
        auto moment = [&](const Point& p, Bytes allocated) {
            BoundedAnalysis::Moment m;
            m.time = p.time;
            m.allocated = allocated;
            if (a.hasReserved)
                m.reserved = p.reserved;
            return m;
        };
        if (dev->oom) {
            out.firstOom.emplace();
            static_cast<BoundedAnalysis::Moment&>(*out.firstOom) = moment(*dev->oom, dev->oom->ratioAllocated);
            out.firstOom->request = dev->oomRequest;
        }
        if (dev->peakAllocated)
            out.peakAllocated = moment(*dev->peakAllocated, dev->peakAllocated->allocated);
        if (a.hasReserved && dev->fullest)
            out.peakReserved = moment(*dev->fullest, dev->fullest->ratioAllocated);
    }
    if (charts) {
        // The columns Timeline::build gives the device: reserved with segment events or a reserved counter,
        // largest free with segment events, the recorded allocated counter beside a reserved one.
        ChartBuckets c;
        c.start = p1.firstTime;
        c.end = p1.lastTime;
        auto& r = p1.devices[d];
        const std::array<bool, kChartKinds.size()> present { true, true, a.hasReserved, dev->segments, dev->recordedCounter };
        for (std::size_t k = 0; k < kChartKinds.size(); ++k)
            if (present[k] && k < r.charts.size())
                c.series[static_cast<std::size_t>(kChartKinds[k])] = r.charts[k].finish();
        out.charts = std::move(c);
    }

    // analysis.cpp computeStats, computeFragmentation, headlineOf.
    auto& st = a.stats;
    st.allocatedBytes = dev->sAllocated.stat;
    st.activeBytes = dev->sActive.stat;
    st.requestedBytes = dev->sRequested.stat;
    if (a.hasReserved)
        st.reservedBytes = dev->sReserved.stat;
    if (dev->segments)
        st.inactiveSplitBytes = dev->sInactive.stat;
    st.hasSegments = dev->segments;
    st.allocations = dev->allocations;
    st.allocations.current = dev->live;
    st.activeAllocations = dev->activeAllocations;
    st.activeAllocations.current = dev->activeCount;
    st.segments = dev->segmentCount;
    st.segments.current = dev->segs;
    st.ooms = dev->ooms;

    auto& f = a.fragmentation;
    f.peakAllocated = st.allocatedBytes.peak;
    f.peakActive = st.activeBytes.peak;
    f.peakRequested = st.requestedBytes.peak;
    f.openingAllocated = replay::openingAllocated(skeleton, d, dev->firstRequest);
    {
        // replay::livePeak(trace, device, opening): the opening bytes live from the start, less the blocks
        // freed without an alloc at their frees when those add up to no more than the opening.
        const Wide opening = f.openingAllocated;
        const Wide peak = opening + (opening > 0 && dev->freedBefore <= opening ? dev->lowPeakLessFreed : dev->lowPeak);
        f.lowerBound = peak > Wide(~Bytes(0)) ? ~Bytes(0) : static_cast<Bytes>(peak);
    }
    if (dev->peakAllocated)
        f.internalAtPeakAllocated = dev->peakAllocated->allocated >= dev->peakAllocated->requested
            ? dev->peakAllocated->allocated - dev->peakAllocated->requested
            : 0;
    if (a.hasReserved && dev->peakReserved && dev->peakReserved->reserved > 0) {
        const Point& p = *dev->peakReserved;
        const double r = static_cast<double>(p.reserved);
        f.peakReserved = p.reserved;
        f.utilizationActive = static_cast<double>(dev->recordedCounter ? dev->recordedPeak : f.peakActive) / r;
        f.utilizationAllocated = static_cast<double>(dev->recordedCounter ? dev->recordedPeak : f.peakAllocated) / r;
        if (dev->recordedCounter)
            f.peakRecordedAllocated = dev->recordedPeak;
        f.wasteAtPeakReserved = wasteAt(p);
        if (dev->segments)
            f.externalAtPeakReserved = externalAt(p);
        if (f.lowerBound)
            f.overheadVsLowerBound = r / static_cast<double>(f.lowerBound);
        if (dev->wasteSpan > 0)
            f.timeWeightedWaste = dev->wasteArea / dev->wasteSpan;
    }
    if (dev->segments)
        f.maxInactiveSplit = st.inactiveSplitBytes.peak;
    std::optional<Point> headlinePoint;
    if (a.hasReserved) {
        FragmentationSummary::Headline h;
        if (dev->oom) {
            headlinePoint = dev->oom;
            h.moment = "first OOM";
        } else {
            const bool afterOpening = dev->rebuilt > 0 && dev->events > dev->rebuilt;
            headlinePoint = afterOpening ? dev->fullestInWindow : dev->fullest;
            h.moment = afterOpening ? "peak after opening state" : "reserved peak";
        }
        if (headlinePoint && headlinePoint->reserved > 0) {
            h.point = static_cast<std::size_t>(headlinePoint->ordinal);
            h.time = headlinePoint->time;
            h.reserved = headlinePoint->reserved;
            h.live = headlinePoint->ratioAllocated; // a recorded allocated counter counts what its reserved does
            f.headline = h;
        }
    }

    // Steps: detection from the pass's inputs, then (pass 2) their figures and phases.
    a.steps.autogradEvidence = autogradEvidenceInTables(skeleton);
    if (a.steps.autogradEvidence.empty())
        a.steps.autogradEvidence = p1.recordedAutograd;
    {
        auto found = findStepRanges(skeleton, dev->markers, dev->allocSizes);
        if (!found.unresolved.empty()) {
            out.needsTrace = found.unresolved;
            return out;
        }
        found.set.autogradEvidence = a.steps.autogradEvidence;
        a.steps = std::move(found.set);
    }
    if (!a.steps.steps.empty()) {
        stepPass(source, d, a.steps.steps);
        ++out.passes;
        if (!a.steps.autogradEvidence.empty()
            && std::any_of(a.steps.steps.begin(), a.steps.steps.end(), [](const Step& s) { return !s.phasesAnnotated; })) {
            guessPhasesPasses(source, d, a.steps.steps);
            out.passes += 2;
        }
    }
    progress(0.6);
    const bool growing = leakTrend(a.steps, a.leaks);

    // The instants to break down (analysis.cpp), then pass 3 for the blocks live at each.
    std::vector<Instant> resolved;
    for (std::size_t k = 0; k < instants.size(); ++k) {
        const auto& spec = instants[k];
        if (spec.kind == InstantSpec::Kind::PeakAllocated && dev->peakAllocated)
            resolved.push_back(instantAt(*dev->peakAllocated, "peak allocated", d, a.hasReserved));
        else if (spec.kind == InstantSpec::Kind::PeakReserved && a.hasReserved && dev->peakReserved)
            resolved.push_back(instantAt(*dev->peakReserved, "peak reserved", d, true));
        else if (spec.kind == InstantSpec::Kind::Time && dev->atTime[timeSpecOf[k]]) {
            resolved.push_back(instantAt(*dev->atTime[timeSpecOf[k]], "t=" + std::to_string(spec.time) + " ns", d, a.hasReserved));
            resolved.back().time = spec.time;
        }
    }
    if (defaults && f.headline) {
        const auto& h = *f.headline;
        const auto& peak = dev->peakAllocated;
        if (peak && (peak->ordinal == h.point || peak->time == h.time))
            a.reservedBreakdownOmitted = "the " + h.moment + " is the moment of the allocated peak";
        else if (peak && peak->allocated == headlinePoint->allocated && peak->reserved == headlinePoint->reserved)
            a.reservedBreakdownOmitted = "the " + h.moment + " holds the same live bytes and reserved as the allocated peak";
        else if (h.live * 100 < f.peakAllocated)
            a.reservedBreakdownOmitted = "only " + formatBytes(h.live) + " is live at the " + h.moment
                + ", under 1 % of the allocated peak";
        else {
            resolved.push_back(instantAt(*headlinePoint, h.moment == "first OOM" ? "first OOM" : "peak reserved", d, true));
            resolved.back().time = h.time;
        }
    }
    a.categoriesRecorded = p1.recordedCategories;
    std::vector<std::uint64_t> events;
    for (const auto& i : resolved)
        events.push_back(i.eventIndex);
    if (a.categoriesRecorded && dev->peakAllocated)
        events.push_back(dev->peakAllocated->event);
    // Without steps, the blocks live at the allocated peak came out of pass 1 (DeviceRun::snapshot).
    const bool onlyPeak = dev->peakAllocated
        && std::all_of(events.begin(), events.end(), [&](std::uint64_t e) { return e == dev->peakAllocated->event; });
    if (a.steps.steps.empty() && onlyPeak && dev->snapshotValid && p1.snapshots) {
        std::vector<std::size_t> order(dev->snapshot.size());
        for (std::size_t k = 0; k < order.size(); ++k)
            order[k] = k;
        std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return dev->snapshot[x].allocation < dev->snapshot[y].allocation; });
        std::vector<LiveBlock> live;
        CategoryAgreement atPeak;
        for (auto k : order) {
            LiveBlock b = dev->snapshot[k];
            const Category inferred = inferredWithoutSteps(dev->snapshotFreed[k] != 0);
            addToAgreement(atPeak, b.size, b.category, inferred);
            if (!a.categoriesRecorded)
                b.category = inferred;
            live.push_back(b);
        }
        for (const auto& i : resolved) {
            a.breakdowns.push_back(breakdownOf(skeleton, i, live, !a.categoriesRecorded));
            if (charts) // the report draws its flame graph from them
                a.breakdowns.back().blocks = live;
        }
        if (a.categoriesRecorded) {
            a.agreementAtPeak = atPeak;
            a.agreementAll = dev->agreementWithoutSteps;
        }
        progress(1.0);
        return out;
    }
    const Pass3 p3 = blockPass(source, d, events, a.steps, a.categoriesRecorded, dev->rebuilt, growing);
    ++out.passes;
    progress(0.8);
    for (const auto& i : resolved) {
        const auto& live = captureAt(p3, i.eventIndex).blocks;
        a.breakdowns.push_back(breakdownOf(skeleton, i, live, !a.categoriesRecorded));
        if (charts)
            a.breakdowns.back().blocks = live;
    }
    if (growing)
        nameLeakSites(skeleton, a.steps, p3.survivors, a.leaks);
    if (a.categoriesRecorded) {
        if (dev->peakAllocated) {
            const Capture& c = captureAt(p3, dev->peakAllocated->event);
            CategoryAgreement atPeak;
            for (std::size_t k = 0; k < c.blocks.size(); ++k)
                addToAgreement(atPeak, c.blocks[k].size, c.blocks[k].category, c.inferred[k]);
            a.agreementAtPeak = atPeak;
        }
        a.agreementAll = p3.all;
    }
    progress(1.0);
    return out;
}

} // namespace gpumem::analyze
