#include "importers/oom_text_importer.h"

#include "core/outside_memory.h"

#include "core/file_io.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <type_traits>
#include <vector>

namespace gpumem {

namespace {
    constexpr std::string_view kTorchAnchor = " out of memory. Tried to allocate ";
    constexpr std::string_view kSummaryAnchor = "PyTorch CUDA memory summary, device ID ";
    constexpr std::string_view kTfShapeAnchor = "OOM when allocating tensor with shape[";
    constexpr std::string_view kTfAllocatorAnchor = ") ran out of memory trying to allocate ";
    constexpr std::string_view kTfOldAnchor = "Ran out of memory trying to allocate ";
    constexpr std::string_view kXlaAnchor = "Out of memory while trying to allocate ";
    constexpr std::string_view kBfcSumAnchor = "Sum Total of in-use chunks: ";
    // The longest message text kept in the metadata.
    constexpr std::size_t kMaxMessageBytes = 2000;

    __extension__ typedef unsigned __int128 Wide; // exact products of a size and its unit

    bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
    bool isDigit(char c) { return c >= '0' && c <= '9'; }
    bool isAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

    std::string_view trim(std::string_view s)
    {
        while (!s.empty() && isSpace(s.front()))
            s.remove_prefix(1);
        while (!s.empty() && isSpace(s.back()))
            s.remove_suffix(1);
        return s;
    }

    // Runs of whitespace (line ends included) as one space: how a message wrapped by a terminal or an
    // issue tracker reads.
    std::string collapseSpaces(std::string_view s, std::size_t maxBytes)
    {
        std::string out;
        bool space = false;
        for (char c : trim(s)) {
            if (isSpace(c)) {
                space = true;
                continue;
            }
            if (space)
                out += ' ';
            space = false;
            out += c;
            if (out.size() >= maxBytes)
                break;
        }
        return out;
    }

    std::size_t lineNumberAt(std::string_view text, std::size_t pos)
    {
        return 1
            + static_cast<std::size_t>(
                std::count(text.begin(), text.begin() + std::ptrdiff_t(std::min(pos, text.size())), '\n'));
    }

    std::string_view lineAt(std::string_view text, std::size_t pos)
    {
        std::size_t begin = text.rfind('\n', pos == 0 ? 0 : pos - 1);
        begin = begin == std::string_view::npos || pos == 0 ? 0 : begin + 1;
        std::size_t end = text.find('\n', pos);
        return text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    }

    template <typename T> std::optional<T> parseInt(std::string_view s)
    {
        T value {};
        if (s.empty())
            return std::nullopt;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
        if (ec != std::errc() || end != s.data() + s.size())
            return std::nullopt;
        return value;
    }

    // A size as a report printed it, and what it means in bytes.
    struct Figure {
        std::string text; // as printed, spaces collapsed: "14.06 GiB", "1062 MB", "0 bytes"
        Bytes bytes = 0; // the nearest byte (rounded figures) or the lower end (floored figures)
        Bytes plusMinus = 0; // rounded figures: the true value is within bytes ± plusMinus
        Bytes upTo = 0; // floored figures: the true value is within bytes … bytes + upTo
        std::size_t line = 0;
    };

    // PyTorch's c10 format_size (CUDACachingAllocator.cpp): "N bytes" up to 1 KiB, then two decimals of
    // KiB, MiB or GiB; TensorFlow's HumanReadableNumBytes writes "512B", "7.2KiB", "6.66GiB".
    std::optional<Bytes> binaryUnit(std::string_view unit)
    {
        static constexpr std::pair<std::string_view, Bytes> kUnits[]
            = { { "bytes", 1 }, { "B", 1 }, { "KiB", Bytes(1) << 10 }, { "MiB", Bytes(1) << 20 },
                  { "GiB", Bytes(1) << 30 }, { "TiB", Bytes(1) << 40 }, { "PiB", Bytes(1) << 50 } };
        for (const auto& [name, scale] : kUnits)
            if (unit == name)
                return scale;
        return std::nullopt;
    }

    // A cursor over the text with the whitespace-tolerant matching of a message that may be wrapped.
    class Scanner {
    public:
        enum class Step { Ok, Mismatch, Cut };

        Scanner(std::string_view text, const std::string& source)
            : m_text(text)
            , m_source(source)
        {
        }

        std::string_view text() const { return m_text; }
        std::size_t pos() const { return m_pos; }
        void seek(std::size_t pos) { m_pos = pos; }
        bool atEnd() const { return m_pos >= m_text.size(); }
        std::string where(std::size_t pos) const
        {
            return m_source + ":" + std::to_string(lineNumberAt(m_text, pos)) + ": ";
        }
        // What follows the cursor, for messages.
        std::string next(std::size_t n = 40) const
        {
            return quoteForMessage(lineAt(m_text, m_pos).substr(m_pos - lineStart(m_pos)), n);
        }

        // Matches `literal`: each space in it matches one or more whitespace characters (a line end
        // too); the rest must match exactly. On a mismatch after a line end, or at the end of the text,
        // the answer is Cut (the message stops there); a mismatch inside a line is Mismatch. The cursor
        // moves only on Ok.
        Step literal(std::string_view literal)
        {
            std::size_t p = m_pos;
            bool crossedLine = false;
            for (std::size_t i = 0; i < literal.size(); ++i) {
                if (literal[i] == ' ') {
                    while (i + 1 < literal.size() && literal[i + 1] == ' ')
                        ++i;
                    const std::size_t start = p;
                    while (p < m_text.size() && isSpace(m_text[p]))
                        crossedLine |= m_text[p++] == '\n';
                    if (p == start)
                        return p >= m_text.size() ? Step::Cut : Step::Mismatch;
                    continue;
                }
                if (p >= m_text.size())
                    return Step::Cut;
                if (m_text[p] != literal[i])
                    return crossedLine ? Step::Cut : Step::Mismatch;
                ++p;
            }
            m_pos = p;
            m_crossedLine = crossedLine;
            return Step::Ok;
        }

        // Skips whitespace; true when a line end was among it.
        bool skipSpace()
        {
            bool crossed = false;
            while (m_pos < m_text.size() && isSpace(m_text[m_pos]))
                crossed |= m_text[m_pos++] == '\n';
            m_crossedLine = crossed;
            return crossed;
        }

        // Digits at the cursor, or nullopt (cursor unmoved).
        std::optional<std::uint64_t> integer()
        {
            std::size_t p = m_pos;
            while (p < m_text.size() && isDigit(m_text[p]))
                ++p;
            auto value = parseInt<std::uint64_t>(m_text.substr(m_pos, p - m_pos));
            if (value)
                m_pos = p;
            return value;
        }

        // True when only spaces are left on the cursor's line.
        bool lineEndsHere() const
        {
            std::size_t p = m_pos;
            while (p < m_text.size() && (m_text[p] == ' ' || m_text[p] == '\t' || m_text[p] == '\r'))
                ++p;
            return p >= m_text.size() || m_text[p] == '\n';
        }

        // True when nothing of the message follows: the end of the text, or the last literal crossed a line end.
        bool cutHere() const { return atEnd() || m_crossedLine; }

        // A figure "<digits>[.<digits>] <unit>" (PyTorch format_size, TensorFlow HumanReadableNumBytes with
        // the space optional), rounded to the nearest byte. nullopt when no digit is at the cursor; throws
        // FormatError naming `field` when a number is cut off, has no unit or has a unit that is not binary.
        std::optional<Figure> figure(std::string_view field)
        {
            const std::size_t start = m_pos;
            std::size_t p = m_pos;
            while (p < m_text.size() && isDigit(m_text[p]))
                ++p;
            if (p == start)
                return std::nullopt;
            const std::string_view whole = m_text.substr(start, p - start);
            std::string_view fraction;
            if (p < m_text.size() && m_text[p] == '.' && p + 1 < m_text.size() && isDigit(m_text[p + 1])) {
                const std::size_t f = ++p;
                while (p < m_text.size() && isDigit(m_text[p]))
                    ++p;
                fraction = m_text.substr(f, p - f);
            } else if (p < m_text.size() && m_text[p] == '.' && (p + 1 >= m_text.size() || isSpace(m_text[p + 1]))) {
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" is cut off: \""
                    + quoteForMessage(m_text.substr(start, p + 1 - start)) + "\" has no digits after the point");
            }
            const std::size_t numberEnd = p;
            while (p < m_text.size() && (m_text[p] == ' ' || m_text[p] == '\t'))
                ++p;
            const std::size_t unitStart = p;
            while (p < m_text.size() && isAlpha(m_text[p]))
                ++p;
            const std::string_view number = m_text.substr(start, numberEnd - start);
            const std::string_view unit = m_text.substr(unitStart, p - unitStart);
            if (unit.empty())
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" is cut off: \""
                    + quoteForMessage(number)
                    + "\" has no unit (PyTorch writes bytes, KiB, MiB or GiB after each size)");
            auto scale = binaryUnit(unit);
            if (!scale)
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" has an unknown unit \""
                    + quoteForMessage(unit) + "\" in \"" + quoteForMessage(m_text.substr(start, p - start))
                    + "\"; PyTorch's format_size writes bytes, KiB, MiB or GiB");
            if (*scale == 1 && !fraction.empty())
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" \""
                    + quoteForMessage(m_text.substr(start, p - start)) + "\" is not a whole number of bytes");
            // At most 22 digits in all, so digits × 2^50 fits in 128 bits.
            if (whole.size() > 20 || fraction.size() > 9 || whole.size() + fraction.size() > 22)
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" \""
                    + quoteForMessage(number) + "\" has too many digits for a size in bytes");
            Wide digits = *parseInt<std::uint64_t>(whole.size() > 19 ? whole.substr(0, 19) : whole);
            if (whole.size() > 19)
                digits = digits * 10 + unsigned(whole.back() - '0');
            Wide denominator = 1;
            for (char c : fraction) {
                digits = digits * 10 + unsigned(c - '0');
                denominator *= 10;
            }
            const Wide value = (digits * *scale + denominator / 2) / denominator;
            if (value > std::numeric_limits<Bytes>::max())
                throw FormatError(where(start) + "the figure \"" + std::string(field) + "\" \""
                    + quoteForMessage(m_text.substr(start, p - start)) + "\" is more than 2^64 - 1 bytes");
            Figure f;
            f.text = std::string(number) + " " + std::string(unit);
            f.bytes = static_cast<Bytes>(value);
            // Half a unit of the last digit printed (none for a count of bytes).
            f.plusMinus = *scale == 1 ? 0 : static_cast<Bytes>((*scale + 2 * denominator - 1) / (2 * denominator));
            f.line = lineNumberAt(m_text, start);
            m_pos = p;
            return f;
        }

    private:
        std::size_t lineStart(std::size_t pos) const
        {
            if (pos == 0)
                return 0;
            std::size_t nl = m_text.rfind('\n', pos - 1);
            return nl == std::string_view::npos ? 0 : nl + 1;
        }

        std::string_view m_text;
        const std::string& m_source;
        std::size_t m_pos = 0;
        bool m_crossedLine = false;
    };

    // The trace every importer here builds: one device, counters of one sample at time 0, an optional Oom.
    class CounterTrace {
    public:
        CounterTrace(std::string_view format) { m_b.metadata()["source_format"] = std::string(format); }

        TraceBuilder& builder() { return m_b; }
        nlohmann::json& metadata() { return m_b.metadata(); }
        ImportStats& stats() { return m_b.stats(); }

        // One sample at time 0 on the device; a name already recorded keeps its first value.
        void counter(const std::string& name, std::int64_t value)
        {
            if (std::find(m_names.begin(), m_names.end(), name) != m_names.end())
                return;
            m_names.push_back(name);
            const std::uint32_t series = m_b.addCounterSeries({ m_b.intern(name), m_device });
            m_b.add(CounterSample { 0, series, value });
        }
        void counter(const std::string& name, const Figure& f)
        {
            counter(name,
                static_cast<std::int64_t>(std::min<Bytes>(f.bytes, Bytes(std::numeric_limits<std::int64_t>::max()))));
            figure(name, f);
        }
        // Records how a figure was printed and how far it may be from the value stored.
        void figure(const std::string& name, const Figure& f)
        {
            auto& figures = m_b.metadata()["oom_figures"];
            if (figures.contains(name))
                return;
            nlohmann::json j { { "text", f.text }, { "bytes", f.bytes }, { "line", f.line } };
            if (f.upTo)
                j["up_to_bytes"] = f.upTo;
            else
                j["plus_minus_bytes"] = f.plusMinus;
            figures[name] = std::move(j);
        }

        void oom(Bytes size, Bytes requested)
        {
            MemoryEvent e;
            e.time = 0;
            e.kind = EventKind::Oom;
            e.device = m_device;
            e.stream = m_b.stream(m_device, 0);
            e.size = size;
            e.requestedSize = requested;
            m_b.add(e);
        }

        Trace build() { return m_b.build(); }

        DeviceId deviceSized(DeviceType type, std::int32_t ordinal, Bytes total)
        {
            Device d;
            d.type = type;
            d.ordinal = ordinal;
            d.totalMemory = total;
            m_device = m_b.addDevice(d);
            return m_device;
        }

    private:
        TraceBuilder m_b;
        DeviceId m_device = 0;
        std::vector<std::string> m_names;
    };

    // ---------------------------------------------------------------------------------------------
    // PyTorch's OutOfMemoryError text (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc).

    struct OtherProcess {
        std::uint64_t pid = 0;
        Figure used;
    };

    struct TorchMessage {
        std::size_t begin = 0, end = 0; // byte range, from "CUDA" to the last field read
        DeviceType type = DeviceType::Cuda;
        std::optional<std::int32_t> ordinal;
        std::string wording; // "current", "current-capacty-typo", "older-reserved", "oldest-cached"
        std::optional<Figure> request, total, free, allowed, allocated, privatePools, unallocated, reserved, cached,
            self;
        std::vector<OtherProcess> others;
        std::string hint, hintSetting;
        std::string cutAfter; // non-empty: the message stops after this field
        std::string unrecognized; // non-empty: text where PyTorch's wording was expected
        std::vector<std::string> unknownFields;
    };

    // Finds the anchor from `from`; npos when there is none. Returns the offset of "CUDA"/"HIP".
    std::size_t findTorchMessage(std::string_view text, std::size_t from, DeviceType& type)
    {
        for (std::size_t at = text.find(kTorchAnchor, from); at != std::string_view::npos;
             at = text.find(kTorchAnchor, at + 1)) {
            if (at >= 4 && text.substr(at - 4, 4) == "CUDA") {
                type = DeviceType::Cuda;
                return at - 4;
            }
            if (at >= 3 && text.substr(at - 3, 3) == "HIP") {
                type = DeviceType::Hip;
                return at - 3;
            }
        }
        return std::string_view::npos;
    }

    class TorchMessageParser {
    public:
        TorchMessageParser(std::string_view text, const std::string& source)
            : m_s(text, source)
        {
        }

        TorchMessage parse(std::size_t begin, DeviceType type)
        {
            m_m = TorchMessage {};
            m_m.begin = begin;
            m_m.type = type;
            m_s.seek(begin + (type == DeviceType::Cuda ? 4 : 3) + kTorchAnchor.size());
            m_m.request = m_s.figure("Tried to allocate");
            if (!m_m.request)
                throw FormatError(m_s.where(m_s.pos()) + "\"Tried to allocate\" is not followed by a size (got \""
                    + m_s.next() + "\"); expected e.g. \"Tried to allocate 20.00 MiB\"");
            m_last = "Tried to allocate";
            m_m.end = m_s.pos();
            const auto current = m_s.literal(". GPU ");
            if (current == Scanner::Step::Ok) {
                parseCurrent();
                return m_m;
            }
            const auto older = m_s.literal(" (GPU ");
            if (older == Scanner::Step::Ok)
                parseOlder();
            else
                stop(current == Scanner::Step::Cut || older == Scanner::Step::Cut || m_s.lineEndsHere(),
                    "\". GPU N has a total capacity of\" or \" (GPU N; … total capacity;\"");
            return m_m;
        }

    private:
        // Records where the message stops: cut (the text or line ends) or unrecognized wording.
        void stop(bool cut, std::string_view expected)
        {
            if (cut)
                m_m.cutAfter = m_last;
            else
                m_m.unrecognized = "after \"" + m_last + "\" the text reads \"" + m_s.next()
                    + "\" where PyTorch writes " + std::string(expected);
        }

        // Matches a literal; on failure records the stop and returns false.
        bool expect(std::string_view literal)
        {
            auto step = m_s.literal(literal);
            if (step == Scanner::Step::Ok)
                return true;
            stop(step == Scanner::Step::Cut, "\"" + std::string(trim(literal)) + "\"");
            return false;
        }

        // Reads a figure for `field`; on a missing number records the stop and returns nullopt.
        std::optional<Figure> figure(std::string_view field)
        {
            auto f = m_s.figure(field);
            if (!f) {
                stop(m_s.cutHere(), "a size for \"" + std::string(field) + "\"");
                return std::nullopt;
            }
            m_last = std::string(field);
            m_m.end = m_s.pos();
            return f;
        }

        bool ordinal()
        {
            auto n = m_s.integer();
            if (!n || *n > 65535) {
                stop(m_s.cutHere(), "the GPU number");
                return false;
            }
            m_m.ordinal = static_cast<std::int32_t>(*n);
            m_last = "GPU " + std::to_string(*n);
            m_m.end = m_s.pos();
            return true;
        }

        // "… GPU 0 has a total capacity of X of which X is free. [Process N has X memory in use. ]
        // [Including non-PyTorch memory, this process has X memory in use. ][X allowed; ]Of the allocated
        // memory X is allocated by PyTorch, [with X allocated in private pools (e.g., CUDA Graphs), ]and X is
        // reserved by PyTorch but unallocated. [If reserved but unallocated memory is large try setting S to
        // avoid fragmentation.]"
        void parseCurrent()
        {
            m_m.wording = "current";
            if (!ordinal())
                return;
            if (!expect(" has a total "))
                return;
            if (m_s.literal("capacty of ") == Scanner::Step::Ok)
                m_m.wording = "current-capacty-typo";
            else if (!expect("capacity of "))
                return;
            if (!(m_m.total = figure("total capacity")) || !expect(" of which ") || !(m_m.free = figure("free"))
                || !expect(" is free."))
                return;
            m_m.end = m_s.pos();
            while (true) { // literal() moves the cursor only on a match
                if (m_s.literal(" Process ") == Scanner::Step::Ok) {
                    auto pid = m_s.integer();
                    if (!pid) {
                        stop(m_s.cutHere(), "a process id");
                        return;
                    }
                    m_last = "Process " + std::to_string(*pid);
                    auto used = (expect(" has ") ? figure("Process " + std::to_string(*pid) + " has") : std::nullopt);
                    if (!used || !expect(" memory in use."))
                        return;
                    m_m.others.push_back({ *pid, *used });
                    m_m.end = m_s.pos();
                    continue;
                }
                if (m_s.literal(" Including non-PyTorch memory, this process has ") == Scanner::Step::Ok) {
                    if (!(m_m.self = figure("this process has")) || !expect(" memory in use."))
                        return;
                    m_m.end = m_s.pos();
                    continue;
                }
                break;
            }
            const std::size_t mark = m_s.pos();
            m_s.skipSpace();
            if (auto allowed = m_s.figure("allowed")) {
                m_m.allowed = allowed;
                m_last = "allowed";
                if (!expect(" allowed;"))
                    return;
            } else {
                m_s.seek(mark);
            }
            if (!expect(" Of the allocated memory ") || !(m_m.allocated = figure("allocated by PyTorch"))
                || !expect(" is allocated by PyTorch,"))
                return;
            m_m.end = m_s.pos();
            if (m_s.literal(" with ") == Scanner::Step::Ok) {
                if (!(m_m.privatePools = figure("allocated in private pools"))
                    || !expect(" allocated in private pools (e.g., CUDA Graphs),"))
                    return;
            }
            if (!expect(" and ") || !(m_m.unallocated = figure("reserved by PyTorch but unallocated"))
                || !expect(" is reserved by PyTorch but unallocated."))
                return;
            m_m.end = m_s.pos();
            hint(" If reserved but unallocated memory is large try setting ");
        }

        // "… (GPU 0; X total capacity; X already allocated; X free; [X allowed; ]X reserved in total by
        // PyTorch)" — in the earliest versions (pytorch/pytorch#13751) "…; X cached)". [If reserved memory is >>
        // allocated memory try setting max_split_size_mb to avoid fragmentation.]
        void parseOlder()
        {
            m_m.wording = "older-reserved";
            if (!ordinal() || !expect("; "))
                return;
            while (true) {
                m_s.skipSpace();
                const std::size_t start = m_s.pos();
                auto f = m_s.figure("a figure of the (GPU …) list");
                if (!f) {
                    stop(m_s.cutHere(), "a size");
                    return;
                }
                // The label runs to the next ';' or ')' on this line.
                const std::string_view rest = m_s.text().substr(m_s.pos());
                const std::size_t stopAt = rest.find_first_of(";)\n");
                if (stopAt == std::string_view::npos || rest[stopAt] == '\n') {
                    m_last = std::string(trim(rest.substr(0, stopAt)));
                    m_m.cutAfter
                        = m_last.empty() ? std::string(trim(m_s.text().substr(start, m_s.pos() - start))) : m_last;
                    return;
                }
                const std::string label(trim(rest.substr(0, stopAt)));
                if (label == "total capacity")
                    m_m.total = f;
                else if (label == "already allocated")
                    m_m.allocated = f;
                else if (label == "free")
                    m_m.free = f;
                else if (label == "allowed")
                    m_m.allowed = f;
                else if (label == "reserved in total by PyTorch")
                    m_m.reserved = f;
                else if (label == "cached") {
                    m_m.cached = f;
                    m_m.wording = "oldest-cached";
                } else
                    m_m.unknownFields.push_back(f->text + " " + label);
                m_last = label;
                m_s.seek(m_s.pos() + stopAt + 1);
                m_m.end = m_s.pos();
                if (rest[stopAt] == ')')
                    break;
            }
            hint(" If reserved memory is >> allocated memory try setting ");
        }

        // The hint sentence after the figures: the setting it names, up to " to avoid fragmentation.".
        void hint(std::string_view opening)
        {
            const std::size_t mark = m_s.pos();
            if (m_s.literal(opening) != Scanner::Step::Ok)
                return;
            const std::size_t settingStart = m_s.pos();
            const std::string_view rest = m_s.text().substr(settingStart, 400);
            std::size_t end = rest.find(" to avoid");
            if (end == std::string_view::npos)
                end = std::min(rest.find_first_of(" \n"), rest.size());
            std::string setting(trim(rest.substr(0, end)));
            if (setting.starts_with("PYTORCH_CUDA_ALLOC_CONF="))
                setting.erase(0, std::string_view("PYTORCH_CUDA_ALLOC_CONF=").size());
            m_m.hintSetting = setting;
            std::size_t sentenceEnd = rest.find("fragmentation.");
            sentenceEnd
                = sentenceEnd == std::string_view::npos ? end : sentenceEnd + std::string_view("fragmentation.").size();
            m_m.hint = collapseSpaces(
                std::string(m_s.text().substr(mark, settingStart - mark)) + std::string(rest.substr(0, sentenceEnd)),
                400);
            m_m.end = settingStart + sentenceEnd;
        }

        Scanner m_s;
        TorchMessage m_m;
        std::string m_last;
    };

    std::string sumText(const Figure& a, const Figure& b) { return a.text + " + " + b.text; }

    Figure sum(const Figure& a, const Figure& b)
    {
        Figure f;
        f.text = sumText(a, b);
        f.bytes = a.bytes + b.bytes;
        f.plusMinus = a.plusMinus + b.plusMinus;
        f.line = a.line;
        return f;
    }

    // Figures that contradict each other beyond their rounding.
    void checkTorchMessage(const TorchMessage& m, const Figure* reserved, CounterTrace& t, const std::string& source)
    {
        auto report = [&](const std::string& what) {
            t.stats().add("oom_figures_inconsistent", Severity::Warning,
                source + ":" + std::to_string(m.request->line) + ": " + what);
        };
        auto exceeds = [](const Figure& a, const Figure& b) { return a.bytes > b.bytes + a.plusMinus + b.plusMinus; };
        if (m.total && m.free && exceeds(*m.free, *m.total))
            report("the device has " + m.free->text + " free, more than its total capacity of " + m.total->text);
        if (m.self && reserved && exceeds(*reserved, *m.self))
            report("PyTorch reserved " + reserved->text + " (allocated + reserved but unallocated), more than the "
                + m.self->text + " this process has in use");
        if (m.allocated && m.reserved && exceeds(*m.allocated, *m.reserved))
            report("\"already allocated\" " + m.allocated->text + " is more than \"reserved in total by PyTorch\" "
                + m.reserved->text);
        if (m.total && (m.self || !m.others.empty())) {
            Bytes used = m.free ? m.free->bytes : 0, slack = m.free ? m.free->plusMinus : 0;
            for (const auto& p : m.others) {
                used += p.used.bytes;
                slack += p.used.plusMinus;
            }
            if (m.self) {
                used += m.self->bytes;
                slack += m.self->plusMinus;
            }
            if (used > m.total->bytes + m.total->plusMinus + slack)
                report("the processes' memory in use plus the free memory (" + std::to_string(used)
                    + " B) exceed the total capacity of " + m.total->text);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // torch.cuda.memory_summary() (torch/cuda/memory.py, memory_summary): a 75-column box of
    // "| <metric> | Cur Usage | Peak Usage | Tot Alloc | Tot Freed |" rows, sizes by _format_size (the value
    // floor-divided by 1024 per unit step; "KB"/"MB"/"GB" of older versions mean the same binary units) and
    // counts by _format_count (floor-divided by 1000: "K", "M").

    struct SummaryMetric {
        std::string_view row; // as memory_summary prints it
        std::string_view key; // torch.cuda.memory_stats() key
        bool bytes; // _format_size, else _format_count
        bool pooled; // has "from large pool"/"from small pool" sub-rows
    };
    constexpr SummaryMetric kSummaryMetrics[] = {
        { "Allocated memory", "allocated_bytes", true, true },
        { "Active memory", "active_bytes", true, true },
        { "Requested memory", "requested_bytes", true, true },
        { "GPU reserved memory", "reserved_bytes", true, true },
        { "Reserved memory", "reserved_bytes", true, true },
        { "Non-releasable memory", "inactive_split_bytes", true, true },
        { "Allocations", "allocation", false, true },
        { "Active allocs", "active", false, true },
        { "GPU reserved segments", "segment", false, true },
        { "Non-releasable allocs", "inactive_split", false, true },
        { "Oversize allocations", "oversize_allocations", false, false },
        { "Oversize GPU segments", "oversize_segments", false, false },
    };
    constexpr std::array<std::string_view, 4> kSummaryColumns = { "current", "peak", "allocated", "freed" };
    constexpr std::array<std::string_view, 4> kSummaryColumnTitles
        = { "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed" };

    struct SummaryTable {
        std::int32_t device = 0;
        std::size_t line = 0;
        bool closed = false; // the closing "====" rule was seen
        std::size_t lastLine = 0;
        std::optional<std::uint64_t> ooms, retries;
        // counter name → figure (bytes) or count
        std::vector<std::pair<std::string, Figure>> cells;
        std::vector<std::string> unknownRows;
        std::size_t end = 0; // byte offset after the table
    };

    // The integer after `label` (and spaces) on `line`: memory_summary's "CUDA OOMs: 1", BFC's "memory_limit_: N".
    template <typename T> std::optional<T> integerAfter(std::string_view line, std::string_view label)
    {
        std::size_t at = line.find(label);
        if (at == std::string_view::npos)
            return std::nullopt;
        std::string_view rest = line.substr(at + label.size());
        while (!rest.empty() && rest.front() == ' ')
            rest.remove_prefix(1);
        std::size_t n = std::is_signed_v<T> && rest.starts_with('-') ? 1 : 0;
        while (n < rest.size() && isDigit(rest[n]))
            ++n;
        return parseInt<T>(rest.substr(0, n));
    }

    // One cell: "14324 MiB", "0 B", "4102", "9 K". Throws FormatError naming the row and column.
    Figure summaryCell(std::string_view cell, const SummaryMetric& metric, std::size_t column, std::string_view rowName,
        const std::string& where, std::size_t line)
    {
        const std::string_view text = trim(cell);
        auto fail = [&](const std::string& why) -> FormatError {
            return FormatError(where + "memory_summary row \"" + std::string(rowName) + "\", column "
                + std::string(kSummaryColumnTitles[column]) + ": " + why);
        };
        std::size_t n = 0;
        while (n < text.size() && isDigit(text[n]))
            ++n;
        if (n == 0 || (n < text.size() && text[n] == '.'))
            throw fail("expected a whole number" + std::string(metric.bytes ? " and a unit" : "")
                + " (memory_summary floors every figure to a whole unit), got \"" + quoteForMessage(text) + "\"");
        const std::string_view unit = trim(text.substr(n));
        if (n > 19)
            throw fail("\"" + quoteForMessage(text) + "\" has too many digits");
        const std::uint64_t value = *parseInt<std::uint64_t>(text.substr(0, n));
        Bytes scale = 1;
        if (metric.bytes) {
            static constexpr std::pair<std::string_view, int> kUnits[]
                = { { "B", 0 }, { "KiB", 1 }, { "MiB", 2 }, { "GiB", 3 }, { "TiB", 4 }, { "PiB", 5 }, { "KB", 1 },
                      { "MB", 2 }, { "GB", 3 }, { "TB", 4 }, { "PB", 5 } };
            const auto* it
                = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& u) { return u.first == unit; });
            if (it == std::end(kUnits))
                throw fail(unit.empty() ? "\"" + quoteForMessage(text)
                            + "\" has no unit (memory_summary writes B, KiB, MiB, GiB, TiB or PiB)"
                                        : "unknown unit \"" + quoteForMessage(unit) + "\" in \"" + quoteForMessage(text)
                            + "\"; memory_summary writes B, KiB, MiB, GiB, TiB or PiB (KB, MB, … in older versions)");
            scale = Bytes(1) << (10 * it->second);
        } else {
            if (unit == "K")
                scale = 1000;
            else if (unit == "M")
                scale = 1000 * 1000;
            else if (!unit.empty())
                throw fail("unknown count suffix \"" + quoteForMessage(unit) + "\" in \"" + quoteForMessage(text)
                    + "\"; memory_summary writes a count, or a count with K or M");
        }
        if (value > std::numeric_limits<Bytes>::max() / scale)
            throw fail("\"" + quoteForMessage(text) + "\" is more than 2^64 - 1");
        Figure f;
        f.text = std::string(text.substr(0, n)) + (unit.empty() ? "" : " " + std::string(unit));
        f.bytes = value * scale;
        f.upTo = scale - 1;
        f.line = line;
        return f;
    }

    // Reads the table whose header holds the anchor at `at`. Throws FormatError for a cell that does not parse.
    SummaryTable parseSummary(std::string_view text, std::size_t at, const std::string& source, ImportStats& stats)
    {
        SummaryTable t;
        t.line = lineNumberAt(text, at);
        std::string_view rest = text.substr(at + kSummaryAnchor.size());
        std::size_t n = 0;
        while (n < rest.size() && isDigit(rest[n]))
            ++n;
        auto device = parseInt<std::int32_t>(rest.substr(0, n));
        if (!device)
            throw FormatError(source + ":" + std::to_string(t.line) + ": \"" + std::string(kSummaryAnchor)
                + "\" is not followed by a device number");
        t.device = *device;
        std::size_t pos = text.find('\n', at);
        const SummaryMetric* metric = nullptr;
        std::string_view metricRow;
        bool rows = false;
        std::size_t lineNo = t.line;
        while (pos != std::string_view::npos && pos + 1 < text.size()) {
            const std::size_t begin = pos + 1;
            pos = text.find('\n', begin);
            const std::string_view line
                = text.substr(begin, pos == std::string_view::npos ? std::string_view::npos : pos - begin);
            ++lineNo;
            const std::size_t bar = line.find('|');
            if (bar == std::string_view::npos)
                break;
            t.lastLine = lineNo;
            t.end = pos == std::string_view::npos ? text.size() : pos;
            const std::string_view body = trim(line.substr(bar));
            const std::string_view inner = trim(
                body.substr(1, body.size() >= 2 && body.back() == '|' ? body.size() - 2 : std::string_view::npos));
            if (!inner.empty() && inner.find_first_not_of('=') == std::string_view::npos) {
                if (rows) {
                    t.closed = true;
                    break;
                }
                continue;
            }
            if (inner.empty() || inner.find_first_not_of('-') == std::string_view::npos)
                continue;
            if (auto ooms = integerAfter<std::uint64_t>(line, "CUDA OOMs:"))
                t.ooms = ooms;
            if (auto retries = integerAfter<std::uint64_t>(line, "cudaMalloc retries:"))
                t.retries = retries;
            if (line.find("CUDA OOMs:") != std::string_view::npos
                || line.find("cudaMalloc retries:") != std::string_view::npos)
                continue;
            std::vector<std::string_view> cells;
            for (std::size_t p = bar + 1; p <= line.size();) {
                std::size_t q = line.find('|', p);
                if (q == std::string_view::npos)
                    break;
                cells.push_back(line.substr(p, q - p));
                p = q + 1;
            }
            if (cells.empty())
                continue;
            const std::string_view name = trim(cells[0]);
            if (name == "Metric")
                continue;
            if (cells.size() < 5) {
                stats.add("memory_summary_truncated", Severity::Warning,
                    source + ":" + std::to_string(lineNo) + ": the memory_summary row \"" + quoteForMessage(name)
                        + "\" is cut off (fewer than 4 values); the table is read up to the line before");
                t.closed = true; // reported here, not again as an unclosed table
                break;
            }
            std::string pool = "all";
            if (name == "from large pool" || name == "from small pool") {
                if (!metric || !metric->pooled)
                    continue;
                pool = name == "from large pool" ? "large_pool" : "small_pool";
            } else {
                metric = nullptr;
                for (const auto& m : kSummaryMetrics)
                    if (m.row == name)
                        metric = &m;
                metricRow = name;
                if (!metric) {
                    t.unknownRows.push_back(std::string(name));
                    continue;
                }
            }
            rows = true;
            const std::string where = source + ":" + std::to_string(lineNo) + ": ";
            const std::string rowName
                = pool == "all" ? std::string(metricRow) : std::string(metricRow) + " " + std::string(name);
            for (std::size_t c = 0; c < 4; ++c) {
                Figure f = summaryCell(cells[1 + c], *metric, c, rowName, where, lineNo);
                std::string counter = std::string(metric->key) + "." + (metric->pooled ? pool + "." : std::string())
                    + std::string(kSummaryColumns[c]);
                if (!metric->bytes)
                    counter += " (count)";
                t.cells.emplace_back(std::move(counter), std::move(f));
            }
        }
        return t;
    }

    // Adds a table's counters to the trace (its device must be the trace's device).
    void addSummary(const SummaryTable& t, CounterTrace& trace, const std::string& source)
    {
        auto& meta = trace.metadata()["memory_summary"];
        meta = { { "line", t.line }, { "device", t.device }, { "complete", t.closed },
            { "rounding",
                "each size v U (U = B, KiB, MiB, …) is floor(bytes / U): the bytes are v·U … v·U + U − 1, stored as "
                "v·U; "
                "counts with K or M likewise (×1000)" } };
        if (t.ooms)
            trace.counter("num_ooms (count)", static_cast<std::int64_t>(*t.ooms));
        if (t.retries)
            trace.counter("num_alloc_retries (count)", static_cast<std::int64_t>(*t.retries));
        const Figure* allocated = nullptr;
        const Figure* reserved = nullptr;
        for (const auto& [name, f] : t.cells) {
            std::string counter = name;
            if (name == "allocated_bytes.all.current") {
                counter = "Total Allocated";
                allocated = &f;
            } else if (name == "reserved_bytes.all.current") {
                counter = "Total Reserved";
                reserved = &f;
            }
            trace.counter(counter, f);
        }
        for (const auto& row : t.unknownRows)
            trace.stats().add("memory_summary_unknown_row", Severity::Info,
                source + ":" + std::to_string(t.line) + ": the memory_summary row \"" + quoteForMessage(row)
                    + "\" is not one gpumem knows; it is skipped");
        if (!t.closed)
            trace.stats().add("memory_summary_truncated", Severity::Warning,
                source + ":" + std::to_string(t.lastLine)
                    + ": the memory_summary table ends before its closing \"====\" rule; the rows after line "
                    + std::to_string(t.lastLine) + " are missing");
        if (allocated && reserved && allocated->bytes > reserved->bytes + reserved->upTo)
            trace.stats().add("oom_figures_inconsistent", Severity::Warning,
                source + ":" + std::to_string(allocated->line) + ": memory_summary's Allocated memory ("
                    + allocated->text + ") is more than its GPU reserved memory (" + reserved->text + ")");
        for (std::size_t i = 0; i < t.cells.size(); ++i) {
            const auto& [name, f] = t.cells[i];
            if (!name.ends_with(".current") && !name.ends_with(".current (count)"))
                continue;
            const std::size_t peak = i + 1;
            if (peak < t.cells.size() && f.bytes > t.cells[peak].second.bytes + t.cells[peak].second.upTo)
                trace.stats().add("oom_figures_inconsistent", Severity::Warning,
                    source + ":" + std::to_string(f.line) + ": memory_summary's current " + name + " (" + f.text
                        + ") is more than its peak (" + t.cells[peak].second.text + ")");
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Building the PyTorch message trace.

    void addTorchMessage(const TorchMessage& m, std::string_view text, CounterTrace& t, const std::string& source)
    {
        t.deviceSized(m.type, m.ordinal.value_or(0), m.total ? m.total->bytes : 0);
        auto& meta = t.metadata();
        meta["oom_message"] = collapseSpaces(text.substr(m.begin, m.end - m.begin), kMaxMessageBytes);
        meta["oom_message_line"] = collapseSpaces(lineAt(text, m.begin), kMaxMessageBytes);
        meta["oom_message_line_number"] = lineNumberAt(text, m.begin);
        meta["oom_wording"] = m.wording.empty() ? "unknown" : m.wording;
        if (!m.hint.empty()) {
            meta["oom_hint"] = m.hint;
            meta["alloc_conf_hint"] = m.hintSetting;
        }
        t.figure("Tried to allocate", *m.request);
        if (m.total)
            t.figure("total capacity", *m.total);
        if (m.allowed) {
            meta["allowed_bytes"] = m.allowed->bytes;
            t.figure("allowed", *m.allowed);
        }
        // allocated ⊂ reserved: the current wording prints the reserved remainder, the older one the total
        // ("cached" of the earliest versions is the remainder, like "reserved but unallocated").
        std::optional<Figure> reserved;
        if (m.allocated && m.unallocated)
            reserved = sum(*m.allocated, *m.unallocated);
        else if (m.allocated && m.cached)
            reserved = sum(*m.allocated, *m.cached);
        else if (m.reserved)
            reserved = m.reserved;
        if (m.allocated)
            t.counter("Total Allocated", *m.allocated);
        if (reserved)
            t.counter("Total Reserved", *reserved);
        if (m.self)
            t.counter("Process In Use", *m.self);
        if (m.free)
            t.counter("Device Free", *m.free);
        if (m.privatePools)
            t.counter("Allocated In Private Pools", *m.privatePools);
        if (m.unallocated)
            t.figure("reserved by PyTorch but unallocated", *m.unallocated);
        if (m.cached)
            t.figure("cached", *m.cached);
        for (const auto& p : m.others)
            t.counter("Other Process " + std::to_string(p.pid) + " In Use", p.used);
        if (m.self || !m.others.empty())
            // PyTorch names this process by its pid (getpid() against NVML's list); in a container's pid
            // namespace the two differ and this process is listed as "Process N" instead.
            meta["self_process_listed"] = m.self.has_value();
        // The layer outside the allocator (core/outside_memory.h): this process's memory in use less what
        // PyTorch reserved ("Including non-PyTorch memory, this process has X memory in use" − allocated −
        // reserved but unallocated), plus the other processes listed. Rounded figures may make the
        // difference slightly negative: it is clamped at 0. Without the "this process" line one of the
        // "Process N" lines may be this process (a container's pid namespace): no figure then.
        if (m.self && reserved) {
            OutsideMemory outside;
            outside.source = "oom_message";
            outside.process = m.self->bytes - std::min(m.self->bytes, reserved->bytes);
            for (const auto& p : m.others)
                outside.otherProcesses += p.used.bytes;
            setOutsideMemory(meta, m.ordinal.value_or(0), outside);
        }
        t.oom(m.request->bytes, 0);

        const std::string at = source + ":" + std::to_string(m.request->line) + ": ";
        if (!m.cutAfter.empty())
            t.stats().add("oom_message_truncated", Severity::Warning,
                at + "the out-of-memory message stops after \"" + quoteForMessage(m.cutAfter) + "\""
                    + (m.ordinal ? "" : " (the GPU number is unknown: cuda:0 is assumed)")
                    + "; the figures after it are missing — paste the whole message");
        if (!m.unrecognized.empty())
            t.stats().add("oom_message_unrecognized", Severity::Warning,
                at + m.unrecognized + "; the figures after it are not read");
        for (const auto& f : m.unknownFields)
            t.stats().add("oom_message_unknown_field", Severity::Info,
                at + "the field \"" + quoteForMessage(f) + "\" is not one gpumem knows; it is skipped");
        checkTorchMessage(m, reserved ? &*reserved : nullptr, t, source);
    }

    // `offsets`: where the reports after the first start. Only the first few are turned into line numbers
    // (a long retry loop may repeat a message many thousand times in a large log).
    void countRepeats(std::string_view what, const std::vector<std::size_t>& offsets, std::string_view text,
        CounterTrace& t, const std::string& source)
    {
        if (offsets.empty())
            return;
        std::string list;
        for (std::size_t i = 0; i < offsets.size() && i < 8; ++i)
            list += (i ? ", " : "") + std::to_string(lineNumberAt(text, offsets[i]));
        if (offsets.size() > 8)
            list += ", …";
        t.stats().add("oom_message_repeated", Severity::Info,
            source + ": the text holds " + std::to_string(offsets.size()) + " more of the " + std::string(what) + " (line"
                + std::string(offsets.size() == 1 ? " " : "s ") + list + "); only the first is imported",
            offsets.size());
    }

    // ---------------------------------------------------------------------------------------------
    // TensorFlow / XLA.

    // tensorflow/core/framework/types.proto names as the OOM message prints them (DataTypeString).
    std::optional<Bytes> tfDtypeBytes(std::string_view dtype)
    {
        static constexpr std::pair<std::string_view, Bytes> kSizes[]
            = { { "float", 4 }, { "double", 8 }, { "half", 2 }, { "bfloat16", 2 }, { "int8", 1 }, { "uint8", 1 },
                  { "int16", 2 }, { "uint16", 2 }, { "int32", 4 }, { "uint32", 4 }, { "int64", 8 }, { "uint64", 8 },
                  { "bool", 1 }, { "complex64", 8 }, { "complex128", 16 }, { "qint8", 1 }, { "quint8", 1 },
                  { "qint16", 2 }, { "quint16", 2 }, { "qint32", 4 }, { "float8_e4m3fn", 1 }, { "float8_e5m2", 1 } };
        for (const auto& [name, size] : kSizes)
            if (dtype == name)
                return size;
        return std::nullopt;
    }

    Trace readTfReport(std::string_view text, const std::string& source)
    {
        CounterTrace t("tf-oom-report");
        Scanner s(text, source);
        std::optional<std::int32_t> ordinal;
        std::optional<std::string> allocator, dtype, tfDevice;
        std::optional<std::vector<std::uint64_t>> shape;
        std::optional<Bytes> requested, roundedTo;
        std::optional<Figure> tried, sumInUse;
        std::size_t messageAt = std::string_view::npos;
        std::vector<std::size_t> repeats;

        // "OOM when allocating tensor with shape[32,30,30,1] and type float on /job:…/device:GPU:0 by allocator
        // GPU_0_bfc"
        for (std::size_t at = text.find(kTfShapeAnchor); at != std::string_view::npos;
             at = text.find(kTfShapeAnchor, at + 1)) {
            if (messageAt != std::string_view::npos) {
                repeats.push_back(at);
                continue;
            }
            messageAt = at;
            const std::string_view line = lineAt(text, at);
            std::string_view rest = text.substr(at + kTfShapeAnchor.size());
            rest = rest.substr(0, rest.find('\n'));
            const std::size_t close = rest.find(']');
            if (close == std::string_view::npos)
                throw FormatError(s.where(at) + "the tensor shape after \"shape[\" has no closing \"]\": \""
                    + quoteForMessage(rest) + "\"");
            std::vector<std::uint64_t> dims;
            Wide elements = 1;
            bool overflow = false;
            for (std::string_view dimsText = rest.substr(0, close); !dimsText.empty();) {
                const std::size_t comma = dimsText.find(',');
                const std::string_view d = trim(dimsText.substr(0, comma));
                auto v = parseInt<std::uint64_t>(d);
                if (!v)
                    throw FormatError(s.where(at) + "the tensor shape \"shape[" + quoteForMessage(rest.substr(0, close))
                        + "]\" has a dimension that is not a whole number: \"" + quoteForMessage(d) + "\"");
                dims.push_back(*v);
                elements *= *v;
                overflow |= elements > std::numeric_limits<Bytes>::max();
                if (comma == std::string_view::npos)
                    break;
                dimsText.remove_prefix(comma + 1);
            }
            shape = dims;
            std::string_view after = rest.substr(close + 1);
            if (after.starts_with(" and type ")) {
                after.remove_prefix(10);
                const std::size_t e = std::min(after.find(' '), after.size());
                dtype = std::string(after.substr(0, e));
                after.remove_prefix(e);
                if (auto size = tfDtypeBytes(*dtype);
                    size && !overflow && elements * *size <= std::numeric_limits<Bytes>::max())
                    requested = static_cast<Bytes>(elements * *size);
                else if (!size)
                    t.stats().add("tf_unknown_dtype", Severity::Info,
                        s.where(at) + "the tensor type \"" + quoteForMessage(*dtype)
                            + "\" has no size gpumem knows; the request size is not computed from the shape");
            }
            if (after.starts_with(" on ")) {
                after.remove_prefix(4);
                const std::size_t e = std::min(after.find(' '), after.size());
                tfDevice = std::string(after.substr(0, e));
                after.remove_prefix(e);
            }
            if (after.starts_with(" by allocator ")) {
                after.remove_prefix(14);
                std::size_t e = 0;
                while (e < after.size() && (isAlpha(after[e]) || isDigit(after[e]) || after[e] == '_'))
                    ++e;
                allocator = std::string(after.substr(0, e));
            }
            t.metadata()["oom_message_line"] = collapseSpaces(line, kMaxMessageBytes);
            t.metadata()["oom_message_line_number"] = lineNumberAt(text, at);
            t.metadata()["oom_message"]
                = collapseSpaces(text.substr(at, rest.size() + kTfShapeAnchor.size()), kMaxMessageBytes);
        }
        // "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.21GiB (rounded to 1300000000)"
        if (std::size_t at = text.find(kTfAllocatorAnchor); at != std::string_view::npos) {
            // The name between "Allocator (" and ")" on the same line ("Allocator (" holds no ')': open + 11 <= at).
            const std::size_t open = text.rfind("Allocator (", at);
            if (open != std::string_view::npos && !allocator && at - open - 11 <= 64
                && text.substr(open + 11, at - open - 11).find_first_of(" \n") == std::string_view::npos)
                allocator = std::string(text.substr(open + 11, at - open - 11));
            s.seek(at + kTfAllocatorAnchor.size());
            tried = s.figure("ran out of memory trying to allocate");
            if (s.literal(" (rounded to ") == Scanner::Step::Ok)
                if (auto n = s.integer())
                    roundedTo = *n;
        } else if (std::size_t old = text.find(kTfOldAnchor); old != std::string_view::npos) {
            s.seek(old + kTfOldAnchor.size());
            tried = s.figure("Ran out of memory trying to allocate");
        }
        // XLA: "Out of memory while trying to allocate 4000000000 bytes."
        std::optional<Bytes> xlaBytes;
        if (std::size_t at = text.find(kXlaAnchor); at != std::string_view::npos) {
            s.seek(at + kXlaAnchor.size());
            if (auto n = s.integer(); n && s.literal(" bytes") == Scanner::Step::Ok)
                xlaBytes = *n;
            if (messageAt == std::string_view::npos) {
                t.metadata()["oom_message_line"] = collapseSpaces(lineAt(text, at), kMaxMessageBytes);
                t.metadata()["oom_message_line_number"] = lineNumberAt(text, at);
            }
        }
        if (std::size_t at = text.find(kBfcSumAnchor); at != std::string_view::npos) {
            s.seek(at + kBfcSumAnchor.size());
            sumInUse = s.figure("Sum Total of in-use chunks");
        }
        std::optional<std::int64_t> regionBytes, limit, available, currRegion;
        for (std::string_view label : { "total_region_allocated_bytes_:", "Total bytes in pool:" })
            if (std::size_t at = text.find(label); at != std::string_view::npos) {
                const std::string_view line = lineAt(text, at);
                regionBytes = integerAfter<std::int64_t>(line, label);
                limit = integerAfter<std::int64_t>(line, "memory_limit_:");
                available = integerAfter<std::int64_t>(line, "available bytes:");
                currRegion = integerAfter<std::int64_t>(line, "curr_region_allocation_bytes_:");
                break;
            }
        // "Stats: \nLimit: N\nInUse: N\nMaxInUse: N\nNumAllocs: N\nMaxAllocSize: N\nReserved: N\nPeakReserved:
        // N\nLargestFreeBlock: N"
        std::vector<std::pair<std::string, std::int64_t>> statsLines;
        std::size_t statsAt = text.starts_with("Stats:") ? 0 : text.find("] Stats:");
        if (statsAt == std::string_view::npos)
            statsAt = text.find("\nStats:");
        if (std::size_t at = statsAt; at != std::string_view::npos) {
            std::size_t pos = text.find('\n', at + 1);
            for (int i = 0; i < 12 && pos != std::string_view::npos; ++i) {
                const std::size_t begin = pos + 1;
                pos = text.find('\n', begin);
                const std::string_view line
                    = trim(text.substr(begin, pos == std::string_view::npos ? std::string_view::npos : pos - begin));
                const std::size_t colon = line.find(':');
                if (line.empty() || colon == std::string_view::npos)
                    break;
                const std::string_view key = line.substr(0, colon);
                const std::string_view value = trim(line.substr(colon + 1));
                if (key.find_first_of(" []") != std::string_view::npos)
                    break;
                auto v = parseInt<std::int64_t>(value);
                if (!v)
                    throw FormatError(source + ":" + std::to_string(lineNumberAt(text, begin))
                        + ": the BFC Stats field \"" + quoteForMessage(key) + "\" is \"" + quoteForMessage(value)
                        + "\", not a whole number of bytes");
                statsLines.emplace_back(std::string(key), *v);
            }
        }
        if (messageAt == std::string_view::npos && !tried && !xlaBytes && !sumInUse && !regionBytes
            && statsLines.empty())
            throw FormatError(source
                + ": no TensorFlow/XLA out-of-memory report found (expected \"OOM when allocating tensor with "
                  "shape[…]\", "
                  "\"ran out of memory trying to allocate\" or a BFC allocator dump with \"Sum Total of in-use "
                  "chunks\")");

        // The device: "/device:GPU:N", else the allocator "GPU_N_bfc"; a host allocator is the host.
        DeviceType type = DeviceType::Cuda;
        if (tfDevice) {
            const std::size_t gpu = tfDevice->rfind("device:GPU:");
            if (gpu != std::string::npos)
                ordinal = parseInt<std::int32_t>(std::string_view(*tfDevice).substr(gpu + 11));
        }
        if (!ordinal && allocator && allocator->starts_with("GPU_") && allocator->ends_with("_bfc"))
            ordinal = parseInt<std::int32_t>(std::string_view(*allocator).substr(4, allocator->size() - 8));
        if (!ordinal && allocator && allocator->find("host") != std::string::npos) {
            type = DeviceType::Cpu;
            ordinal = -1;
        }
        if (!ordinal)
            t.stats().add("tf_device_unknown", Severity::Info,
                source + ": the report names no GPU (no \"/device:GPU:N\" or \"GPU_N_bfc\"); cuda:0 is assumed");
        t.deviceSized(type, ordinal.value_or(0), 0);
        auto& meta = t.metadata();
        if (allocator)
            meta["allocator"] = *allocator;
        if (tfDevice)
            meta["tf_device"] = *tfDevice;
        if (shape)
            meta["tensor_shape"] = *shape;
        if (dtype)
            meta["tensor_dtype"] = *dtype;
        std::optional<std::int64_t> statLimit;
        for (const auto& [k, v] : statsLines)
            if (k == "Limit")
                statLimit = v;
        if (limit || statLimit)
            meta["memory_limit"] = limit ? *limit : *statLimit;
        if (available)
            meta["bfc_available_bytes"] = *available;
        if (currRegion)
            meta["bfc_curr_region_allocation_bytes"] = *currRegion;
        if (tried)
            t.figure("ran out of memory trying to allocate", *tried);

        std::optional<std::int64_t> inUse;
        for (const auto& [k, v] : statsLines)
            if (k == "InUse")
                inUse = v;
        if (inUse)
            t.counter("Total Allocated", *inUse);
        else if (sumInUse)
            t.counter("Total Allocated", *sumInUse);
        if (sumInUse)
            t.figure("Sum Total of in-use chunks", *sumInUse);
        if (regionBytes)
            t.counter("Total Reserved", *regionBytes);
        for (const auto& [k, v] : statsLines) {
            if (k == "InUse" || k == "Limit")
                continue;
            t.counter(k == "NumAllocs" ? "NumAllocs (count)" : k, v);
        }
        // The request: the allocator's rounded size when printed, else XLA's exact bytes, else the tensor's.
        const std::optional<Bytes> size = roundedTo ? roundedTo
            : xlaBytes                              ? xlaBytes
            : requested                             ? requested
            : tried                                 ? std::optional<Bytes>(tried->bytes)
                                                    : std::nullopt;
        if (size)
            t.oom(*size, requested ? *requested : xlaBytes.value_or(0));
        else
            t.stats().add("oom_request_unknown", Severity::Info,
                source
                    + ": the report does not say how many bytes were requested (no tensor shape and type, no \"trying "
                      "to allocate\"); no OOM event is recorded");
        if (regionBytes && limit && available && *limit - *regionBytes != *available)
            t.stats().add("oom_figures_inconsistent", Severity::Warning,
                source + ": memory_limit_ " + std::to_string(*limit) + " minus the pool's "
                    + std::to_string(*regionBytes) + " bytes is not the " + std::to_string(*available)
                    + " available bytes it reports");
        countRepeats("\"OOM when allocating tensor\" lines", repeats, text, t, source);
        return t.build();
    }

    // A sniff that also looks past the head: an out-of-memory report is usually at the end of a long log.
    // Only plain text files (no NUL in the head, not gzip) are searched, through a read-only map.
    bool sniffText(const SniffInput& in, bool (*looks)(std::string_view))
    {
        if (in.content.find('\0') != std::string_view::npos)
            return false;
        if (looks(in.content))
            return true;
        if (in.gzip || in.raw.size() < 64 * 1024)
            return false;
        try {
            MappedFile file { std::string(in.path) };
            if (file.bytes().size() > (std::size_t(4) << 30))
                return false;
            return looks(file.bytes());
        } catch (const Error&) {
            return false;
        }
    }
} // namespace

bool looksLikeTorchOomMessage(std::string_view text)
{
    DeviceType type;
    return findTorchMessage(text, 0, type) != std::string_view::npos;
}

bool looksLikeTorchMemorySummary(std::string_view text) { return text.find(kSummaryAnchor) != std::string_view::npos; }

bool looksLikeTfOomReport(std::string_view text)
{
    for (std::string_view anchor : { kTfShapeAnchor, kTfAllocatorAnchor, kXlaAnchor, kBfcSumAnchor })
        if (text.find(anchor) != std::string_view::npos)
            return true;
    return false;
}

Trace importTorchOomMessage(std::string_view text, const std::string& source, const LoadOptions&)
{
    DeviceType type = DeviceType::Cuda;
    const std::size_t at = findTorchMessage(text, 0, type);
    if (at == std::string_view::npos)
        throw FormatError(
            source + ": no PyTorch out-of-memory message found (expected \"CUDA out of memory. Tried to allocate …\")");
    TorchMessageParser parser(text, source);
    const TorchMessage m = parser.parse(at, type);
    CounterTrace t("pytorch-oom-message");
    addTorchMessage(m, text, t, source);
    std::vector<std::size_t> repeats;
    DeviceType other;
    for (std::size_t next = findTorchMessage(text, m.end, other); next != std::string_view::npos;
         next = findTorchMessage(text, next + kTorchAnchor.size(), other))
        repeats.push_back(next);
    countRepeats("out-of-memory messages", repeats, text, t, source);
    // A memory_summary() printed with the message (in the except block) adds its counters, when it is of the same
    // device.
    for (std::size_t s = text.find(kSummaryAnchor); s != std::string_view::npos; s = text.find(kSummaryAnchor, s + 1)) {
        SummaryTable table = parseSummary(text, s, source, t.stats());
        if (table.device != m.ordinal.value_or(0)) {
            t.stats().add("memory_summary_other_device", Severity::Info,
                source + ":" + std::to_string(table.line) + ": a memory_summary of device "
                    + std::to_string(table.device) + " is not the failing GPU's; it is skipped");
            continue;
        }
        addSummary(table, t, source);
        break;
    }
    return t.build();
}

Trace importTorchMemorySummary(std::string_view text, const std::string& source, const LoadOptions&)
{
    const std::size_t at = text.find(kSummaryAnchor);
    if (at == std::string_view::npos)
        throw FormatError(source + ": no torch.cuda.memory_summary() table found (expected \""
            + std::string(kSummaryAnchor) + "N\")");
    CounterTrace t("pytorch-memory-summary");
    SummaryTable table = parseSummary(text, at, source, t.stats());
    t.deviceSized(DeviceType::Cuda, table.device, 0);
    addSummary(table, t, source);
    std::vector<std::size_t> repeats;
    for (std::size_t s = text.find(kSummaryAnchor, table.end); s != std::string_view::npos;
         s = text.find(kSummaryAnchor, s + 1))
        repeats.push_back(s);
    countRepeats("memory_summary tables", repeats, text, t, source);
    return t.build();
}

Trace importTfOomReport(std::string_view text, const std::string& source, const LoadOptions&)
{
    return readTfReport(text, source);
}

namespace {
    // The three formats differ in what they look for and how they read it, nothing else.
    class OomTextImporter final : public Importer {
    public:
        using Looks = bool (*)(std::string_view);
        using Import = Trace (*)(std::string_view, const std::string&, const LoadOptions&);
        OomTextImporter(std::string_view name, std::string_view description, Looks looks, Import import)
            : m_name(name)
            , m_description(description)
            , m_looks(looks)
            , m_import(import)
        {
        }
        std::string_view name() const override { return m_name; }
        std::string_view description() const override { return m_description; }
        bool sniff(const SniffInput& in) const override { return sniffText(in, m_looks); }
        Trace load(const std::string& path, const LoadOptions& options) const override
        {
            return m_import(readFileMaybeGzip(path), path, options);
        }

    private:
        std::string_view m_name, m_description;
        Looks m_looks;
        Import m_import;
    };
} // namespace

std::unique_ptr<Importer> makePytorchOomMessageImporter()
{
    return std::make_unique<OomTextImporter>("pytorch-oom-message",
        "PyTorch \"CUDA out of memory. Tried to allocate …\" in a log or traceback", looksLikeTorchOomMessage,
        importTorchOomMessage);
}
std::unique_ptr<Importer> makePytorchMemorySummaryImporter()
{
    return std::make_unique<OomTextImporter>("pytorch-memory-summary",
        "torch.cuda.memory_summary() table (\"PyTorch CUDA memory summary\")", looksLikeTorchMemorySummary,
        importTorchMemorySummary);
}
std::unique_ptr<Importer> makeTfOomReportImporter()
{
    return std::make_unique<OomTextImporter>("tf-oom-report",
        "TensorFlow/XLA \"OOM when allocating tensor …\" and BFC allocator dump text", looksLikeTfOomReport,
        importTfOomReport);
}

} // namespace gpumem
