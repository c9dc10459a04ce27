#include "core/importers/pickle_reader.h"

#include "core/file_io.h"

#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace gpumem {

std::string_view toString(PickleKind kind)
{
    static constexpr std::array<std::string_view, 11> kNames
        = { "None", "bool", "int", "int", "float", "str", "bytes", "list", "tuple", "dict", "set" };
    auto i = static_cast<std::size_t>(kind);
    return i < kNames.size() ? kNames[i] : "invalid";
}

namespace {

    // Opcode names from CPython Lib/pickle.py, for messages.
    std::string_view opcodeName(unsigned char op)
    {
        switch (op) {
        case 0x28: return "MARK";
        case 0x2e: return "STOP";
        case 0x30: return "POP";
        case 0x31: return "POP_MARK";
        case 0x32: return "DUP";
        case 0x46: return "FLOAT";
        case 0x49: return "INT";
        case 0x4a: return "BININT";
        case 0x4b: return "BININT1";
        case 0x4c: return "LONG";
        case 0x4d: return "BININT2";
        case 0x4e: return "NONE";
        case 0x50: return "PERSID";
        case 0x51: return "BINPERSID";
        case 0x52: return "REDUCE";
        case 0x53: return "STRING";
        case 0x54: return "BINSTRING";
        case 0x55: return "SHORT_BINSTRING";
        case 0x56: return "UNICODE";
        case 0x58: return "BINUNICODE";
        case 0x61: return "APPEND";
        case 0x62: return "BUILD";
        case 0x63: return "GLOBAL";
        case 0x64: return "DICT";
        case 0x7d: return "EMPTY_DICT";
        case 0x65: return "APPENDS";
        case 0x67: return "GET";
        case 0x68: return "BINGET";
        case 0x69: return "INST";
        case 0x6a: return "LONG_BINGET";
        case 0x6c: return "LIST";
        case 0x5d: return "EMPTY_LIST";
        case 0x6f: return "OBJ";
        case 0x70: return "PUT";
        case 0x71: return "BINPUT";
        case 0x72: return "LONG_BINPUT";
        case 0x73: return "SETITEM";
        case 0x74: return "TUPLE";
        case 0x29: return "EMPTY_TUPLE";
        case 0x75: return "SETITEMS";
        case 0x47: return "BINFLOAT";
        case 0x80: return "PROTO";
        case 0x81: return "NEWOBJ";
        case 0x82: return "EXT1";
        case 0x83: return "EXT2";
        case 0x84: return "EXT4";
        case 0x85: return "TUPLE1";
        case 0x86: return "TUPLE2";
        case 0x87: return "TUPLE3";
        case 0x88: return "NEWTRUE";
        case 0x89: return "NEWFALSE";
        case 0x8a: return "LONG1";
        case 0x8b: return "LONG4";
        case 0x42: return "BINBYTES";
        case 0x43: return "SHORT_BINBYTES";
        case 0x8c: return "SHORT_BINUNICODE";
        case 0x8d: return "BINUNICODE8";
        case 0x8e: return "BINBYTES8";
        case 0x8f: return "EMPTY_SET";
        case 0x90: return "ADDITEMS";
        case 0x91: return "FROZENSET";
        case 0x92: return "NEWOBJ_EX";
        case 0x93: return "STACK_GLOBAL";
        case 0x94: return "MEMOIZE";
        case 0x95: return "FRAME";
        case 0x96: return "BYTEARRAY8";
        case 0x97: return "NEXT_BUFFER";
        case 0x98: return "READONLY_BUFFER";
        default: return {};
        }
    }

    std::string hexByte(unsigned char op)
    {
        static constexpr char kHex[] = "0123456789abcdef";
        return std::string("0x") + kHex[op >> 4] + kHex[op & 15];
    }

} // namespace

class PickleParser {
public:
    PickleParser(PickleDocument& doc)
        : m_doc(doc)
        , m_data(reinterpret_cast<const unsigned char*>(doc.m_bytes.data()))
        , m_size(doc.m_bytes.size())
    {
    }

    void run()
    {
        // Python pickles of this shape push roughly one value per 4 bytes.
        m_stack.reserve(64);
        m_memo.reserve(m_size / 16 + 16);
        m_doc.m_containers.reserve(m_size / 64 + 16);
        while (true) {
            if (m_pos >= m_size)
                fail(m_size, "the pickle ends without a STOP opcode (the file is truncated); re-save it or copy it again");
            m_opOffset = m_pos;
            const unsigned char op = m_data[m_pos++];
            switch (op) {
            case 0x80: { // PROTO
                unsigned char proto = readU8();
                if (proto > 5)
                    fail(m_opOffset, "pickle protocol " + std::to_string(proto) + " is newer than 5, the newest gpumem reads");
                m_doc.m_protocol = proto;
                break;
            }
            case 0x95: // FRAME: a length prefix only; the frame's bytes follow in line
                readLE(8);
                break;
            case 0x2e: // STOP
                m_doc.m_root = pop();
                return;
            case 0x28: // MARK
                m_marks.push_back(m_stack.size());
                break;
            case 0x30: // POP
                if (m_stack.empty())
                    popMark();
                else
                    m_stack.pop_back();
                break;
            case 0x31: // POP_MARK
                m_stack.resize(popMark());
                break;
            case 0x32: // DUP
                push(top());
                break;
            case 0x4e: // NONE
                push(PickleValue {});
                break;
            case 0x88: // NEWTRUE
                push(PickleValue { PickleKind::Bool, 0, 1 });
                break;
            case 0x89: // NEWFALSE
                push(PickleValue { PickleKind::Bool, 0, 0 });
                break;
            case 0x4a: // BININT: signed 32-bit
                pushInt(static_cast<std::int32_t>(static_cast<std::uint32_t>(readLE(4))));
                break;
            case 0x4b: // BININT1
                pushInt(readU8());
                break;
            case 0x4d: // BININT2
                pushInt(static_cast<std::int64_t>(readLE(2)));
                break;
            case 0x8a: // LONG1
                pushLong(readU8());
                break;
            case 0x8b: { // LONG4
                auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(readLE(4)));
                if (n < 0)
                    fail(m_opOffset, "LONG4 with a negative byte count");
                pushLong(static_cast<std::uint64_t>(n));
                break;
            }
            case 0x47: { // BINFLOAT: big-endian IEEE double
                need(8);
                std::uint64_t bits = 0;
                for (int i = 0; i < 8; ++i)
                    bits = (bits << 8) | m_data[m_pos + i];
                m_pos += 8;
                push(PickleValue { PickleKind::Float, 0, bits });
                break;
            }
            case 0x8c: // SHORT_BINUNICODE
                pushString(PickleKind::Str, readU8());
                break;
            case 0x58: // BINUNICODE
                pushString(PickleKind::Str, readLE(4));
                break;
            case 0x8d: // BINUNICODE8
                pushString(PickleKind::Str, readLE(8));
                break;
            case 0x55: // SHORT_BINSTRING (protocol 1 str; bytes here)
            case 0x43: // SHORT_BINBYTES
                pushString(PickleKind::Binary, readU8());
                break;
            case 0x54: { // BINSTRING: signed 32-bit length
                auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(readLE(4)));
                if (n < 0)
                    fail(m_opOffset, "BINSTRING with a negative length");
                pushString(PickleKind::Binary, static_cast<std::uint64_t>(n));
                break;
            }
            case 0x42: // BINBYTES
                pushString(PickleKind::Binary, readLE(4));
                break;
            case 0x8e: // BINBYTES8
            case 0x96: // BYTEARRAY8
                pushString(PickleKind::Binary, readLE(8));
                break;
            case 0x7d: // EMPTY_DICT
                push(newContainer(PickleKind::Dict));
                break;
            case 0x5d: // EMPTY_LIST
                push(newContainer(PickleKind::List));
                break;
            case 0x29: // EMPTY_TUPLE
                push(newContainer(PickleKind::Tuple));
                break;
            case 0x8f: // EMPTY_SET
                push(newContainer(PickleKind::Set));
                break;
            case 0x85: // TUPLE1
            case 0x86: // TUPLE2
            case 0x87: { // TUPLE3
                std::size_t n = op - 0x84u;
                if (m_stack.size() < n)
                    underflow(op);
                pushFromStack(PickleKind::Tuple, m_stack.size() - n);
                break;
            }
            case 0x74: // TUPLE
                pushFromStack(PickleKind::Tuple, popMark());
                break;
            case 0x6c: // LIST
                pushFromStack(PickleKind::List, popMark());
                break;
            case 0x91: // FROZENSET
                pushFromStack(PickleKind::Set, popMark());
                break;
            case 0x64: { // DICT
                std::size_t mark = popMark();
                if ((m_stack.size() - mark) % 2 != 0)
                    fail(m_opOffset, "DICT with an odd number of items after the mark");
                pushFromStack(PickleKind::Dict, mark);
                break;
            }
            case 0x73: { // SETITEM
                if (m_stack.size() < 3)
                    underflow(op);
                auto& target = container(m_stack[m_stack.size() - 3], PickleKind::Dict, op);
                target.push_back(m_stack[m_stack.size() - 2]);
                target.push_back(m_stack[m_stack.size() - 1]);
                m_stack.resize(m_stack.size() - 2);
                break;
            }
            case 0x75: { // SETITEMS
                std::size_t mark = popMark();
                if (mark == 0)
                    underflow(op);
                if ((m_stack.size() - mark) % 2 != 0)
                    fail(m_opOffset, "SETITEMS with an odd number of items after the mark");
                appendFromStack(container(m_stack[mark - 1], PickleKind::Dict, op), mark);
                break;
            }
            case 0x61: { // APPEND
                if (m_stack.size() < 2)
                    underflow(op);
                container(m_stack[m_stack.size() - 2], PickleKind::List, op).push_back(m_stack.back());
                m_stack.pop_back();
                break;
            }
            case 0x65: // APPENDS
            case 0x90: { // ADDITEMS
                std::size_t mark = popMark();
                if (mark == 0)
                    underflow(op);
                appendFromStack(container(m_stack[mark - 1], op == 0x65 ? PickleKind::List : PickleKind::Set, op), mark);
                break;
            }
            case 0x71: // BINPUT
                put(readU8());
                break;
            case 0x72: // LONG_BINPUT
                put(readLE(4));
                break;
            case 0x94: // MEMOIZE
                put(m_memoCount);
                break;
            case 0x68: // BINGET
                get(readU8());
                break;
            case 0x6a: // LONG_BINGET
                get(readLE(4));
                break;
            case 0x63: // GLOBAL
            case 0x93: // STACK_GLOBAL
            case 0x52: // REDUCE
            case 0x62: // BUILD
            case 0x69: // INST
            case 0x6f: // OBJ
            case 0x81: // NEWOBJ
            case 0x92: // NEWOBJ_EX
            case 0x82: // EXT1
            case 0x83: // EXT2
            case 0x84: // EXT4
            case 0x50: // PERSID
            case 0x51: // BINPERSID
            case 0x97: // NEXT_BUFFER
            case 0x98: // READONLY_BUFFER
                throw FormatError(m_doc.m_source + ": pickle opcode " + std::string(opcodeName(op)) + " (" + hexByte(op)
                    + ") at byte offset " + std::to_string(m_opOffset)
                    + " is not allowed: gpumem reads only plain-data pickles and never runs code from them");
            default: {
                std::string_view name = opcodeName(op);
                if (!name.empty())
                    fail(m_opOffset, "pickle opcode " + std::string(name) + " (" + hexByte(op)
                            + ") is a protocol-0 text opcode gpumem does not read; save the file with protocol 2 or newer");
                fail(m_opOffset, "byte " + hexByte(op) + " is not a pickle opcode (the file is not a pickle or is corrupt)");
            }
            }
        }
    }

private:
    [[noreturn]] void fail(std::uint64_t offset, const std::string& what) const
    {
        throw FormatError(m_doc.m_source + ": at byte offset " + std::to_string(offset) + ": " + what);
    }
    [[noreturn]] void underflow(unsigned char op) const
    {
        fail(m_opOffset, "pickle opcode " + std::string(opcodeName(op)) + " finds too few values on the stack (corrupt pickle)");
    }

    void need(std::uint64_t n) const
    {
        if (n > m_size - m_pos)
            fail(m_opOffset, "the pickle is cut off inside opcode " + std::string(opcodeName(m_data[m_opOffset])) + " (needs "
                    + std::to_string(n) + " more bytes, " + std::to_string(m_size - m_pos) + " left)");
    }
    unsigned char readU8()
    {
        need(1);
        return m_data[m_pos++];
    }
    std::uint64_t readLE(int n)
    {
        need(static_cast<std::uint64_t>(n));
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i)
            v = (v << 8) | m_data[m_pos + static_cast<std::size_t>(i)];
        m_pos += static_cast<std::size_t>(n);
        return v;
    }

    void push(const PickleValue& v) { m_stack.push_back(v); }
    void pushInt(std::int64_t v) { m_stack.push_back(PickleValue { PickleKind::Int, 0, static_cast<std::uint64_t>(v) }); }
    const PickleValue& top() const
    {
        if (m_stack.empty())
            fail(m_opOffset, "pickle opcode " + std::string(opcodeName(m_data[m_opOffset])) + " on an empty stack (corrupt pickle)");
        return m_stack.back();
    }
    PickleValue pop()
    {
        PickleValue v = top();
        m_stack.pop_back();
        return v;
    }
    std::size_t popMark()
    {
        if (m_marks.empty())
            fail(m_opOffset, "pickle opcode " + std::string(opcodeName(m_data[m_opOffset])) + " without a MARK (corrupt pickle)");
        std::size_t mark = m_marks.back();
        m_marks.pop_back();
        if (mark > m_stack.size())
            fail(m_opOffset, "a MARK points above the stack top (corrupt pickle)");
        return mark;
    }

    // Two's complement little-endian integer of n bytes (Python's decode_long).
    void pushLong(std::uint64_t n)
    {
        need(n);
        const unsigned char* p = m_data + m_pos;
        m_pos += n;
        if (n == 0) {
            pushInt(0);
            return;
        }
        const bool negative = (p[n - 1] & 0x80) != 0;
        // Strip sign-extension bytes; what remains must fit in 8 bytes with the right sign bit.
        std::uint64_t len = n;
        const unsigned char fill = negative ? 0xff : 0x00;
        while (len > 1 && p[len - 1] == fill && ((p[len - 2] & 0x80) != 0) == negative)
            --len;
        if (len > 8) {
            push(PickleValue { PickleKind::BigInt, 0,
                static_cast<std::uint64_t>(negative ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max()) });
            return;
        }
        std::uint64_t v = negative ? ~std::uint64_t(0) : 0;
        for (std::uint64_t i = len; i-- > 0;)
            v = (v << 8) | p[i];
        pushInt(static_cast<std::int64_t>(v));
    }

    void pushString(PickleKind kind, std::uint64_t n)
    {
        need(n);
        if (n > std::numeric_limits<std::uint32_t>::max())
            fail(m_opOffset, "a string of " + std::to_string(n) + " bytes is larger than gpumem reads (4 GiB)");
        push(PickleValue { kind, static_cast<std::uint32_t>(n), m_pos });
        m_pos += n;
    }

    PickleValue newContainer(PickleKind kind)
    {
        m_doc.m_containers.emplace_back();
        return PickleValue { kind, 0, m_doc.m_containers.size() - 1 };
    }
    void pushFromStack(PickleKind kind, std::size_t from)
    {
        PickleValue v = newContainer(kind);
        m_doc.m_containers.back().assign(m_stack.begin() + static_cast<std::ptrdiff_t>(from), m_stack.end());
        m_stack.resize(from);
        push(v);
    }
    std::vector<PickleValue>& container(const PickleValue& v, PickleKind kind, unsigned char op)
    {
        if (v.kind != kind)
            fail(m_opOffset, "pickle opcode " + std::string(opcodeName(op)) + " applies to a " + std::string(toString(kind))
                    + " but finds a " + std::string(toString(v.kind)) + " (corrupt pickle)");
        return m_doc.m_containers[v.bits];
    }
    void appendFromStack(std::vector<PickleValue>& target, std::size_t mark)
    {
        target.insert(target.end(), m_stack.begin() + static_cast<std::ptrdiff_t>(mark), m_stack.end());
        m_stack.resize(mark);
    }

    void put(std::uint64_t index)
    {
        // A valid pickle never has more memo entries than bytes; refusing larger indexes bounds memory.
        if (index > m_size)
            fail(m_opOffset, "memo index " + std::to_string(index) + " is larger than the pickle (corrupt pickle)");
        const PickleValue& v = top();
        if (index >= m_memo.size()) {
            m_memo.resize(index + 1);
            m_memoSet.resize(index + 1, 0);
        }
        if (!m_memoSet[index]) {
            m_memoSet[index] = 1;
            ++m_memoCount;
        }
        m_memo[index] = v;
    }
    void get(std::uint64_t index)
    {
        if (index >= m_memo.size() || !m_memoSet[index])
            fail(m_opOffset, "memo index " + std::to_string(index) + " was never stored (corrupt pickle)");
        push(m_memo[index]);
    }

    PickleDocument& m_doc;
    const unsigned char* m_data;
    std::size_t m_size;
    std::size_t m_pos = 0;
    std::size_t m_opOffset = 0;
    std::vector<PickleValue> m_stack;
    std::vector<std::size_t> m_marks;
    std::vector<PickleValue> m_memo;
    std::vector<std::uint8_t> m_memoSet;
    std::uint64_t m_memoCount = 0;
};

PickleDocument::PickleDocument() = default;
PickleDocument::~PickleDocument() = default;
PickleDocument::PickleDocument(PickleDocument&&) noexcept = default;
PickleDocument& PickleDocument::operator=(PickleDocument&&) noexcept = default;

PickleDocument PickleDocument::parse(std::string_view bytes, std::string_view source)
{
    PickleDocument doc;
    doc.m_bytes = bytes;
    doc.m_source = std::string(source);
    PickleParser(doc).run();
    return doc;
}

PickleDocument PickleDocument::readFile(const std::string& path)
{
    std::string head = readFileHead(path, 2);
    if (isGzip(head)) {
        auto owned = std::make_shared<std::string>(readFileMaybeGzip(path));
        PickleDocument doc = parse(*owned, path);
        doc.m_keepAlive = std::move(owned);
        return doc;
    }
    auto mapped = std::make_shared<MappedFile>(path);
    PickleDocument doc = parse(mapped->bytes(), path);
    doc.m_keepAlive = std::move(mapped);
    return doc;
}

std::optional<std::int64_t> PickleDocument::toInt(const PickleValue& v) const
{
    switch (v.kind) {
    case PickleKind::Int:
    case PickleKind::BigInt:
    case PickleKind::Bool:
        return static_cast<std::int64_t>(v.bits);
    case PickleKind::Float: {
        double d = std::bit_cast<double>(v.bits);
        if (!std::isfinite(d) || d >= 9.2e18 || d <= -9.2e18)
            return std::nullopt;
        return static_cast<std::int64_t>(d);
    }
    default:
        return std::nullopt;
    }
}

std::optional<double> PickleDocument::toFloat(const PickleValue& v) const
{
    if (v.kind == PickleKind::Float)
        return std::bit_cast<double>(v.bits);
    if (v.kind == PickleKind::Int || v.kind == PickleKind::BigInt || v.kind == PickleKind::Bool)
        return static_cast<double>(static_cast<std::int64_t>(v.bits));
    return std::nullopt;
}

std::string_view PickleDocument::text(const PickleValue& v) const
{
    if (v.kind != PickleKind::Str && v.kind != PickleKind::Binary)
        return {};
    return m_bytes.substr(v.bits, v.length);
}

bool PickleDocument::isContainer(const PickleValue& v) const
{
    return v.kind == PickleKind::List || v.kind == PickleKind::Tuple || v.kind == PickleKind::Dict || v.kind == PickleKind::Set;
}

std::span<const PickleValue> PickleDocument::items(const PickleValue& v) const
{
    if (!isContainer(v))
        return {};
    return m_containers[v.bits];
}

const PickleValue* PickleDocument::find(const PickleValue& dict, std::string_view key) const
{
    if (dict.kind != PickleKind::Dict)
        return nullptr;
    const auto& kv = m_containers[dict.bits];
    for (std::size_t i = kv.size(); i >= 2; i -= 2) {
        const PickleValue& k = kv[i - 2];
        if (k.kind == PickleKind::Str && k.length == key.size()
            && std::memcmp(m_bytes.data() + k.bits, key.data(), key.size()) == 0)
            return &kv[i - 1];
    }
    return nullptr;
}

nlohmann::json PickleDocument::toJson(const PickleValue& v, int maxDepth) const
{
    if (maxDepth < 0)
        throw FormatError(m_source + ": the pickle nests deeper than gpumem converts (or contains a cycle)");
    switch (v.kind) {
    case PickleKind::None: return nullptr;
    case PickleKind::Bool: return v.bits != 0;
    case PickleKind::Int:
    case PickleKind::BigInt: return static_cast<std::int64_t>(v.bits);
    case PickleKind::Float: return std::bit_cast<double>(v.bits);
    case PickleKind::Str:
    case PickleKind::Binary: return std::string(text(v));
    case PickleKind::Dict: {
        nlohmann::json out = nlohmann::json::object();
        auto kv = items(v);
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            std::string key;
            if (kv[i].kind == PickleKind::Str || kv[i].kind == PickleKind::Binary)
                key = std::string(text(kv[i]));
            else
                key = toJson(kv[i], maxDepth - 1).dump();
            out[key] = toJson(kv[i + 1], maxDepth - 1);
        }
        return out;
    }
    default: {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& item : items(v))
            out.push_back(toJson(item, maxDepth - 1));
        return out;
    }
    }
}

class PickleJsonBuilder {
public:
    PickleJsonBuilder(PickleDocument& doc, std::string& strings, int maxDepth)
        : m_doc(doc)
        , m_strings(strings)
        , m_maxDepth(maxDepth)
    {
    }
    PickleValue build(const nlohmann::json& j, int depth)
    {
        if (depth > m_maxDepth)
            throw FormatError(m_doc.m_source + ": the JSON nests deeper than " + std::to_string(m_maxDepth) + " levels");
        switch (j.type()) {
        case nlohmann::json::value_t::null: return PickleValue {};
        case nlohmann::json::value_t::boolean: return PickleValue { PickleKind::Bool, 0, j.get<bool>() ? 1u : 0u };
        case nlohmann::json::value_t::number_integer:
            return PickleValue { PickleKind::Int, 0, static_cast<std::uint64_t>(j.get<std::int64_t>()) };
        case nlohmann::json::value_t::number_unsigned: {
            auto u = j.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                return PickleValue { PickleKind::BigInt, 0, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) };
            return PickleValue { PickleKind::Int, 0, u };
        }
        case nlohmann::json::value_t::number_float: return PickleValue { PickleKind::Float, 0, std::bit_cast<std::uint64_t>(j.get<double>()) };
        case nlohmann::json::value_t::string: return str(j.get_ref<const std::string&>());
        case nlohmann::json::value_t::array: {
            std::vector<PickleValue> items;
            items.reserve(j.size());
            for (const auto& item : j)
                items.push_back(build(item, depth + 1));
            return store(PickleKind::List, std::move(items));
        }
        case nlohmann::json::value_t::object: {
            std::vector<PickleValue> items;
            items.reserve(j.size() * 2);
            for (auto it = j.begin(); it != j.end(); ++it) {
                items.push_back(str(it.key()));
                items.push_back(build(it.value(), depth + 1));
            }
            return store(PickleKind::Dict, std::move(items));
        }
        default: return PickleValue {};
        }
    }

private:
    PickleValue str(const std::string& s)
    {
        PickleValue v { PickleKind::Str, static_cast<std::uint32_t>(s.size()), m_strings.size() };
        m_strings += s;
        return v;
    }
    PickleValue store(PickleKind kind, std::vector<PickleValue> items)
    {
        m_doc.m_containers.push_back(std::move(items));
        return PickleValue { kind, 0, m_doc.m_containers.size() - 1 };
    }
    PickleDocument& m_doc;
    std::string& m_strings;
    int m_maxDepth;
};

PickleDocument PickleDocument::fromJson(const nlohmann::json& json, std::string_view source, int maxDepth)
{
    PickleDocument doc;
    doc.m_source = std::string(source);
    auto strings = std::make_shared<std::string>();
    doc.m_root = PickleJsonBuilder(doc, *strings, maxDepth).build(json, 0);
    doc.m_bytes = *strings;
    doc.m_keepAlive = std::move(strings);
    return doc;
}

} // namespace gpumem
