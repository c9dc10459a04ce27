#include "core/trace_builder.h"

#include "core/detail/flat_id_index.h"
#include "core/detail/trace_body.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/outside_memory.h"

#include <algorithm>
#include <numeric>

namespace gpumem {

namespace {
    struct ScopeKey {
        ScopeId parent;
        StringId name;
        ScopeKind kind;
        bool operator==(const ScopeKey&) const = default;
    };
    struct ScopeKeyHash {
        std::size_t operator()(const ScopeKey& k) const noexcept
        {
            return (std::size_t(k.parent) * 1000003u) ^ (std::size_t(k.name) << 3) ^ std::size_t(k.kind);
        }
    };
    std::uint64_t frameHash(StringId name, StringId file, std::int32_t line)
    {
        return detail::mix64((std::uint64_t(name) << 32 | file) ^ detail::mix64(static_cast<std::uint32_t>(line)));
    }
    std::uint64_t siteHash(std::span<const FrameId> frames)
    {
        std::uint64_t h = frames.size();
        for (FrameId f : frames)
            h = (h ^ f) * 0x9e3779b97f4a7c15ULL ^ (h >> 29);
        return detail::mix64(h);
    }

    // The tracer writes each CUDA device's size into the metadata, "cuda_devices": {"<ordinal>":
    // {"total_memory": BYTES, "name", …}} (tracer/activity_converter.h: its device rows are written
    // before CUPTI's DEVICE record arrives). A CUDA device row without a size takes it from there, so
    // a traced run's replay is on its own GPU's memory (the first GPU run, traces/gpu_check_h200.gmt,
    // was replayed on the simulator's default 80 GiB although the trace said 139.80 GiB). An entry
    // for a device the trace has no row of is left alone (the tracer lists every GPU of the machine).
    // What cannot be a GPU's size — not an object, not an integer, or outside [1 MiB, 1 PiB] — is
    // left out with the warning cuda_devices_ignored, one count per problem.
    void takeRecordedDeviceSizes(const nlohmann::json& metadata, std::vector<Device>& devices, ImportStats& stats)
    {
        constexpr const char* kCode = "cuda_devices_ignored";
        constexpr Bytes kSmallest = Bytes(1) << 20, kLargest = Bytes(1) << 50;
        if (!metadata.is_object() || stats.find(kCode))
            return;
        auto it = metadata.find("cuda_devices");
        if (it == metadata.end())
            return;
        std::vector<std::string> problems;
        auto shown = [](const nlohmann::json& v) { return quoteForMessage(v.dump(), 40); };
        if (!it->is_object())
            problems.push_back("metadata cuda_devices is " + shown(*it)
                + ", not an object of {\"<ordinal>\": {\"total_memory\": BYTES, …}}: ignored (docs/trace-format.md)");
        else
            for (Device& d : devices) {
                if (d.type != DeviceType::Cuda || d.totalMemory != 0)
                    continue;
                const std::string key = std::to_string(d.ordinal);
                auto e = it->find(key);
                if (e == it->end())
                    continue;
                const std::string where = "metadata cuda_devices[\"" + key + "\"]";
                if (!e->is_object()) {
                    problems.push_back(where + " is " + shown(*e) + ", not an object: the device's size is unknown");
                    continue;
                }
                auto total = e->find("total_memory");
                if (total == e->end())
                    continue;
                if (total->is_number_unsigned() && total->get<Bytes>() >= kSmallest && total->get<Bytes>() <= kLargest)
                    d.totalMemory = total->get<Bytes>();
                else
                    problems.push_back(where + ".total_memory is " + shown(*total)
                        + ", not a GPU's size (an integer from 1 MiB to 1 PiB): the device's size is unknown");
            }
        stats.addEach(kCode, Severity::Warning, problems);
    }
} // namespace

struct TraceBuilder::Impl {
    std::shared_ptr<detail::TraceBody> body = std::make_shared<detail::TraceBody>();
    // Sites and frames made by site() and frame() (not those appended raw), by their rows in `body`:
    // flat indexes, no allocation per lookup.
    detail::FlatIdIndex siteIndex;
    std::unordered_map<ScopeKey, ScopeId, ScopeKeyHash> scopeIndex;
    detail::FlatIdIndex frameIndex;
    std::map<std::pair<DeviceType, std::int32_t>, DeviceId> deviceIndex;
    std::map<std::pair<DeviceId, std::uint64_t>, StreamId> streamIndex;
};

TraceBuilder::TraceBuilder()
    : m_impl(std::make_unique<Impl>())
{
}
TraceBuilder::~TraceBuilder() = default;

nlohmann::json& TraceBuilder::metadata() { return m_impl->body->metadata; }
StringId TraceBuilder::intern(std::string_view text) { return m_impl->body->strings.intern(text); }
ImportStats& TraceBuilder::stats() { return m_impl->body->importStats; }

DeviceId TraceBuilder::addDevice(const Device& device)
{
    auto& devices = m_impl->body->devices;
    if (devices.size() >= kNoDevice)
        throw FormatError("too many devices (more than " + std::to_string(kNoDevice) + ")");
    auto id = static_cast<DeviceId>(devices.size());
    devices.push_back(device);
    m_impl->deviceIndex.try_emplace({ device.type, device.ordinal }, id);
    return id;
}

DeviceId TraceBuilder::device(DeviceType type, std::int32_t ordinal)
{
    if (auto it = m_impl->deviceIndex.find({ type, ordinal }); it != m_impl->deviceIndex.end())
        return it->second;
    return addDevice(Device { type, ordinal, 0, 0 });
}

StreamId TraceBuilder::addStream(const Stream& stream)
{
    auto& streams = m_impl->body->streams;
    auto id = static_cast<StreamId>(streams.size());
    streams.push_back(stream);
    m_impl->streamIndex.try_emplace({ stream.device, stream.handle }, id);
    return id;
}

StreamId TraceBuilder::stream(DeviceId device, std::uint64_t handle)
{
    if (auto it = m_impl->streamIndex.find({ device, handle }); it != m_impl->streamIndex.end())
        return it->second;
    return addStream(Stream { device, handle, 0 });
}

FrameId TraceBuilder::frame(std::string_view name, std::string_view file, std::int32_t line)
{
    // The file first: the former make_tuple(intern(name), intern(file), line) evaluated its arguments
    // right to left (g++), and string ids follow the order of interning, so .gmt files stay the same.
    const StringId fileId = intern(file);
    const StringId nameId = intern(name);
    const auto& frames = m_impl->body->frames;
    const std::uint64_t h = frameHash(nameId, fileId, line);
    const std::uint32_t none = ~0u;
    const std::uint32_t found = m_impl->frameIndex.find(h, none, [&](std::uint32_t id) {
        const Frame& f = frames[id];
        return f.name == nameId && f.file == fileId && f.line == line;
    });
    if (found != none)
        return static_cast<FrameId>(found);
    const FrameId id = appendFrame(Frame { nameId, fileId, line });
    m_impl->frameIndex.insert(h, id);
    return id;
}

SiteId TraceBuilder::site(std::span<const FrameId> frames)
{
    if (frames.empty())
        return 0;
    const auto& b = *m_impl->body;
    const std::uint64_t h = siteHash(frames);
    const std::uint32_t none = ~0u;
    const std::uint32_t found = m_impl->siteIndex.find(h, none, [&](std::uint32_t id) {
        const std::uint32_t begin = b.siteOffsets[id], end = b.siteOffsets[id + 1];
        return end - begin == frames.size() && std::equal(frames.begin(), frames.end(), b.siteFrames.begin() + begin);
    });
    if (found != none)
        return static_cast<SiteId>(found);
    const SiteId id = appendSite(frames);
    m_impl->siteIndex.insert(h, id);
    return id;
}

ScopeId TraceBuilder::scope(ScopeId parent, std::string_view name, ScopeKind kind)
{
    ScopeKey key { parent, intern(name), kind };
    auto [it, inserted] = m_impl->scopeIndex.try_emplace(key, 0);
    if (inserted)
        it->second = appendScope(Scope { parent, key.name, kind });
    return it->second;
}

FrameId TraceBuilder::appendFrame(const Frame& frame)
{
    auto& frames = m_impl->body->frames;
    frames.push_back(frame);
    return static_cast<FrameId>(frames.size() - 1);
}

SiteId TraceBuilder::appendSite(std::span<const FrameId> frames)
{
    auto& b = *m_impl->body;
    b.siteFrames.insert(b.siteFrames.end(), frames.begin(), frames.end());
    b.siteOffsets.push_back(static_cast<std::uint32_t>(b.siteFrames.size()));
    return static_cast<SiteId>(b.siteOffsets.size() - 2);
}

PoolId TraceBuilder::appendPool(const MemoryPool& pool)
{
    auto& pools = m_impl->body->pools;
    pools.push_back(pool);
    return static_cast<PoolId>(pools.size() - 1);
}

PoolId TraceBuilder::pool(PoolKind kind, std::int64_t idFirst, std::int64_t idSecond)
{
    if (idFirst == 0 && idSecond == 0)
        return 0;
    const auto& pools = m_impl->body->pools;
    for (std::size_t i = 1; i < pools.size(); ++i) // a handful of pools: a scan is enough
        if (pools[i].kind == kind && pools[i].idFirst == idFirst && pools[i].idSecond == idSecond)
            return static_cast<PoolId>(i);
    return appendPool(MemoryPool { kind, idFirst, idSecond, false });
}

ScopeId TraceBuilder::appendScope(const Scope& scope)
{
    auto& scopes = m_impl->body->scopes;
    scopes.push_back(scope);
    return static_cast<ScopeId>(scopes.size() - 1);
}

void TraceBuilder::add(const MemoryEvent& event)
{
    auto& m = m_impl->body->memory;
    if (event.sequence == MemoryEvent::kAutoSequence) {
        MemoryEvent e = event;
        e.sequence = m.count();
        m.push(e);
    } else {
        m.push(event);
    }
}

std::uint32_t TraceBuilder::addCounterSeries(const CounterSeries& series)
{
    auto& s = m_impl->body->counterSeries;
    s.push_back(series);
    return static_cast<std::uint32_t>(s.size() - 1);
}

void TraceBuilder::alloc(TimeNs time, Address address, Bytes size, Bytes requested)
{
    if (m_impl->body->devices.empty())
        device(DeviceType::Cuda, 0);
    if (m_impl->body->streams.empty())
        stream(0, 0);
    MemoryEvent e;
    e.time = time;
    e.kind = EventKind::Alloc;
    e.address = address;
    e.size = size;
    e.requestedSize = requested;
    add(e);
}

void TraceBuilder::free(TimeNs time, Address address, Bytes size)
{
    if (m_impl->body->devices.empty())
        device(DeviceType::Cuda, 0);
    if (m_impl->body->streams.empty())
        stream(0, 0);
    MemoryEvent e;
    e.time = time;
    e.kind = EventKind::Free;
    e.address = address;
    e.size = size;
    add(e);
}

MemoryEventColumns& TraceBuilder::memoryColumns() { return m_impl->body->memory; }
std::vector<Kernel>& TraceBuilder::kernels() { return m_impl->body->kernels; }
std::vector<Annotation>& TraceBuilder::annotations() { return m_impl->body->annotations; }
std::vector<CounterSample>& TraceBuilder::counterSamples() { return m_impl->body->counterSamples; }
std::size_t TraceBuilder::memoryEventCount() const { return m_impl->body->memory.count(); }
std::size_t TraceBuilder::deviceCount() const { return m_impl->body->devices.size(); }
std::size_t TraceBuilder::streamCount() const { return m_impl->body->streams.size(); }
std::size_t TraceBuilder::frameCount() const { return m_impl->body->frames.size(); }
std::size_t TraceBuilder::siteCount() const { return m_impl->body->siteOffsets.size() - 1; }
std::size_t TraceBuilder::scopeCount() const { return m_impl->body->scopes.size(); }
std::size_t TraceBuilder::poolCount() const { return m_impl->body->pools.size(); }

namespace {
    template <typename T> void permute(std::vector<T>& v, const std::vector<std::uint32_t>& order)
    {
        std::vector<T> out;
        out.reserve(v.size());
        for (auto i : order)
            out.push_back(v[i]);
        v.swap(out);
    }

    void sortMemory(MemoryEventColumns& m, ImportStats& stats)
    {
        const std::size_t n = m.count();
        bool sorted = true;
        for (std::size_t i = 1; i < n && sorted; ++i)
            sorted = m.time[i - 1] < m.time[i] || (m.time[i - 1] == m.time[i] && m.sequence[i - 1] <= m.sequence[i]);
        if (sorted)
            return;
        std::vector<std::uint32_t> order(n);
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
            return m.time[a] < m.time[b] || (m.time[a] == m.time[b] && m.sequence[a] < m.sequence[b]);
        });
        std::size_t moved = 0;
        for (std::size_t i = 0; i < n; ++i)
            moved += order[i] != i;
        stats.add("unsorted_input", Severity::Info,
            std::to_string(moved) + " memory events were out of (time, sequence) order in the source and were sorted; first moved event: index "
                + std::to_string(std::find_if(order.begin(), order.end(), [i = std::uint32_t(0)](std::uint32_t o) mutable { return o != i++; }) - order.begin()),
            moved);
        permute(m.time, order);
        permute(m.kind, order);
        permute(m.device, order);
        permute(m.stream, order);
        permute(m.address, order);
        permute(m.size, order);
        permute(m.requestedSize, order);
        permute(m.scope, order);
        permute(m.site, order);
        permute(m.thread, order);
        permute(m.sequence, order);
        permute(m.category, order);
        permute(m.pool, order);
    }
} // namespace

Trace TraceBuilder::build()
{
    auto& b = *m_impl->body;
    auto& m = b.memory;
    const std::size_t n = m.count();
    if (n > std::numeric_limits<std::uint32_t>::max())
        throw FormatError("trace has more than 4,294,967,295 memory events; split it");
    // Checked column by column (a max scan vectorises; a per-event loop of six checks cost 8% of a
    // .gmt read); the first bad event is searched only when a column has one.
    auto check = [&](const char* field, const auto& column, std::size_t limit) {
        if (n == 0)
            return;
        auto max = column[0];
        for (auto v : column)
            max = std::max(max, v);
        if (static_cast<std::size_t>(max) < limit)
            return;
        auto i = static_cast<std::size_t>(
            std::find_if(column.begin(), column.end(), [&](auto v) { return static_cast<std::size_t>(v) >= limit; }) - column.begin());
        throw FormatError("memory event " + std::to_string(i) + ": " + field + " " + std::to_string(static_cast<std::uint64_t>(column[i]))
            + " refers to no entry (the trace has " + std::to_string(limit) + ")");
    };
    // Readers that fill columns directly and know no pools (a .gmt 1.0 file) leave the pool column short.
    if (m.pool.size() != n)
        m.pool.resize(n, 0);
    check("device", m.device, b.devices.size());
    check("stream", m.stream, b.streams.size());
    check("scope", m.scope, b.scopes.size());
    check("site", m.site, b.siteOffsets.size() - 1);
    check("kind", m.kind, kEventKindCount);
    check("category", m.category, kCategoryCount);
    check("pool", m.pool, b.pools.size());
    sortMemory(m, b.importStats);
    checkOutsideMemoryMetadata(b.metadata, b.devices, b.importStats);
    takeRecordedDeviceSizes(b.metadata, b.devices, b.importStats);
    std::stable_sort(b.kernels.begin(), b.kernels.end(),
        [](const Kernel& x, const Kernel& y) { return x.start < y.start; });
    std::stable_sort(b.annotations.begin(), b.annotations.end(),
        [](const Annotation& x, const Annotation& y) { return x.start < y.start; });
    std::stable_sort(b.counterSamples.begin(), b.counterSamples.end(),
        [](const CounterSample& x, const CounterSample& y) { return x.time < y.time; });
    Trace trace(std::move(m_impl->body));
    m_impl = std::make_unique<Impl>();
    return trace;
}

} // namespace gpumem
