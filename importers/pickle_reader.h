#pragma once
// A safe reader for plain-data Python pickles of protocols 0–5: None, bool, int, float, str, bytes,
// list, tuple, dict and set, with the memo. It implements the pickle virtual machine of CPython's
// Lib/pickle.py (_Unpickler) for those opcodes only, the text opcodes of protocols 0 and 1 included
// (INT, LONG, FLOAT, STRING, UNICODE as raw-unicode-escape, PUT, GET), and refuses every opcode that
// names a global or builds an object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER) by name and byte offset, so
// reading a pickle never runs code (design.md §4).
//
// The result is a PickleDocument: an immutable tree of PickleValue handles. Containers are shared,
// exactly as in Python (a memo GET yields the same list/dict, not a copy), so a document may contain
// cycles; code that walks it recursively must bound its depth (toJson does). Beyond that, a list
// that repeats the memo references of an earlier one (PyTorch's frames lists: a fresh list of the
// same memoized frame dicts for every allocation from one line) is recognised from its opcode bytes
// and stores no items of its own: it shares the earlier list's items, and itemsIdentity() says so.
// The same holds for a repeated dict of plain values (EMPTY_DICT MEMOIZE MARK, memo GETs and small
// ints, SETITEMS: a frame {name, filename, line} in snapshots that write a fresh dict per frame): it
// is its own container (a memo GET of it yields it), with the first occurrence's items and identity.
// Sharing needs the memo unchanged since the first occurrence (no slot overwritten), so it is exact.
// Strings and bytes are views into the pickle bytes (no copies), which is why parse() needs the bytes
// to outlive the document and readFile() keeps them alive itself. The one exception: a STRING or
// UNICODE operand with escapes or non-ASCII bytes is decoded, and then the document keeps its own copy
// of the pickle bytes followed by the decoded texts.
//
// Resource bounds: every opcode pushes at most one value, so values, container items and the memo are
// all bounded by the input size (a memo index beyond it is refused); parsing is iterative (no
// recursion), so a hostile file can neither exhaust memory beyond O(file size) nor recurse forever.
// Recognising a repeated list or dict compares at most 32 earlier ones with the same key, each at
// most as long as the list itself (a plain dict: at most 69 bytes), so it stays linear too.
//
// Thread-safety: a document is immutable after parsing and may be read from many threads.
#include "core/error.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

enum class PickleKind : std::uint8_t {
    None,
    Bool,
    Int, // fits in int64
    BigInt, // a LONG1/LONG4 integer beyond int64: the value is clamped to INT64_MIN/INT64_MAX
    Float,
    Str,
    Binary, // bytes, bytearray and protocol-1 str
    List,
    Tuple,
    Dict,
    Set, // set and frozenset
};
std::string_view toString(PickleKind kind);
// The kind as a message names a value of it: "None", "a bool", "an int", "a str", "a dict" (English
// articles; None takes none), for "'size' is an int, not a list". Brief tx item 2.
std::string_view withArticle(PickleKind kind);

// A handle: scalars are stored inline, strings as (offset, length) into the document's bytes,
// containers as an index into the document's container table. 16 bytes, trivially copyable.
struct PickleValue {
    PickleKind kind = PickleKind::None;
    std::uint32_t length = 0; // Str/Bytes: byte length
    std::uint64_t bits = 0; // Int/BigInt: int64; Float: IEEE bits; Bool: 0/1; Str/Bytes: offset; containers: index
};

// True if `text` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, ≤ U+10FFFF).
bool isValidUtf8(std::string_view text);
// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD, so
// that JSON writers accept it (Python can pickle lone surrogates; corrupt files hold anything).
std::string sanitizeUtf8(std::string_view text);

class PickleDocument;

// Takes the trace entries of a PyTorch snapshot out of the pickle while it is parsed, so that the
// document never holds their items (snapshot_importer.cpp; issue 22: the items of 10 M entries were
// most of the import's memory). The parser offers every dict filled by one SETITEMS that is an item of
// a list that is an item of the list under the top-level key "device_traces" (snapshot["device_traces"]
// [d][i]), as far as it recognises that structure from the opcodes (protocols 2 to 5: EMPTY_DICT/
// EMPTY_LIST, MARK, SETITEMS/APPENDS); a dict built another way (DICT, a plain dict shared by
// dictOfPlainValues) is never offered and stays in the document.
class PickleDictSink {
public:
    virtual ~PickleDictSink() = default;
    // `kv`: the dict's items (k0, v0, k1, v1, …; containers among them are already complete, strings
    // are views of `bytes`, the pickle being parsed); `container`: the dict's container index; `list`:
    // which list of device_traces (0, 1, … in the order the parser met them). True = taken: the dict
    // stays in the document as an empty dict that isTaken(), and a later memo GET of it makes the parse
    // throw PickleSinkRefused. False = declined: the dict keeps its items, as without a sink. A sink
    // must not throw; it declines what it cannot take (the importer then reads the dict and reports).
    virtual bool take(std::span<const PickleValue> kv, std::uint64_t container, std::size_t list,
        std::string_view bytes)
        = 0;
};

// Thrown by a parse with a sink when the pickle refers to a dict the sink took (a memo GET of it): the
// document cannot answer for its items. Not a gpumem::Error: the caller parses again without a sink.
struct PickleSinkRefused { };

class PickleDocument {
public:
    // Parses `bytes` (a whole pickle). `source` names the input in error messages (a path).
    // The document refers into `bytes`, which must outlive it.
    // Throws FormatError "<source>: pickle opcode NAME (0xNN) at byte offset N …" for a refused or
    // unknown opcode, a truncated pickle, a stack underflow or a container opcode on the wrong type.
    static PickleDocument parse(std::string_view bytes, std::string_view source);
    // Reads and parses a file (gzip is decompressed first); the document keeps the bytes alive.
    // Throws IoError / FormatError naming the path.
    static PickleDocument readFile(const std::string& path);

    // The content of a file, as readFile() parses it: gzip decompressed; read at once, or mapped
    // when larger than 8 MiB. `owner` keeps `bytes` alive. For callers that look at the content
    // before they parse it (a snapshot may be JSON), so that the file is read once.
    struct Input {
        std::shared_ptr<const void> owner;
        std::string_view bytes;
        // Bytes after `bytes` that may be read (not part of the content): kReadPadding for a file read
        // into a buffer, the rest of the last page for a mapped one.
        std::size_t padding = 0;
        // `bytes` are a read-only mapping of the file (larger than 8 MiB, not gzip): a parse with a sink
        // gives back the pages it has read (madvise MADV_DONTNEED; a later read maps them again from
        // the page cache), so that the file does not count in the import's resident memory.
        bool mapped = false;
    };
    // Throws IoError / FormatError (corrupt gzip) naming the path.
    static Input readInput(const std::string& path);
    // As parse(bytes, source); the document keeps input.owner alive.
    static PickleDocument parse(Input input, std::string_view source);
    // As parse(input, source), offering the trace entries to `sink` (PickleDictSink); with input.mapped,
    // the pages behind the parse are given back every 8 MiB (at FRAME opcodes, protocol 4 and 5).
    // Throws as parse() does, and PickleSinkRefused (above).
    static PickleDocument parse(Input input, std::string_view source, PickleDictSink& sink);
    // Whether `v` is a dict a PickleDictSink took (its items are not in the document).
    bool isTaken(const PickleValue& v) const
    {
        return v.kind == PickleKind::Dict && v.bits < m_taken.size() && m_taken[v.bits];
    }

    PickleDocument();
    ~PickleDocument();
    PickleDocument(PickleDocument&&) noexcept;
    PickleDocument& operator=(PickleDocument&&) noexcept;
    PickleDocument(const PickleDocument&) = delete;
    PickleDocument& operator=(const PickleDocument&) = delete;

    const PickleValue& root() const { return m_root; }
    const std::string& source() const { return m_source; }
    std::uint8_t protocol() const { return m_protocol; } // 0 when there was no PROTO opcode
    // Bytes after the STOP opcode, which Python's pickle.load leaves unread (a second pickle, or damage);
    // 0 for a JSON document.
    std::size_t bytesAfterStop() const { return m_bytesAfterStop; }

    // Int and Bool as int64 (BigInt clamped; Float truncated toward zero); nullopt for other kinds.
    std::optional<std::int64_t> toInt(const PickleValue& v) const
    {
        if (v.kind == PickleKind::Int || v.kind == PickleKind::BigInt || v.kind == PickleKind::Bool) [[likely]]
            return static_cast<std::int64_t>(v.bits);
        return floatToInt(v);
    }
    // Float, Int, BigInt and Bool as double; nullopt otherwise.
    std::optional<double> toFloat(const PickleValue& v) const;
    // The UTF-8 text of a Str (or the raw bytes of Bytes); empty for other kinds.
    std::string_view text(const PickleValue& v) const
    {
        if (v.kind != PickleKind::Str && v.kind != PickleKind::Binary)
            return {};
        return m_bytes.substr(v.bits, v.length);
    }
    // The items of a List, Tuple or Set; for a Dict, keys and values alternate (k0, v0, k1, v1, …);
    // empty for scalars.
    std::span<const PickleValue> items(const PickleValue& v) const
    {
        if (!isContainer(v))
            return {};
        const auto& [start, count] = m_spans[v.bits];
        return std::span<const PickleValue>(m_items.data() + start, count);
    }
    // The value of the Str key `key` in a Dict (last one wins, as in Python); nullptr if absent or
    // `dict` is not a Dict.
    const PickleValue* find(const PickleValue& dict, std::string_view key) const;
    // Containers with the same identity have the same items (the parser shares the items of a
    // repeated list of memo references, such as a frames list, or of a repeated dict of plain values,
    // such as a frame, with its first occurrence); different identities say nothing. For a
    // container: a container index ≤ v.bits; for a scalar: v.bits.
    std::uint64_t itemsIdentity(const PickleValue& v) const
    {
        return isContainer(v) && v.bits < m_identity.size() ? m_identity[v.bits] : v.bits;
    }
    bool isContainer(const PickleValue& v) const
    {
        return v.kind == PickleKind::List || v.kind == PickleKind::Tuple || v.kind == PickleKind::Dict
            || v.kind == PickleKind::Set;
    }

    // A JSON rendering (tuples and sets become arrays, bytes become strings with invalid UTF-8
    // replaced by U+FFFD, non-string dict keys are written as their int value or "<kind>").
    // Throws FormatError naming source() when nesting exceeds `maxDepth` (which is also how a
    // cycle is refused) or the rendering would exceed `maxValues` values (shared containers are
    // expanded, so a small hostile pickle could otherwise ask for 2^64 of them; 0 = 16 per input
    // byte + 2^20, several times what real snapshots need).
    nlohmann::json toJson(const PickleValue& v, int maxDepth = 64, std::uint64_t maxValues = 0) const;

    // Builds a document from JSON text (the snapshot saved as JSON: json.dump of the same dict) with
    // simdjson's On-Demand parser, no DOM in between: objects → Dict (keys in file order; readers take
    // the last of repeated keys, as find() does), arrays → List, strings → Str (interned: equal strings
    // share one offset), true/false → Bool, null → None, an integer that fits int64 → Int; any other
    // number is read as a double (as nlohmann::json, which this replaced, read an integer beyond 64
    // bits), and an integral one beyond the int64 range (2**70 written as its digits, 1.2e21) →
    // BigInt clamped to INT64_MIN/INT64_MAX, like a pickled LONG; else Float. `bytes` need not outlive
    // the document (it copies what it keeps). As nlohmann did, a UTF-8 byte order mark is skipped and
    // the text ends at its first NUL byte. As parse() does for memo-shared ones, a dict or list of
    // scalars equal to an earlier one, or a list of such dicts (a frame, a frames list: JSON repeats
    // them in full), shares the earlier one's items and identity (docs/pytorch-snapshot-json.md).
    // Throws FormatError naming `source`: "<source>: at byte offset N: not valid JSON (reason)" for
    // invalid JSON (including invalid UTF-8 and an escaped lone surrogate), "<source>: the JSON
    // nests deeper than <maxDepth> levels" when a value lies deeper than `maxDepth` (the root is at 0).
    // Time and memory are linear in the size of `bytes`; recursion is bounded by `maxDepth`.
    static PickleDocument fromJsonText(std::string_view bytes, std::string_view source, int maxDepth = 256);
    // The same for a file's content (readInput()): reads input.bytes in place when input.padding leaves
    // SIMDJSON_PADDING readable bytes after them, else from a padded copy (as the overload above does).
    static PickleDocument fromJsonText(Input input, std::string_view source, int maxDepth = 256);
    // fromJsonText(json.dump(), source, maxDepth): for callers (tests) that hold a nlohmann value.
    static PickleDocument fromJson(const nlohmann::json& json, std::string_view source, int maxDepth = 256);

private:
    std::optional<std::int64_t> floatToInt(const PickleValue& v) const;
    nlohmann::json toJsonBounded(const PickleValue& v, int depth, std::uint64_t& budget) const;
    friend class PickleParser;
    friend class PickleJsonTextBuilder;
    friend class PickleContainerStore;
    std::shared_ptr<const void> m_keepAlive; // owner of m_bytes when the document owns them
    std::string_view m_bytes;
    // Container c holds m_items[m_spans[c].first, + m_spans[c].second): one allocation for all.
    std::vector<PickleValue> m_items;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> m_spans;
    std::vector<std::uint64_t> m_identity; // container → itemsIdentity
    std::vector<bool> m_taken; // container → taken by a PickleDictSink (empty without one)
    PickleValue m_root;
    std::string m_source;
    std::uint8_t m_protocol = 0;
    std::size_t m_bytesAfterStop = 0;
};

} // namespace gpumem
