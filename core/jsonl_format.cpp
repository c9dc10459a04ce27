#include "core/jsonl_format.h"

#include "core/detail/json_limits.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>
#include <sstream>

namespace gpumem {

namespace {
    using ojson = nlohmann::ordered_json;
    constexpr std::string_view kFormatName = "gpumem-jsonl";
    constexpr int kJsonlMajor = 1;

    void line(std::ostream& out, const ojson& j) { out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n'; }
    template <typename T> void putIf(ojson& j, const char* key, T value, T def = T {})
    {
        if (value != def)
            j[key] = value;
    }
} // namespace

void writeJsonl(const Trace& t, std::ostream& out)
{
    ojson header;
    header["format"] = kFormatName;
    header["version"] = kJsonlMajor;
    header["metadata"] = t.metadata(); // an object with sorted keys: canonical
    line(out, header);
    for (std::size_t i = 0; i < t.devices().size(); ++i) {
        const auto& d = t.devices()[i];
        ojson j { { "type", "device" }, { "id", i }, { "kind", toString(d.type) }, { "ordinal", d.ordinal } };
        putIf(j, "name", t.str(d.name));
        putIf<Bytes>(j, "total_memory", d.totalMemory);
        line(out, j);
    }
    for (std::size_t i = 0; i < t.streams().size(); ++i) {
        const auto& s = t.streams()[i];
        ojson j { { "type", "stream" }, { "id", i }, { "device", s.device }, { "handle", s.handle } };
        putIf(j, "name", t.str(s.name));
        line(out, j);
    }
    for (std::size_t i = 1; i < t.frames().size(); ++i) {
        const auto& f = t.frames()[i];
        line(out, ojson { { "type", "frame" }, { "id", i }, { "name", t.str(f.name) }, { "file", t.str(f.file) }, { "line", f.line } });
    }
    for (SiteId i = 1; i < t.siteCount(); ++i) {
        auto frames = t.siteFrames(i);
        line(out, ojson { { "type", "site" }, { "id", i }, { "frames", std::vector<FrameId>(frames.begin(), frames.end()) } });
    }
    for (std::size_t i = 1; i < t.scopes().size(); ++i) {
        const auto& s = t.scopes()[i];
        line(out, ojson { { "type", "scope" }, { "id", i }, { "parent", s.parent }, { "name", t.str(s.name) }, { "kind", toString(s.kind) } });
    }
    for (std::size_t i = 1; i < t.pools().size(); ++i) {
        const auto& p = t.pools()[i];
        ojson j { { "type", "pool" }, { "id", i }, { "kind", toString(p.kind) }, { "source_id", { p.idFirst, p.idSecond } } };
        if (p.useOnOom)
            j["use_on_oom"] = true;
        line(out, j);
    }
    for (std::size_t i = 0; i < t.counterSeries().size(); ++i) {
        const auto& s = t.counterSeries()[i];
        ojson j { { "type", "counter_series" }, { "id", i }, { "name", t.str(s.name) } };
        if (s.device != kNoDevice)
            j["device"] = s.device;
        line(out, j);
    }
    const auto& m = t.memory();
    for (std::size_t i = 0; i < m.count(); ++i) {
        ojson j { { "type", "mem" }, { "t", m.time[i] }, { "kind", toString(m.kind[i]) } };
        putIf<DeviceId>(j, "device", m.device[i]);
        putIf<StreamId>(j, "stream", m.stream[i]);
        j["addr"] = m.address[i];
        j["size"] = m.size[i];
        putIf<Bytes>(j, "requested", m.requestedSize[i]);
        putIf<ScopeId>(j, "scope", m.scope[i]);
        putIf<SiteId>(j, "site", m.site[i]);
        putIf<std::uint64_t>(j, "thread", m.thread[i]);
        putIf<std::uint64_t>(j, "seq", m.sequence[i], i); // the default is the line's position
        if (m.category[i] != Category::Unknown)
            j["category"] = toString(m.category[i]);
        putIf<PoolId>(j, "pool", m.pool[i]);
        line(out, j);
    }
    for (const auto& k : t.kernels()) {
        ojson j { { "type", "kernel" }, { "start", k.start }, { "end", k.end } };
        putIf<DeviceId>(j, "device", k.device);
        putIf<StreamId>(j, "stream", k.stream);
        j["name"] = t.str(k.name);
        putIf<std::uint64_t>(j, "correlation", k.correlation);
        line(out, j);
    }
    for (const auto& a : t.annotations()) {
        ojson j { { "type", "annotation" }, { "start", a.start }, { "end", a.end }, { "name", t.str(a.name) } };
        if (a.kind != AnnotationKind::Range)
            j["kind"] = toString(a.kind);
        if (a.device != kNoDevice)
            j["device"] = a.device;
        putIf<std::uint64_t>(j, "thread", a.thread);
        line(out, j);
    }
    for (const auto& s : t.counterSamples())
        line(out, ojson { { "type", "counter" }, { "t", s.time }, { "series", s.series }, { "value", s.value } });
    for (const auto& a : t.importStats().anomalies())
        line(out, ojson { { "type", "anomaly" }, { "code", a.code }, { "severity", toString(a.severity) }, { "count", a.count }, { "detail", a.detail } });
}

void writeJsonl(const Trace& trace, const std::string& path)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        throw IoError(path + ": cannot create");
    writeJsonl(trace, out);
    out.flush();
    if (!out)
        throw IoError(path + ": cannot write (disk full?)");
}

namespace {
    // Reads one JSONL record's fields with errors that name path:line and the field.
    class Record {
    public:
        Record(const nlohmann::json& j, const std::string& where)
            : m_j(j)
            , m_where(where)
        {
        }
        [[noreturn]] void fail(std::string_view field, std::string_view problem) const
        {
            throw FormatError(m_where + ": field \"" + std::string(field) + "\" " + std::string(problem));
        }
        template <typename T> T num(const char* key, std::optional<T> def = std::nullopt) const
        {
            auto it = m_j.find(key);
            if (it == m_j.end()) {
                if (def)
                    return *def;
                fail(key, "is missing");
            }
            if constexpr (std::is_signed_v<T>) {
                if (!it->is_number_integer())
                    fail(key, "must be an integer");
                auto v = it->get<std::int64_t>();
                if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
                    fail(key, "is out of range");
                if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
                    fail(key, "is out of range");
                return static_cast<T>(v);
            } else {
                if (!it->is_number_unsigned())
                    fail(key, "must be a non-negative integer");
                auto v = it->get<std::uint64_t>();
                if (v > std::numeric_limits<T>::max())
                    fail(key, "is out of range");
                return static_cast<T>(v);
            }
        }
        std::string text(const char* key, std::optional<std::string> def = std::nullopt) const
        {
            auto it = m_j.find(key);
            if (it == m_j.end()) {
                if (def)
                    return *def;
                fail(key, "is missing");
            }
            if (!it->is_string())
                fail(key, "must be a string");
            return it->get<std::string>();
        }
        template <typename E> E choice(const char* key, std::optional<E> (*parse)(std::string_view), std::optional<E> def = std::nullopt) const
        {
            if (!m_j.contains(key) && def)
                return *def;
            std::string s = text(key);
            auto v = parse(s);
            if (!v)
                fail(key, "has unknown value \"" + quoteForMessage(s) + "\"");
            return *v;
        }
        const nlohmann::json& json() const { return m_j; }

    private:
        const nlohmann::json& m_j;
        const std::string& m_where;
    };
} // namespace

namespace {
    // The reader over any source of lines: `nextLine(text)` sets the next line (without '\n') and returns
    // false after the last; `fraction()` says how much was read (progress).
    // Memory events go to `sink.memoryEvent` and kernels to `sink.kernel` (with the line's number, in
    // file order) where set, else to the builder as every other record.
    template <class NextLine, class Fraction>
    Trace readJsonlLines(NextLine&& nextLine, Fraction&& fraction, std::string_view name, const LoadOptions& options, const JsonlSink& sink)
    {
    const std::string path(name);
    TraceBuilder b;
    std::size_t lineNo = 0;
    std::uint64_t memoryEvents = 0; // the default "seq": the event's position in the file
    bool sawHeader = false;
    std::size_t seriesCount = 0;
    std::string where;
    auto expectId = [&](const Record& r, std::size_t next) {
        if (r.num<std::uint64_t>("id") != next)
            r.fail("id", "must be " + std::to_string(next) + " (ids are dense and in order)");
    };
    std::string_view text;
    while (nextLine(text)) {
        if (lineNo == 0 && text.starts_with("\xEF\xBB\xBF")) // a UTF-8 byte-order mark, as some editors write
            text.remove_prefix(3);
        ++lineNo;
        if (options.progress && lineNo % 65536 == 0 && !options.progress(std::min(1.0, fraction())))
            throw Cancelled();
        if (text.find_first_not_of(" \t\r") == std::string_view::npos)
            continue;
        where = path + ":" + std::to_string(lineNo);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::parse_error& e) {
            // e.byte is 1-based within the line; nlohmann's message names the token it expected.
            std::string why = e.what();
            if (auto colon = why.find("syntax error"); colon != std::string::npos)
                why = why.substr(colon);
            why = quoteForMessage(why, 240); // nlohmann echoes the input it read last: bounded, valid UTF-8
            throw FormatError(where + ":" + std::to_string(e.byte) + ": not valid JSON (" + why
                + "); each line of a .jsonl trace is one JSON object");
        } catch (const nlohmann::json::exception& e) {
            // Not a syntax error but still unreadable: a number beyond double range (out_of_range.406).
            std::string why = e.what();
            if (auto bracket = why.find("] "); bracket != std::string::npos)
                why = why.substr(bracket + 2);
            why = quoteForMessage(why, 240);
            throw FormatError(where + ": not valid JSON (" + why + "); each line of a .jsonl trace is one JSON object");
        }
        if (!j.is_object())
            throw FormatError(where + ": not a JSON object; each line of a .jsonl trace is one JSON object");
        Record r(j, where);
        if (!sawHeader) {
            if (r.text("format", "") != kFormatName)
                r.fail("format", "must be \"gpumem-jsonl\" on the first line");
            auto version = r.num<std::int64_t>("version");
            if (version > kJsonlMajor)
                r.fail("version", "is " + std::to_string(version) + ", newer than this gpumem reads (" + std::to_string(kJsonlMajor)
                        + "); upgrade gpumem");
            if (version < 1)
                r.fail("version", "must be 1");
            if (j.contains("metadata")) {
                if (!j["metadata"].is_object())
                    r.fail("metadata", "must be an object");
                bool tooDeep = false;
                detail::parseShallowJson(text, tooDeep); // the header line again, with a depth check
                if (tooDeep)
                    r.fail("metadata", "nests deeper than " + std::to_string(detail::kMaxMetadataDepth) + " levels");
                b.metadata() = j["metadata"];
            }
            sawHeader = true;
            continue;
        }
        std::string type = r.text("type");
        if (type == "mem") {
            MemoryEvent e;
            e.time = r.num<TimeNs>("t");
            e.kind = r.choice<EventKind>("kind", eventKindFromString);
            e.device = r.num<DeviceId>("device", 0);
            e.stream = r.num<StreamId>("stream", 0);
            e.address = r.num<Address>("addr");
            e.size = r.num<Bytes>("size");
            e.requestedSize = r.num<Bytes>("requested", 0);
            e.scope = r.num<ScopeId>("scope", 0);
            e.site = r.num<SiteId>("site", 0);
            e.thread = r.num<std::uint64_t>("thread", 0);
            e.sequence = r.num<std::uint64_t>("seq", memoryEvents);
            e.category = r.choice<Category>("category", categoryFromString, Category::Unknown);
            e.pool = r.num<PoolId>("pool", 0);
            if (e.pool >= b.poolCount())
                r.fail("pool", "refers to no pool record above it");
            if (e.device >= b.deviceCount())
                r.fail("device", "refers to no device record above it");
            if (e.stream >= b.streamCount())
                r.fail("stream", "refers to no stream record above it");
            if (e.scope >= b.scopeCount())
                r.fail("scope", "refers to no scope record above it");
            if (e.site >= b.siteCount())
                r.fail("site", "refers to no site record above it");
            ++memoryEvents;
            if (sink.memoryEvent)
                sink.memoryEvent(e, lineNo);
            else
                b.memoryColumns().push(e); // not add(): an explicit seq of 2^64−1 is a value, not "auto"
        } else if (type == "device") {
            expectId(r, b.deviceCount());
            if (b.deviceCount() >= kNoDevice)
                r.fail("id", "too many devices");
            Device d;
            d.type = r.choice<DeviceType>("kind", deviceTypeFromString);
            d.ordinal = r.num<std::int32_t>("ordinal", 0);
            d.name = b.intern(r.text("name", ""));
            d.totalMemory = r.num<Bytes>("total_memory", 0);
            b.addDevice(d);
        } else if (type == "stream") {
            expectId(r, b.streamCount());
            Stream s;
            s.device = r.num<DeviceId>("device");
            if (s.device >= b.deviceCount())
                r.fail("device", "refers to no device record above it");
            s.handle = r.num<std::uint64_t>("handle", 0);
            s.name = b.intern(r.text("name", ""));
            b.addStream(s);
        } else if (type == "frame") {
            expectId(r, b.frameCount());
            Frame f;
            f.name = b.intern(r.text("name"));
            f.file = b.intern(r.text("file", ""));
            f.line = r.num<std::int32_t>("line", 0);
            b.appendFrame(f);
        } else if (type == "site") {
            expectId(r, b.siteCount());
            const auto& frames = j.find("frames");
            if (frames == j.end() || !frames->is_array())
                r.fail("frames", "must be an array of frame ids");
            std::vector<FrameId> ids;
            for (const auto& f : *frames) {
                if (!f.is_number_unsigned() || f.get<std::uint64_t>() >= b.frameCount())
                    r.fail("frames", "must hold ids of frame records above it");
                ids.push_back(f.get<FrameId>());
            }
            b.appendSite(ids);
        } else if (type == "scope") {
            expectId(r, b.scopeCount());
            Scope s;
            s.parent = r.num<ScopeId>("parent", 0);
            if (s.parent >= b.scopeCount())
                r.fail("parent", "refers to no scope record above it");
            s.name = b.intern(r.text("name"));
            s.kind = r.choice<ScopeKind>("kind", scopeKindFromString, ScopeKind::Range);
            b.appendScope(s);
        } else if (type == "pool") {
            expectId(r, b.poolCount());
            MemoryPool p;
            p.kind = r.choice<PoolKind>("kind", poolKindFromString);
            if (p.kind == PoolKind::Default)
                r.fail("kind", "must not be \"default\" (pool 0, the default pool, is implicit)");
            if (auto id = j.find("source_id"); id != j.end()) {
                if (!id->is_array() || id->size() != 2 || !(*id)[0].is_number_integer() || !(*id)[1].is_number_integer())
                    r.fail("source_id", "must be an array of two integers (PyTorch's segment_pool_id)");
                p.idFirst = (*id)[0].get<std::int64_t>();
                p.idSecond = (*id)[1].get<std::int64_t>();
            }
            if (auto u = j.find("use_on_oom"); u != j.end()) {
                if (!u->is_boolean())
                    r.fail("use_on_oom", "must be true or false");
                p.useOnOom = u->get<bool>();
            }
            b.appendPool(p);
        } else if (type == "counter_series") {
            CounterSeries s;
            s.name = b.intern(r.text("name"));
            s.device = r.num<DeviceId>("device", kNoDevice);
            if (s.device != kNoDevice && s.device >= b.deviceCount())
                r.fail("device", "refers to no device record above it");
            expectId(r, b.addCounterSeries(s));
            ++seriesCount;
        } else if (type == "kernel") {
            Kernel k;
            k.start = r.num<TimeNs>("start");
            k.end = r.num<TimeNs>("end");
            k.device = r.num<DeviceId>("device", 0);
            k.stream = r.num<StreamId>("stream", 0);
            if (k.device >= b.deviceCount())
                r.fail("device", "refers to no device record above it");
            if (k.stream >= b.streamCount())
                r.fail("stream", "refers to no stream record above it");
            k.name = b.intern(r.text("name"));
            k.correlation = r.num<std::uint64_t>("correlation", 0);
            if (sink.kernel)
                sink.kernel(k, lineNo);
            else
                b.add(k);
        } else if (type == "annotation") {
            Annotation a;
            a.start = r.num<TimeNs>("start");
            a.end = r.num<TimeNs>("end", a.start);
            a.name = b.intern(r.text("name"));
            a.kind = r.choice<AnnotationKind>("kind", annotationKindFromString, AnnotationKind::Range);
            a.device = r.num<DeviceId>("device", kNoDevice);
            if (a.device != kNoDevice && a.device >= b.deviceCount())
                r.fail("device", "refers to no device record above it");
            a.thread = r.num<std::uint64_t>("thread", 0);
            b.add(a);
        } else if (type == "counter") {
            CounterSample s;
            s.time = r.num<TimeNs>("t");
            s.series = r.num<std::uint32_t>("series");
            if (s.series >= seriesCount)
                r.fail("series", "refers to no counter_series record above it");
            s.value = r.num<std::int64_t>("value");
            b.add(s);
        } else if (type == "anomaly") {
            b.stats().add(r.text("code"), r.choice<Severity>("severity", severityFromString, Severity::Warning), r.text("detail", ""),
                r.num<std::uint64_t>("count", 1));
        } else {
            b.stats().add("unknown_record", Severity::Warning, where + ": record type \"" + quoteForMessage(type) + "\" is not known to this gpumem; skipped");
        }
    }
    if (!sawHeader)
        throw FormatError(path + ": empty .jsonl trace: the first line must be the {\"format\":\"gpumem-jsonl\",…} header");
    if (options.progress && !options.progress(1.0))
        throw Cancelled();
    return b.build();
    }
} // namespace

// A gzip .jsonl is inflated as it is read (LineReader): the inflated text is never held whole.
Trace readJsonl(const std::string& path, const LoadOptions& options)
{
    return readJsonl(path, JsonlSink {}, options);
}

Trace readJsonl(const std::string& path, const JsonlSink& sink, const LoadOptions& options)
{
    LineReader lines(path);
    return readJsonlLines([&](std::string_view& line) { return lines.next(line); }, [&] { return lines.fractionRead(); },
        path, options, sink);
}

Trace readJsonlText(std::string_view content, std::string_view name, const LoadOptions& options)
{
    std::size_t pos = 0;
    auto nextLine = [&](std::string_view& line) {
        if (pos >= content.size())
            return false;
        std::size_t end = content.find('\n', pos);
        if (end == std::string::npos)
            end = content.size();
        line = content.substr(pos, end - pos);
        pos = end + 1;
        return true;
    };
    return readJsonlLines(nextLine, [&] { return double(std::min(pos, content.size())) / double(std::max<std::size_t>(content.size(), 1)); },
        name, options, JsonlSink {});
}

namespace {
    class JsonlImporter final : public Importer {
    public:
        std::string_view name() const override { return "jsonl"; }
        std::string_view description() const override { return "gpumem JSON-lines trace (.jsonl, optionally gzip), see docs/trace-format.md"; }
        bool sniff(const SniffInput& in) const override
        {
            std::string_view c = in.content;
            auto first = c.find_first_not_of(" \t\r\n");
            if (first == std::string_view::npos || c[first] != '{')
                return false;
            auto nl = c.find('\n', first);
            std::string_view head = c.substr(first, nl == std::string_view::npos ? c.size() - first : nl - first);
            return head.find("\"format\":\"gpumem-jsonl\"") != std::string_view::npos
                || head.find("\"format\": \"gpumem-jsonl\"") != std::string_view::npos;
        }
        Trace load(const std::string& path, const LoadOptions& options) const override { return readJsonl(path, options); }
    };
} // namespace

std::unique_ptr<Importer> makeJsonlImporter() { return std::make_unique<JsonlImporter>(); }

} // namespace gpumem
