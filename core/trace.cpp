#include "core/trace.h"

#include "core/detail/trace_body.h"

#include <algorithm>
#include <array>
#include <set>
#include <unordered_map>

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
    void TraceBody::pair() const
    {
        stats = importStats;
        const auto& m = memory;
        std::unordered_map<std::uint64_t, std::uint64_t> live; // (device, address) → allocation index
        std::unordered_map<std::uint64_t, std::uint64_t> awaitingCompletion;
        live.reserve(m.count() / 4 + 16);
        auto key = [&](std::size_t i) { return (std::uint64_t(m.device[i]) << 52) ^ m.address[i]; };
        // Live blocks in address order, per device, for the segment_free check; kept only when the trace
        // has segment_free events (most request-level traces have none).
        const bool segmentFrees = std::find(m.kind.begin(), m.kind.end(), EventKind::SegmentFree) != m.kind.end();
        std::set<std::pair<DeviceId, Address>> liveByAddress;
        for (std::size_t i = 0; i < m.count(); ++i) {
            switch (m.kind[i]) {
            case EventKind::Alloc: {
                if (segmentFrees)
                    liveByAddress.emplace(m.device[i], m.address[i]);
                auto [it, inserted] = live.try_emplace(key(i), allocations.size());
                if (!inserted) {
                    stats.add("alloc_at_live_address", Severity::Warning,
                        "memory event " + std::to_string(i) + ": alloc at address " + std::to_string(m.address[i])
                            + " which is still live since event " + std::to_string(allocations[it->second].allocEvent)
                            + "; the earlier block is treated as never freed");
                    it->second = allocations.size();
                }
                allocations.push_back(Allocation { i, kNoIndex, kNoIndex });
                break;
            }
            case EventKind::Free: {
                auto it = live.find(key(i));
                if (it == live.end()) {
                    stats.add("unmatched_free", Severity::Info,
                        "memory event " + std::to_string(i) + ": free of address " + std::to_string(m.address[i])
                            + " with no alloc in the trace (allocated before the recording began)");
                    break;
                }
                // A free's size is the block's (0: not known); another size means one of the two is wrong.
                const std::size_t allocEvent = allocations[it->second].allocEvent;
                if (m.size[i] != 0 && m.size[i] != m.size[allocEvent])
                    stats.add("free_size_mismatch", Severity::Warning,
                        "memory event " + std::to_string(i) + ": free of " + std::to_string(m.size[i])
                            + " bytes at address " + std::to_string(m.address[i]) + ", whose alloc (event "
                            + std::to_string(allocEvent) + ") was of " + std::to_string(m.size[allocEvent])
                            + " bytes");
                allocations[it->second].freeEvent = i;
                awaitingCompletion[key(i)] = it->second;
                live.erase(it);
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
                const auto block = live.find((std::uint64_t(inside->first) << 52) ^ inside->second);
                const Bytes blockSize = block == live.end() ? 0 : m.size[allocations[block->second].allocEvent];
                stats.add("segment_free_with_live_block", Severity::Warning,
                    "memory event " + std::to_string(i) + ": segment_free of " + std::to_string(m.size[i])
                        + " bytes at address " + std::to_string(m.address[i]) + " while the block of "
                        + std::to_string(blockSize) + " bytes at address " + std::to_string(inside->second)
                        + " in it is live (allocated, not freed)");
                break;
            }
            case EventKind::FreeCompleted: {
                auto it = awaitingCompletion.find(key(i));
                if (it == awaitingCompletion.end())
                    break; // completion of a free before the window: the unmatched free was already counted
                allocations[it->second].freeCompletedEvent = i;
                awaitingCompletion.erase(it);
                break;
            }
            default:
                break;
            }
        }
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
const ImportStats& Trace::importStats() const { return m_body->importStats; }
const ImportStats& Trace::stats() const
{
    allocations();
    return m_body->stats;
}

} // namespace gpumem
