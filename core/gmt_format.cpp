#include "core/gmt_format.h"

#include "core/detail/trace_body.h"
#include "core/detail/varint.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace gpumem {

using detail::Cursor;
using detail::putU16;
using detail::putU32;
using detail::putVarint;
using detail::unzigzag;
using detail::varintLength;
using detail::zigzag;

namespace {
    constexpr std::uint32_t fourcc(const char (&s)[5])
    {
        return std::uint32_t(std::uint8_t(s[0])) | std::uint32_t(std::uint8_t(s[1])) << 8
            | std::uint32_t(std::uint8_t(s[2])) << 16 | std::uint32_t(std::uint8_t(s[3])) << 24;
    }
    constexpr std::uint32_t kStrings = fourcc("STRS");
    constexpr std::uint32_t kDevices = fourcc("DEVS");
    constexpr std::uint32_t kStreams = fourcc("STRM");
    constexpr std::uint32_t kFrames = fourcc("FRMS");
    constexpr std::uint32_t kSites = fourcc("SITE");
    constexpr std::uint32_t kScopes = fourcc("SCOP");
    constexpr std::uint32_t kSeries = fourcc("CSER");
    constexpr std::uint32_t kMemory = fourcc("MEMV");
    constexpr std::uint32_t kKernels = fourcc("KERN");
    constexpr std::uint32_t kAnnotations = fourcc("ANNO");
    constexpr std::uint32_t kSamples = fourcc("CSMP");
    constexpr std::uint32_t kStats = fourcc("STAT");
    constexpr std::uint32_t kMetaPatch = fourcc("META");
    constexpr std::uint32_t kEnd = fourcc("END ");
    constexpr std::size_t kChunkHeaderSize = 16;

    // Column encodings (docs/trace-format.md §Memory events).
    enum ColumnEncoding : std::uint8_t { kConst = 0, kRaw = 1, kDelta = 2, kLinear = 3, kDiffSize = 4 };

    std::uint32_t crc(std::string_view bytes)
    {
        uLong c = crc32(0L, Z_NULL, 0);
        const char* p = bytes.data();
        std::size_t n = bytes.size();
        while (n > 0) {
            auto step = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
            c = crc32(c, reinterpret_cast<const Bytef*>(p), step);
            p += step;
            n -= step;
        }
        return static_cast<std::uint32_t>(c);
    }

    // Encodes one column of n values given by get(i) (as uint64 bit patterns), choosing the smallest encoding.
    template <typename Get> void encodeColumn(std::string& out, std::size_t n, Get get, const Bytes* sizes = nullptr)
    {
        std::string data;
        if (n == 0) {
            out.push_back(char(kConst));
            putVarint(out, 1);
            out.push_back(0);
            return;
        }
        bool constant = true, linear = n >= 2;
        std::uint64_t first = get(0);
        std::uint64_t step = n >= 2 ? get(1) - first : 0;
        std::size_t rawLen = 0, deltaLen = 0, diffLen = 0;
        std::uint64_t prev = 0;
        for (std::size_t i = 0; i < n; ++i) {
            std::uint64_t v = get(i);
            constant &= v == first;
            if (i >= 1)
                linear &= v - prev == step;
            rawLen += varintLength(v);
            deltaLen += varintLength(zigzag(static_cast<std::int64_t>(v - prev)));
            if (sizes)
                diffLen += varintLength(zigzag(static_cast<std::int64_t>(v - sizes[i])));
            prev = v;
        }
        std::uint8_t enc;
        if (constant) {
            enc = kConst;
            putVarint(data, first);
        } else if (linear) {
            enc = kLinear;
            putVarint(data, first);
            putVarint(data, zigzag(static_cast<std::int64_t>(step)));
        } else if (sizes && diffLen < rawLen && diffLen < deltaLen) {
            enc = kDiffSize;
            data.reserve(diffLen);
            for (std::size_t i = 0; i < n; ++i)
                putVarint(data, zigzag(static_cast<std::int64_t>(get(i) - sizes[i])));
        } else if (rawLen <= deltaLen) {
            enc = kRaw;
            data.reserve(rawLen);
            for (std::size_t i = 0; i < n; ++i)
                putVarint(data, get(i));
        } else {
            enc = kDelta;
            data.reserve(deltaLen);
            prev = 0;
            for (std::size_t i = 0; i < n; ++i) {
                std::uint64_t v = get(i);
                putVarint(data, zigzag(static_cast<std::int64_t>(v - prev)));
                prev = v;
            }
        }
        out.push_back(static_cast<char>(enc));
        putVarint(out, data.size());
        out += data;
    }

    // Decodes one column into `out` (appending n values); `check` rejects out-of-range values.
    // Returns false on malformed data.
    template <typename T, typename Check>
    bool decodeColumn(Cursor& c, std::size_t n, std::vector<T>& out, Check check, const Bytes* sizes = nullptr)
    {
        std::uint8_t enc = c.byte();
        std::uint64_t len = c.varint();
        std::string_view data = c.bytes(len);
        if (c.failed())
            return false;
        Cursor d(data.data(), data.data() + data.size());
        auto put = [&](std::uint64_t v) {
            if (!check(v))
                return false;
            out.push_back(static_cast<T>(v));
            return true;
        };
        switch (enc) {
        case kConst: {
            std::uint64_t v = d.varint();
            if (d.failed() || !check(v))
                return false;
            out.insert(out.end(), n, static_cast<T>(v));
            break;
        }
        case kLinear: {
            std::uint64_t v = d.varint();
            auto step = static_cast<std::uint64_t>(unzigzag(d.varint()));
            for (std::size_t i = 0; i < n; ++i, v += step)
                if (!put(v))
                    return false;
            break;
        }
        case kRaw:
            for (std::size_t i = 0; i < n; ++i)
                if (!put(d.varint()))
                    return false;
            break;
        case kDelta: {
            std::uint64_t v = 0;
            for (std::size_t i = 0; i < n; ++i) {
                v += static_cast<std::uint64_t>(unzigzag(d.varint()));
                if (!put(v))
                    return false;
            }
            break;
        }
        case kDiffSize:
            if (!sizes)
                return false;
            for (std::size_t i = 0; i < n; ++i)
                if (!put(sizes[i] + static_cast<std::uint64_t>(unzigzag(d.varint()))))
                    return false;
            break;
        default:
            return false;
        }
        return !d.failed() && d.atEnd();
    }

    std::string jsonText(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
} // namespace

// ---------------------------------------------------------------------------------------------- writer

GmtWriter::GmtWriter(const std::string& path, const nlohmann::json& metadata)
    : m_path(path)
{
    m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0)
        throw IoError(path + ": cannot create: " + std::strerror(errno));
    std::string header(kGmtMagic, sizeof kGmtMagic);
    putU16(header, kGmtMajorVersion);
    putU16(header, kGmtMinorVersion);
    std::string meta = jsonText(metadata.is_object() ? metadata : nlohmann::json::object());
    putU32(header, static_cast<std::uint32_t>(meta.size()));
    header += meta;
    putU32(header, crc(header));
    writeChunk(0, 0, header); // type 0: raw bytes, see writeChunk
}

GmtWriter::~GmtWriter()
{
    if (m_fd >= 0) {
        try {
            finish();
        } catch (...) {
            ::close(m_fd);
        }
    }
}

void GmtWriter::writeChunk(std::uint32_t type, std::uint32_t records, const std::string& payload)
{
    if (m_fd < 0)
        throw Error(m_path + ": write after finish()");
    std::string& buf = m_scratch;
    buf.clear();
    if (type != 0) {
        if (payload.size() > 0xffffffffu)
            throw Error(m_path + ": chunk larger than 4 GiB; write fewer records per chunk");
        putU32(buf, type);
        putU32(buf, static_cast<std::uint32_t>(payload.size()));
        putU32(buf, records);
        putU32(buf, crc(payload));
    }
    buf += payload;
    const char* p = buf.data();
    std::size_t left = buf.size();
    while (left > 0) {
        ssize_t n = ::write(m_fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw IoError(m_path + ": cannot write: " + std::strerror(errno));
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    m_bytesWritten += buf.size();
}

void GmtWriter::appendStrings(const StringTable& table, StringId first, std::size_t count)
{
    if (first != m_nextString)
        throw Error("GmtWriter::appendStrings: strings must be appended in id order (next id " + std::to_string(m_nextString)
            + ", got " + std::to_string(first) + ")");
    if (count == 0)
        return;
    std::string p;
    for (std::size_t i = 0; i < count; ++i) {
        std::string_view s = table.at(static_cast<StringId>(first + i));
        putVarint(p, s.size());
        p += s;
    }
    writeChunk(kStrings, static_cast<std::uint32_t>(count), p);
    m_nextString += static_cast<StringId>(count);
}

void GmtWriter::appendDevices(std::span<const Device> devices)
{
    if (devices.empty())
        return;
    std::string p;
    for (const auto& d : devices) {
        p.push_back(static_cast<char>(d.type));
        putVarint(p, zigzag(d.ordinal));
        putVarint(p, d.name);
        putVarint(p, d.totalMemory);
    }
    writeChunk(kDevices, static_cast<std::uint32_t>(devices.size()), p);
}

void GmtWriter::appendStreams(std::span<const Stream> streams)
{
    if (streams.empty())
        return;
    std::string p;
    for (const auto& s : streams) {
        putVarint(p, s.device);
        putVarint(p, s.handle);
        putVarint(p, s.name);
    }
    writeChunk(kStreams, static_cast<std::uint32_t>(streams.size()), p);
}

void GmtWriter::appendFrames(std::span<const Frame> frames)
{
    if (frames.empty())
        return;
    std::string p;
    for (const auto& f : frames) {
        putVarint(p, f.name);
        putVarint(p, f.file);
        putVarint(p, zigzag(f.line));
    }
    writeChunk(kFrames, static_cast<std::uint32_t>(frames.size()), p);
}

void GmtWriter::appendSites(const Trace& trace, SiteId first, std::size_t count)
{
    if (count == 0)
        return;
    std::string p;
    for (std::size_t i = 0; i < count; ++i) {
        auto frames = trace.siteFrames(static_cast<SiteId>(first + i));
        putVarint(p, frames.size());
        for (auto f : frames)
            putVarint(p, f);
    }
    writeChunk(kSites, static_cast<std::uint32_t>(count), p);
}

void GmtWriter::appendSite(std::span<const FrameId> frames)
{
    std::string p;
    putVarint(p, frames.size());
    for (auto f : frames)
        putVarint(p, f);
    writeChunk(kSites, 1, p);
}

void GmtWriter::appendScopes(std::span<const Scope> scopes)
{
    if (scopes.empty())
        return;
    std::string p;
    for (const auto& s : scopes) {
        putVarint(p, s.parent);
        putVarint(p, s.name);
        p.push_back(static_cast<char>(s.kind));
    }
    writeChunk(kScopes, static_cast<std::uint32_t>(scopes.size()), p);
}

void GmtWriter::appendCounterSeries(std::span<const CounterSeries> series)
{
    if (series.empty())
        return;
    std::string p;
    for (const auto& s : series) {
        putVarint(p, s.name);
        putVarint(p, s.device);
    }
    writeChunk(kSeries, static_cast<std::uint32_t>(series.size()), p);
}

void GmtWriter::appendMemoryEvents(const MemoryEventColumns& m, std::size_t begin, std::size_t end)
{
    if (end <= begin)
        return;
    const std::size_t n = end - begin;
    std::string p;
    p.reserve(n * 20);
    auto col = [&](const auto& v) { encodeColumn(p, n, [&](std::size_t i) { return static_cast<std::uint64_t>(v[begin + i]); }); };
    encodeColumn(p, n, [&](std::size_t i) { return static_cast<std::uint64_t>(m.time[begin + i]); });
    col(m.kind);
    col(m.device);
    col(m.stream);
    col(m.address);
    col(m.size);
    encodeColumn(p, n, [&](std::size_t i) { return m.requestedSize[begin + i]; }, m.size.data() + begin);
    col(m.scope);
    col(m.site);
    col(m.thread);
    col(m.sequence);
    col(m.category);
    writeChunk(kMemory, static_cast<std::uint32_t>(n), p);
    m_memoryEvents += n;
}

void GmtWriter::appendKernels(std::span<const Kernel> kernels)
{
    if (kernels.empty())
        return;
    std::string p;
    TimeNs prev = 0;
    for (const auto& k : kernels) {
        putVarint(p, zigzag(k.start - prev));
        putVarint(p, zigzag(k.end - k.start));
        putVarint(p, k.device);
        putVarint(p, k.stream);
        putVarint(p, k.name);
        putVarint(p, k.correlation);
        prev = k.start;
    }
    writeChunk(kKernels, static_cast<std::uint32_t>(kernels.size()), p);
}

void GmtWriter::appendAnnotations(std::span<const Annotation> annotations)
{
    if (annotations.empty())
        return;
    std::string p;
    TimeNs prev = 0;
    for (const auto& a : annotations) {
        putVarint(p, zigzag(a.start - prev));
        putVarint(p, zigzag(a.end - a.start));
        putVarint(p, a.name);
        p.push_back(static_cast<char>(a.kind));
        putVarint(p, a.device);
        putVarint(p, a.thread);
        prev = a.start;
    }
    writeChunk(kAnnotations, static_cast<std::uint32_t>(annotations.size()), p);
}

void GmtWriter::appendCounterSamples(std::span<const CounterSample> samples)
{
    if (samples.empty())
        return;
    std::string p;
    TimeNs prev = 0;
    for (const auto& s : samples) {
        putVarint(p, zigzag(s.time - prev));
        putVarint(p, s.series);
        putVarint(p, zigzag(s.value));
        prev = s.time;
    }
    writeChunk(kSamples, static_cast<std::uint32_t>(samples.size()), p);
}

void GmtWriter::appendStats(const ImportStats& stats)
{
    if (stats.empty())
        return;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& a : stats.anomalies())
        arr.push_back({ { "code", a.code }, { "severity", toString(a.severity) }, { "count", a.count }, { "detail", a.detail } });
    writeChunk(kStats, static_cast<std::uint32_t>(arr.size()), jsonText(arr));
}

void GmtWriter::appendMetadataPatch(const nlohmann::json& patch) { writeChunk(kMetaPatch, 1, jsonText(patch)); }

void GmtWriter::finish()
{
    if (m_fd < 0)
        return;
    std::string p;
    putVarint(p, m_memoryEvents);
    writeChunk(kEnd, 0, p);
    int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0)
        throw IoError(m_path + ": cannot close: " + std::strerror(errno));
}

void writeGmt(const Trace& trace, const std::string& path, std::size_t eventsPerChunk)
{
    GmtWriter w(path, trace.metadata());
    w.appendStrings(trace.strings(), 1, trace.strings().size() - 1);
    w.appendDevices(trace.devices());
    w.appendStreams(trace.streams());
    w.appendFrames(trace.frames().subspan(1));
    w.appendSites(trace, 1, trace.siteCount() - 1);
    w.appendScopes(trace.scopes().subspan(1));
    w.appendCounterSeries(trace.counterSeries());
    const auto& m = trace.memory();
    eventsPerChunk = std::max<std::size_t>(eventsPerChunk, 1);
    for (std::size_t i = 0; i < m.count(); i += eventsPerChunk)
        w.appendMemoryEvents(m, i, std::min(m.count(), i + eventsPerChunk));
    auto chunked = [&](auto span, auto append) {
        for (std::size_t i = 0; i < span.size(); i += eventsPerChunk)
            append(span.subspan(i, std::min(eventsPerChunk, span.size() - i)));
    };
    chunked(trace.kernels(), [&](auto s) { w.appendKernels(s); });
    chunked(trace.annotations(), [&](auto s) { w.appendAnnotations(s); });
    chunked(trace.counterSamples(), [&](auto s) { w.appendCounterSamples(s); });
    w.appendStats(trace.importStats());
    w.finish();
}

// ---------------------------------------------------------------------------------------------- reader

namespace {
    struct ChunkReader {
        TraceBuilder& b;
        std::size_t strings = 1;

        bool str(std::uint64_t id) const { return id < b_strings(); }
        std::size_t b_strings() const { return strings; }

        bool decode(std::uint32_t type, std::uint32_t records, std::string_view payload, nlohmann::json& metadata)
        {
            Cursor c(payload.data(), payload.data() + payload.size());
            switch (type) {
            case kStrings:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::string_view s = c.bytes(c.varint());
                    if (c.failed())
                        return false;
                    if (b.intern(s) != strings)
                        return false; // a duplicate string: ids would shift
                    ++strings;
                }
                break;
            case kDevices:
                for (std::uint32_t i = 0; i < records; ++i) {
                    Device d;
                    std::uint8_t type8 = c.byte();
                    d.ordinal = static_cast<std::int32_t>(unzigzag(c.varint()));
                    std::uint64_t name = c.varint();
                    d.totalMemory = c.varint();
                    if (c.failed() || type8 > static_cast<std::uint8_t>(DeviceType::Other) || !str(name)
                        || b.deviceCount() >= kNoDevice)
                        return false;
                    d.type = static_cast<DeviceType>(type8);
                    d.name = static_cast<StringId>(name);
                    b.addDevice(d);
                }
                break;
            case kStreams:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint64_t dev = c.varint(), handle = c.varint(), name = c.varint();
                    if (c.failed() || dev >= b.deviceCount() || !str(name))
                        return false;
                    b.addStream(Stream { static_cast<DeviceId>(dev), handle, static_cast<StringId>(name) });
                }
                break;
            case kFrames:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint64_t name = c.varint(), file = c.varint();
                    std::int64_t line = unzigzag(c.varint());
                    if (c.failed() || !str(name) || !str(file) || line < INT32_MIN || line > INT32_MAX)
                        return false;
                    b.appendFrame(Frame { static_cast<StringId>(name), static_cast<StringId>(file), static_cast<std::int32_t>(line) });
                }
                break;
            case kSites: {
                std::vector<FrameId> frames;
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint64_t n = c.varint();
                    if (c.failed() || n > payload.size())
                        return false;
                    frames.clear();
                    for (std::uint64_t k = 0; k < n; ++k) {
                        std::uint64_t f = c.varint();
                        if (f >= b.frameCount())
                            return false;
                        frames.push_back(static_cast<FrameId>(f));
                    }
                    if (c.failed())
                        return false;
                    b.appendSite(frames);
                }
                break;
            }
            case kScopes:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint64_t parent = c.varint(), name = c.varint();
                    std::uint8_t kind = c.byte();
                    if (c.failed() || parent >= b.scopeCount() || !str(name) || kind > static_cast<std::uint8_t>(ScopeKind::Function))
                        return false;
                    b.appendScope(Scope { static_cast<ScopeId>(parent), static_cast<StringId>(name), static_cast<ScopeKind>(kind) });
                }
                break;
            case kSeries:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint64_t name = c.varint(), dev = c.varint();
                    if (c.failed() || !str(name) || (dev >= b.deviceCount() && dev != kNoDevice))
                        return false;
                    m_series++;
                    b.addCounterSeries(CounterSeries { static_cast<StringId>(name), static_cast<DeviceId>(dev) });
                }
                break;
            case kMemory:
                return decodeMemory(c, records);
            case kKernels: {
                TimeNs prev = 0;
                for (std::uint32_t i = 0; i < records; ++i) {
                    Kernel k;
                    k.start = prev + unzigzag(c.varint());
                    k.end = k.start + unzigzag(c.varint());
                    std::uint64_t dev = c.varint(), stream = c.varint(), name = c.varint();
                    k.correlation = c.varint();
                    if (c.failed() || dev >= b.deviceCount() || stream >= b.streamCount() || !str(name))
                        return false;
                    k.device = static_cast<DeviceId>(dev);
                    k.stream = static_cast<StreamId>(stream);
                    k.name = static_cast<StringId>(name);
                    b.add(k);
                    prev = k.start;
                }
                break;
            }
            case kAnnotations: {
                TimeNs prev = 0;
                for (std::uint32_t i = 0; i < records; ++i) {
                    Annotation a;
                    a.start = prev + unzigzag(c.varint());
                    a.end = a.start + unzigzag(c.varint());
                    std::uint64_t name = c.varint();
                    std::uint8_t kind = c.byte();
                    std::uint64_t dev = c.varint();
                    a.thread = c.varint();
                    if (c.failed() || !str(name) || kind > static_cast<std::uint8_t>(AnnotationKind::Instant)
                        || (dev >= b.deviceCount() && dev != kNoDevice))
                        return false;
                    a.name = static_cast<StringId>(name);
                    a.kind = static_cast<AnnotationKind>(kind);
                    a.device = static_cast<DeviceId>(dev);
                    b.add(a);
                    prev = a.start;
                }
                break;
            }
            case kSamples: {
                TimeNs prev = 0;
                for (std::uint32_t i = 0; i < records; ++i) {
                    CounterSample s;
                    s.time = prev + unzigzag(c.varint());
                    std::uint64_t series = c.varint();
                    s.value = unzigzag(c.varint());
                    if (c.failed() || series >= m_series)
                        return false;
                    s.series = static_cast<std::uint32_t>(series);
                    b.add(s);
                    prev = s.time;
                }
                break;
            }
            case kStats: {
                auto arr = nlohmann::json::parse(payload, nullptr, false);
                if (!arr.is_array())
                    return false;
                for (const auto& a : arr) {
                    if (!a.is_object() || !a.contains("code") || !a["code"].is_string() || !a.contains("count")
                        || !a["count"].is_number_unsigned())
                        return false;
                    auto sev = severityFromString(a.value("severity", std::string("info")));
                    b.stats().add(a["code"].get<std::string>(), sev.value_or(Severity::Warning), a.value("detail", std::string()),
                        a["count"].get<std::uint64_t>());
                }
                return true;
            }
            case kMetaPatch: {
                auto patch = nlohmann::json::parse(payload, nullptr, false);
                if (patch.is_discarded())
                    return false;
                metadata.merge_patch(patch);
                return true;
            }
            default:
                return true; // unknown chunk types are skipped (added by a newer minor version)
            }
            return !c.failed() && c.atEnd();
        }

        bool decodeMemory(Cursor& c, std::uint32_t n)
        {
            auto& m = b.memoryColumns();
            const std::size_t before = m.count();
            const std::size_t devices = b.deviceCount(), streams = b.streamCount(), scopes = b.scopeCount(),
                              sites = b.siteCount();
            auto any = [](std::uint64_t) { return true; };
            bool ok = decodeColumn(c, n, m.time, any)
                && decodeColumn(c, n, m.kind, [](std::uint64_t v) { return v < kEventKindCount; })
                && decodeColumn(c, n, m.device, [&](std::uint64_t v) { return v < devices; })
                && decodeColumn(c, n, m.stream, [&](std::uint64_t v) { return v < streams; })
                && decodeColumn(c, n, m.address, any) && decodeColumn(c, n, m.size, any)
                && decodeColumn(c, n, m.requestedSize, any, m.size.data() + before)
                && decodeColumn(c, n, m.scope, [&](std::uint64_t v) { return v < scopes; })
                && decodeColumn(c, n, m.site, [&](std::uint64_t v) { return v < sites; })
                && decodeColumn(c, n, m.thread, any) && decodeColumn(c, n, m.sequence, any)
                && decodeColumn(c, n, m.category, [](std::uint64_t v) { return v < kCategoryCount; }) && c.atEnd();
            if (!ok) {
                // Drop the partly decoded chunk so every column keeps the same length.
                auto cut = [&](auto& v) { v.resize(std::min(v.size(), before)); };
                cut(m.time), cut(m.kind), cut(m.device), cut(m.stream), cut(m.address), cut(m.size);
                cut(m.requestedSize), cut(m.scope), cut(m.site), cut(m.thread), cut(m.sequence), cut(m.category);
            }
            return ok;
        }
        std::size_t m_series = 0;
    };

    std::string chunkName(std::uint32_t type)
    {
        std::string s;
        for (int i = 0; i < 4; ++i) {
            char ch = static_cast<char>((type >> (8 * i)) & 0xff);
            s += (ch >= 32 && ch < 127) ? ch : '?';
        }
        return s;
    }
} // namespace

Trace readGmt(const std::string& path, const LoadOptions& options)
{
    MappedFile file(path);
    std::string_view bytes = file.bytes();
    if (bytes.empty())
        throw FormatError(path + ": empty file (0 bytes); a .gmt file starts with a header — was the writer killed before it started?");
    if (bytes.size() < sizeof kGmtMagic || std::memcmp(bytes.data(), kGmtMagic, sizeof kGmtMagic) != 0)
        throw FormatError(path + ": not a .gmt file (wrong magic bytes at offset 0); give a .gmt trace or a format that `gpumem help formats` lists");
    constexpr std::size_t kFixed = sizeof kGmtMagic + 2 + 2 + 4;
    if (bytes.size() < kFixed + 4)
        throw FormatError(path + ": the header is cut short (file is " + std::to_string(bytes.size()) + " bytes); the file is truncated");
    std::uint16_t major = detail::getU16(bytes.data() + 8);
    std::uint16_t minor = detail::getU16(bytes.data() + 10);
    if (major > kGmtMajorVersion)
        throw FormatError(path + ": written in .gmt format " + std::to_string(major) + "." + std::to_string(minor)
            + " by a newer gpumem; this gpumem reads format " + std::to_string(kGmtMajorVersion)
            + ".x — upgrade gpumem to read it");
    if (major == 0)
        throw FormatError(path + ": .gmt format version 0 at offset 8 is invalid; the file is damaged");
    std::uint32_t metaLen = detail::getU32(bytes.data() + 12);
    if (metaLen > bytes.size() - kFixed - 4)
        throw FormatError(path + ": the header's metadata (" + std::to_string(metaLen)
            + " bytes at offset 16) runs past the end of the file; the file is truncated or damaged");
    std::size_t headerEnd = kFixed + metaLen;
    if (detail::getU32(bytes.data() + headerEnd) != crc(bytes.substr(0, headerEnd)))
        throw FormatError(path + ": header checksum mismatch at offset " + std::to_string(headerEnd) + "; the file is damaged");
    TraceBuilder b;
    auto meta = nlohmann::json::parse(bytes.substr(kFixed, metaLen), nullptr, false);
    if (!meta.is_object())
        throw FormatError(path + ": the header metadata at offset 16 is not a JSON object; the file is damaged");
    b.metadata() = std::move(meta);

    ChunkReader reader { b };
    std::size_t offset = headerEnd + 4;
    bool ended = false;
    std::uint64_t chunks = 0;
    auto stop = [&](std::string_view code, std::string detail) {
        b.stats().add(code, Severity::Error,
            path + ": " + detail + "; read " + std::to_string(chunks) + " whole chunks (" + std::to_string(b.memoryEventCount())
                + " memory events) before it");
    };
    while (offset < bytes.size()) {
        if (options.progress && !options.progress(double(offset) / double(bytes.size())))
            throw Cancelled();
        if (bytes.size() - offset < kChunkHeaderSize) {
            stop("truncated", "the file ends at offset " + std::to_string(bytes.size()) + " inside the header of a chunk at offset " + std::to_string(offset));
            break;
        }
        const char* h = bytes.data() + offset;
        std::uint32_t type = detail::getU32(h), length = detail::getU32(h + 4), records = detail::getU32(h + 8), sum = detail::getU32(h + 12);
        if (length > bytes.size() - offset - kChunkHeaderSize) {
            stop("truncated", "the file ends at offset " + std::to_string(bytes.size()) + " inside chunk " + chunkName(type) + " at offset "
                    + std::to_string(offset) + " (" + std::to_string(length) + " payload bytes announced)");
            break;
        }
        std::string_view payload = bytes.substr(offset + kChunkHeaderSize, length);
        if (crc(payload) != sum) {
            stop("corrupt_chunk", "checksum mismatch in chunk " + chunkName(type) + " at offset " + std::to_string(offset) + ": the rest of the file is ignored");
            break;
        }
        if (type == kEnd) {
            ended = true;
            offset += kChunkHeaderSize + length;
            break;
        }
        if (!reader.decode(type, records, payload, b.metadata())) {
            stop("corrupt_chunk", "malformed " + chunkName(type) + " chunk at offset " + std::to_string(offset)
                    + " (bad value or reference): the rest of the file is ignored");
            break;
        }
        ++chunks;
        offset += kChunkHeaderSize + length;
    }
    if (!ended && !b.stats().find("truncated") && !b.stats().find("corrupt_chunk"))
        stop("truncated", "no end chunk after offset " + std::to_string(offset) + ": the writer did not finish (killed or crashed?)");
    if (ended && offset < bytes.size())
        b.stats().add("trailing_bytes", Severity::Warning, path + ": " + std::to_string(bytes.size() - offset) + " bytes after the end chunk were ignored");
    return b.build();
}

namespace {
    class GmtImporter final : public Importer {
    public:
        std::string_view name() const override { return "gmt"; }
        std::string_view description() const override { return "gpumem native binary trace (.gmt), see docs/trace-format.md"; }
        bool sniff(const SniffInput& in) const override
        {
            return !in.gzip && in.raw.size() >= 4 && std::memcmp(in.raw.data(), kGmtMagic, 4) == 0;
        }
        Trace load(const std::string& path, const LoadOptions& options) const override { return readGmt(path, options); }
    };
} // namespace

std::unique_ptr<Importer> makeGmtImporter() { return std::make_unique<GmtImporter>(); }

} // namespace gpumem
