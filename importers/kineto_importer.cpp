#include "importers/kineto_importer.h"

#include "core/file_io.h"
#include "importers/detail/json_cut.h"
#include "importers/detail/json_number.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"
#include "core/units.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <unordered_map>

namespace gpumem {

namespace {
    namespace od = simdjson::ondemand;

    // What an event is, decided from ph / cat / name (SOURCES.md §A; 2021 names in parentheses).
    enum class EventClass : std::uint8_t { Unknown, Ignored, Memory, Kernel, CpuOp, PyFunction, UserAnnotation };

    // Interval kinds in nesting order when two intervals have the same bounds (outermost first).
    enum class IntervalKind : std::uint8_t { Range = 0, Module = 1, PyFrame = 2, Op = 3 };

    struct MemRecord {
        TimeNs ts = 0; // relative to baseTimeNanoseconds until resolved
        std::uint64_t sequence = 0;
        std::int64_t bytes = 0;
        std::int64_t address = 0;
        std::int64_t totalAllocated = 0;
        std::int64_t totalReserved = 0;
        std::int64_t deviceType = -1;
        std::int64_t deviceId = 0;
        std::int64_t tid = 0;
        std::uint32_t thread = 0; // index into threads
        bool hasAddress = false, hasAllocated = false, hasReserved = false, hasBytes = false, hasDeviceType = false;
    };

    struct IntervalRecord {
        TimeNs start = 0, end = 0;
        std::string_view name; // points into the parser's string buffer
        std::string_view callStack; // 2021 "Call stack" string, or empty
        IntervalKind kind = IntervalKind::Op;
        std::uint32_t order = 0;
    };

    struct KernelRecord {
        TimeNs start = 0, end = 0;
        std::int64_t device = 0, stream = 0;
        std::uint64_t correlation = 0;
        std::string_view name;
    };

    struct AnnotationRecord {
        TimeNs start = 0, end = 0;
        std::string_view name;
        AnnotationKind kind = AnnotationKind::Range;
        std::int64_t tid = 0;
    };

    struct DeviceProperty {
        std::int64_t id = 0;
        std::string name;
        std::int64_t totalMemory = 0;
    };

    // The fields of one event we care about, gathered in whatever order the keys come.
    struct EventFields {
        std::string_view ph, cat, name, callStack;
        bool hasPh = false, hasCat = false, hasName = false;
        std::int64_t pid = 0, tid = 0;
        bool hasPid = false, hasTid = false;
        TimeNs ts = 0, dur = 0;
        bool hasTs = false, hasDur = false;
        // args
        std::int64_t deviceType = -1, deviceId = 0, address = 0, bytes = 0, totalAllocated = 0, totalReserved = 0,
                     evIdx = 0, argDevice = 0, argStream = 0, correlation = 0;
        bool hasDeviceType = false, hasDeviceId = false, hasAddress = false, hasBytes = false, hasAllocated = false,
             hasReserved = false, hasEvIdx = false, hasArgDevice = false, hasArgStream = false, hasCorrelation = false;
        // The first arg whose value cannot be what it names (a fractional "Bytes", a device beyond
        // 32 bits): a [memory] or kernel event with one is counted as bad_event_field and skipped.
        const char* badField = nullptr;
        const char* badRule = nullptr;
        std::string_view badValue;
    };

    bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

    EventClass classify(const EventFields& f)
    {
        if (f.hasPh && f.ph != "X" && f.ph != "i" && f.ph != "I")
            return EventClass::Ignored;
        if (f.hasCat) {
            const auto c = f.cat;
            if (c == "kernel" || c == "Kernel")
                return f.hasPh ? EventClass::Kernel : EventClass::Unknown;
            if (c == "cpu_op" || c == "Operator")
                return f.hasPh ? EventClass::CpuOp : EventClass::Unknown;
            if (c == "python_function")
                return f.hasPh ? EventClass::PyFunction : EventClass::Unknown;
            if (c == "user_annotation")
                return f.hasPh ? EventClass::UserAnnotation : EventClass::Unknown;
            if (c != "cpu_instant_event")
                return EventClass::Ignored;
        }
        if (f.hasPh && f.hasName && (f.ph == "i" || f.ph == "I"))
            return f.name == "[memory]" ? EventClass::Memory : EventClass::Ignored;
        if (f.hasPh && f.hasCat && f.ph == "X")
            return EventClass::Ignored; // X events of cpu_instant_event: none known
        return EventClass::Unknown;
    }

    // A field whose value cannot be represented; parseDocument() adds the file and offset.
    struct FieldError : std::runtime_error {
        using std::runtime_error::runtime_error;
    };

    std::int64_t readInt(od::value& v, std::string_view field)
    {
        const od::json_type t = v.type();
        if (t != od::json_type::number)
            return 0;
        std::int64_t out = 0;
        const std::string_view token = detail::withoutTrailingBlanks(v.raw_json_token());
        if (!detail::isJsonNumber(token))
            throw FieldError(std::string("\"") + std::string(field) + "\" is not a JSON number ("
                + quoteForMessage(token) + ")");
        if (!detail::parseScaledDecimal(token, 0, out))
            throw FieldError(std::string("the number in \"") + std::string(field) + "\" does not fit in 64 bits");
        return out;
    }

    // Whether the JSON number token is written as an integer (no fraction, no exponent).
    bool isIntegerToken(std::string_view token)
    {
        std::size_t i = !token.empty() && token[0] == '-' ? 1 : 0;
        while (i < token.size() && token[i] >= '0' && token[i] <= '9')
            ++i;
        return i == token.size() || (token[i] != '.' && token[i] != 'e' && token[i] != 'E');
    }

    void markBad(EventFields& f, const char* field, const char* rule, od::value& v)
    {
        if (f.badField)
            return;
        f.badField = field;
        f.badRule = rule;
        const od::json_type t = v.type();
        if (t == od::json_type::object || t == od::json_type::array) { // its first token alone says nothing
            f.badValue = t == od::json_type::object ? "{…}" : "[…]";
            return;
        }
        f.badValue = detail::withoutTrailingBlanks(v.raw_json_token());
    }

    // The rule a value of JSON type `t` (not a number, not null) breaks, for bad_event_field.
    const char* notANumber(od::json_type t)
    {
        switch (t) {
        case od::json_type::string:
            return "a string, not a number";
        case od::json_type::boolean:
            return "true/false, not a number";
        case od::json_type::object:
            return "an object, not a number";
        case od::json_type::array:
            return "a list, not a number";
        default:
            return "not a number";
        }
    }

    constexpr const char* kNotWhole = "not a whole number";
    // A token simdjson typed by its first byte as a number ("1024abc", "0x7f", "00012", "2p48") or as
    // null ("nan") that is not one (detail::isJsonNumber).
    constexpr const char* kNotJsonNumber = "not a JSON number";
    constexpr const char* kNotJsonValue = "not a JSON value (a number or null)";

    // Whether `v`, typed null, is the literal null; else marks the event bad and returns false.
    bool isRealNull(od::value& v, const char* field, EventFields& f)
    {
        if (detail::isJsonNull(v.raw_json_token())) [[likely]]
            return true;
        markBad(f, field, kNotJsonValue, v);
        return false;
    }
    constexpr const char* kOutOfRange = "out of range (not a 64-bit integer)";

    // An integer arg ("Addr", "Bytes", "Device Id", …): sets `has` and `out` when the value is a number
    // that is a whole 64-bit integer (4e3 included); null leaves them alone. Otherwise the event is marked
    // bad (bad_event_field) rather than rounded, clamped, read as absent or failing the file: a fraction
    // (1.5) is not whole, 1e30 is out of range, "big" is a string, not a number.
    void readIntegerArg(od::value& v, const char* field, EventFields& f, bool& has, std::int64_t& out)
    {
        if (const od::json_type t = v.type(); t != od::json_type::number) [[unlikely]] {
            if (t != od::json_type::null) // null is no value, as if the arg were absent
                markBad(f, field, notANumber(t), v);
            else
                isRealNull(v, field, f);
            return;
        }
        const std::string_view token = detail::withoutTrailingBlanks(v.raw_json_token());
        if (!detail::isJsonNumber(token)) [[unlikely]] {
            markBad(f, field, kNotJsonNumber, v);
            return;
        }
        // The usual token, [-]digits (at most 18, so int64 holds them) ending the number, in one pass.
        const char* p = token.data();
        const char* const end = p + token.size();
        const bool negative = p != end && *p == '-';
        p += negative;
        const char* const digits = p;
        std::uint64_t value = 0;
        while (p != end && p - digits < 18 && static_cast<unsigned>(*p - '0') < 10)
            value = value * 10 + static_cast<unsigned>(*p++ - '0');
        if (p != digits && (p == end || (*p != '.' && *p != 'e' && *p != 'E' && static_cast<unsigned>(*p - '0') >= 10)))
            [[likely]] {
            out = negative ? -static_cast<std::int64_t>(value) : static_cast<std::int64_t>(value);
            has = true;
            return;
        }
        if (isIntegerToken(token)) {
            has = detail::parseScaledDecimal(token, 0, out);
            if (!has)
                markBad(f, field, kOutOfRange, v);
            return;
        }
        double d = 0;
        const auto parsed = std::from_chars(token.data(), token.data() + token.size(), d);
        if (parsed.ec == std::errc::result_out_of_range) // too large, or too small to be anything but a fraction
            markBad(f, field,
                token.find("e-") == token.npos && token.find("E-") == token.npos ? kOutOfRange : kNotWhole, v);
        else if (!(d >= -0x1p63 && d < 0x1p63))
            markBad(f, field, kOutOfRange, v);
        else if (d != std::trunc(d))
            markBad(f, field, kNotWhole, v);
        else
            out = static_cast<std::int64_t>(d), has = true;
    }

    bool fitsDeviceOrdinal(std::int64_t id)
    {
        return id >= std::numeric_limits<std::int32_t>::min() && id <= std::numeric_limits<std::int32_t>::max();
    }

    // Reads an id that is a number or a digit string; false for null/other strings. A number token that
    // is no JSON number marks the event bad.
    bool readId(od::value& v, const char* field, EventFields& f, std::int64_t& out)
    {
        const od::json_type t = v.type();
        if (t == od::json_type::number) {
            if (!detail::isJsonNumber(v.raw_json_token())) {
                markBad(f, field, kNotJsonNumber, v);
                return false;
            }
            return detail::parseLooseId(v.raw_json_token(), false, out);
        }
        if (t == od::json_type::null)
            isRealNull(v, field, f);
        if (t == od::json_type::string)
            return detail::parseLooseId(v.get_string(), true, out);
        return false;
    }

    // A time in microseconds ("ts", "dur"; an integer or a float with ns decimals) → ns, exactly. null
    // leaves `has` false (no time); a value that is no number, or whose ns do not fit in 64 bits, marks
    // the event bad (bad_event_field names the value) instead of reading as a missing time.
    void readMicrosField(od::value& v, const char* field, EventFields& f, bool& has, TimeNs& out)
    {
        const od::json_type t = v.type();
        if (t == od::json_type::number) [[likely]] {
            if (!detail::isJsonNumber(v.raw_json_token())) [[unlikely]] {
                markBad(f, field, kNotJsonNumber, v);
                return;
            }
            has = detail::parseScaledDecimal(v.raw_json_token(), 3, out);
            if (!has)
                markBad(f, field, "out of range (in nanoseconds not a 64-bit integer)", v);
        } else if (t == od::json_type::null) {
            isRealNull(v, field, f);
        } else {
            markBad(f, field, notANumber(t), v);
        }
    }

    void readArgs(od::object args, EventFields& f)
    {
        for (auto field : args) {
            std::string_view key = field.unescaped_key();
            od::value v = field.value();
            switch (key.size()) {
            case 4:
                if (key == "Addr")
                    readIntegerArg(v, "Addr", f, f.hasAddress, f.address);
                break;
            case 5:
                if (key == "Bytes")
                    readIntegerArg(v, "Bytes", f, f.hasBytes, f.bytes);
                break;
            case 6:
                if (key == "Ev Idx")
                    readIntegerArg(v, "Ev Idx", f, f.hasEvIdx, f.evIdx);
                else if (key == "device") {
                    f.hasArgDevice = readId(v, "device", f, f.argDevice);
                    if (f.hasArgDevice && !fitsDeviceOrdinal(f.argDevice))
                        markBad(f, "device", "not a device ordinal (32 bits)", v);
                }
                else if (key == "stream")
                    f.hasArgStream = readId(v, "stream", f, f.argStream);
                break;
            case 9:
                if (key == "Device Id") {
                    readIntegerArg(v, "Device Id", f, f.hasDeviceId, f.deviceId);
                    if (f.hasDeviceId && !fitsDeviceOrdinal(f.deviceId))
                        markBad(f, "Device Id", "not a device ordinal (an integer of 32 bits)", v);
                }
                break;
            case 10:
                if (key == "Call stack" && v.type() == od::json_type::string)
                    f.callStack = v.get_string();
                break;
            case 11:
                if (key == "Device Type")
                    readIntegerArg(v, "Device Type", f, f.hasDeviceType, f.deviceType);
                else if (key == "correlation")
                    readIntegerArg(v, "correlation", f, f.hasCorrelation, f.correlation);
                break;
            case 14:
                if (key == "Total Reserved")
                    readIntegerArg(v, "Total Reserved", f, f.hasReserved, f.totalReserved);
                break;
            case 15:
                if (key == "Total Allocated")
                    readIntegerArg(v, "Total Allocated", f, f.hasAllocated, f.totalAllocated);
                break;
            default:
                break;
            }
        }
    }

    // "path/file.py(123): func" → (file, line, func); anything else → (text, "", 0).
    struct ParsedFrame {
        std::string_view name, file;
        std::int32_t line = 0;
    };
    ParsedFrame parseFrameText(std::string_view text)
    {
        const std::size_t colon = text.find("): ");
        if (colon != std::string_view::npos) {
            const std::size_t paren = text.rfind('(', colon);
            if (paren != std::string_view::npos && paren + 1 < colon) {
                std::int64_t line = 0;
                const std::string_view digits = text.substr(paren + 1, colon - paren - 1);
                if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos
                    && digits.size() <= 9 && std::from_chars(digits.data(), digits.data() + digits.size(), line).ec == std::errc())
                    return { text.substr(colon + 3), text.substr(0, paren), static_cast<std::int32_t>(line) };
            }
        }
        return { text, {}, 0 };
    }

    std::optional<DeviceType> deviceTypeOf(std::int64_t c10Type)
    {
        switch (c10Type) { // c10::DeviceType numbers
        case 0:
            return DeviceType::Cpu;
        case 1:
            return DeviceType::Cuda;
        case 6:
            return DeviceType::Hip;
        default:
            return std::nullopt;
        }
    }

    std::string deviceName(DeviceType type, std::int64_t ordinal)
    {
        if (type == DeviceType::Cpu)
            return "cpu";
        return std::string(toString(type)) + ":" + std::to_string(ordinal);
    }

    nlohmann::json scalarToJson(od::value& v)
    {
        switch (v.type()) {
        case od::json_type::number: {
            std::int64_t i = 0;
            std::string_view tok = v.raw_json_token();
            if (tok.find_first_of(".eE") == std::string_view::npos && detail::parseScaledDecimal(tok, 0, i))
                return i;
            return double(v.get_double());
        }
        case od::json_type::string:
            return std::string(std::string_view(v.get_string()));
        case od::json_type::boolean:
            return bool(v.get_bool());
        default:
            return nullptr;
        }
    }

    // Per-thread interval sweep state (one stack entry per open interval).
    struct OpenInterval {
        const IntervalRecord* record = nullptr;
        ScopeId scope = 0; // this interval's scope, or the enclosing one for frames
        std::int64_t site = -1; // computed on demand
    };

    // simdjson refused the document on its first read: importKinetoJson() looks for a cut before
    // reporting the message.
    struct CutFile : std::runtime_error {
        using std::runtime_error::runtime_error;
    };

    class KinetoParser {
    public:
        KinetoParser(std::string_view source, const LoadOptions& options, bool recovering = false)
            : m_source(source)
            , m_options(options)
            , m_recovering(recovering)
        {
        }
        // The "truncated" anomaly's detail for a file re-read after a cut (importKinetoJson); run() adds it.
        void setCut(std::string detail) { m_cut = std::move(detail); }

        Trace run(std::string& json);

    private:
        // How far parseDocument() got, for the location in its error messages.
        enum class Stage : std::uint8_t { Start, Top, Events, AfterEvents };
        void parseDocument(std::string& json);
        std::string location() const
        {
            switch (m_stage) {
            case Stage::Start: return std::string(); // simdjson refused the document before reading any of it
            case Stage::Top: return " outside traceEvents";
            case Stage::Events: return " in traceEvents[" + std::to_string(m_currentEvent) + "]";
            case Stage::AfterEvents: return " after traceEvents";
            }
            return std::string();
        }
        void addCutAnomaly();
        void parseEvents(od::array events, const char* begin, std::size_t size, od::document& doc);
        void addEvent(const EventFields& f, EventClass cls, std::uint64_t index);
        // Counts one event skipped for `field` (its value as quoted for a message, the rule it breaks).
        void countBadField(std::string_view field, std::uint64_t index, const std::string& value, std::string_view rule);
        void addBadFieldAnomaly();
        std::uint32_t threadIndex(std::int64_t pid, std::int64_t tid);
        void resolve();
        void attribute(
            const std::vector<std::uint32_t>& order, std::vector<ScopeId>& scopes, std::vector<SiteId>& sites);
        FrameId frameOf(std::string_view text);
        SiteId siteOf(std::vector<OpenInterval>& stack, std::size_t k);
        std::vector<std::uint32_t> sortedMemoryOrder() const;
        void emitMemory();
        void emitUnaddressedMemory();
        void emitKernels();
        void emitAnnotations();
        DeviceId deviceFor(DeviceType type, std::int64_t ordinal);

        std::string_view m_source;
        const LoadOptions& m_options;
        TraceBuilder m_b;
        od::parser m_parser;

        std::vector<MemRecord> m_mem;
        std::vector<std::vector<IntervalRecord>> m_intervals; // by thread index
        std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> m_threads;
        std::vector<KernelRecord> m_kernels;
        std::vector<AnnotationRecord> m_annotations;
        std::vector<DeviceProperty> m_deviceProperties;
        // Events skipped for a bad field, per field (an event counts under its first bad field).
        struct BadFieldTally {
            std::string field;
            std::uint64_t count = 0;
            std::uint64_t firstEvent = 0; // index in traceEvents
            std::string firstValue; // "value, rule"
            std::vector<std::string> rules; // the distinct rules met (the first one's)
            std::vector<std::string> alsoValues; // "traceEvents[i]: value, rule" of up to 2 later distinct rules
        };
        std::vector<BadFieldTally> m_badFields;
        static std::string alsoText(const BadFieldTally& t);
        std::unordered_map<std::string_view, std::uint64_t> m_categories;
        std::unordered_map<std::string_view, FrameId> m_frameCache;
        std::map<std::pair<DeviceType, std::int64_t>, DeviceId> m_devices;
        std::vector<std::string> m_deviceLabels; // by DeviceId
        std::uint64_t m_eventCount = 0;
        std::uint64_t m_currentEvent = 0;
        std::uint64_t m_moduleEvents
            = 0; // python_function "nn.Module: …" events // index in traceEvents of the event being read
        std::int64_t m_baseTime = 0;
        // Times that left the int64 ns range (a base near the limit plus an offset, or a start plus a
        // duration) and were clamped to it: counted as time_overflow instead of wrapping (undefined).
        std::uint64_t m_timeOverflows = 0;
        TimeNs m_firstOverflowA = 0, m_firstOverflowB = 0;
        TimeNs later(TimeNs a, TimeNs b)
        {
            TimeNs sum = 0;
            if (!__builtin_add_overflow(a, b, &sum)) [[likely]]
                return sum;
            if (m_timeOverflows++ == 0)
                m_firstOverflowA = a, m_firstOverflowB = b;
            return b > 0 ? std::numeric_limits<TimeNs>::max() : std::numeric_limits<TimeNs>::min();
        }
        bool m_rocm = false;
        bool m_recovering = false;
        Stage m_stage = Stage::Start;
        std::string m_cut;
        nlohmann::json m_meta = nlohmann::json::object();
    };

    void KinetoParser::countBadField(
        std::string_view field, std::uint64_t index, const std::string& value, std::string_view rule)
    {
        auto it = std::find_if(m_badFields.begin(), m_badFields.end(),
            [&](const BadFieldTally& t) { return t.field == field; });
        if (it == m_badFields.end()) {
            m_badFields.push_back({ std::string(field), 0, index, value + ", " + std::string(rule), { std::string(rule) }, {} });
            it = m_badFields.end() - 1;
        } else if (it->rules.size() < 3 && std::find(it->rules.begin(), it->rules.end(), rule) == it->rules.end()) {
            // Up to 3 distinct reasons per field: the first and two more (task "lim" item 6).
            it->rules.emplace_back(rule);
            it->alsoValues.push_back("traceEvents[" + std::to_string(index) + "]: " + value + ", " + std::string(rule));
        }
        ++it->count;
    }

    // "; also: traceEvents[i]: value, rule; …" for the other distinct reasons of one field ("" if none).
    std::string KinetoParser::alsoText(const BadFieldTally& t)
    {
        std::string out;
        for (std::size_t k = 0; k < t.alsoValues.size(); ++k)
            out += (k == 0 ? "; also: " : "; ") + t.alsoValues[k];
        return out;
    }

    // One bad_event_field anomaly for all skipped events. With one field its detail is that field's first
    // event; with several, each field's count and first event, in the order the fields were first met.
    void KinetoParser::addBadFieldAnomaly()
    {
        if (m_badFields.empty())
            return;
        std::uint64_t total = 0;
        for (const auto& t : m_badFields)
            total += t.count;
        std::string detail;
        if (m_badFields.size() == 1) {
            const auto& t = m_badFields.front();
            detail = "traceEvents[" + std::to_string(t.firstEvent) + "]: \"" + t.field + "\" is " + t.firstValue
                + alsoText(t) + "; the event was skipped";
        } else {
            for (const auto& t : m_badFields)
                detail += "\"" + t.field + "\" in " + std::to_string(t.count) + (t.count == 1 ? " event" : " events")
                    + " (first traceEvents[" + std::to_string(t.firstEvent) + "]: " + t.firstValue + alsoText(t) + "); ";
            detail += "those events were skipped";
        }
        m_b.stats().add("bad_event_field", Severity::Warning, detail, total);
    }

    std::uint32_t KinetoParser::threadIndex(std::int64_t pid, std::int64_t tid)
    {
        auto [it, inserted] = m_threads.try_emplace({ pid, tid }, static_cast<std::uint32_t>(m_threads.size()));
        if (inserted)
            m_intervals.emplace_back();
        return it->second;
    }

    void KinetoParser::addEvent(const EventFields& f, EventClass cls, std::uint64_t index)
    {
        if (f.badField && (cls == EventClass::Memory || cls == EventClass::Kernel)) [[unlikely]] {
            countBadField(f.badField, index, quoteForMessage(f.badValue), f.badRule);
            return;
        }
        // c10 gives the CPU device index -1; a CUDA or HIP device has an ordinal >= 0, so a negative one
        // would make a device "cuda:-3".
        if (cls == EventClass::Memory && f.hasDeviceId && f.deviceId < 0 && f.hasDeviceType
            && (f.deviceType == 1 || f.deviceType == 6)) [[unlikely]] {
            countBadField("Device Id", index, std::to_string(f.deviceId),
                "negative on a CUDA/HIP event (only a CPU event may have -1)");
            return;
        }
        // A CPU event's index is -1 (c10) or a CPU ordinal ≥ 0; below -1 it is damaged, not a device.
        if (cls == EventClass::Memory && f.hasDeviceId && f.deviceId < -1 && f.hasDeviceType && f.deviceType == 0)
            [[unlikely]] {
            countBadField("Device Id", index, std::to_string(f.deviceId), "below -1 on a CPU event (only -1 is valid)");
            return;
        }
        // A CUDA/HIP event names its device; without one it is not "device 0".
        if (cls == EventClass::Memory && !f.hasDeviceId && f.hasDeviceType && (f.deviceType == 1 || f.deviceType == 6))
            [[unlikely]] {
            countBadField("Device Id", index, "null or absent", "a CUDA/HIP event must name its device ordinal");
            return;
        }
        switch (cls) {
        case EventClass::Memory: {
            MemRecord r;
            r.ts = f.ts;
            r.sequence = f.hasEvIdx ? static_cast<std::uint64_t>(f.evIdx) : index;
            r.bytes = f.bytes;
            r.hasBytes = f.hasBytes;
            r.address = f.address;
            r.hasAddress = f.hasAddress;
            r.totalAllocated = f.totalAllocated;
            r.hasAllocated = f.hasAllocated;
            r.totalReserved = f.totalReserved;
            r.hasReserved = f.hasReserved;
            r.deviceType = f.hasDeviceType ? f.deviceType : -1;
            r.hasDeviceType = f.hasDeviceType;
            r.deviceId = f.deviceId;
            r.tid = f.tid;
            r.thread = threadIndex(f.pid, f.tid);
            if (!f.hasTs) {
                m_b.stats().add("memory_event_without_time", Severity::Warning,
                    "traceEvents[" + std::to_string(index) + "]: a [memory] event has no \"ts\"; skipped");
                return;
            }
            m_mem.push_back(r);
            return;
        }
        case EventClass::Kernel: {
            if (!f.hasTs) { // null or absent: no place on the time line (issue 21: they vanished silently)
                m_b.stats().add("kernel_without_time", Severity::Warning,
                    "traceEvents[" + std::to_string(index) + "]: a kernel event has no \"ts\" (null or absent); skipped");
                return;
            }
            KernelRecord k;
            k.start = f.ts;
            k.end = later(f.ts, std::max<TimeNs>(f.dur, 0));
            k.device = f.hasArgDevice ? f.argDevice : f.pid;
            k.stream = f.hasArgStream ? f.argStream : f.tid;
            k.correlation = f.hasCorrelation ? static_cast<std::uint64_t>(f.correlation) : 0;
            k.name = f.name;
            m_kernels.push_back(k);
            return;
        }
        case EventClass::CpuOp:
        case EventClass::PyFunction:
        case EventClass::UserAnnotation: {
            if (!f.hasTs || !f.hasPid || !f.hasTid)
                return;
            const TimeNs end = later(f.ts, std::max<TimeNs>(f.dur, 0));
            if (startsWith(f.name, "ProfilerStep#")) {
                m_annotations.push_back({ f.ts, end, f.name, AnnotationKind::Step, f.tid });
                return;
            }
            IntervalRecord r;
            r.start = f.ts;
            r.end = end;
            r.name = f.name;
            if (cls == EventClass::CpuOp) {
                r.kind = IntervalKind::Op;
                r.callStack = f.callStack;
            } else if (cls == EventClass::UserAnnotation) {
                r.kind = IntervalKind::Range;
                m_annotations.push_back({ f.ts, end, f.name, AnnotationKind::Range, f.tid });
            } else if (startsWith(f.name, "nn.Module: ")) {
                ++m_moduleEvents;
                r.kind = IntervalKind::Module;
                r.name = f.name.substr(11);
            } else {
                r.kind = IntervalKind::PyFrame;
            }
            auto& list = m_intervals[threadIndex(f.pid, f.tid)];
            r.order = static_cast<std::uint32_t>(list.size());
            list.push_back(r);
            return;
        }
        default:
            return;
        }
    }

    void KinetoParser::parseEvents(od::array events, const char* begin, std::size_t size, od::document& doc)
    {
        std::uint64_t index = 0;
        for (auto element : events) {
            m_currentEvent = index;
            od::object ev = element.get_object();
            EventFields f;
            EventClass cls = EventClass::Unknown;
            for (auto field : ev) {
                std::string_view key = field.unescaped_key();
                od::value v = field.value();
                if (key == "ph") {
                    f.ph = v.get_string(), f.hasPh = true;
                } else if (key == "cat") {
                    f.cat = v.get_string(), f.hasCat = true;
                    ++m_categories[f.cat];
                } else if (key == "name") {
                    if (v.type() == od::json_type::string)
                        f.name = v.get_string(), f.hasName = true;
                } else if (key == "pid") {
                    f.hasPid = readId(v, "pid", f, f.pid);
                } else if (key == "tid") {
                    f.hasTid = readId(v, "tid", f, f.tid);
                } else if (key == "ts") {
                    readMicrosField(v, "ts", f, f.hasTs, f.ts);
                } else if (key == "dur") {
                    readMicrosField(v, "dur", f, f.hasDur, f.dur);
                } else if (key == "args") {
                    // Python frames and annotations need nothing from args ("Python id", "Ev Idx").
                    if (v.type() == od::json_type::object && cls != EventClass::Ignored && cls != EventClass::PyFunction
                        && cls != EventClass::UserAnnotation)
                        readArgs(v.get_object(), f);
                } else {
                    continue;
                }
                if (cls == EventClass::Unknown || cls == EventClass::Ignored) {
                    cls = classify(f);
                    if (cls == EventClass::Ignored && f.hasCat)
                        break; // the rest of the event is skipped by the parser
                }
            }
            if (!f.hasCat)
                ++m_categories[std::string_view()];
            if (cls == EventClass::Unknown)
                cls = classify(f);
            addEvent(f, cls, index);
            ++index;
            if ((index & 0xFFFF) == 0 && m_options.progress) {
                const char* at = doc.current_location().value_unsafe();
                double done = at && at >= begin ? double(at - begin) / double(std::max<std::size_t>(size, 1)) : 0.0;
                if (!m_options.progress(std::min(done, 1.0) * 0.9))
                    throw Cancelled();
            }
        }
        m_eventCount += index;
    }

    void KinetoParser::parseDocument(std::string& json)
    {
        if (json.capacity() - json.size() < simdjson::SIMDJSON_PADDING)
            json.reserve(json.size() + simdjson::SIMDJSON_PADDING);
        const char* begin = json.data();
        od::document doc;
        try {
            doc = m_parser.iterate(simdjson::padded_string_view(json.data(), json.size(), json.capacity()));
            od::object top = doc.get_object();
            m_stage = Stage::Top;
            bool sawEvents = false;
            for (auto field : top) {
                std::string_view key = field.unescaped_key();
                od::value v = field.value();
                if (key == "traceEvents") {
                    if (v.type() != od::json_type::array)
                        throw FormatError(
                            std::string(m_source) + ": \"traceEvents\" is not a list; this is not a Kineto trace");
                    sawEvents = true;
                    m_stage = Stage::Events;
                    parseEvents(v.get_array(), begin, json.size(), doc);
                    m_stage = Stage::AfterEvents;
                } else if (key == "deviceProperties") {
                    if (v.type() != od::json_type::array)
                        continue;
                    for (auto element : v.get_array()) {
                        if (element.type() != od::json_type::object)
                            continue;
                        DeviceProperty p;
                        for (auto pf : element.get_object()) {
                            std::string_view pk = pf.unescaped_key();
                            od::value pv = pf.value();
                            if (pk == "id")
                                p.id = readInt(pv, pk);
                            else if (pk == "name" && pv.type() == od::json_type::string)
                                p.name = std::string(std::string_view(pv.get_string()));
                            else if (pk == "totalGlobalMem")
                                p.totalMemory = readInt(pv, pk);
                        }
                        m_deviceProperties.push_back(std::move(p));
                    }
                } else if (key == "baseTimeNanoseconds") {
                    m_baseTime = readInt(v, key);
                    m_meta["base_time_ns"] = m_baseTime;
                } else if (key == "distributedInfo") {
                    if (v.type() != od::json_type::object)
                        continue;
                    nlohmann::json info = nlohmann::json::object();
                    for (auto df : v.get_object()) {
                        std::string dk(std::string_view(df.unescaped_key()));
                        od::value dv = df.value();
                        if (dv.type() != od::json_type::object && dv.type() != od::json_type::array)
                            info[dk] = scalarToJson(dv);
                    }
                    m_meta["distributed"] = std::move(info);
                } else if (key == "schemaVersion" || key == "traceName" || key == "displayTimeUnit"
                    || key == "profile_memory" || key == "with_stack" || key == "with_modules" || key == "record_shapes"
                    || key == "with_flops" || key == "cuda_runtime_version" || key == "cupti_version"
                    || key == "cuda_driver_version" || key == "hip_runtime_version" || key == "hip_driver_version"
                    || key == "roctracer_version" || key == "trace_id") {
                    if (startsWith(key, "hip_") || key == "roctracer_version")
                        m_rocm = true;
                    if (v.type() != od::json_type::object && v.type() != od::json_type::array)
                        m_meta[std::string(key)] = scalarToJson(v);
                }
            }
            if (!sawEvents)
                throw FormatError(std::string(m_source)
                    + ": the JSON object has no \"traceEvents\" list; this is not a Kineto/Chrome trace");
        } catch (const FieldError& e) {
            throw FormatError(std::string(m_source) + ":" + location() + ": " + e.what()
                + "; the file is damaged or not a Kineto trace");
        } catch (const simdjson::simdjson_error& e) {
            // simdjson says a failed allocation with an error code: it is memory, not the file (loadTrace says so).
            if (e.error() == simdjson::MEMALLOC)
                throw std::bad_alloc();
            // (The parser cannot report a byte offset once it has failed; the event index is exact.)
            // The file may have been cut (a profiler killed while writing): importKinetoJson() looks
            // for the cut and re-reads the part before it, or reports this message.
            const std::string message = "invalid JSON" + location() + " (" + e.what() + ")";
            if (!m_recovering)
                throw CutFile(message);
            throw FormatError(std::string(m_source) + ": " + message + "; the file is damaged or not a Kineto trace");
        }
    }

    FrameId KinetoParser::frameOf(std::string_view text)
    {
        auto [it, inserted] = m_frameCache.try_emplace(text, 0);
        if (inserted) {
            ParsedFrame p = parseFrameText(text);
            it->second = m_b.frame(p.name, p.file, p.line);
        }
        return it->second;
    }

    SiteId KinetoParser::siteOf(std::vector<OpenInterval>& stack, std::size_t k)
    {
        if (stack[k].site >= 0)
            return static_cast<SiteId>(stack[k].site);
        std::vector<FrameId> frames;
        for (std::size_t j = k + 1; j-- > 0;) {
            const IntervalRecord& r = *stack[j].record;
            if (r.kind == IntervalKind::PyFrame) {
                frames.push_back(frameOf(r.name));
            } else if (!r.callStack.empty()) {
                std::string_view rest = r.callStack; // innermost first, ';'-separated
                while (!rest.empty()) {
                    const std::size_t semi = rest.find(';');
                    std::string_view one = rest.substr(0, semi);
                    if (!one.empty())
                        frames.push_back(frameOf(one));
                    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
                }
                break;
            }
        }
        const SiteId site = m_b.site(frames);
        stack[k].site = site;
        return site;
    }

    // For each thread, sweeps its intervals (sorted by start, outer first) and its memory events (in
    // time order) together, keeping the stack of open intervals: O((n + m) log n) per thread.
    void KinetoParser::attribute(
        const std::vector<std::uint32_t>& order, std::vector<ScopeId>& scopes, std::vector<SiteId>& sites)
    {
        std::vector<std::vector<std::uint32_t>> memByThread(m_intervals.size());
        for (auto i : order)
            memByThread[m_mem[i].thread].push_back(i);
        std::vector<OpenInterval> stack;
        for (std::size_t t = 0; t < m_intervals.size(); ++t) {
            auto& list = m_intervals[t];
            const auto& points = memByThread[t];
            if (points.empty() || list.empty())
                continue;
            const auto outerFirst = [](const IntervalRecord& a, const IntervalRecord& b) {
                if (a.start != b.start)
                    return a.start < b.start;
                if (a.end != b.end)
                    return a.end > b.end;
                if (a.kind != b.kind)
                    return a.kind < b.kind;
                return a.order < b.order;
            };
            if (!std::is_sorted(list.begin(), list.end(), outerFirst))
                std::stable_sort(list.begin(), list.end(), outerFirst); // merges the runs of a post-order file
            stack.clear();
            std::size_t i = 0;
            for (auto p : points) {
                const TimeNs ts = m_mem[p].ts;
                for (; i < list.size() && list[i].start <= ts; ++i) {
                    const IntervalRecord& r = list[i];
                    while (!stack.empty() && stack.back().record->end < r.end)
                        stack.pop_back(); // closed before r starts, or overlapping it without containing it
                    OpenInterval o;
                    o.record = &r;
                    const ScopeId parent = stack.empty() ? 0 : stack.back().scope;
                    switch (r.kind) {
                    case IntervalKind::Range:
                        o.scope = m_b.scope(parent, r.name, ScopeKind::Range);
                        break;
                    case IntervalKind::Module:
                        o.scope = m_b.scope(parent, r.name, ScopeKind::Module);
                        break;
                    case IntervalKind::Op:
                        o.scope = m_b.scope(parent, r.name, ScopeKind::Op);
                        break;
                    case IntervalKind::PyFrame:
                        o.scope = parent;
                        break;
                    }
                    if (r.kind != IntervalKind::PyFrame && r.callStack.empty() && !stack.empty())
                        o.site = stack.back().site; // same frames as the parent (may still be "not computed")
                    stack.push_back(o);
                }
                while (!stack.empty() && stack.back().record->end < ts)
                    stack.pop_back();
                if (stack.empty())
                    continue;
                scopes[p] = stack.back().scope;
                sites[p] = siteOf(stack, stack.size() - 1);
            }
        }
    }

    // The device for (type, ordinal), created on first use with its name and memory from
    // deviceProperties (whose ids are the torch ordinals of the GPUs).
    DeviceId KinetoParser::deviceFor(DeviceType type, std::int64_t ordinal)
    {
        auto [it, inserted] = m_devices.try_emplace({ type, ordinal }, 0);
        if (!inserted)
            return it->second;
        Device d;
        d.type = type;
        d.ordinal = static_cast<std::int32_t>(ordinal);
        if (type != DeviceType::Cpu)
            for (const auto& p : m_deviceProperties)
                if (p.id == ordinal) {
                    d.name = m_b.intern(p.name);
                    d.totalMemory = p.totalMemory > 0 ? static_cast<Bytes>(p.totalMemory) : 0;
                    break;
                }
        it->second = m_b.addDevice(d);
        m_deviceLabels.resize(std::max<std::size_t>(m_deviceLabels.size(), it->second + 1u));
        m_deviceLabels[it->second] = deviceName(type, ordinal);
        return it->second;
    }

    // Indexes of m_mem in (ts, Ev Idx) order — the allocator's own order (SOURCES.md §A).
    std::vector<std::uint32_t> KinetoParser::sortedMemoryOrder() const
    {
        std::vector<std::uint32_t> order(m_mem.size());
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
            const auto& x = m_mem[a];
            const auto& y = m_mem[b];
            return x.ts < y.ts || (x.ts == y.ts && x.sequence < y.sequence);
        });
        return order;
    }

    void KinetoParser::emitMemory()
    {
        const std::vector<std::uint32_t> order = sortedMemoryOrder();
        std::size_t moved = 0;
        for (std::size_t i = 0; i < order.size(); ++i)
            moved += order[i] != i;
        if (moved) // sorted here so counters follow the same order; TraceBuilder then sees sorted input
            m_b.stats().add("unsorted_input", Severity::Info,
                counted(moved, "[memory] event was", "[memory] events were")
                    + " out of (ts, Ev Idx) order in the file (threads are written "
                      "one after another); sorted here",
                moved);
        std::vector<ScopeId> scopes(m_mem.size(), 0);
        std::vector<SiteId> sites(m_mem.size(), 0);
        attribute(order, scopes, sites);

        std::map<DeviceId, std::pair<std::uint32_t, std::uint32_t>> series; // device → (allocated, reserved)
        const std::uint32_t kNone = ~0u;
        std::uint64_t zero = 0, noAddress = 0;
        for (auto i : order) {
            const MemRecord& r = m_mem[i];
            auto type = deviceTypeOf(r.deviceType);
            if (!type) {
                m_b.stats().add("unknown_device_type", Severity::Warning,
                    "[memory] event Ev Idx " + std::to_string(r.sequence)
                        + (r.hasDeviceType ? ": Device Type " + std::to_string(r.deviceType)
                                    + " is not CPU (0), CUDA (1) or HIP (6)"
                                           : std::string(" has no \"Device Type\""))
                        + "; imported as device type other");
                type = DeviceType::Other;
            }
            const DeviceId dev = deviceFor(*type, *type == DeviceType::Cpu ? -1 : r.deviceId);
            const TimeNs time = later(m_baseTime, r.ts);
            auto [it, inserted] = series.try_emplace(dev, kNone, kNone);
            if (r.hasAllocated) {
                if (it->second.first == kNone)
                    it->second.first = m_b.addCounterSeries({ m_b.intern("Total Allocated"), dev });
                m_b.add(CounterSample { time, it->second.first, r.totalAllocated });
            }
            if (r.hasReserved) {
                if (it->second.second == kNone)
                    it->second.second = m_b.addCounterSeries({ m_b.intern("Total Reserved"), dev });
                m_b.add(CounterSample { time, it->second.second, r.totalReserved });
            }
            if (!r.hasBytes || r.bytes == 0) {
                ++zero;
                continue;
            }
            if (!r.hasAddress) {
                ++noAddress;
                continue;
            }
            MemoryEvent e;
            e.time = time;
            e.kind = r.bytes > 0 ? EventKind::Alloc : EventKind::Free;
            e.device = dev;
            e.stream = m_b.stream(dev, 0);
            e.address = static_cast<Address>(r.address);
            e.size = static_cast<Bytes>(r.bytes > 0 ? r.bytes : -r.bytes);
            e.scope = scopes[i];
            e.site = sites[i];
            e.thread = static_cast<std::uint64_t>(r.tid);
            e.sequence = r.sequence;
            m_b.add(e);
        }
        if (zero)
            m_b.stats().add("memory_event_without_size", Severity::Warning,
                counted(zero, "[memory] event has", "[memory] events have")
                    + " no or zero \"Bytes\"; skipped, with the counters kept");
        if (noAddress)
            m_b.stats().add("memory_event_without_address", Severity::Warning,
                counted(noAddress, "[memory] event has", "[memory] events have")
                    + " no \"Addr\" while others have one; skipped (without an address, a free cannot be paired)");
    }

    // PyTorch ≤ 1.9 wrote [memory] events without Addr (and without totals). Sizes alone cannot be
    // paired into lifetimes, and inventing addresses would invent either pairings or leaks, so the
    // events become a counter per device — the running sum of Bytes, which is what "Total Allocated"
    // would have shown minus the blocks allocated before the window — and the counts go to metadata
    // and to the "no_addresses" anomaly that `gpumem info` lists.
    void KinetoParser::emitUnaddressedMemory()
    {
        const std::vector<std::uint32_t> order = sortedMemoryOrder();
        struct Counts {
            std::uint32_t series = 0;
            std::int64_t sum = 0;
            std::uint64_t allocs = 0, frees = 0, allocBytes = 0, freeBytes = 0;
        };
        std::map<DeviceId, Counts> perDevice;
        for (auto i : order) {
            const MemRecord& r = m_mem[i];
            const DeviceType type = deviceTypeOf(r.deviceType).value_or(DeviceType::Other);
            const DeviceId dev = deviceFor(type, type == DeviceType::Cpu ? -1 : r.deviceId);
            auto [it, inserted] = perDevice.try_emplace(dev);
            if (inserted)
                it->second.series = m_b.addCounterSeries({ m_b.intern("Allocated (sum of Bytes)"), dev });
            Counts& c = it->second;
            if (!r.hasBytes || r.bytes == 0)
                continue;
            c.sum += r.bytes;
            if (r.bytes > 0)
                ++c.allocs, c.allocBytes += static_cast<std::uint64_t>(r.bytes);
            else
                ++c.frees, c.freeBytes += static_cast<std::uint64_t>(-r.bytes);
            m_b.add(CounterSample { later(m_baseTime, r.ts), c.series, c.sum });
        }
        std::string detail
            = "the [memory] events record sizes but no addresses (PyTorch <= 1.9), so allocations are counted "
              "but not paired; the running sum of Bytes is the counter \"Allocated (sum of Bytes)\":";
        nlohmann::json counts = nlohmann::json::object();
        for (const auto& [dev, c] : perDevice) {
            const std::string& label = m_deviceLabels[dev];
            counts[label] = { { "alloc", c.allocs }, { "free", c.frees }, { "alloc_bytes", c.allocBytes },
                { "free_bytes", c.freeBytes } };
            detail += " " + label + " " + counted(c.allocs, "alloc", "allocs") + " / " + counted(c.frees, "free", "frees") + ";";
        }
        detail.pop_back();
        m_b.metadata()["unaddressed_memory_events"] = std::move(counts);
        m_b.stats().add("no_addresses", Severity::Info, detail, m_mem.size());
    }

    void KinetoParser::emitKernels()
    {
        if (m_kernels.empty())
            return;
        const DeviceType type = m_rocm ? DeviceType::Hip : DeviceType::Cuda;
        // Kernel device ids are the tracer's: CUPTI gives the CUDA ordinal, but roctracer gives the HSA
        // agent index, which counts the CPU agents first (MI300X: GPU 0 is agent 2), while [memory] events
        // give the torch ordinal. Where the kernel ids are not memory ordinals, the distinct kernel ids are
        // mapped in ascending order onto the distinct GPU memory ordinals when both sets have the same size.
        std::set<std::int64_t> kernelIds, memoryIds;
        for (const auto& k : m_kernels)
            kernelIds.insert(k.device);
        for (const auto& r : m_mem)
            if (deviceTypeOf(r.deviceType) == type)
                memoryIds.insert(r.deviceId);
        std::map<std::int64_t, std::int64_t> remap;
        const bool subset = std::includes(memoryIds.begin(), memoryIds.end(), kernelIds.begin(), kernelIds.end());
        if (!subset && !memoryIds.empty()) {
            if (kernelIds.size() == memoryIds.size()) {
                auto m = memoryIds.begin();
                std::string detail;
                for (auto k : kernelIds) {
                    remap[k] = *m;
                    m_b.metadata()["kernel_device_map"][std::to_string(k)] = *m;
                    detail += (detail.empty() ? "" : ", ") + std::to_string(k) + " → " + std::to_string(*m);
                    ++m;
                }
                m_b.stats().add("kernel_device_remapped", Severity::Info,
                    "kernel device ids (the tracer's, e.g. ROCm HSA agent indices) differ from the [memory] device "
                    "ids; "
                    "mapped in ascending order: "
                        + detail);
            } else {
                m_b.stats().add("kernel_device_unmatched", Severity::Warning,
                    std::to_string(kernelIds.size()) + " kernel device ids vs " + std::to_string(memoryIds.size())
                        + " [memory] device ids, and they differ: kernels keep their raw device ids");
            }
        }
        for (const auto& k : m_kernels) {
            auto it = remap.find(k.device);
            const DeviceId dev = deviceFor(type, it == remap.end() ? k.device : it->second);
            Kernel out;
            out.start = later(m_baseTime, k.start);
            out.end = later(m_baseTime, k.end);
            out.device = dev;
            out.stream = m_b.stream(dev, static_cast<std::uint64_t>(k.stream));
            out.name = m_b.intern(k.name);
            out.correlation = k.correlation;
            m_b.add(out);
        }
    }

    void KinetoParser::emitAnnotations()
    {
        for (const auto& a : m_annotations) {
            Annotation out;
            out.start = later(m_baseTime, a.start);
            out.end = later(m_baseTime, a.end);
            out.name = m_b.intern(a.name);
            out.kind = a.kind;
            out.thread = static_cast<std::uint64_t>(a.tid);
            m_b.add(out);
        }
    }

    void KinetoParser::resolve()
    {
        for (const auto& r : m_mem)
            if (r.deviceType == 6)
                m_rocm = true;
        bool anyAddress = false;
        for (const auto& r : m_mem)
            anyAddress = anyAddress || r.hasAddress;
        if (anyAddress || m_mem.empty())
            emitMemory();
        else
            emitUnaddressedMemory();
        emitKernels();
        emitAnnotations();
    }

    // Times read from a file without "baseTimeNanoseconds" are its own numbers; a current Kineto file's
    // are µs offsets from that base, written after traceEvents, so a cut loses it (SOURCES.md §A).
    void KinetoParser::addCutAnomaly()
    {
        TimeNs first = std::numeric_limits<TimeNs>::max();
        if (!m_mem.empty())
            first = std::min(first, m_mem.front().ts);
        if (!m_kernels.empty())
            first = std::min(first, m_kernels.front().start);
        if (!m_annotations.empty())
            first = std::min(first, m_annotations.front().start);
        for (const auto& list : m_intervals)
            if (!list.empty())
                first = std::min(first, list.front().start);
        std::string detail = m_cut;
        constexpr TimeNs kEpochLike = 100'000'000'000'000'000; // 1973 in ns: anything smaller is not wall-clock time
        if (m_baseTime == 0 && first < kEpochLike)
            detail += "; without \"baseTimeNanoseconds\" (Kineto writes it after traceEvents) the times are the "
                      "file's own offsets, not wall-clock time";
        m_b.stats().add("truncated", Severity::Error, detail);
    }

    Trace KinetoParser::run(std::string& json)
    {
        parseDocument(json);
        addBadFieldAnomaly();
        if (!m_cut.empty())
            addCutAnomaly();
        resolve();
        if (m_timeOverflows)
            m_b.stats().add("time_overflow", Severity::Error,
                std::to_string(m_firstOverflowA) + " ns + " + std::to_string(m_firstOverflowB)
                    + " ns (baseTimeNanoseconds plus a \"ts\", or a \"ts\" plus its \"dur\") is past the 64-bit "
                      "nanosecond range; such times are clamped to it",
                m_timeOverflows);
        auto& meta = m_b.metadata();
        meta["source_format"] = "kineto";
        meta["tool"] = "pytorch-profiler";
        nlohmann::json counts = nlohmann::json::object();
        for (const auto& [cat, n] : m_categories)
            counts[cat.empty() ? std::string("(none)") : std::string(cat)] = n;
        m_meta["events"] = m_eventCount;
        m_meta["events_by_category"] = std::move(counts);
        m_meta["module_events"] = m_moduleEvents;
        meta["kineto"] = std::move(m_meta);
        if (m_options.progress && !m_options.progress(0.95))
            throw Cancelled();
        return m_b.build();
    }

    // The key of the first member of the object that `json` (starting with '{') opens, or "" when the
    // head ends before that key does.
    std::string_view firstKey(std::string_view json)
    {
        const std::size_t open = json.find_first_not_of(" \t\r\n", 1);
        if (open == std::string_view::npos || json[open] != '"')
            return {};
        const std::size_t close = json.find('"', open + 1);
        return close == std::string_view::npos ? std::string_view() : json.substr(open + 1, close - open - 1);
    }

    // Keys that begin the top-level object of a Kineto file (SOURCES.md §A: "schemaVersion" in the
    // profiler's files, "metadata" in TraceLens's) or may come first in a Chrome trace.
    bool isLeadingKey(std::string_view key)
    {
        return key == "schemaVersion" || key == "metadata" || key == "deviceProperties" || key == "traceEvents"
            || key == "distributedInfo" || key == "displayTimeUnit" || key == "traceName" || key == "otherData";
    }

    class KinetoImporter final : public Importer {
    public:
        std::string_view name() const override { return "kineto"; }
        std::string_view description() const override
        {
            return "PyTorch profiler / Kineto Chrome trace (.pt.trace.json[.gz]): [memory] events, kernels, modules";
        }
        bool sniff(const SniffInput& input) const override
        {
            const std::string_view c = input.content;
            const std::size_t first = c.find_first_not_of(" \t\r\n");
            if (first == std::string_view::npos || c[first] != '{')
                return false;
            if (c.find("\"traceEvents\"") != std::string_view::npos
                || (c.find("\"schemaVersion\"") != std::string_view::npos
                    && c.find("\"deviceProperties\"") != std::string_view::npos))
                return true;
            // What precedes traceEvents can fill the whole head (TraceLens writes ~26 KB of "metadata"
            // first), or the file may be cut before traceEvents: an object that begins with a key a Kineto
            // file begins with and does not close within the head is claimed, so that load() finds
            // traceEvents further on or says where the file ends ("the JSON ends at byte N, before
            // "traceEvents" began").
            return isLeadingKey(firstKey(c.substr(first))) && detail::locateJsonCut(c.substr(first), "traceEvents").cut;
        }
        Trace load(const std::string& path, const LoadOptions& options) const override
        {
            GzipEnd gzip;
            std::string json = readFileMaybeGzip(path, gzip);
            if (gzip.endsEarly)
                return importKinetoJsonFromCutGzip(json, path, gzip.compressedBytes, options);
            return importKinetoJson(json, path, options);
        }
    };
    // importKinetoJson(), with `gzipCut` ("" for a plain file) leading the cut's message when the JSON
    // was inflated from a gzip stream that ends early.
    Trace importKinetoText(
        std::string& json, std::string_view source, const LoadOptions& options, const std::string& gzipCut)
    {
        std::string parseError;
        try {
            KinetoParser parser(source, options);
            if (!gzipCut.empty()) // kept only if the inflated JSON is whole
                parser.setCut(gzipCut
                    + "; the JSON inflated from it is whole (the cut fell in the gzip trailer): "
                      "every event was kept, but the stream's CRC-32 could not be checked");
            return parser.run(json);
        } catch (const CutFile& e) {
            parseError = e.what();
        }
        // The rule for a file cut short (docs/kineto-import.md, "Damaged files"): a cut inside traceEvents
        // keeps every complete event before it, a cut after the list closed keeps all of them, and a cut
        // before the first complete event is an error; each names the byte where the JSON ends.
        const detail::JsonCut cut = detail::locateJsonCut(json, "traceEvents");
        const std::string inflated = gzipCut.empty() ? std::string() : gzipCut + "; inflated, ";
        if (!cut.cut)
            throw FormatError(
                std::string(source) + ": " + inflated + parseError + "; the file is damaged or not a Kineto trace");
        const std::string at
            = inflated + "the JSON ends at byte " + std::to_string(cut.size) + ", " + cut.where("traceEvents");
        const std::uint64_t kept = cut.completeElements;
        if (cut.region == detail::JsonCut::Region::BeforeList || kept == 0)
            throw FormatError(std::string(source) + ": " + at
                + ": the file was cut before its first complete trace event, so it holds nothing to import; copy or "
                  "export it again");
        std::string detail = at + ": the file was cut; ";
        if (cut.region == detail::JsonCut::Region::InList) {
            detail += kept == 1 ? std::string("the 1 complete event before it (traceEvents[0]")
                                : "the " + std::to_string(kept) + " complete events before it (traceEvents[0.."
                    + std::to_string(kept - 1) + "]";
            detail += ", bytes up to " + std::to_string(cut.elementsEnd) + (kept == 1 ? ") was kept" : ") were kept");
            json.resize(cut.elementsEnd);
            json += "]}";
        } else {
            detail += kept == 1 ? std::string("its 1 event was kept")
                                : "all " + std::to_string(kept) + " events were kept";
            if (!cut.member.empty())
                detail += "; the top-level \"" + cut.member + "\" is lost";
            json.resize(cut.membersEnd);
            json += "}";
        }
        KinetoParser parser(source, options, true);
        parser.setCut(std::move(detail));
        return parser.run(json);
    }
} // namespace

Trace importKinetoJson(std::string& json, std::string_view source, const LoadOptions& options)
{
    return importKinetoText(json, source, options, std::string());
}

Trace importKinetoJsonFromCutGzip(
    std::string& json, std::string_view source, std::size_t compressedBytes, const LoadOptions& options)
{
    return importKinetoText(json, source, options, gzipEndsEarlyAt(compressedBytes));
}

std::unique_ptr<Importer> makeKinetoImporter() { return std::make_unique<KinetoImporter>(); }

} // namespace gpumem
