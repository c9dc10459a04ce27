#include "tracer/trace_sink.h"

#include <algorithm>

namespace gpumem::tracer {

SinkTables::SinkTables()
    : m_frames(1)
    , m_siteFrame(1, 0)
    , m_scopes(1)
{
}

DeviceId SinkTables::device(DeviceType type, std::int32_t ordinal, std::string_view name)
{
    auto key = std::make_tuple(static_cast<std::uint8_t>(type), ordinal, std::string(name));
    if (auto it = m_deviceIndex.find(key); it != m_deviceIndex.end())
        return it->second;
    auto id = static_cast<DeviceId>(m_devices.size());
    m_devices.push_back(Device { type, ordinal, intern(name), 0 });
    m_deviceIndex.emplace(std::move(key), id);
    return id;
}

StreamId SinkTables::stream(DeviceId device, std::uint64_t handle)
{
    auto key = std::make_pair(device, handle);
    if (auto it = m_streamIndex.find(key); it != m_streamIndex.end())
        return it->second;
    auto id = static_cast<StreamId>(m_streams.size());
    m_streams.push_back(Stream { device, handle, 0 });
    m_streamIndex.emplace(key, id);
    return id;
}

SiteId SinkTables::site(std::string_view function, std::string_view file)
{
    if (function.empty() && file.empty())
        return 0;
    auto key = std::make_pair(intern(function), intern(file));
    if (auto it = m_siteIndex.find(key); it != m_siteIndex.end())
        return it->second;
    auto frame = static_cast<FrameId>(m_frames.size());
    m_frames.push_back(Frame { key.first, key.second, 0 });
    auto id = static_cast<SiteId>(m_siteFrame.size());
    m_siteFrame.push_back(frame);
    m_siteIndex.emplace(key, id);
    return id;
}

ScopeId SinkTables::scope(ScopeId parent, std::string_view name, ScopeKind kind)
{
    auto key = std::make_tuple(parent, intern(name), static_cast<std::uint8_t>(kind));
    if (auto it = m_scopeIndex.find(key); it != m_scopeIndex.end())
        return it->second;
    auto id = static_cast<ScopeId>(m_scopes.size());
    m_scopes.push_back(Scope { parent, std::get<1>(key), kind });
    m_scopeIndex.emplace(key, id);
    return id;
}

std::uint32_t SinkTables::counterSeries(std::string_view name, DeviceId device)
{
    auto key = std::make_pair(intern(name), device);
    if (auto it = m_seriesIndex.find(key); it != m_seriesIndex.end())
        return it->second;
    auto id = static_cast<std::uint32_t>(m_series.size());
    m_series.push_back(CounterSeries { key.first, device });
    m_seriesIndex.emplace(key, id);
    return id;
}

bool PendingEvents::admit()
{
    if (size() < limit)
        return true;
    stats.add("tracer_backlog_full", Severity::Error,
        "the tracer's writer fell behind by " + std::to_string(limit)
            + " events and dropped the rest; the trace is incomplete (is the output disk slow or full?)");
    return false;
}

TraceSink::TraceSink(std::size_t maxPendingEvents) { m_pending.limit = maxPendingEvents; }

std::size_t TraceSink::drainTo(GmtWriter& writer)
{
    PendingEvents batch;
    std::vector<std::string> strings;
    std::vector<Device> devices;
    std::vector<Stream> streams;
    std::vector<Frame> frames;
    std::vector<FrameId> siteFrames;
    std::vector<Scope> scopes;
    std::vector<CounterSeries> series;
    {
        std::lock_guard lock(m_mutex);
        std::swap(batch, m_pending);
        m_pending.limit = batch.limit;
        const auto& t = m_tables;
        for (std::size_t i = m_writtenStrings.size(); i < t.strings().size(); ++i)
            strings.emplace_back(t.strings().at(static_cast<StringId>(i)));
        devices.assign(t.devices().begin() + static_cast<std::ptrdiff_t>(m_writtenDevices), t.devices().end());
        streams.assign(t.streams().begin() + static_cast<std::ptrdiff_t>(m_writtenStreams), t.streams().end());
        frames.assign(t.frames().begin() + static_cast<std::ptrdiff_t>(m_writtenFrames), t.frames().end());
        for (std::size_t i = m_writtenSites; i < t.siteCount(); ++i)
            siteFrames.push_back(t.siteFrame(static_cast<SiteId>(i)));
        scopes.assign(t.scopes().begin() + static_cast<std::ptrdiff_t>(m_writtenScopes), t.scopes().end());
        series.assign(t.series().begin() + static_cast<std::ptrdiff_t>(m_writtenSeries), t.series().end());
    }

    const auto firstString = static_cast<StringId>(m_writtenStrings.size());
    for (const auto& s : strings)
        m_writtenStrings.intern(s);
    writer.appendStrings(m_writtenStrings, firstString, strings.size());
    writer.appendDevices(devices);
    writer.appendStreams(streams);
    writer.appendFrames(frames);
    for (FrameId f : siteFrames)
        writer.appendSite(std::span<const FrameId>(&f, 1));
    writer.appendScopes(scopes);
    writer.appendCounterSeries(series);
    m_writtenDevices += devices.size();
    m_writtenStreams += streams.size();
    m_writtenFrames += frames.size();
    m_writtenSites += siteFrames.size();
    m_writtenScopes += scopes.size();
    m_writtenSeries += series.size();

    auto& mem = batch.memory;
    std::stable_sort(mem.begin(), mem.end(), [](const MemoryEvent& a, const MemoryEvent& b) {
        return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
    });
    MemoryEventColumns columns;
    columns.reserve(mem.size());
    for (const auto& e : mem)
        columns.push(e);
    constexpr std::size_t kEventsPerChunk = 65536;
    for (std::size_t i = 0; i < columns.count(); i += kEventsPerChunk)
        writer.appendMemoryEvents(columns, i, std::min(columns.count(), i + kEventsPerChunk));
    auto byStart = [](const auto& a, const auto& b) { return a.start < b.start; };
    std::stable_sort(batch.kernels.begin(), batch.kernels.end(), byStart);
    std::stable_sort(batch.annotations.begin(), batch.annotations.end(), byStart);
    std::stable_sort(batch.samples.begin(), batch.samples.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
    writer.appendKernels(batch.kernels);
    writer.appendAnnotations(batch.annotations);
    writer.appendCounterSamples(batch.samples);
    writer.appendStats(batch.stats);
    if (!batch.metadataPatch.empty())
        writer.appendMetadataPatch(batch.metadataPatch);
    m_memoryWritten += mem.size();
    const std::size_t written = batch.size();
    m_eventsWritten += written;
    return written;
}

} // namespace gpumem::tracer
