#include "core/event_source.h"

#include "core/detail/trace_access.h"

#include <algorithm>

namespace gpumem {

void MemoryEventSource::forEachKernelChunk(const std::function<void(std::span<const Kernel> kernels)>& visit) const
{
    if (!skeleton().kernels().empty())
        visit(skeleton().kernels());
}

std::optional<std::pair<TimeNs, TimeNs>> MemoryEventSource::firstAndLastTime() const
{
    std::optional<std::pair<TimeNs, TimeNs>> times;
    forEachChunk([&](const MemoryEventColumns& chunk, std::uint64_t first) {
        if (first == 0)
            times.emplace(chunk.time.front(), chunk.time.back());
        times->second = chunk.time.back();
    });
    return times;
}

namespace {
    // A copy of `trace` without its memory events (and without its kernels unless `kernels`).
    Trace skeletonOf(const Trace& trace, bool kernels)
    {
        const detail::TraceBody& from = TraceAccess::body(trace);
        auto body = std::make_shared<detail::TraceBody>();
        body->metadata = from.metadata;
        body->strings = from.strings;
        body->devices = from.devices;
        body->streams = from.streams;
        body->frames = from.frames;
        body->scopes = from.scopes;
        body->pools = from.pools;
        body->siteOffsets = from.siteOffsets;
        body->siteFrames = from.siteFrames;
        if (kernels)
            body->kernels = from.kernels;
        body->annotations = from.annotations;
        body->counterSeries = from.counterSeries;
        body->counterSamples = from.counterSamples;
        body->importStats = from.importStats;
        return TraceAccess::make(std::move(body));
    }
} // namespace

namespace {
    class TraceSource final : public MemoryEventSource {
    public:
        TraceSource(Trace trace, std::size_t chunkEvents)
            : m_trace(std::move(trace))
            , m_skeleton(skeletonOf(m_trace, true))
            , m_chunkEvents(std::max<std::size_t>(chunkEvents, 1))
        {
        }
        const Trace& skeleton() const override { return m_skeleton; }
        std::uint64_t eventCount() const override { return m_trace.memory().count(); }
        std::uint64_t kernelCount() const override { return m_trace.kernels().size(); }
        void forEachChunk(const std::function<void(const MemoryEventColumns&, std::uint64_t)>& visit) const override
        {
            const MemoryEventColumns& m = m_trace.memory();
            MemoryEventColumns slice;
            for (std::size_t begin = 0; begin < m.count(); begin += m_chunkEvents) {
                const std::size_t end = std::min(m.count(), begin + m_chunkEvents);
                auto copy = [&](auto& to, const auto& from) { to.assign(from.begin() + begin, from.begin() + end); };
                copy(slice.time, m.time);
                copy(slice.kind, m.kind);
                copy(slice.device, m.device);
                copy(slice.stream, m.stream);
                copy(slice.address, m.address);
                copy(slice.size, m.size);
                copy(slice.requestedSize, m.requestedSize);
                copy(slice.scope, m.scope);
                copy(slice.site, m.site);
                copy(slice.thread, m.thread);
                copy(slice.sequence, m.sequence);
                copy(slice.category, m.category);
                copy(slice.pool, m.pool);
                visit(slice, begin);
            }
        }

    private:
        Trace m_trace;
        Trace m_skeleton;
        std::size_t m_chunkEvents;
    };

    class TraceView final : public MemoryEventSource {
    public:
        explicit TraceView(const Trace& trace)
            : m_trace(trace)
        {
        }
        const Trace& skeleton() const override { return m_trace; }
        std::uint64_t eventCount() const override { return m_trace.memory().count(); }
        std::uint64_t kernelCount() const override { return m_trace.kernels().size(); }
        void forEachChunk(const std::function<void(const MemoryEventColumns&, std::uint64_t)>& visit) const override
        {
            if (m_trace.memory().count() > 0)
                visit(m_trace.memory(), 0);
        }
        const Trace* wholeTrace() const override { return &m_trace; }

    private:
        const Trace& m_trace;
    };
} // namespace

std::unique_ptr<MemoryEventSource> traceView(const Trace& trace) { return std::make_unique<TraceView>(trace); }

std::unique_ptr<MemoryEventSource> memorySource(Trace trace, std::size_t chunkEvents)
{
    return std::make_unique<TraceSource>(std::move(trace), chunkEvents);
}

} // namespace gpumem
