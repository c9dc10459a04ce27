// PickleDocument::fromJsonText and fromJson: a snapshot saved as JSON (json.dump of the dict that
// torch.cuda.memory._snapshot() returns, the same dict the pickle holds) read with simdjson's On-Demand
// API straight into a PickleDocument, with no DOM in between.
//
// The kinds are those a nlohmann::json DOM gave (the importer and its tests were written against it):
// null/bool → None/Bool; an integer that fits int64 → Int; any other number is read as a double (as
// nlohmann's lexer falls back to strtod for an integer beyond 64 bits) and an integral one beyond the
// int64 range → BigInt clamped to INT64_MIN/INT64_MAX (so a JSON twin reports big_int_clamped as the
// pickled LONG does), else Float; strings → Str; arrays → List; objects → Dict with the keys in file
// order (readers take the last of repeated keys, as PickleDocument::find does, which is what nlohmann's
// std::map kept).
//
// Strings are interned: the JSON of a snapshot repeats every frame's name and file name for every
// reference (the pickle shares them through the memo), e.g. 23 MB of string bytes and 430 distinct
// strings in a 31 MB file, so the document keeps each distinct string once and equal strings have the
// same offset (the importer's frame cache keys on it).
//
// Errors: simdjson stops at the first error without a byte offset, so the text is then scanned by
// nlohmann's SAX parser (no DOM), which names the byte offset and the reason exactly as the former
// nlohmann::json::parse did.
#include "importers/pickle_reader.h"

#include "core/detail/flat_id_index.h"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <type_traits>

namespace gpumem {

namespace {
    namespace od = simdjson::ondemand;

    // The first syntax error nlohmann's parser finds in `text` (byte offset and message), or nullopt
    // if it accepts the text. A SAX scan: nothing is built.
    struct SyntaxError {
        std::size_t byte = 0;
        std::string what;
    };
    std::optional<SyntaxError> nlohmannSyntaxError(std::string_view text)
    {
        struct Sax {
            std::optional<SyntaxError> error;
            bool null() { return true; }
            bool boolean(bool) { return true; }
            bool number_integer(std::int64_t) { return true; }
            bool number_unsigned(std::uint64_t) { return true; }
            bool number_float(double, const std::string&) { return true; }
            bool string(std::string&) { return true; }
            bool binary(std::vector<std::uint8_t>&) { return true; }
            bool start_object(std::size_t) { return true; }
            bool key(std::string&) { return true; }
            bool end_object() { return true; }
            bool start_array(std::size_t) { return true; }
            bool end_array() { return true; }
            bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e)
            {
                error = SyntaxError { position, e.what() };
                return false;
            }
        } sax;
        nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
        return sax.error;
    }

    // Thrown inside the builder; fromJsonText turns them into FormatErrors.
    struct InvalidJson {
        simdjson::error_code code;
    };
    struct TooDeep { };
} // namespace

class PickleJsonTextBuilder {
public:
    PickleJsonTextBuilder(PickleDocument& doc, std::string& strings, int maxDepth)
        : m_doc(doc)
        , m_strings(strings)
        , m_maxDepth(maxDepth)
    {
    }

    void build(od::document& json)
    {
        od::json_type type;
        check(json.type().get(type));
        PickleValue root;
        if (type == od::json_type::object || type == od::json_type::array) {
            od::value v;
            check(json.get_value().get(v));
            root = value(v, 0);
        } else {
            if (m_maxDepth < 0)
                throw TooDeep {};
            root = scalar(json, type);
        }
        // Past the root value the iterator is out of bounds, unless something follows it (a root number
        // beyond 64 bits was read from its token, which number() checked to the end).
        if (!m_rootReadFromToken && json.current_location().error() != simdjson::OUT_OF_BOUNDS)
            throw InvalidJson { simdjson::TRAILING_CONTENT };
        m_doc.m_root = root;
        m_doc.m_items = std::move(m_items);
        m_doc.m_spans = std::move(m_spans);
        if (m_shared)
            m_doc.m_identity = std::move(m_identity);
    }

private:
    static void check(simdjson::error_code e)
    {
        if (e != simdjson::SUCCESS) [[unlikely]]
            throw InvalidJson { e };
    }

    PickleValue value(od::value v, int depth)
    {
        if (depth > m_maxDepth) [[unlikely]]
            throw TooDeep {};
        od::json_type type;
        check(v.type().get(type));
        if (type == od::json_type::object) {
            od::object object;
            check(v.get_object().get(object));
            const std::size_t mark = m_stack.size();
            for (auto field : object) {
                od::field f;
                check(std::move(field).get(f));
                std::string_view key = unescapedText(f.key().raw());
                if (key.data() == nullptr) [[unlikely]]
                    key = checkedUtf8(f.unescaped_key());
                m_stack.push_back(str(key));
                const PickleValue item = value(f.value(), depth + 1);
                m_stack.push_back(item);
            }
            return close(PickleKind::Dict, mark);
        }
        if (type == od::json_type::array) {
            od::array array;
            check(v.get_array().get(array));
            const std::size_t mark = m_stack.size();
            for (auto element : array) {
                od::value e;
                check(std::move(element).get(e));
                const PickleValue item = value(e, depth + 1);
                m_stack.push_back(item);
            }
            return close(PickleKind::List, mark);
        }
        return scalar(v, type);
    }

    // A scalar of a value or of a document whose root is a scalar (the same calls on both).
    template <typename V> PickleValue scalar(V& v, od::json_type type)
    {
        switch (type) {
        case od::json_type::string: {
            if constexpr (std::is_same_v<V, od::document>)
                return str(checkedUtf8(v.get_string())); // a root string: consumed, so the end is checked
            // Read in place when it has no escape. Every value is consumed (On-Demand does not check the
            // structure around a value it skips: `[["s": 1}, 2]` would pass).
            std::string_view text = unescapedText(rawToken(v).data() + 1);
            if (text.data() == nullptr) [[unlikely]]
                return str(checkedUtf8(v.get_string()));
            od::raw_json_string consumed;
            check(v.get_raw_json_string().get(consumed));
            return str(text);
        }
        case od::json_type::number:
            return number(v);
        case od::json_type::boolean: {
            bool b = false;
            check(v.get_bool().get(b));
            return PickleValue { PickleKind::Bool, 0, b ? 1u : 0u };
        }
        case od::json_type::null: {
            bool isNull = false;
            check(v.is_null().get(isNull));
            if (!isNull)
                throw InvalidJson { simdjson::N_ATOM_ERROR };
            return PickleValue {};
        }
        default:
            throw InvalidJson { simdjson::INCORRECT_TYPE };
        }
    }

    template <typename V> PickleValue number(V& v)
    {
        {
            // simdjson's integer parsing here takes a leading zero ("01"), which JSON (and nlohmann) refuse.
            const char* p = rawToken(v).data();
            p += *p == '-';
            if (*p == '0' && static_cast<unsigned char>(p[1] - '0') <= 9) [[unlikely]]
                throw InvalidJson { simdjson::NUMBER_ERROR };
        }
        od::number_type type;
        check(v.get_number_type().get(type));
        if (type == od::number_type::signed_integer) {
            std::int64_t i = 0;
            if (v.get_int64().get(i) == simdjson::SUCCESS) [[likely]]
                return PickleValue { PickleKind::Int, 0, static_cast<std::uint64_t>(i) };
        } else if (type == od::number_type::unsigned_integer) {
            std::uint64_t u = 0;
            if (v.get_uint64().get(u) == simdjson::SUCCESS) {
                // get_number_type() says unsigned only from 2^63 on: beyond int64, clamped.
                if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    return PickleValue { PickleKind::BigInt, 0,
                        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) };
                return PickleValue { PickleKind::Int, 0, u };
            }
        } else {
            double f = 0;
            check(v.get_double().get(f));
            return fromDouble(f);
        }
        // An integer beyond 64 bits (simdjson: BIGINT_ERROR), or a negative one below INT64_MIN:
        // nlohmann's lexer read it with strtod, so the same rule as for any double applies.
        const std::string_view token = rawToken(v);
        std::string digits(token.substr(0, token.find_first_not_of("-0123456789")));
        char* end = nullptr;
        const double f = std::strtod(digits.c_str(), &end);
        if (digits.empty() || end != digits.c_str() + digits.size() || !std::isfinite(f))
            throw InvalidJson { simdjson::NUMBER_ERROR }; // nlohmann: "number overflow"
        double consumed = 0; // every value is consumed (see the strings in scalar())
        check(v.get_double().get(consumed));
        if constexpr (std::is_same_v<V, od::document>) {
            // A root number's token runs to the end of the text: only whitespace may follow it.
            if (token.find_first_not_of(" \t\r\n", digits.size()) != std::string_view::npos)
                throw InvalidJson { simdjson::TRAILING_CONTENT };
            m_rootReadFromToken = true;
        }
        return fromDouble(f);
    }

    // The text of the string whose raw content starts at `raw` (after the opening quote) when it has no
    // escape: stage 1 has checked that the input is UTF-8 with no control character inside a string.
    // A null view when there is an escape (the caller unescapes it with simdjson).
    static std::string_view unescapedText(const char* raw)
    {
        const char* p = raw;
        while (*p != '"' && *p != '\\')
            ++p;
        return *p == '"' ? std::string_view(raw, static_cast<std::size_t>(p - raw)) : std::string_view();
    }
    // An unescaped string: an escaped lone surrogate (which nlohmann refused) makes it invalid UTF-8,
    // always as a sequence that starts with 0xED.
    static std::string_view checkedUtf8(simdjson::simdjson_result<std::string_view> result)
    {
        std::string_view text;
        check(std::move(result).get(text));
        if (std::memchr(text.data(), 0xED, text.size()) && !isValidUtf8(text)) [[unlikely]]
            throw InvalidJson { simdjson::STRING_ERROR };
        return text;
    }

    static std::string_view rawToken(od::value& v) { return v.raw_json_token(); }
    static std::string_view rawToken(od::document& d)
    {
        std::string_view token;
        check(d.raw_json_token().get(token));
        return token;
    }

    // An integral double beyond int64 (2**70 written as digits, or 1.2e21) is that integer, clamped like
    // a pickled LONG, so that both twins report big_int_clamped alike.
    static PickleValue fromDouble(double f)
    {
        if (f == std::trunc(f) && (f >= 0x1p63 || f < -0x1p63))
            return PickleValue { PickleKind::BigInt, 0,
                static_cast<std::uint64_t>(
                    f > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min()) };
        return PickleValue { PickleKind::Float, 0, std::bit_cast<std::uint64_t>(f) };
    }

    PickleValue str(std::string_view text)
    {
        const std::uint64_t hash = detail::hashBytes(text);
        const std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
        std::uint32_t id = m_interned.find(hash, none, [&](std::uint32_t candidate) {
            const auto& [offset, length] = m_internedSpans[candidate];
            return length == text.size() && std::memcmp(m_strings.data() + offset, text.data(), length) == 0;
        });
        if (id == none) {
            id = static_cast<std::uint32_t>(m_internedSpans.size());
            m_internedSpans.emplace_back(m_strings.size(), static_cast<std::uint32_t>(text.size()));
            m_strings.append(text);
            m_interned.insert(hash, id);
        }
        const auto& [offset, length] = m_internedSpans[id];
        return PickleValue { PickleKind::Str, length, offset };
    }

    // The items pushed since `mark` become a container (numbered after its children, as before).
    //
    // A JSON snapshot repeats every frame dict {name, filename, line} and every frames list in full
    // where the pickle shares them through the memo. As the unpickler does for a repeated list of memo
    // references or dict of plain values (pickle_reader.h), a container equal to an earlier one gets
    // its own index but shares that one's items and identity: a dict or list of scalars only, or a
    // list of such dicts (compared by identity). Nothing else is shared, so a container that holds
    // other containers (a segment, its blocks list, a trace entry) still has items of its own, and
    // the importer's checks for shared segments and blocks lists see what the file says.
    PickleValue close(PickleKind kind, std::size_t mark)
    {
        const std::uint64_t count = m_stack.size() - mark;
        const std::uint64_t index = m_spans.size();
        const PickleValue* first = m_stack.data() + mark;
        std::uint8_t flags = 0;
        if (count > 0 && count <= kMaxShared) {
            bool scalars = true, flatDicts = kind == PickleKind::List;
            for (std::uint64_t i = 0; i < count; ++i) {
                const bool container = first[i].kind == PickleKind::List || first[i].kind == PickleKind::Dict;
                scalars = scalars && !container;
                flatDicts = flatDicts && first[i].kind == PickleKind::Dict && (m_flags[first[i].bits] & kScalars);
            }
            flags = scalars ? kScalars : flatDicts ? kFlatDicts : 0;
        }
        if (flags != 0) {
            std::uint64_t hash = detail::mix64(count ^ (static_cast<std::uint64_t>(kind) << 56));
            for (std::uint64_t i = 0; i < count; ++i)
                hash = detail::mix64(hash ^ itemKey(first[i]) ^ (static_cast<std::uint64_t>(first[i].length) << 32)
                    ^ (static_cast<std::uint64_t>(first[i].kind) << 58));
            const std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
            const std::uint32_t earlier = m_repeats.find(hash, none, [&](std::uint32_t c) {
                const auto& [start, n] = m_spans[c];
                if (n != count || m_kinds[c] != kind)
                    return false;
                for (std::uint64_t i = 0; i < count; ++i) {
                    const PickleValue& a = m_items[start + i];
                    if (a.kind != first[i].kind || a.length != first[i].length || itemKey(a) != itemKey(first[i]))
                        return false;
                }
                return true;
            });
            if (earlier != none) {
                m_spans.push_back(m_spans[earlier]);
                m_identity.push_back(earlier); // the first occurrence is its own identity
                m_flags.push_back(flags);
                m_kinds.push_back(kind);
                m_stack.resize(mark);
                m_shared = true;
                return PickleValue { kind, 0, index };
            }
            if (index < none)
                m_repeats.insert(hash, static_cast<std::uint32_t>(index));
        }
        m_spans.emplace_back(count == 0 ? 0 : m_items.size(), count);
        m_identity.push_back(index);
        m_flags.push_back(flags);
        m_kinds.push_back(kind);
        m_items.insert(m_items.end(), m_stack.begin() + static_cast<std::ptrdiff_t>(mark), m_stack.end());
        m_stack.resize(mark);
        return PickleValue { kind, 0, index };
    }
    // What makes two items equal (with kind and length): a scalar's bits (interned strings: equal
    // text, equal offset), a container's identity.
    std::uint64_t itemKey(const PickleValue& v) const
    {
        return v.kind == PickleKind::List || v.kind == PickleKind::Dict ? m_identity[v.bits] : v.bits;
    }

    static constexpr std::uint64_t kMaxShared = 256; // items; keeps a comparison short
    static constexpr std::uint8_t kScalars = 1, kFlatDicts = 2;

public:
    // Reserving address space is free; only the pages written are touched. A value takes 2 bytes of
    // JSON at least, and a snapshot's about 15.
    void reserve(std::size_t jsonBytes) { m_items.reserve(jsonBytes / 8); }

private:
    PickleDocument& m_doc;
    std::string& m_strings;
    int m_maxDepth;
    bool m_rootReadFromToken = false;
    std::vector<PickleValue> m_stack; // the items of the containers being read, innermost last
    std::vector<PickleValue> m_items;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> m_spans;
    std::vector<std::uint64_t> m_identity; // container → the first container with equal items
    std::vector<std::uint8_t> m_flags; // container → kScalars, kFlatDicts or 0 (never shared)
    std::vector<PickleKind> m_kinds;
    detail::FlatIdIndex m_repeats; // sharable containers with items of their own
    bool m_shared = false;
    detail::FlatIdIndex m_interned;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> m_internedSpans; // id → (offset, length) in m_strings
};

PickleDocument PickleDocument::fromJsonText(Input input, std::string_view source, int maxDepth)
{
    std::string_view text = input.bytes;
    // nlohmann skipped a UTF-8 byte order mark and took a NUL byte outside a string for the end of the
    // input (inside one, it is an error, which the text up to it gives as well); simdjson does neither.
    if (text.starts_with("\xEF\xBB\xBF"))
        text.remove_prefix(3);
    if (const void* nul = std::memchr(text.data(), 0, text.size())) [[unlikely]]
        text = text.substr(0, static_cast<std::size_t>(static_cast<const char*>(nul) - text.data()));
    const char* const end = input.bytes.data() + input.bytes.size();
    const std::size_t padding = input.padding + static_cast<std::size_t>(end - (text.data() + text.size()));
    simdjson::padded_string copy;
    simdjson::padded_string_view padded;
    if (padding >= simdjson::SIMDJSON_PADDING) {
        padded = simdjson::padded_string_view(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING);
    } else {
        copy = simdjson::padded_string(text.data(), text.size());
        padded = copy;
    }

    PickleDocument doc;
    doc.m_source = std::string(source);
    auto strings = std::make_shared<std::string>();
    auto fail = [&](const std::string& why) -> FormatError {
        if (auto e = nlohmannSyntaxError(input.bytes))
            return FormatError(
                doc.m_source + ": at byte offset " + std::to_string(e->byte) + ": not valid JSON (" + e->what + ")");
        return FormatError(doc.m_source + ": " + why);
    };
    try {
        // simdjson's own depth limit (for its stage 1) stays above ours, which is checked while building.
        od::parser parser;
        if (const auto e = parser.allocate(text.size(), static_cast<std::size_t>(std::max(maxDepth, 0)) + 2))
            throw InvalidJson { e };
        od::document json;
        if (const auto e = parser.iterate(padded).get(json))
            throw InvalidJson { e };
        PickleJsonTextBuilder builder(doc, *strings, maxDepth);
        builder.reserve(text.size());
        builder.build(json);
    } catch (const InvalidJson& e) {
        if (e.code == simdjson::MEMALLOC) // memory, not the text (loadTrace says so)
            throw std::bad_alloc();
        if (e.code == simdjson::DEPTH_ERROR)
            throw fail("the JSON nests deeper than " + std::to_string(maxDepth) + " levels");
        // (Only when nlohmann would have accepted the text: e.g. one beyond simdjson's 4 GiB.)
        throw fail(std::string("simdjson cannot read this JSON (") + simdjson::error_message(e.code) + ")");
    } catch (const TooDeep&) {
        // As when the whole text was parsed before the tree was built: a syntax error comes first.
        throw fail("the JSON nests deeper than " + std::to_string(maxDepth) + " levels");
    }
    doc.m_bytes = *strings;
    doc.m_keepAlive = std::move(strings);
    return doc;
}

PickleDocument PickleDocument::fromJsonText(std::string_view bytes, std::string_view source, int maxDepth)
{
    return fromJsonText(Input { nullptr, bytes, 0 }, source, maxDepth);
}

PickleDocument PickleDocument::fromJson(const nlohmann::json& json, std::string_view source, int maxDepth)
{
    return fromJsonText(json.dump(), source, maxDepth);
}

} // namespace gpumem
