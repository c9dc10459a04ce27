#include "core/trace.h"

#include "core/detail/address_map.h"
#include "core/detail/trace_body.h"

#include <algorithm>
#include <array>
#include <memory_resource>
#include <set>

namespace gpumem {

void MemoryEventColumns::reserve(std::size_t n)
{
    time.reserve(n);
    kind.reserve(n);
    device.reserve(n);
    stream.reserve(n);
    address.reserve(n);
    size.reserve(n);
    requestedSize.reserve(n);
    scope.reserve(n);
    site.reserve(n);
    thread.reserve(n);
    sequence.reserve(n);
    category.reserve(n);
    pool.reserve(n);
}

void MemoryEventColumns::clear()
{
    time.clear(), kind.clear(), device.clear(), stream.clear(), address.clear(), size.clear(), requestedSize.clear();
    scope.clear(), site.clear(), thread.clear(), sequence.clear(), category.clear(), pool.clear();
}

void MemoryEventColumns::push(const MemoryEvent& e)
{
    time.push_back(e.time);
    kind.push_back(e.kind);
    device.push_back(e.device);
    stream.push_back(e.stream);
    address.push_back(e.address);
    size.push_back(e.size);
    requestedSize.push_back(e.requestedSize);
    scope.push_back(e.scope);
    site.push_back(e.site);
    thread.push_back(e.thread);
    sequence.push_back(e.sequence);
    category.push_back(e.category);
    pool.push_back(e.pool);
}

MemoryEvent MemoryEventColumns::row(std::size_t i) const
{
    return MemoryEvent { time[i], kind[i], device[i], stream[i], address[i], size[i], requestedSize[i], scope[i],
        site[i], thread[i], sequence[i], category[i], pool[i] };
}

namespace {
    constexpr std::array<std::string_view, 3> kAnnotationKindNames = { "range", "step", "instant" };
}
std::string_view toString(AnnotationKind kind)
{
    auto i = static_cast<std::size_t>(kind);
    return i < kAnnotationKindNames.size() ? kAnnotationKindNames[i] : "invalid";
}
std::optional<AnnotationKind> annotationKindFromString(std::string_view name)
{
    for (std::size_t i = 0; i < kAnnotationKindNames.size(); ++i)
        if (kAnnotationKindNames[i] == name)
            return static_cast<AnnotationKind>(i);
    return std::nullopt;
}

namespace detail {
    namespace {
        // One anomaly code pairing may find many times (a ring-buffer trace has thousands of unmatched
        // frees). ImportStats keeps the detail of the first occurrence only, so the detail is built for the
        // first alone (building it for every event was a tenth of pairing's time) and the rest are counted
        // and added at the end: the same anomalies, in the same order, with the same counts.
        class AnomalyTally {
        public:
            AnomalyTally(ImportStats& stats, const char* code, Severity severity)
                : m_stats(stats)
                , m_code(code)
                , m_severity(severity)
            {
            }
            // `detail` () -> std::string, called on the first occurrence only.
            template <typename Detail> void add(Detail&& detail)
            {
                if (m_seen++ == 0)
                    m_stats.add(m_code, m_severity, detail());
            }
            void flush()
            {
                if (m_seen > 1)
                    m_stats.add(m_code, m_severity, {}, m_seen - 1);
                m_seen = 0;
            }

        private:
            ImportStats& m_stats;
            const char* m_code;
            Severity m_severity;
            std::uint64_t m_seen = 0;
        };
        // The live table's tag for a block size: the size itself below 2^32 − 1, else kWideSize (then a free
        // reads the size from the alloc's row: blocks of 4 GiB or more are few).
        constexpr std::uint32_t kWideSize = 0xffffffffu;
        std::uint32_t sizeTag(Bytes size) { return size < kWideSize ? static_cast<std::uint32_t>(size) : kWideSize; }
    } // namespace

    // One sequential pass over the memory columns; writes are sequential too (allocations are appended in
    // alloc order) except a free's freeEvent, which goes to its allocation's row. Nothing is allocated per
    // event: the live table is open-addressed and keeps beside each key the allocation index and the
    // block's size (a free compares its size without reading the alloc's row), the address-ordered set
    // the segment_free check needs draws its nodes from a pool that reuses freed ones.
    void TraceBody::pair() const
    {
        stats = importStats;
        const auto& m = memory;
        const std::size_t n = m.count();
        // One pass over the kind column first: how many allocations there will be (the vector is sized
        // once), and whether the trace has segment_free or free_completed events at all (most
        // request-level traces have neither, and then their bookkeeping is skipped).
        std::size_t allocs = 0;
        bool segmentFrees = false, completions = false;
        for (const EventKind k : m.kind) {
            allocs += k == EventKind::Alloc;
            segmentFrees |= k == EventKind::SegmentFree;
            completions |= k == EventKind::FreeCompleted;
        }
        allocations.reserve(allocs);
        // (device, address) → allocation index of the live block there, and of the freed block whose
        // free_completed is still to come. Sized by the blocks live at once, not the events: addresses
        // recur, and the table grows (by doubling) only when a trace holds more; a table larger than the
        // live set would only spread the probes over more cache lines.
        AddressMap live;
        AddressMap awaitingCompletion;
        live.reserve(std::min<std::size_t>(allocs, 1u << 12));
        auto key = [&](std::size_t i) { return blockKey(m.device[i], m.address[i]); };
        // Live blocks in address order, per device, for the segment_free check; kept only when the trace
        // has segment_free events.
        std::pmr::unsynchronized_pool_resource nodes;
        std::pmr::set<std::pair<DeviceId, Address>> liveByAddress(&nodes);
        AnomalyTally atLiveAddress(stats, "alloc_at_live_address", Severity::Warning);
        AnomalyTally unmatchedFree(stats, "unmatched_free", Severity::Info);
        AnomalyTally sizeMismatch(stats, "free_size_mismatch", Severity::Warning);
        AnomalyTally segmentFreeWithLive(stats, "segment_free_with_live_block", Severity::Warning);
        auto blockSize = [&](const AddressMap::Entry& e) {
            return e.tag != kWideSize ? Bytes(e.tag) : m.size[allocations[e.value].allocEvent];
        };
        for (std::size_t i = 0; i < n; ++i) {
            switch (m.kind[i]) {
            case EventKind::Alloc: {
                if (segmentFrees)
                    liveByAddress.emplace(m.device[i], m.address[i]);
                const auto index = static_cast<std::uint32_t>(allocations.size());
                const std::uint32_t earlier = live.exchange(key(i), index, sizeTag(m.size[i]));
                if (earlier != AddressMap::kNone)
                    atLiveAddress.add([&] {
                        return "memory event " + std::to_string(i) + ": alloc at address " + std::to_string(m.address[i])
                            + " which is still live since event " + std::to_string(allocations[earlier].allocEvent)
                            + "; the earlier block is treated as never freed";
                    });
                allocations.push_back(Allocation { i, kNoIndex, kNoIndex });
                break;
            }
            case EventKind::Free: {
                const AddressMap::Entry block = live.takeEntry(key(i));
                if (block.value == AddressMap::kNone) {
                    unmatchedFree.add([&] {
                        return "memory event " + std::to_string(i) + ": free of address " + std::to_string(m.address[i])
                            + " with no alloc in the trace (allocated before the recording began)";
                    });
                    break;
                }
                // A free's size is the block's (0: not known); another size means one of the two is wrong.
                if (m.size[i] != 0 && m.size[i] != blockSize(block))
                    sizeMismatch.add([&] {
                        return "memory event " + std::to_string(i) + ": free of " + std::to_string(m.size[i])
                            + " bytes at address " + std::to_string(m.address[i]) + ", whose alloc (event "
                            + std::to_string(allocations[block.value].allocEvent) + ") was of "
                            + std::to_string(blockSize(block)) + " bytes";
                    });
                allocations[block.value].freeEvent = i;
                if (completions)
                    awaitingCompletion.exchange(key(i), block.value);
                if (segmentFrees)
                    liveByAddress.erase({ m.device[i], m.address[i] });
                break;
            }
            case EventKind::SegmentFree: {
                // An allocator returns a segment to the driver only when none of its blocks is allocated
                // (PyTorch releases a cached block only when it spans its whole segment, no prev/next
                // split: c10/cuda/CUDACachingAllocator.cpp, release_blocks): a live block inside it means
                // a missing free, or a segment_free that did not happen.
                const Address end = m.address[i] + std::min(m.size[i], ~Address(0) - m.address[i]);
                auto inside = liveByAddress.lower_bound({ m.device[i], m.address[i] });
                if (inside == liveByAddress.end() || inside->first != m.device[i]
                    || !(inside->second < end || inside->second == m.address[i]))
                    break;
                segmentFreeWithLive.add([&] {
                    const std::uint32_t b = live.find(blockKey(inside->first, inside->second));
                    const Bytes size = b == AddressMap::kNone ? 0 : m.size[allocations[b].allocEvent];
                    return "memory event " + std::to_string(i) + ": segment_free of " + std::to_string(m.size[i])
                        + " bytes at address " + std::to_string(m.address[i]) + " while the block of "
                        + std::to_string(size) + " bytes at address " + std::to_string(inside->second)
                        + " in it is live (allocated, not freed)";
                });
                break;
            }
            case EventKind::FreeCompleted: {
                const std::uint32_t index = awaitingCompletion.take(key(i));
                if (index == AddressMap::kNone)
                    break; // completion of a free before the window: the unmatched free was already counted
                allocations[index].freeCompletedEvent = i;
                break;
            }
            default:
                break;
            }
        }
        for (AnomalyTally* t : { &atLiveAddress, &unmatchedFree, &sizeMismatch, &segmentFreeWithLive })
            t->flush();
    }
} // namespace detail

Trace::Trace()
    : m_body(std::make_shared<detail::TraceBody>())
{
}
Trace::Trace(std::shared_ptr<detail::TraceBody> body)
    : m_body(std::move(body))
{
}
Trace::~Trace() = default;
Trace::Trace(const Trace&) = default;
Trace& Trace::operator=(const Trace&) = default;
Trace::Trace(Trace&&) noexcept = default;
Trace& Trace::operator=(Trace&&) noexcept = default;

const nlohmann::json& Trace::metadata() const { return m_body->metadata; }
const StringTable& Trace::strings() const { return m_body->strings; }
std::span<const Device> Trace::devices() const { return m_body->devices; }
std::span<const Stream> Trace::streams() const { return m_body->streams; }
std::span<const Frame> Trace::frames() const { return m_body->frames; }
std::span<const Scope> Trace::scopes() const { return m_body->scopes; }
std::span<const MemoryPool> Trace::pools() const { return m_body->pools; }
std::size_t Trace::siteCount() const { return m_body->siteOffsets.size() - 1; }
std::span<const FrameId> Trace::siteFrames(SiteId site) const
{
    if (site + 1 >= m_body->siteOffsets.size())
        return {};
    auto begin = m_body->siteOffsets[site];
    auto end = m_body->siteOffsets[site + 1];
    return std::span<const FrameId>(m_body->siteFrames).subspan(begin, end - begin);
}
const MemoryEventColumns& Trace::memory() const { return m_body->memory; }
std::span<const Kernel> Trace::kernels() const { return m_body->kernels; }
std::span<const Annotation> Trace::annotations() const { return m_body->annotations; }
std::span<const CounterSeries> Trace::counterSeries() const { return m_body->counterSeries; }
std::span<const CounterSample> Trace::counterSamples() const { return m_body->counterSamples; }
std::span<const Allocation> Trace::allocations() const
{
    std::call_once(m_body->pairedOnce, [this] { m_body->pair(); });
    return m_body->allocations;
}
std::span<const std::uint32_t> Trace::allocationOfEvents() const
{
    std::call_once(m_body->allocationOfEventsOnce, [this] {
        const auto allocs = allocations();
        auto& of = m_body->allocationOfEvents;
        of.assign(m_body->memory.count(), kNoAllocationOfEvent);
        for (std::size_t a = 0; a < allocs.size(); ++a)
            for (std::uint64_t e : { allocs[a].allocEvent, allocs[a].freeEvent, allocs[a].freeCompletedEvent })
                if (e != kNoIndex)
                    of[e] = std::uint32_t(a);
    });
    return m_body->allocationOfEvents;
}
const ImportStats& Trace::importStats() const { return m_body->importStats; }
const ImportStats& Trace::stats() const
{
    allocations();
    return m_body->stats;
}

} // namespace gpumem
