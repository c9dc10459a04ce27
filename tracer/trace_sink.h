#pragma once
// TraceSink: the tracer's in-memory staging area between the threads that produce events (CUPTI's
// buffer-completion thread, CUDA API callbacks and NVTX handlers on application threads) and the
// one background thread that writes .gmt chunks. It owns the growing tables (strings, devices,
// streams, sites, scopes, counter series) and the events not yet written. Producers call update()
// under the sink's mutex, which is only ever held for in-memory work; drainTo() copies what is new
// under the mutex and does the file I/O outside it, so no producer ever waits on a write.
// Thread-safe. The pending backlog is bounded: events beyond the bound are dropped and counted
// ("tracer_backlog_full"), never blocking the program.
#include "core/gmt_format.h"
#include "core/import_stats.h"
#include "core/string_table.h"
#include "core/trace.h"

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace gpumem::tracer {

// Tables that only grow; ids are final once handed out. Accessed only under the sink's mutex.
class SinkTables {
public:
    SinkTables();
    StringId intern(std::string_view text) { return m_strings.intern(text); }
    // The device with this type, ordinal and name, added if new (devices are told apart by all three:
    // the tracer keeps pinned host and managed memory apart from device memory this way).
    DeviceId device(DeviceType type, std::int32_t ordinal, std::string_view name);
    // The stream with this device and source handle, added if new.
    StreamId stream(DeviceId device, std::uint64_t handle);
    // A one-frame site (function, file), added if new; site 0 when both are empty.
    SiteId site(std::string_view function, std::string_view file);
    // The site of a requesting shared object or program at `path` (CUPTI's allocation source, the
    // caller of a cuMemMap): function = the file's name, file = the path; site 0 for an empty path.
    SiteId librarySite(std::string_view path)
    {
        const auto slash = path.rfind('/');
        return site(slash == std::string_view::npos ? path : path.substr(slash + 1), path);
    }
    // A scope by (parent, name, kind), added if new.
    ScopeId scope(ScopeId parent, std::string_view name, ScopeKind kind);
    // A counter series by (name, device), added if new; returns its index.
    std::uint32_t counterSeries(std::string_view name, DeviceId device);

    const StringTable& strings() const { return m_strings; }
    const std::vector<Device>& devices() const { return m_devices; }
    const std::vector<Stream>& streams() const { return m_streams; }
    const std::vector<Frame>& frames() const { return m_frames; } // [0] is the implicit empty frame
    const std::vector<Scope>& scopes() const { return m_scopes; } // [0] is the implicit root
    const std::vector<CounterSeries>& series() const { return m_series; }
    std::size_t siteCount() const { return m_siteFrame.size(); } // site i has the one frame m_siteFrame[i]
    FrameId siteFrame(SiteId site) const { return m_siteFrame.at(site); }

private:
    StringTable m_strings;
    std::vector<Device> m_devices;
    std::map<std::tuple<std::uint8_t, std::int32_t, std::string>, DeviceId> m_deviceIndex;
    std::vector<Stream> m_streams;
    std::map<std::pair<DeviceId, std::uint64_t>, StreamId> m_streamIndex;
    std::vector<Frame> m_frames;
    std::vector<FrameId> m_siteFrame;
    std::map<std::pair<StringId, StringId>, SiteId> m_siteIndex;
    std::vector<Scope> m_scopes;
    std::map<std::tuple<ScopeId, StringId, std::uint8_t>, ScopeId> m_scopeIndex;
    std::vector<CounterSeries> m_series;
    std::map<std::pair<StringId, DeviceId>, std::uint32_t> m_seriesIndex;
};

// Events not yet written. Accessed only under the sink's mutex.
struct PendingEvents {
    std::vector<MemoryEvent> memory;
    std::vector<Kernel> kernels;
    std::vector<Annotation> annotations;
    std::vector<CounterSample> samples;
    ImportStats stats; // counts since the last drain (a .gmt reader adds up every STAT chunk)
    nlohmann::json metadataPatch = nlohmann::json::object(); // merged into the file's metadata at the next drain
    std::size_t limit = 0;

    std::size_t size() const { return memory.size() + kernels.size() + annotations.size() + samples.size(); }
    // True if one more event fits under the backlog limit; otherwise counts the drop and returns false.
    bool admit();
};

class TraceSink {
public:
    // `maxPendingEvents`: the backlog bound (events of all kinds waiting for the writer).
    explicit TraceSink(std::size_t maxPendingEvents = std::size_t(1) << 22);

    // Runs f(SinkTables&, PendingEvents&) under the mutex and returns its result. f must not block.
    template <typename F> decltype(auto) update(F&& f)
    {
        std::lock_guard lock(m_mutex);
        return f(m_tables, m_pending);
    }

    // Writes every table row and event added since the last drain to `writer` as whole chunks:
    // tables first (so events only refer to rows already in the file), memory events sorted by
    // (time, sequence), then kernels, annotations, counter samples and the anomaly counts.
    // Called by one thread at a time (the writer thread). Throws what GmtWriter throws.
    // Returns the number of events written.
    std::size_t drainTo(GmtWriter& writer);

    // Totals written so far by drainTo (for the trailer metadata and tests).
    std::uint64_t memoryEventsWritten() const { return m_memoryWritten; }
    std::uint64_t eventsWritten() const { return m_eventsWritten; }

private:
    std::mutex m_mutex;
    SinkTables m_tables;
    PendingEvents m_pending;
    // Writer-side state (drainTo only).
    StringTable m_writtenStrings; // mirror of the strings already written (ids match m_tables)
    std::size_t m_writtenDevices = 0, m_writtenStreams = 0, m_writtenFrames = 1, m_writtenSites = 1, m_writtenScopes = 1,
                m_writtenSeries = 0;
    std::uint64_t m_memoryWritten = 0, m_eventsWritten = 0;
};

} // namespace gpumem::tracer
