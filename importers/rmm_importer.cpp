#include "importers/rmm_importer.h"

#include "core/file_io.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <array>
#include <charconv>
#include <limits>

namespace gpumem {

namespace {
    constexpr TimeNs kNsPerSecond = 1'000'000'000;
    constexpr TimeNs kDayNs = 24 * 3600 * kNsPerSecond;
    constexpr TimeNs kHalfDayNs = kDayNs / 2;
    constexpr std::array<std::string_view, 6> kColumns = { "Thread", "Time", "Action", "Pointer", "Size", "Stream" };

    // A row that does not parse; where() names the line and column.
    struct RowError {
        std::size_t column = 0; // 0-based index into kColumns; kColumns.size() for the field count
        std::string what;
    };

    template <typename T>
    std::optional<T> parseInt(std::string_view text, int base)
    {
        T value {};
        if (text.empty())
            return std::nullopt;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
        if (ec != std::errc() || end != text.data() + text.size())
            return std::nullopt;
        return value;
    }

    std::string_view stripHexPrefix(std::string_view text)
    {
        if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
            text.remove_prefix(2);
        return text;
    }

    // "HH:MM:SS[.fraction]" → ns since midnight.
    std::optional<TimeNs> parseTimeOfDay(std::string_view text)
    {
        if (text.size() < 8 || text[2] != ':' || text[5] != ':')
            return std::nullopt;
        auto h = parseInt<int>(text.substr(0, 2), 10);
        auto m = parseInt<int>(text.substr(3, 2), 10);
        auto s = parseInt<int>(text.substr(6, 2), 10);
        if (!h || !m || !s || *h > 23 || *m > 59 || *s > 60)
            return std::nullopt;
        TimeNs ns = ((*h * 60 + *m) * 60 + *s) * kNsPerSecond;
        std::string_view rest = text.substr(8);
        if (rest.empty())
            return ns;
        if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10)
            return std::nullopt;
        std::string_view digits = rest.substr(1);
        auto fraction = parseInt<std::int64_t>(digits, 10);
        if (!fraction || digits.find_first_not_of("0123456789") != std::string_view::npos)
            return std::nullopt;
        std::int64_t scale = 1;
        for (std::size_t i = digits.size(); i < 9; ++i)
            scale *= 10;
        return ns + *fraction * scale;
    }

    // The last second since the epoch whose ns still fit an int64 TimeNs (2262-04-11).
    constexpr std::int64_t kMaxEpochSeconds = std::numeric_limits<std::int64_t>::max() / kNsPerSecond - 1;

    // "1634567890.123456" (seconds since the epoch, up to 9 fraction digits, at most kMaxEpochSeconds)
    // → ns.
    std::optional<TimeNs> parseEpochSeconds(std::string_view text)
    {
        auto dot = text.find('.');
        std::string_view whole = text.substr(0, dot);
        std::string_view digits = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
        if (whole.size() > 11 || digits.size() > 9 || whole.find_first_not_of("0123456789") != std::string_view::npos
            || digits.find_first_not_of("0123456789") != std::string_view::npos || (dot != std::string_view::npos && digits.empty()))
            return std::nullopt;
        auto seconds = parseInt<std::int64_t>(whole, 10);
        if (!seconds || *seconds > kMaxEpochSeconds)
            return std::nullopt;
        std::int64_t fraction = digits.empty() ? 0 : *parseInt<std::int64_t>(digits, 10);
        for (std::size_t i = digits.size(); i < 9; ++i)
            fraction *= 10;
        return *seconds * kNsPerSecond + fraction;
    }

    class RmmReader {
    public:
        RmmReader(const std::string& source, std::int32_t ordinal, const LoadOptions& options)
            : m_source(source)
            , m_options(options)
        {
            m_builder.metadata()["source_format"] = "rmm-csv";
            m_device = m_builder.device(DeviceType::Cuda, ordinal);
        }

        Trace read(std::string_view text)
        {
            std::size_t pos = 0;
            std::size_t lineNumber = 0;
            std::size_t rows = 0;
            while (pos < text.size()) {
                ++lineNumber;
                std::size_t nl = text.find('\n', pos);
                const bool complete = nl != std::string_view::npos;
                std::string_view line = text.substr(pos, complete ? nl - pos : std::string_view::npos);
                pos = complete ? nl + 1 : text.size();
                if (!line.empty() && line.back() == '\r')
                    line.remove_suffix(1);
                if (lineNumber == 1) {
                    if (line != kRmmCsvHeader)
                        throw FormatError(m_source + ":1: the first line must be the RMM log header \"" + std::string(kRmmCsvHeader)
                            + "\"; this is not a logging_resource_adaptor CSV");
                    continue;
                }
                if (line.empty())
                    continue;
                if ((lineNumber & 0xffff) == 0 && m_options.progress
                    && !m_options.progress(static_cast<double>(pos) / static_cast<double>(text.size())))
                    throw Cancelled();
                if (auto error = readRow(line, lineNumber)) {
                    std::string where = m_source + ":" + std::to_string(lineNumber) + ": ";
                    std::string column = error->column < kColumns.size()
                        ? "column " + std::to_string(error->column + 1) + " (" + std::string(kColumns[error->column]) + "): "
                        : std::string();
                    if (!complete) {
                        m_builder.stats().add("truncated", Severity::Error,
                            where + "the last line has no line end and does not parse (" + column + error->what
                                + "); the log was cut while being written, the row is dropped");
                        break;
                    }
                    throw FormatError(where + column + error->what + "; fix or delete the row");
                }
                ++rows;
            }
            if (lineNumber == 0)
                throw FormatError(m_source + ": empty file; an RMM log starts with the header \"" + std::string(kRmmCsvHeader) + "\"");
            m_builder.metadata()["time_base"] = m_epochTimes ? "unix epoch (ns)" : "ns since midnight of the first row's day (the log has no date)";
            if (m_dayWraps > 0)
                m_builder.stats().add("rmm_midnight_wrap", Severity::Info,
                    m_source + ": the time of day went back by more than 12 h " + std::to_string(m_dayWraps)
                        + " time(s); each is taken as the log crossing midnight",
                    m_dayWraps);
            return m_builder.build();
        }

    private:
        std::optional<RowError> readRow(std::string_view line, std::size_t lineNumber)
        {
            std::array<std::string_view, 6> f;
            std::size_t n = 0, start = 0;
            while (true) {
                std::size_t comma = line.find(',', start);
                if (n == f.size())
                    return RowError { kColumns.size(), "expected 6 comma-separated fields (" + std::string(kRmmCsvHeader) + "), found more" };
                f[n++] = line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
                if (comma == std::string_view::npos)
                    break;
                start = comma + 1;
            }
            if (n != f.size())
                return RowError { kColumns.size(), "expected 6 comma-separated fields (" + std::string(kRmmCsvHeader) + "), found " + std::to_string(n) };

            MemoryEvent e;
            e.device = m_device;
            e.sequence = lineNumber;
            auto thread = parseInt<std::uint64_t>(f[0], 10);
            if (!thread)
                return RowError { 0, "expected a decimal thread id, got \"" + quoteForMessage(f[0]) + "\"" };
            e.thread = *thread;

            // One log, one clock: a row of the other kind than the first row's (epoch seconds among times
            // of day, or the reverse) would put them 50 years apart (issue 21: a 51-year span).
            const bool epoch = f[1].find(':') == std::string_view::npos;
            if (m_timeKindLine == 0) {
                m_timeKindLine = lineNumber;
                m_epochKind = epoch;
            } else if (epoch != m_epochKind) {
                return RowError { 1, "\"" + quoteForMessage(f[1]) + "\" is " + (epoch ? "seconds since the epoch" : "a time of day")
                        + ", but line " + std::to_string(m_timeKindLine) + " gives "
                        + (m_epochKind ? "seconds since the epoch" : "a time of day")
                        + "; one log has one kind of time (mixed, they would lie decades apart)" };
            }
            auto time = readTime(f[1]);
            if (!time) {
                const std::string_view whole = f[1].substr(0, f[1].find('.'));
                const auto seconds = parseInt<std::int64_t>(whole, 10); // nullopt past int64 too
                if (!whole.empty() && whole.find_first_not_of("0123456789") == std::string_view::npos
                    && (!seconds || *seconds > kMaxEpochSeconds))
                    return RowError { 1, "seconds since the epoch \"" + quoteForMessage(f[1]) + "\" are past "
                            + std::to_string(kMaxEpochSeconds) + " (year 2262), whose ns do not fit int64; expected a time "
                            + "HH:MM:SS.micro or seconds since the epoch such as 1634567890.123456" };
                return RowError { 1, "expected a time HH:MM:SS.micro (or seconds since the epoch), got \"" + quoteForMessage(f[1]) + "\"" };
            }
            e.time = *time;

            if (f[2] == "allocate")
                e.kind = EventKind::Alloc;
            else if (f[2] == "free" || f[2] == "deallocate")
                e.kind = EventKind::Free;
            else if (f[2] == "allocate failure")
                e.kind = EventKind::Oom;
            else
                return RowError { 2, "expected allocate, free or allocate failure, got \"" + quoteForMessage(f[2]) + "\"" };

            if (f[3] == "(nil)" || f[3] == "0" || f[3] == "0x0") {
                e.address = 0;
            } else if (auto address = parseInt<std::uint64_t>(stripHexPrefix(f[3]), 16)) {
                e.address = *address;
            } else {
                return RowError { 3, "expected a hex pointer such as 0x7f0000a00000 or (nil), got \"" + quoteForMessage(f[3]) + "\"" };
            }

            auto size = parseInt<std::uint64_t>(f[4], 10);
            if (!size)
                return RowError { 4, "expected a decimal size in bytes, got \"" + quoteForMessage(f[4]) + "\"" };
            e.size = *size;
            e.requestedSize = *size;

            auto streamHandle = parseInt<std::uint64_t>(stripHexPrefix(f[5]), 16);
            if (!streamHandle)
                return RowError { 5, "expected a hex cudaStream_t such as 0 or 7f12a4001020, got \"" + quoteForMessage(f[5]) + "\"" };
            e.stream = m_builder.stream(m_device, *streamHandle);

            if (e.address == 0 && e.kind != EventKind::Oom) {
                m_builder.stats().add("rmm_null_pointer", Severity::Warning,
                    m_source + ":" + std::to_string(lineNumber) + ": " + std::string(f[2]) + " of a null pointer; row skipped");
                return std::nullopt;
            }
            m_builder.add(e);
            return std::nullopt;
        }

        std::optional<TimeNs> readTime(std::string_view text)
        {
            if (text.find(':') == std::string_view::npos) {
                auto t = parseEpochSeconds(text);
                if (t)
                    m_epochTimes = true;
                return t;
            }
            auto tod = parseTimeOfDay(text);
            if (!tod)
                return std::nullopt;
            TimeNs t = m_dayOffset + *tod;
            if (m_hasPrevious && t < m_previous - kHalfDayNs) {
                m_dayOffset += kDayNs;
                t += kDayNs;
                ++m_dayWraps;
            } else if (m_hasPrevious && m_dayOffset > 0 && t > m_previous + kHalfDayNs) {
                // A row of a slower thread written just after another thread's first row past midnight:
                // it belongs to the day before. The day is not moved back for later rows.
                t -= kDayNs;
                return t;
            }
            m_previous = t;
            m_hasPrevious = true;
            return t;
        }

        const std::string& m_source;
        const LoadOptions& m_options;
        TraceBuilder m_builder;
        DeviceId m_device = 0;
        TimeNs m_dayOffset = 0;
        TimeNs m_previous = 0;
        bool m_hasPrevious = false;
        bool m_epochTimes = false;
        bool m_epochKind = false; // the first row's kind of time
        std::size_t m_timeKindLine = 0; // the line of the first row with a time; 0 before it
        std::uint64_t m_dayWraps = 0;
    };
} // namespace

bool looksLikeRmmCsv(std::string_view head)
{
    if (!head.starts_with(kRmmCsvHeader))
        return false;
    std::string_view rest = head.substr(kRmmCsvHeader.size());
    return rest.empty() || rest.starts_with("\n") || rest.starts_with("\r\n");
}

std::optional<std::int32_t> rmmDeviceOrdinalFromPath(std::string_view path)
{
    auto slash = path.find_last_of('/');
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    for (std::size_t at = name.rfind(".dev"); at != std::string_view::npos; at = at == 0 ? std::string_view::npos : name.rfind(".dev", at - 1)) {
        std::string_view rest = name.substr(at + 4);
        std::size_t digits = rest.find_first_not_of("0123456789");
        std::string_view number = rest.substr(0, digits);
        if (number.empty() || (digits != std::string_view::npos && rest[digits] != '.'))
            continue;
        if (auto ordinal = parseInt<std::int32_t>(number, 10))
            return ordinal;
    }
    return std::nullopt;
}

Trace importRmmCsv(std::string_view text, const std::string& source, std::int32_t deviceOrdinal, const LoadOptions& options)
{
    return RmmReader(source, deviceOrdinal, options).read(text);
}

Trace readRmmCsv(const std::string& path, const LoadOptions& options)
{
    std::string text = readFileMaybeGzip(path);
    return importRmmCsv(text, path, rmmDeviceOrdinalFromPath(path).value_or(0), options);
}

namespace {
    class RmmCsvImporter final : public Importer {
    public:
        std::string_view name() const override { return "rmm-csv"; }
        std::string_view description() const override
        {
            return "RAPIDS RMM logging_resource_adaptor CSV (Thread,Time,Action,Pointer,Size,Stream); device from .dev<N> in the name";
        }
        bool sniff(const SniffInput& in) const override { return looksLikeRmmCsv(in.content); }
        Trace load(const std::string& path, const LoadOptions& options) const override { return readRmmCsv(path, options); }
    };
} // namespace

std::unique_ptr<Importer> makeRmmCsvImporter() { return std::make_unique<RmmCsvImporter>(); }

} // namespace gpumem
