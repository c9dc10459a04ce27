#include "importers/pickle_reader.h"

#include "core/detail/flat_id_index.h"
#include "core/detail/utf8_encode.h"
#include "core/file_io.h"
#include "core/message_quote.h"

#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits>

namespace gpumem {

std::string_view toString(PickleKind kind)
{
    static constexpr std::array<std::string_view, 11> kNames
        = { "None", "bool", "int", "int", "float", "str", "bytes", "list", "tuple", "dict", "set" };
    auto i = static_cast<std::size_t>(kind);
    return i < kNames.size() ? kNames[i] : "invalid";
}

std::string_view withArticle(PickleKind kind)
{
    static constexpr std::array<std::string_view, 11> kNames = { "None", "a bool", "an int", "an int", "a float",
        "a str", "a bytes object", "a list", "a tuple", "a dict", "a set" };
    auto i = static_cast<std::size_t>(kind);
    return i < kNames.size() ? kNames[i] : "an invalid value";
}

namespace {

    // Opcode names from CPython Lib/pickle.py, for messages.
    struct OpcodeName {
        unsigned char op;
        std::string_view name;
    };
    constexpr OpcodeName kOpcodeNames[] = {
        { 0x28, "MARK" },
        { 0x2e, "STOP" },
        { 0x30, "POP" },
        { 0x31, "POP_MARK" },
        { 0x32, "DUP" },
        { 0x46, "FLOAT" },
        { 0x49, "INT" },
        { 0x4a, "BININT" },
        { 0x4b, "BININT1" },
        { 0x4c, "LONG" },
        { 0x4d, "BININT2" },
        { 0x4e, "NONE" },
        { 0x50, "PERSID" },
        { 0x51, "BINPERSID" },
        { 0x52, "REDUCE" },
        { 0x53, "STRING" },
        { 0x54, "BINSTRING" },
        { 0x55, "SHORT_BINSTRING" },
        { 0x56, "UNICODE" },
        { 0x58, "BINUNICODE" },
        { 0x61, "APPEND" },
        { 0x62, "BUILD" },
        { 0x63, "GLOBAL" },
        { 0x64, "DICT" },
        { 0x7d, "EMPTY_DICT" },
        { 0x65, "APPENDS" },
        { 0x67, "GET" },
        { 0x68, "BINGET" },
        { 0x69, "INST" },
        { 0x6a, "LONG_BINGET" },
        { 0x6c, "LIST" },
        { 0x5d, "EMPTY_LIST" },
        { 0x6f, "OBJ" },
        { 0x70, "PUT" },
        { 0x71, "BINPUT" },
        { 0x72, "LONG_BINPUT" },
        { 0x73, "SETITEM" },
        { 0x74, "TUPLE" },
        { 0x29, "EMPTY_TUPLE" },
        { 0x75, "SETITEMS" },
        { 0x47, "BINFLOAT" },
        { 0x80, "PROTO" },
        { 0x81, "NEWOBJ" },
        { 0x82, "EXT1" },
        { 0x83, "EXT2" },
        { 0x84, "EXT4" },
        { 0x85, "TUPLE1" },
        { 0x86, "TUPLE2" },
        { 0x87, "TUPLE3" },
        { 0x88, "NEWTRUE" },
        { 0x89, "NEWFALSE" },
        { 0x8a, "LONG1" },
        { 0x8b, "LONG4" },
        { 0x42, "BINBYTES" },
        { 0x43, "SHORT_BINBYTES" },
        { 0x8c, "SHORT_BINUNICODE" },
        { 0x8d, "BINUNICODE8" },
        { 0x8e, "BINBYTES8" },
        { 0x8f, "EMPTY_SET" },
        { 0x90, "ADDITEMS" },
        { 0x91, "FROZENSET" },
        { 0x92, "NEWOBJ_EX" },
        { 0x93, "STACK_GLOBAL" },
        { 0x94, "MEMOIZE" },
        { 0x95, "FRAME" },
        { 0x96, "BYTEARRAY8" },
        { 0x97, "NEXT_BUFFER" },
        { 0x98, "READONLY_BUFFER" },
    };

    std::string_view opcodeName(unsigned char op)
    {
        for (const auto& entry : kOpcodeNames)
            if (entry.op == op)
                return entry.name;
        return {};
    }

    std::string hexByte(unsigned char op)
    {
        static constexpr char kHex[] = "0123456789abcdef";
        return std::string("0x") + kHex[op >> 4] + kHex[op & 15];
    }

} // namespace

// Builds the containers of a document without an allocation per container: items are appended to
// one arena, and each container's span in it is kept in the table the document will use. Almost
// every container is filled by one SETITEMS/APPENDS (or by consecutive ones with nothing in between),
// so its items stay where they are and its span is final at once. A container filled in batches
// (APPENDS comes every 1000 items, and its children are built in between) gets a chain of chunks,
// which finish() copies once, contiguously, to the arena's end. The arena becomes the document's
// item table and the span table its span table, so nothing is copied twice.
class PickleContainerStore {
public:
    std::uint64_t create()
    {
        m_spans.emplace_back(0, 0);
        return m_spans.size() - 1;
    }
    [[gnu::always_inline]] void append(std::uint64_t container, const PickleValue* begin, const PickleValue* end)
    {
        const auto n = static_cast<std::uint64_t>(end - begin);
        if (n == 0)
            return;
        auto& [start, count] = m_spans[container];
        const std::uint64_t arenaSize = m_arena.size();
        if (count == 0) [[likely]] {
            start = arenaSize;
            count = n;
        } else if (count < kChained && start + count == arenaSize) {
            count += n; // nothing was appended since: the items stay contiguous
        } else {
            addChunk(container, n);
        }
        m_arena.insert(m_arena.end(), begin, end);
    }
    bool empty(std::uint64_t container) const { return m_spans[container].second == 0; }
    std::uint64_t size() const { return m_spans.size(); } // the index the next create() returns
    // The items of a container filled by one append, as (start, count) in the arena.
    std::pair<std::uint64_t, std::uint64_t> span(std::uint64_t container) const { return m_spans[container]; }
    // Gives the empty `container` the items at arena [start, start + count), which `from` holds
    // (a repeated list of memo references, a repeated dict): no copy. Either container may still
    // grow without changing the other (a later append to either gets its own items).
    void share(std::uint64_t container, std::uint64_t start, std::uint64_t count, std::uint64_t from)
    {
        m_spans[container] = { start, count };
        m_shares.emplace_back(container, from);
    }
    // Reserving address space is free; only the pages written are touched.
    void reserve(std::size_t items, std::size_t containers)
    {
        m_arena.reserve(items);
        m_spans.reserve(containers);
        m_shares.reserve(containers);
    }
    void finish(PickleDocument& doc)
    {
        std::uint64_t extra = 0;
        for (const Chain& c : m_chains)
            for (std::uint64_t k = c.first; k != kNone; k = m_chunks[k].next)
                extra += m_chunks[k].length;
        m_arena.reserve(m_arena.size() + extra);
        for (const Chain& c : m_chains) {
            const std::uint64_t start = m_arena.size();
            for (std::uint64_t k = c.first; k != kNone; k = m_chunks[k].next)
                for (std::uint64_t i = 0; i < m_chunks[k].length; ++i)
                    m_arena.push_back(m_arena[m_chunks[k].start + i]); // capacity reserved above
            m_spans[c.container] = { start, m_arena.size() - start };
        }
        // Two containers with the same span have the same items: the later one takes the identity
        // of the one it shared them with (which never shares itself, so there are no chains).
        doc.m_identity.clear();
        if (!m_shares.empty()) {
            doc.m_identity.resize(m_spans.size());
            for (std::size_t c = 0; c < m_spans.size(); ++c)
                doc.m_identity[c] = c;
            for (const auto& [container, from] : m_shares)
                if (m_spans[from] == m_spans[container])
                    doc.m_identity[container] = from;
        }
        doc.m_spans = std::move(m_spans);
        doc.m_items = std::move(m_arena);
    }

private:
    static constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
    // A span's count at or above kChained marks a chained container: count - kChained indexes m_chains.
    static constexpr std::uint64_t kChained = std::uint64_t(1) << 62;
    struct Chunk {
        std::uint64_t start;
        std::uint64_t length;
        std::uint64_t next;
    };
    struct Chain {
        std::uint64_t container;
        std::uint64_t first;
        std::uint64_t last;
    };
    // Adds the n items about to be appended at the arena's end to a container that has items elsewhere.
    [[gnu::noinline]] void addChunk(std::uint64_t container, std::uint64_t n)
    {
        auto& [start, count] = m_spans[container];
        const std::uint64_t arenaSize = m_arena.size();
        if (count < kChained) { // becomes a chain: its items so far are the first chunk
            m_chunks.push_back(Chunk { start, count, kNone });
            m_chains.push_back(Chain { container, m_chunks.size() - 1, m_chunks.size() - 1 });
            count = kChained + (m_chains.size() - 1);
        }
        Chain& chain = m_chains[count - kChained];
        Chunk& last = m_chunks[chain.last];
        if (last.start + last.length == arenaSize) {
            last.length += n;
            return;
        }
        m_chunks.push_back(Chunk { arenaSize, n, kNone });
        m_chunks[chain.last].next = m_chunks.size() - 1;
        chain.last = m_chunks.size() - 1;
    }

    std::vector<PickleValue> m_arena;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> m_spans; // container → (start, count) or a chain
    std::vector<Chunk> m_chunks;
    std::vector<Chain> m_chains;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> m_shares; // (container, the container it shares with)
};

namespace {
    // A vector of trivially copyable values whose push stays inline (std::vector::push_back was not
    // inlined into the opcode loop: an out-of-line call per pushed value); growth is a cold call. The
    // parser's value stack, memo and marks.
    template <typename T> class PodStack {
    public:
        // By value: DUP pushes the top itself, which grow() would free before the copy (found by
        // the fuzzer).
        [[gnu::always_inline]] void push_back(T v)
        {
            if (m_top == m_cap) [[unlikely]]
                grow();
            *m_top++ = v;
        }
        void pop_back() { --m_top; }
        T& back() { return m_top[-1]; }
        const T& back() const { return m_top[-1]; }
        T& operator[](std::size_t i) { return m_base[i]; }
        const T& operator[](std::size_t i) const { return m_base[i]; }
        const T* data() const { return m_base; }
        std::size_t size() const { return static_cast<std::size_t>(m_top - m_base); }
        bool empty() const { return m_top == m_base; }
        void resize(std::size_t n) // shrinks only (MARK positions are never above the top)
        {
            m_top = m_base + std::min(size(), n);
        }
        void growTo(std::size_t n, T fill) // grows only, filling with `fill`
        {
            if (n > static_cast<std::size_t>(m_cap - m_base))
                reallocate(std::max(n, 2 * static_cast<std::size_t>(m_cap - m_base))); // amortized
            while (size() < n)
                *m_top++ = fill;
        }
        void reserve(std::size_t n)
        {
            if (n > static_cast<std::size_t>(m_cap - m_base))
                reallocate(n);
        }
        [[gnu::noinline]] void grow() { reallocate(std::max<std::size_t>(64, 2 * static_cast<std::size_t>(m_cap - m_base))); }

        // The opcode loop keeps the top in a register: it reads these and writes the top back.
        T* base() const { return m_base; }
        T* top() const { return m_top; }
        T* cap() const { return m_cap; }
        void setTop(T* top) { m_top = top; }

        PodStack() = default;
        PodStack(const PodStack&) = delete;
        PodStack& operator=(const PodStack&) = delete;
        ~PodStack() { std::free(m_base); }

    private:
        // malloc, not a std::vector: the memo is reserved for the whole file up front, and a vector
        // would write zeros over all of it (as much as the file's size) before the parse begins.
        void reallocate(std::size_t capacity)
        {
            const std::size_t n = size();
            static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
            T* grown = static_cast<T*>(std::realloc(static_cast<void*>(m_base), capacity * sizeof(T)));
            if (!grown)
                throw std::bad_alloc();
            m_base = grown;
            m_top = m_base + n;
            m_cap = m_base + capacity;
        }
        T* m_base = nullptr;
        T* m_top = nullptr;
        T* m_cap = nullptr;
    };
    using ValueStack = PodStack<PickleValue>;

    // A little-endian opcode argument (the pickle's byte order).
    template <typename T> [[gnu::always_inline]] inline T loadLE(const unsigned char* p)
    {
        T v = 0;
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&v, p, sizeof v);
        } else {
            for (std::size_t i = sizeof v; i-- > 0;)
                v = static_cast<T>((v << 8) | p[i]);
        }
        return v;
    }

    // A memo slot never stored (kind values above PickleKind::Set are not used by values).
    constexpr PickleValue kUnsetMemo { static_cast<PickleKind>(0xff), 0, 0 };
    // A memo slot of a dict a PickleDictSink took (a GET of it throws PickleSinkRefused).
    constexpr PickleValue kTakenMemo { static_cast<PickleKind>(0xfe), 0, 0 };
}

class PickleParser {
public:
    PickleParser(PickleDocument& doc, PickleDictSink* sink = nullptr)
        : m_doc(doc)
        , m_data(reinterpret_cast<const unsigned char*>(doc.m_bytes.data()))
        , m_size(doc.m_bytes.size())
        , m_sink(sink)
    {
    }

    void releaseBehindWhenMapped(bool on) { m_releaseBehind = on; }

    void run()
    {
        // Python pickles of this shape push roughly one value per 4 bytes.
        m_stack.reserve(64);
        m_memo.reserve(std::min<std::size_t>(m_size / 8, std::size_t(1) << 24) + 16); // snapshots: one per 16–64 bytes
        // Generous (untouched pages cost nothing), capped so a huge file does not ask for absurd amounts.
        m_store.reserve(std::min<std::size_t>(m_size / 2, std::size_t(1) << 26) + 16,
            std::min<std::size_t>(m_size / 16, std::size_t(1) << 22) + 16);
        while (true) {
            runCommonOpcodes();
            if (step())
                return;
        }
    }

private:
    // One opcode with every check: what runCommonOpcodes() leaves (rare opcodes, errors, the last
    // bytes of the pickle). Returns true after STOP.
    bool step()
    {
        if (m_pos >= m_size)
            fail(m_size,
                "the pickle ends without a STOP opcode (the file is truncated); re-save it or copy it again");
        m_opOffset = m_pos;
        const unsigned char op = m_data[m_pos++];
        switch (op) {
        case 0x80: { // PROTO
            unsigned char proto = readU8();
            if (proto > 5)
                fail(m_opOffset,
                    "pickle protocol " + std::to_string(proto) + " is newer than 5, the newest gpumem reads");
            m_doc.m_protocol = proto;
            break;
        }
        case 0x95: // FRAME: a length prefix only; the frame's bytes follow in line
            readLE(8);
            if (m_releaseBehind && m_pos - m_released >= kReleaseStep) [[unlikely]]
                releaseBehind();
            break;
        case 0x2e: // STOP
            m_doc.m_bytesAfterStop = m_size - m_pos;
            m_doc.m_root = pop();
            m_store.finish(m_doc);
            if (!m_decoded.empty()) [[unlikely]]
                adoptDecodedText();
            return true;
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
        case 0x5d: { // EMPTY_LIST
            const PickleValue v = newContainer(op == 0x7d ? PickleKind::Dict : PickleKind::List);
            if (m_sink && m_marks.size() <= 3) [[unlikely]]
                noteContainer(v, m_stack.data(), m_stack.data() + m_stack.size());
            push(v);
            break;
        }
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
            appendFromStack(container(m_stack[m_stack.size() - 3], PickleKind::Dict, op), m_stack.size() - 2);
            break;
        }
        case 0x75: { // SETITEMS
            std::size_t mark = popMark();
            if (mark == 0)
                underflow(op);
            if ((m_stack.size() - mark) % 2 != 0)
                fail(m_opOffset, "SETITEMS with an odd number of items after the mark");
            const std::uint64_t dict = container(m_stack[mark - 1], PickleKind::Dict, op);
            if (m_sink && m_marks.size() <= 3 && offerToSink(m_stack.data(), mark, m_stack.data() + m_stack.size())) {
                m_stack.resize(mark);
                break;
            }
            appendFromStack(dict, mark);
            break;
        }
        case 0x61: { // APPEND
            if (m_stack.size() < 2)
                underflow(op);
            appendFromStack(container(m_stack[m_stack.size() - 2], PickleKind::List, op), m_stack.size() - 1);
            break;
        }
        case 0x65: // APPENDS
        case 0x90: { // ADDITEMS
            std::size_t mark = popMark();
            if (mark == 0)
                underflow(op);
            appendFromStack(
                container(m_stack[mark - 1], op == 0x65 ? PickleKind::List : PickleKind::Set, op), mark);
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
        case 0x6a: // LONG_BINGET
            if (m_size - m_opOffset < 5) { // near the end: no room for the word read below
                get(op == 0x68 ? readU8() : readLE(4));
                break;
            }
            // A run of memo GETs (a frames list is hundreds of them, BINGET and LONG_BINGET mixed
            // at random): decoded in this loop without a branch on the opcode, which a dispatch
            // per opcode would mispredict about half the time.
            if (listOfMemoReferences())
                break;
            m_pos = m_opOffset;
            do {
                m_opOffset = m_pos;
                const bool isLong = m_data[m_pos] == 0x6a;
                std::uint32_t word;
                std::memcpy(&word, m_data + m_pos + 1, 4);
                if constexpr (std::endian::native != std::endian::little)
                    word = (word >> 24) | ((word >> 8) & 0xff00u) | ((word << 8) & 0xff0000u) | (word << 24);
                get(isLong ? word : (word & 0xffu));
                m_pos += isLong ? 5 : 2;
            } while (m_size - m_pos >= 5 && (m_data[m_pos] | 2) == 0x6a); // 0x68 or 0x6a
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
        case 0x49: // INT
        case 0x4c: // LONG
        case 0x46: // FLOAT
        case 0x53: // STRING
        case 0x56: // UNICODE
        case 0x70: // PUT
        case 0x67: // GET
            textOpcode(op);
            break;
        default:
            fail(m_opOffset,
                "byte " + hexByte(op) + " is not a pickle opcode (the file is not a pickle or is corrupt)");
        }
        return false;
    }

    // The text opcodes of protocols 0 and 1 (CPython Lib/pickle.py, load_int … load_get): each operand
    // is a line ended by '\n'. Kept out of step() and cold (with their helpers): snapshots of protocol 2
    // and newer never use them, and in line with the hot parser they cost its unpickling of the flexgen
    // public snapshot 12% (bench/snapshot_vs_pickle.py: 0.27 ms against 0.24 ms).
    [[gnu::cold]] [[gnu::noinline]] void textOpcode(unsigned char op)
    {
        switch (op) {
        case 0x49: { // INT: "00" and "01" are False and True (protocols 0 and 1 have no NEWTRUE)
            const std::string_view arg = readLine();
            if (arg == "00" || arg == "01")
                push(PickleValue { PickleKind::Bool, 0, arg == "01" ? 1u : 0u });
            else
                pushDecimal(arg);
            break;
        }
        case 0x4c: { // LONG: decimal, with Python 2's trailing 'L'
            std::string_view arg = readLine();
            if (!arg.empty() && arg.back() == 'L')
                arg.remove_suffix(1);
            pushDecimal(arg);
            break;
        }
        case 0x46: // FLOAT: repr() of a float
            pushFloatText(readLine());
            break;
        case 0x53: // STRING: a quoted Python 2 str literal (bytes here, as SHORT_BINSTRING)
            pushQuotedString(readLine());
            break;
        case 0x56: // UNICODE: raw-unicode-escape text
            pushRawUnicodeEscape(readLine());
            break;
        case 0x70: // PUT
            put(readIndex());
            break;
        case 0x67: // GET
            get(readIndex());
            break;
        default:
            break;
        }
    }

    // ---- protocol 0 and 1 text operands ----------------------------------------------------------
    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void badOperand(std::string_view arg, const char* expected) const
    {
        fail(m_opOffset,
            "pickle opcode " + std::string(opcodeName(m_data[m_opOffset])) + " has the operand \""
                + quoteForMessage(arg) + "\", not " + expected + " (corrupt pickle)");
    }
    // The operand line after the opcode, without its '\n'.
    [[gnu::cold]] [[gnu::noinline]] std::string_view readLine()
    {
        const auto* begin = m_data + m_pos;
        const auto* nl = static_cast<const unsigned char*>(std::memchr(begin, '\n', m_size - m_pos));
        if (!nl)
            fail(m_opOffset,
                "the pickle is cut off inside opcode " + std::string(opcodeName(m_data[m_opOffset]))
                    + " (its operand has no ending newline)");
        m_pos += static_cast<std::size_t>(nl - begin) + 1;
        return std::string_view(reinterpret_cast<const char*>(begin), static_cast<std::size_t>(nl - begin));
    }
    // Python's int() of an INT or LONG operand: [+-]digits (blanks around allowed); beyond int64 it is
    // a BigInt clamped to INT64_MIN/INT64_MAX, as for LONG1/LONG4.
    [[gnu::cold]] [[gnu::noinline]] void pushDecimal(std::string_view arg)
    {
        std::string_view t = trimBlanks(arg);
        const bool negative = !t.empty() && t[0] == '-';
        if (!t.empty() && (t[0] == '-' || t[0] == '+'))
            t.remove_prefix(1);
        if (t.empty() || t.find_first_not_of("0123456789") != std::string_view::npos)
            badOperand(arg, "a decimal integer");
        std::uint64_t magnitude = 0;
        bool big = false;
        for (char c : t) {
            const auto digit = static_cast<std::uint64_t>(c - '0');
            big = big || magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10;
            magnitude = magnitude * 10 + digit;
        }
        const std::uint64_t limit = negative ? std::uint64_t(1) << 63 : (std::uint64_t(1) << 63) - 1;
        if (big || magnitude > limit) {
            push(PickleValue { PickleKind::BigInt, 0,
                static_cast<std::uint64_t>(
                    negative ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max()) });
            return;
        }
        push(PickleValue { PickleKind::Int, 0, negative ? ~magnitude + 1 : magnitude });
    }
    [[gnu::cold]] [[gnu::noinline]] void pushFloatText(std::string_view arg)
    {
        std::string_view t = trimBlanks(arg);
        if (!t.empty() && t[0] == '+')
            t.remove_prefix(1);
        double d = 0;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
        if (t.empty() || end != t.data() + t.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
            badOperand(arg, "a float");
        push(PickleValue { PickleKind::Float, 0, std::bit_cast<std::uint64_t>(d) });
    }
    // A PUT or GET index: decimal digits.
    [[gnu::cold]] [[gnu::noinline]] std::uint64_t readIndex()
    {
        const std::string_view arg = readLine();
        const std::string_view t = trimBlanks(arg);
        if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string_view::npos)
            badOperand(arg, "a memo index");
        std::uint64_t index = 0;
        for (char c : t)
            index = index * 10 + static_cast<std::uint64_t>(c - '0');
        return index;
    }
    [[gnu::cold]] static std::string_view trimBlanks(std::string_view s)
    {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
            s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
            s.remove_suffix(1);
        return s;
    }
    // Text that is a view of the pickle when it needs no decoding, else decoded into m_decoded (which
    // adoptDecodedText() appends to the document's bytes, so its offsets start at m_size).
    [[gnu::cold]] [[gnu::noinline]] void pushText(PickleKind kind, std::string_view raw, bool decoded)
    {
        if (!decoded) {
            push(PickleValue { kind, static_cast<std::uint32_t>(raw.size()),
                static_cast<std::uint64_t>(reinterpret_cast<const unsigned char*>(raw.data()) - m_data) });
            return;
        }
        if (m_scratch.size() > std::numeric_limits<std::uint32_t>::max())
            fail(m_opOffset, "a string of " + std::to_string(m_scratch.size()) + " bytes is larger than gpumem reads (4 GiB)");
        push(PickleValue { kind, static_cast<std::uint32_t>(m_scratch.size()), m_size + m_decoded.size() });
        m_decoded += m_scratch;
    }
    // STRING: 'text' or "text" with Python's string escapes (codecs.escape_decode).
    [[gnu::cold]] [[gnu::noinline]] void pushQuotedString(std::string_view arg)
    {
        if (arg.size() < 2 || arg.front() != arg.back() || (arg.front() != '\'' && arg.front() != '"'))
            badOperand(arg, "a quoted string");
        const std::string_view body = arg.substr(1, arg.size() - 2);
        if (body.find('\\') == std::string_view::npos) {
            pushText(PickleKind::Binary, body, false);
            return;
        }
        m_scratch.clear();
        for (std::size_t i = 0; i < body.size(); ++i) {
            if (body[i] != '\\' || i + 1 == body.size()) {
                m_scratch += body[i];
                continue;
            }
            const char c = body[++i];
            switch (c) {
            case '\n': break; // a line continuation
            case 'a': m_scratch += '\a'; break;
            case 'b': m_scratch += '\b'; break;
            case 'f': m_scratch += '\f'; break;
            case 'n': m_scratch += '\n'; break;
            case 'r': m_scratch += '\r'; break;
            case 't': m_scratch += '\t'; break;
            case 'v': m_scratch += '\v'; break;
            case '\\': case '\'': case '"': m_scratch += c; break;
            case 'x': {
                const int hi = i + 2 < body.size() ? hexValue(body[i + 1]) : -1;
                const int lo = hi >= 0 ? hexValue(body[i + 2]) : -1;
                if (lo < 0)
                    badOperand(arg, "a string with valid \\x escapes");
                m_scratch += static_cast<char>(hi * 16 + lo);
                i += 2;
                break;
            }
            default:
                if (c >= '0' && c <= '7') { // up to three octal digits
                    unsigned v = static_cast<unsigned>(c - '0');
                    for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
                        v = v * 8 + static_cast<unsigned>(body[++i] - '0');
                    m_scratch += static_cast<char>(v & 0xffu);
                } else { // not an escape: both characters stay
                    m_scratch += '\\';
                    m_scratch += c;
                }
            }
        }
        pushText(PickleKind::Binary, {}, true);
    }
    // UNICODE: raw-unicode-escape (CPython Objects/unicodeobject.c, _PyUnicode_DecodeRawUnicodeEscape):
    // each byte is the code point of its value (Latin-1), except \uXXXX and \UXXXXXXXX.
    [[gnu::cold]] [[gnu::noinline]] void pushRawUnicodeEscape(std::string_view arg)
    {
        bool plain = true;
        for (char c : arg)
            plain = plain && c != '\\' && static_cast<unsigned char>(c) < 0x80;
        if (plain) {
            pushText(PickleKind::Str, arg, false);
            return;
        }
        m_scratch.clear();
        for (std::size_t i = 0; i < arg.size(); ++i) {
            std::uint32_t cp = static_cast<unsigned char>(arg[i]);
            if (arg[i] == '\\' && i + 1 < arg.size() && (arg[i + 1] == 'u' || arg[i + 1] == 'U')) {
                const std::size_t digits = arg[i + 1] == 'u' ? 4 : 8;
                if (i + 2 + digits > arg.size())
                    badOperand(arg, "text with complete \\u escapes");
                cp = 0;
                for (std::size_t k = 0; k < digits; ++k) {
                    const int h = hexValue(arg[i + 2 + k]);
                    if (h < 0)
                        badOperand(arg, "text with complete \\u escapes");
                    cp = cp * 16 + static_cast<std::uint32_t>(h);
                }
                if (cp > 0x10ffff)
                    badOperand(arg, "text with code points up to U+10FFFF");
                i += 1 + digits;
            }
            detail::appendUtf8(m_scratch, cp); // a lone surrogate too, as Python keeps it; readers sanitize text
        }
        pushText(PickleKind::Str, {}, true);
    }
    [[gnu::cold]] static int hexValue(char c)
    {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
            return c - 'A' + 10;
        return -1;
    }
    // Text decoded from STRING/UNICODE operands lives after the pickle's bytes: the document then owns
    // one copy of both (only pickles of protocols 0 and 1 with escaped or non-ASCII text need it).
    [[gnu::cold]] [[gnu::noinline]] void adoptDecodedText()
    {
        auto all = std::make_shared<std::string>();
        all->reserve(m_size + m_decoded.size());
        all->append(m_doc.m_bytes);
        all->append(m_decoded);
        m_doc.m_bytes = *all;
        m_doc.m_keepAlive = std::move(all);
    }

    // The opcodes of real snapshots (memo GET/MEMOIZE, MARK, ints, short strings, empty containers,
    // SETITEMS/APPENDS), decoded with the position and the stack top in registers: the members would
    // put a store-to-load round trip on the chain from one opcode to the next. It runs while at least
    // kSlack bytes are left, so no argument read needs its own bounds check; anything it does not
    // handle on the spot (another opcode, a malformed one, a full stack) it leaves, untouched, to
    // step(), which applies every check and reports the error.
    static constexpr std::size_t kSlack = 16; // > the longest opcode read here (LONG1: 2 + 8 bytes)
    void runCommonOpcodes()
    {
        if (m_size < kSlack)
            return;
        const unsigned char* const data = m_data;
        const std::size_t fastEnd = m_size - kSlack;
        std::size_t pos = m_pos;
        PickleValue* base = m_stack.base();
        PickleValue* cap = m_stack.cap();
        PickleValue* sp = m_stack.top();
        const auto depth = [&] { return static_cast<std::size_t>(sp - base); };
        // Pushes `v` and, when MEMOIZE follows (strings and containers are memoized as they are made),
        // memoizes it too, without a trip through the dispatch.
        const auto pushAndMemoize = [&](PickleValue v) {
            *sp++ = v;
            if (pos < m_size && data[pos] == 0x94 && m_memoCount == m_memo.size()) {
                m_memo.push_back(v);
                ++m_memoCount;
                ++pos;
            }
        };
        // The value opcodes, shared by the loop's dispatch and the dict items loop below. The next
        // position must not wait for the bytes of this opcode: that would put a load on the chain
        // from each opcode to the next (the loop's critical path). So each opcode adds its own
        // constant, which the predicted branch makes known at once. False: not decoded here (leave
        // it to the dispatch, or to step()).
        const auto pushValue = [&](unsigned char op) __attribute__((always_inline)) -> bool {
            std::uint64_t index = 0;
            switch (op) {
            case 0x68: // BINGET
                index = data[pos + 1];
                pos += 2;
                break;
            case 0x6a: // LONG_BINGET
                index = loadLE<std::uint32_t>(data + pos + 1);
                pos += 5;
                break;
            case 0x4b: // BININT1
                *sp++ = PickleValue { PickleKind::Int, 0, data[pos + 1] };
                pos += 2;
                return true;
            case 0x4d: // BININT2
                *sp++ = PickleValue { PickleKind::Int, 0, loadLE<std::uint32_t>(data + pos + 1) & 0xffffu };
                pos += 3;
                return true;
            case 0x4a: // BININT: signed 32-bit
                *sp++ = PickleValue { PickleKind::Int, 0,
                    static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(loadLE<std::uint32_t>(data + pos + 1)))) };
                pos += 5;
                return true;
            case 0x8a: { // LONG1: up to 8 bytes always fit an int64 (two's complement, little-endian)
                const unsigned n = data[pos + 1];
                if (n == 0 || n > 8)
                    return false;
                const unsigned shift = 64 - 8 * n;
                const auto v = static_cast<std::int64_t>(loadLE<std::uint64_t>(data + pos + 2) << shift) >> shift;
                *sp++ = PickleValue { PickleKind::Int, 0, static_cast<std::uint64_t>(v) };
                // Constants for the usual sizes (addresses take 6 bytes, times in µs 7).
                if (n == 6)
                    pos += 8;
                else if (n == 7)
                    pos += 9;
                else
                    pos += 2 + n;
                return true;
            }
            case 0x4e: // NONE
                *sp++ = PickleValue {};
                ++pos;
                return true;
            case 0x88: // NEWTRUE
            case 0x89: // NEWFALSE
                *sp++ = PickleValue { PickleKind::Bool, 0, op == 0x88 ? 1u : 0u };
                ++pos;
                return true;
            case 0x8c: // SHORT_BINUNICODE
            case 0x43: { // SHORT_BINBYTES
                const std::size_t n = data[pos + 1];
                if (n > m_size - pos - 2)
                    return false;
                const PickleValue v { op == 0x8c ? PickleKind::Str : PickleKind::Binary, static_cast<std::uint32_t>(n),
                    pos + 2 };
                pos += 2 + n;
                pushAndMemoize(v);
                return true;
            }
            case 0x58: { // BINUNICODE
                const std::size_t n = loadLE<std::uint32_t>(data + pos + 1);
                if (n > m_size - pos - 5)
                    return false;
                const PickleValue v { PickleKind::Str, static_cast<std::uint32_t>(n), pos + 5 };
                pos += 5 + n;
                pushAndMemoize(v);
                return true;
            }
            default:
                return false;
            }
            if (index >= m_memo.size() || isUnusable(m_memo[index])) [[unlikely]] {
                m_opOffset = pos - (op == 0x68 ? 2 : 5);
                memoUnset(index);
            }
            *sp++ = m_memo[index];
            return true;
        };
        while (pos < fastEnd && sp != cap) [[likely]] {
            const unsigned char op = data[pos];
            switch (op) {
            case 0x68: // BINGET
            case 0x6a: // LONG_BINGET
            case 0x4b: // BININT1
            case 0x4d: // BININT2
            case 0x4a: // BININT
            case 0x8a: // LONG1
            case 0x4e: // NONE
            case 0x88: // NEWTRUE
            case 0x89: // NEWFALSE
            case 0x8c: // SHORT_BINUNICODE
            case 0x43: // SHORT_BINBYTES
            case 0x58: // BINUNICODE
                if (!pushValue(op))
                    goto leave;
                break;
            case 0x94: // MEMOIZE
                if (sp == base || m_memoCount != m_memo.size()) [[unlikely]]
                    goto leave; // an empty stack, or the memo has gaps (BINPUT): step() decides
                m_memo.push_back(sp[-1]);
                ++m_memoCount;
                ++pos;
                break;
            case 0x28: // MARK
                m_marks.push_back(depth());
                ++pos;
                if (sp != base && sp[-1].kind == PickleKind::List && (data[pos] | 2) == 0x6a) {
                    // GETs after the MARK of a list: maybe a list of memo references.
                    m_pos = pos;
                    m_opOffset = pos;
                    m_stack.setTop(sp);
                    if (listOfMemoReferences()) { // it may have grown the stack
                        pos = m_pos;
                        base = m_stack.base();
                        cap = m_stack.cap();
                        sp = m_stack.top();
                    }
                } else if (sp != base && sp[-1].kind == PickleKind::Dict) {
                    // A dict's items: keys and values alternate, the keys (nearly always memo GETs of
                    // strings) are decoded without the dispatch, the values through a switch of their
                    // own, whose jump sees only values. The same opcodes, decoded the same way, so
                    // it may stop at any one and leave it to the dispatch.
                    while (pos < fastEnd && cap - sp >= 2 && (data[pos] | 2) == 0x6a) {
                        const std::size_t key = pos;
                        std::uint64_t index = 0;
                        if (data[pos] == 0x68) {
                            index = data[pos + 1];
                            pos += 2;
                        } else {
                            index = loadLE<std::uint32_t>(data + pos + 1);
                            pos += 5;
                        }
                        if (index >= m_memo.size() || isUnusable(m_memo[index])) [[unlikely]] {
                            m_opOffset = key;
                            memoUnset(index);
                        }
                        *sp++ = m_memo[index];
                        if (pos >= fastEnd || !pushValue(data[pos]))
                            break;
                    }
                }
                break;
            case 0x7d: // EMPTY_DICT
                if (m_sink && m_marks.size() <= 3) [[unlikely]] {
                    noteContainer(PickleValue { PickleKind::Dict, 0, m_store.size() }, base, sp);
                }
                if (data[pos + 2] == 0x28 && data[pos + 3] != 0x75) { // MARK, not SETITEMS: maybe a frame dict
                    m_pos = pos;
                    m_stack.setTop(sp);
                    if (dictOfPlainValues()) {
                        pos = m_pos;
                        sp = m_stack.top();
                        break;
                    }
                }
                [[fallthrough]];
            case 0x5d: // EMPTY_LIST
                ++pos;
                if (op == 0x5d && m_sink && m_marks.size() <= 3) [[unlikely]]
                    noteContainer(PickleValue { PickleKind::List, 0, m_store.size() }, base, sp);
                pushAndMemoize(PickleValue { op == 0x7d ? PickleKind::Dict : PickleKind::List, 0, m_store.create() });
                break;
            case 0x75: // SETITEMS
            case 0x65: { // APPENDS
                if (m_marks.empty())
                    goto leave;
                const std::size_t mark = m_marks.back();
                if (mark == 0 || mark > depth() || base[mark - 1].kind != (op == 0x75 ? PickleKind::Dict : PickleKind::List)
                    || (op == 0x75 && (depth() - mark) % 2 != 0))
                    goto leave;
                m_marks.pop_back();
                if (op == 0x75 && m_sink && m_marks.size() <= 3 && offerToSink(base, mark, sp)) [[unlikely]] {
                    sp = base + mark;
                    ++pos;
                    break;
                }
                m_store.append(base[mark - 1].bits, base + mark, sp);
                sp = base + mark;
                ++pos;
                break;
            }
            default:
                goto leave;
            }
        }
    leave:
        m_pos = pos;
        m_stack.setTop(sp);
    }

    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void fail(std::uint64_t offset, const std::string& what) const
    {
        throw FormatError(m_doc.m_source + ": at byte offset " + std::to_string(offset) + ": " + what);
    }
    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void underflow(unsigned char op) const
    {
        fail(m_opOffset,
            "pickle opcode " + std::string(opcodeName(op)) + " finds too few values on the stack (corrupt pickle)");
    }

    [[noreturn]] [[gnu::noinline]] void cutOff(std::uint64_t n) const
    {
        fail(m_opOffset,
            "the pickle is cut off inside opcode " + std::string(opcodeName(m_data[m_opOffset])) + " (needs "
                + std::to_string(n) + " more bytes, " + std::to_string(m_size - m_pos) + " left)");
    }
    [[gnu::always_inline]] void need(std::uint64_t n) const
    {
        if (n > m_size - m_pos) [[unlikely]]
            cutOff(n);
    }
    [[gnu::always_inline]] unsigned char readU8()
    {
        need(1);
        return m_data[m_pos++];
    }
    [[gnu::always_inline]] std::uint64_t readLE(int n)
    {
        need(static_cast<std::uint64_t>(n));
        std::uint64_t v = 0;
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&v, m_data + m_pos, static_cast<std::size_t>(n));
        } else {
            for (int i = n - 1; i >= 0; --i)
                v = (v << 8) | m_data[m_pos + static_cast<std::size_t>(i)];
        }
        m_pos += static_cast<std::size_t>(n);
        return v;
    }

    [[gnu::always_inline]] void push(const PickleValue& v) { m_stack.push_back(v); }
    [[gnu::always_inline]] void pushInt(std::int64_t v)
    {
        m_stack.push_back(PickleValue { PickleKind::Int, 0, static_cast<std::uint64_t>(v) });
    }
    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void emptyStack() const
    {
        fail(m_opOffset,
            "pickle opcode " + std::string(opcodeName(m_data[m_opOffset])) + " on an empty stack (corrupt pickle)");
    }
    const PickleValue& top() const
    {
        if (m_stack.empty()) [[unlikely]]
            emptyStack();
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
            fail(m_opOffset,
                "pickle opcode " + std::string(opcodeName(m_data[m_opOffset])) + " without a MARK (corrupt pickle)");
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
                static_cast<std::uint64_t>(
                    negative ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max()) });
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

    PickleValue newContainer(PickleKind kind) { return PickleValue { kind, 0, m_store.create() }; }
    void pushFromStack(PickleKind kind, std::size_t from)
    {
        PickleValue v = newContainer(kind);
        appendFromStack(v.bits, from);
        push(v);
    }
    std::uint64_t container(const PickleValue& v, PickleKind kind, unsigned char op) const
    {
        if (v.kind != kind)
            fail(m_opOffset,
                "pickle opcode " + std::string(opcodeName(op)) + " applies to " + std::string(withArticle(kind))
                    + " but finds " + std::string(withArticle(v.kind)) + " (corrupt pickle)");
        return v.bits;
    }
    void appendFromStack(std::uint64_t container, std::size_t mark)
    {
        m_store.append(container, m_stack.data() + mark, m_stack.data() + m_stack.size());
        m_stack.resize(mark);
    }

    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void memoTooLarge(std::uint64_t index) const
    {
        fail(m_opOffset, "memo index " + std::to_string(index) + " is larger than the pickle (corrupt pickle)");
    }
    [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void memoUnset(std::uint64_t index) const
    {
        if (index < m_memo.size() && m_memo[index].kind == kTakenMemo.kind)
            throw PickleSinkRefused {};
        fail(m_opOffset, "memo index " + std::to_string(index) + " was never stored (corrupt pickle)");
    }
    // The hot opcodes (memo GET/PUT, pushes) stay inline in run(); their error paths are cold calls.
    [[gnu::always_inline]] void put(std::uint64_t index)
    {
        // A valid pickle never has more memo entries than bytes; refusing larger indexes bounds memory.
        if (index > m_size) [[unlikely]]
            memoTooLarge(index);
        const PickleValue& v = top();
        if (index == m_memo.size()) [[likely]] { // the usual case: MEMOIZE and sequential BINPUTs
            m_memo.push_back(v);
            ++m_memoCount;
            return;
        }
        putSparse(index, v);
    }
    [[gnu::noinline]] void putSparse(std::uint64_t index, PickleValue v)
    {
        if (index > m_memo.size())
            m_memo.growTo(index + 1, kUnsetMemo);
        if (m_memo[index].kind == kUnsetMemo.kind)
            ++m_memoCount;
        else
            ++m_memoGeneration; // a memo slot is overwritten: lists seen before may now mean other items
        m_memo[index] = v;
    }
    [[gnu::always_inline]] void get(std::uint64_t index)
    {
        if (index >= m_memo.size() || isUnusable(m_memo[index])) [[unlikely]]
            memoUnset(index);
        push(m_memo[index]);
    }

    // A list filled by one APPENDS of memo GETs only (MARK, GET…, APPENDS on an empty list): how
    // PyTorch's frames lists look, each a fresh list of memoized frame dicts, most of them repeats.
    // The GET opcodes' bytes identify the items (with the memo unchanged since), so a repeat shares
    // the items of the first occurrence: no stack pushes, no copy, and the importer sees the shared
    // identity and resolves the list once.
    // Decoding GETs one by one is a chain of dependent loads (each opcode's width decides where the
    // next one starts), so a repeat is found without decoding it: a list of ≥ kKeyBytes bytes is
    // keyed by its first kKeyBytes bytes, read as they are; a shorter one (decoded, it is short) by
    // all of its bytes. A candidate matches when its bytes compare equal here and are followed by
    // APPENDS: decoding equal bytes from the same start gives the same opcodes, so that is the same
    // list (and a list cannot match a longer or shorter one, whose opcode at that place differs).
    // Returns false (nothing consumed) when the opcodes here do not have that shape; a first
    // occurrence is parsed as usual and remembered. Linear: a lookup compares at most
    // kMaxCandidates candidates, each at most as long as the list it matches.
    struct MemoList {
        std::uint64_t hash = 0;
        std::size_t offset = 0; // the GET opcodes' bytes in the pickle
        std::size_t length = 0; // 0 = empty slot
        std::uint64_t memoGeneration = 0;
        std::uint64_t itemsStart = 0, itemsCount = 0; // in the container store's arena
        std::uint64_t container = 0;
    };
    static constexpr std::size_t kKeyBytes = 64;
    static constexpr int kMaxCandidates = 32;
    static constexpr std::uint64_t kShortList = 0x5bd1e995u; // mixed into the key of a short list
    bool listOfMemoReferences()
    {
        if (m_marks.empty() || m_marks.back() != m_stack.size() || m_stack.empty()
            || m_stack.back().kind != PickleKind::List || !m_store.empty(m_stack.back().bits))
            return false;
        const std::size_t offset = m_opOffset;
        const std::uint64_t container = m_stack.back().bits;
        roomForOneMoreList();
        int candidates = 0;
        // A repeat of a long list, found by its first bytes without decoding them.
        if (m_size - offset > kKeyBytes) {
            if (const MemoList* l = findList(hashBytes(m_data + offset, kKeyBytes), offset, candidates))
                return shareList(*l, container, offset);
        }
        // Decode up to kKeyBytes: a short list ends before.
        std::size_t p = offset;
        bool whole = false;
        while (p - offset < kKeyBytes) {
            if (p < m_size && (m_data[p] | 2) == 0x6a) {
                const std::size_t width = m_data[p] == 0x6a ? 5 : 2;
                if (m_size - p < width)
                    return false;
                p += width;
                continue;
            }
            if (p >= m_size || m_data[p] != 0x65) // APPENDS
                return false;
            whole = true;
            break;
        }
        std::uint64_t h = 0;
        if (whole) {
            candidates = 0;
            h = hashBytes(m_data + offset, p - offset) ^ kShortList;
            if (const MemoList* l = findList(h, offset, candidates))
                return shareList(*l, container, offset);
        } else {
            h = hashBytes(m_data + offset, kKeyBytes);
        }
        // Not seen before: find the end, then push the items (checking each memo index) and APPENDS.
        while (!whole) {
            if (p < m_size && (m_data[p] | 2) == 0x6a) {
                const std::size_t width = m_data[p] == 0x6a ? 5 : 2;
                if (m_size - p < width)
                    return false;
                p += width;
                continue;
            }
            if (p >= m_size || m_data[p] != 0x65)
                return false; // not only GETs: the usual path parses it
            whole = true;
        }
        const std::size_t mark = m_marks.back();
        m_pos = offset;
        while (m_pos < p) {
            m_opOffset = m_pos;
            const bool isLong = m_data[m_pos] == 0x6a;
            ++m_pos;
            get(isLong ? readLE(4) : readU8());
        }
        m_opOffset = p;
        m_marks.pop_back();
        appendFromStack(container, mark);
        m_pos = p + 1;
        if (candidates <= kMaxCandidates) {
            const auto [start, count] = m_store.span(container);
            *freeListSlot(h) = MemoList { h, offset, p - offset, m_memoGeneration, start, count, container };
            ++m_listCount;
        }
        return true;
    }
    // The remembered list (dict) with key `h` whose bytes are here, followed by APPENDS (`terminator`,
    // SETITEMS for a dict); nullptr if none.
    // `candidates` counts the lists with this key that were compared (at most kMaxCandidates + 1).
    const MemoList* findList(std::uint64_t h, std::size_t offset, int& candidates, unsigned char terminator = 0x65) const
    {
        const std::size_t mask = m_lists.size() - 1;
        for (std::size_t i = h & mask; m_lists[i].length != 0; i = (i + 1) & mask) {
            const MemoList& l = m_lists[i];
            if (l.hash != h)
                continue;
            if (++candidates > kMaxCandidates)
                return nullptr; // many lists with this key (or a hostile file): parse this one as usual
            if (l.memoGeneration == m_memoGeneration && m_size - offset > l.length
                && m_data[offset + l.length] == terminator && equalBytes(m_data + l.offset, m_data + offset, l.length))
                return &l;
        }
        return nullptr;
    }
    void roomForOneMoreList()
    {
        if (2 * (m_listCount + 1) > m_lists.size()) {
            std::vector<MemoList> old(std::max<std::size_t>(256, m_lists.size() * 2));
            old.swap(m_lists);
            for (const MemoList& l : old)
                if (l.length != 0)
                    *freeListSlot(l.hash) = l;
        }
    }

    // A dict made and filled at once from plain values: EMPTY_DICT MEMOIZE MARK, then GETs and small
    // ints only, then SETITEMS. That is a frame {name, filename, line} in snapshots that write a fresh
    // dict for every frame of every stack, with the strings as memo references (flexgen: 11,072 dicts
    // for 2,000 entries and blocks, 8,974 of them repeats). As for lists of memo references, equal
    // bytes with the memo unchanged since mean equal items, so a repeat shares the first occurrence's
    // items (and its identity): no pushes, no copy, and the importer can resolve each distinct frame
    // once. At `m_pos`, the EMPTY_DICT. Returns false (nothing consumed) when the opcodes here do not
    // have that shape, a GET refers to an unset memo slot or the item count is odd: the usual path
    // then parses them and reports any error at its opcode. Linear: the body is at most
    // kMaxDictBytes long and a lookup compares at most kMaxCandidates candidates.
    static constexpr std::size_t kMaxDictBytes = 64;
    static constexpr std::size_t kDictKeyBytes = 12;
    static constexpr std::uint64_t kDictKey = 0x2545f4914f6cdd1dULL; // mixed into the key of a dict
    static constexpr std::uint64_t kShortDictKey = 0x9fb21c651e98df25ULL; // … of a dict shorter than kDictKeyBytes
    // Bytes per opcode of a plain value (0: not one): memo GETs, BININT1/BININT2/BININT, None, bools.
    static constexpr std::array<unsigned char, 256> kPlainValueBytes = [] {
        std::array<unsigned char, 256> t {};
        t[0x68] = 2; // BINGET
        t[0x6a] = 5; // LONG_BINGET
        t[0x4b] = 2; // BININT1
        t[0x4d] = 3; // BININT2
        t[0x4a] = 5; // BININT
        t[0x4e] = t[0x88] = t[0x89] = 1; // NONE, NEWTRUE, NEWFALSE
        return t;
    }();
    bool dictOfPlainValues()
    {
        const std::size_t body = m_pos + 3;
        if (m_memoCount != m_memo.size() || m_size - body < 4 || m_data[m_pos + 1] != 0x94
            || m_data[m_pos + 2] != 0x28)
            return false;
        // Dicts whose first key is the same memo GET have the same fields (trace entries, blocks,
        // frames): after a few that were not plain in a row, only one in 16 of them is tried (this
        // decides only how fast, never what: a frame dict with a new string inline is not plain).
        std::uint8_t& notPlain = m_dictNotPlain[(loadLE<std::uint32_t>(m_data + body) * 0x9e3779b9u) >> 24];
        if (notPlain >= 4 && (++m_dictSkips & 15) != 0)
            return false;
        roomForOneMoreList();
        // A repeat of a dict of ≥ kDictKeyBytes bytes (a frame dict is 12–15) is found by its first
        // bytes as they are, before decoding its opcodes (a chain of dependent loads, slower than
        // the rest of sharing it); a shorter one, once decoded, by all of its bytes.
        int candidates = 0;
        std::uint64_t h = 0;
        if (m_size - body > kDictKeyBytes) {
            h = hashBytes(m_data + body, kDictKeyBytes) ^ kDictKey;
            if (const MemoList* repeat = findList(h, body, candidates, 0x75))
                return shareDict(*repeat);
        }
        std::size_t p = body;
        std::size_t values = 0;
        while (p < m_size && m_data[p] != 0x75) {
            const std::size_t width = kPlainValueBytes[m_data[p]];
            if (width == 0 || m_size - p < width || p - body > kMaxDictBytes) {
                notPlain = static_cast<std::uint8_t>(std::min(notPlain + 1, 255));
                return false;
            }
            p += width;
            ++values;
        }
        if (p >= m_size || values == 0 || values % 2 != 0)
            return false;
        notPlain = 0;
        if (p - body < kDictKeyBytes) {
            candidates = 0;
            h = hashBytes(m_data + body, p - body) ^ kShortDictKey;
            if (const MemoList* repeat = findList(h, body, candidates, 0x75))
                return shareDict(*repeat);
        }
        PickleValue* const items = m_dictItems.data();
        {
            for (std::size_t q = body, i = 0; q < p; q += kPlainValueBytes[m_data[q]], ++i) {
                const unsigned char op = m_data[q];
                if (op == 0x68 || op == 0x6a) {
                    const std::uint64_t index = op == 0x68 ? m_data[q + 1] : loadLE<std::uint32_t>(m_data + q + 1);
                    if (index >= m_memo.size() || isUnusable(m_memo[index]))
                        return false;
                    items[i] = m_memo[index];
                } else if (op == 0x4b) {
                    items[i] = PickleValue { PickleKind::Int, 0, m_data[q + 1] };
                } else if (op == 0x4d) {
                    items[i] = PickleValue { PickleKind::Int, 0, loadLE<std::uint16_t>(m_data + q + 1) };
                } else if (op == 0x4a) {
                    items[i] = PickleValue { PickleKind::Int, 0,
                        static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(loadLE<std::uint32_t>(m_data + q + 1)))) };
                } else if (op == 0x4e) {
                    items[i] = PickleValue {};
                } else {
                    items[i] = PickleValue { PickleKind::Bool, 0, op == 0x88 ? 1u : 0u };
                }
            }
        }
        const PickleValue dict { PickleKind::Dict, 0, m_store.create() };
        m_memo.push_back(dict); // MEMOIZE
        ++m_memoCount;
        m_store.append(dict.bits, items, items + values);
        if (candidates <= kMaxCandidates) {
            const auto [start, count] = m_store.span(dict.bits);
            *freeListSlot(h) = MemoList { h, body, p - body, m_memoGeneration, start, count, dict.bits };
            ++m_listCount;
        }
        m_stack.push_back(dict);
        m_pos = p + 1;
        return true;
    }

    bool shareDict(const MemoList& repeat)
    {
        const PickleValue dict { PickleKind::Dict, 0, m_store.create() };
        m_memo.push_back(dict); // MEMOIZE
        ++m_memoCount;
        m_store.share(dict.bits, repeat.itemsStart, repeat.itemsCount, repeat.container);
        m_stack.push_back(dict);
        m_pos += 3 + repeat.length + 1; // EMPTY_DICT MEMOIZE MARK, the items, SETITEMS
        return true;
    }

    bool shareList(const MemoList& l, std::uint64_t container, std::size_t offset)
    {
        m_store.share(container, l.itemsStart, l.itemsCount, l.container);
        m_marks.pop_back();
        m_pos = offset + l.length + 1;
        return true;
    }
    // memcmp(a, b, n) == 0, without a call for 8–16 bytes (a frame dict).
    static bool equalBytes(const unsigned char* a, const unsigned char* b, std::size_t n)
    {
        if (n >= 8 && n <= 16) {
            std::uint64_t a0, a1, b0, b1;
            std::memcpy(&a0, a, 8);
            std::memcpy(&b0, b, 8);
            std::memcpy(&a1, a + n - 8, 8);
            std::memcpy(&b1, b + n - 8, 8);
            return ((a0 ^ b0) | (a1 ^ b1)) == 0;
        }
        return std::memcmp(a, b, n) == 0;
    }
    // The repeat tables hash opcode bytes with the byte hash the string table uses (core/detail/flat_id_index.h).
    static std::uint64_t hashBytes(const unsigned char* p, std::size_t n)
    {
        return detail::hashBytes(std::string_view(reinterpret_cast<const char*>(p), n));
    }
    MemoList* freeListSlot(std::uint64_t h)
    {
        const std::size_t mask = m_lists.size() - 1;
        std::size_t i = h & mask;
        while (m_lists[i].length != 0)
            i = (i + 1) & mask;
        return &m_lists[i];
    }

    // ---- the trace entries for a PickleDictSink -------------------------------------------------
    // A memo slot that a GET may not use: never stored, or a dict the sink took.
    static bool isUnusable(const PickleValue& v) { return static_cast<std::uint8_t>(v.kind) >= 0xfe; }
    // Called before container `v` is pushed on the stack [base, top) while at most 3 MARKs are open:
    // recognises snapshot["device_traces"] (a list pushed after the top-level key of that name, the
    // root dict's MARK the only one open) and each of its lists (a list pushed in a batch of that
    // list's items); remembers the memo slot an entry dict will get (the next one).
    [[gnu::cold]] [[gnu::noinline]] void noteContainer(PickleValue v, const PickleValue* base, const PickleValue* top)
    {
        const std::size_t depth = static_cast<std::size_t>(top - base);
        if (m_marks.empty())
            return;
        if (v.kind == PickleKind::List && m_marks.size() == 1 && m_marks[0] == 1 && depth >= 2 && depth % 2 == 0
            && base[0].kind == PickleKind::Dict && top[-1].kind == PickleKind::Str
            && top[-1].bits + top[-1].length <= m_size
            && std::string_view(reinterpret_cast<const char*>(m_data) + top[-1].bits, top[-1].length) == "device_traces") {
            m_traceLists = v.bits;
            m_deviceList = kNoContainer;
            m_deviceLists = 0;
        } else if (v.kind == PickleKind::List && m_traceLists != kNoContainer && m_marks[0] == 1
            && ((m_marks.size() == 1 && depth >= 1 && top[-1].kind == PickleKind::List && top[-1].bits == m_traceLists)
                || (m_marks.size() == 2 && m_marks[1] >= 1 && base[m_marks[1] - 1].kind == PickleKind::List
                    && base[m_marks[1] - 1].bits == m_traceLists))) {
            // One list is appended by APPEND (no MARK), several by MARK … APPENDS (CPython _batch_appends).
            m_deviceList = v.bits;
            m_deviceMarks = m_marks.size();
            ++m_deviceLists;
        } else if (v.kind == PickleKind::Dict && inDeviceList(base)) {
            m_entryMemo = m_memo.size();
        }
    }
    // At SETITEMS of the dict base[mark - 1] (its MARK popped, 3 still open): offers its items
    // [base + mark, top) to the sink when it is an item of a list of device_traces and was memoized
    // in the slot noteContainer() expected (so that the slot can be marked). True if taken.
    // Whether the MARK open last is that of a batch of the current list of device_traces.
    bool inDeviceList(const PickleValue* base) const
    {
        return m_deviceList != kNoContainer && m_marks.size() == m_deviceMarks + 1 && m_marks[0] == 1
            && m_marks.back() >= 1 && base[m_marks.back() - 1].kind == PickleKind::List
            && base[m_marks.back() - 1].bits == m_deviceList;
    }
    bool offerToSink(const PickleValue* base, std::size_t mark, const PickleValue* top)
    {
        const PickleValue& dict = base[mark - 1];
        if (!inDeviceList(base) || m_marks.back() > mark - 1
            || m_entryMemo >= m_memo.size() || m_memo[m_entryMemo].kind != PickleKind::Dict
            || m_memo[m_entryMemo].bits != dict.bits || !m_store.empty(dict.bits))
            return false;
        const std::span<const PickleValue> kv(base + mark, static_cast<std::size_t>(top - (base + mark)));
        if (!m_sink->take(kv, dict.bits, m_deviceLists - 1, m_doc.m_bytes.substr(0, m_size)))
            return false;
        m_memo[m_entryMemo].kind = kTakenMemo.kind;
        if (m_doc.m_taken.size() <= dict.bits)
            m_doc.m_taken.resize(std::max<std::size_t>(dict.bits + 1, 2 * m_doc.m_taken.size()));
        m_doc.m_taken[dict.bits] = true;
        return true;
    }
    // Gives back the pages of a mapped input up to kKeepBehind before the parse position (what follows
    // is read; what lies behind is read again only for memoized strings and repeated lists, whose
    // pages then map again from the page cache).
    static constexpr std::size_t kReleaseStep = std::size_t(8) << 20, kKeepBehind = std::size_t(1) << 20;
    [[gnu::cold]] [[gnu::noinline]] void releaseBehind()
    {
        static const auto kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        const std::size_t end = (m_pos - kKeepBehind) / kPage * kPage;
        if (end > m_released
            && ::madvise(const_cast<unsigned char*>(m_data) + m_released, end - m_released, MADV_DONTNEED) == 0)
            m_released = end;
    }
    bool m_releaseBehind = false;
    std::size_t m_released = 0; // bytes given back, from the start (a multiple of the page size)

    static constexpr std::uint64_t kNoContainer = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t m_traceLists = kNoContainer; // the container of snapshot["device_traces"]
    std::uint64_t m_deviceList = kNoContainer; // the container of its list being read
    std::size_t m_deviceLists = 0; // its lists met so far
    std::size_t m_deviceMarks = 0; // the MARKs open when the current one was made
    std::size_t m_entryMemo = ~std::size_t(0); // the memo slot of the entry dict being read

    PickleDocument& m_doc;
    const unsigned char* m_data;
    std::size_t m_size;
    PickleDictSink* m_sink;
    std::size_t m_pos = 0;
    std::size_t m_opOffset = 0;
    ValueStack m_stack;
    PodStack<std::size_t> m_marks;
    PodStack<PickleValue> m_memo;
    std::uint64_t m_memoCount = 0;
    std::uint64_t m_memoGeneration = 0; // counts overwritten memo slots
    std::vector<MemoList> m_lists; // open addressing, power-of-two size, at most half full
    std::size_t m_listCount = 0;
    PickleContainerStore m_store;
    std::array<PickleValue, PickleParser::kMaxDictBytes + 8> m_dictItems; // the items of a new plain dict
    std::array<std::uint8_t, 256> m_dictNotPlain {}; // dicts not plain in a row, by the first 4 bytes after the MARK
    std::uint64_t m_dictSkips = 0;
    std::string m_scratch; // the text being decoded from a STRING or UNICODE operand
    std::string m_decoded; // decoded texts, one after another; see adoptDecodedText()
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

PickleDocument::Input PickleDocument::readInput(const std::string& path)
{
    // Up to 8 MiB, one read straight into a buffer is cheaper than a mapping (which costs page
    // faults while parsing and an munmap afterwards); larger files are mapped (no copy).
    constexpr std::size_t kMapAbove = std::size_t(8) << 20;
    FileBuffer file = readFileBuffer(path, kMapAbove);
    if (isGzip(file.bytes())) {
        auto text = std::make_shared<std::string>(gunzip(file.bytes(), path));
        const std::string_view bytes = *text;
        const std::size_t padding = text->capacity() - text->size(); // gunzip() leaves kReadPadding at least
        return Input { std::move(text), bytes, padding };
    }
    const std::string_view bytes = file.bytes();
    // A buffer read has kReadPadding spare bytes. A mapped file (larger than kMapAbove) has the rest of
    // its last page: a mapping covers whole pages, and the bytes past the end of the file read as zero
    // (POSIX mmap).
    static const auto kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t padding = file.size > kMapAbove ? (kPage - file.size % kPage) % kPage : kReadPadding;
    // readFileBuffer maps a regular file larger than kMapAbove and reads anything else (a pipe) into a
    // buffer, whose pages must never be given back.
    struct stat st {};
    const bool mapped = file.size > kMapAbove && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)
        && static_cast<std::size_t>(st.st_size) == file.size;
    return Input { std::move(file.data), bytes, padding, mapped };
}

PickleDocument PickleDocument::parse(Input input, std::string_view source)
{
    PickleDocument doc = parse(input.bytes, source);
    if (!doc.m_keepAlive) // else the document holds its own copy (decoded protocol-0 text)
        doc.m_keepAlive = std::move(input.owner);
    return doc;
}

PickleDocument PickleDocument::parse(Input input, std::string_view source, PickleDictSink& sink)
{
    PickleDocument doc;
    doc.m_bytes = input.bytes;
    doc.m_source = std::string(source);
    PickleParser parser(doc, &sink);
    // A mapping starts at a page (mmap), so its pages can be given back from the first byte on.
    parser.releaseBehindWhenMapped(input.mapped
        && reinterpret_cast<std::uintptr_t>(input.bytes.data()) % static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE)) == 0);
    parser.run();
    if (!doc.m_keepAlive)
        doc.m_keepAlive = std::move(input.owner);
    return doc;
}

PickleDocument PickleDocument::readFile(const std::string& path) { return parse(readInput(path), path); }

bool isValidUtf8(std::string_view text)
{
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII fast path, 8 bytes at a time (names and paths are nearly always ASCII).
        while (i + 8 <= n) {
            std::uint64_t word;
            std::memcpy(&word, p + i, 8);
            if (word & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (len == 0 || c > 0xf4 || i + len > n)
            return false;
        for (std::size_t k = 1; k < len; ++k)
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
        if ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] >= 0xa0) || (c == 0xf0 && p[i + 1] < 0x90)
            || (c == 0xf4 && p[i + 1] >= 0x90))
            return false; // overlong, surrogate or beyond U+10FFFF
        i += len;
    }
    return true;
}

std::string sanitizeUtf8(std::string_view text)
{
    if (isValidUtf8(text))
        return std::string(text);
    std::string out;
    out.reserve(text.size() + 8);
    std::size_t i = 0;
    while (i < text.size()) {
        // Take the longest prefix of well-formed characters, then replace one bad byte.
        std::size_t len = 1;
        auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80)
            len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (i + len <= text.size() && isValidUtf8(text.substr(i, len))) {
            out.append(text.substr(i, len));
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

std::optional<std::int64_t> PickleDocument::floatToInt(const PickleValue& v) const
{
    if (v.kind != PickleKind::Float)
        return std::nullopt;
    double d = std::bit_cast<double>(v.bits);
    if (!std::isfinite(d) || d >= 9.2e18 || d <= -9.2e18)
        return std::nullopt;
    return static_cast<std::int64_t>(d);
}

std::optional<double> PickleDocument::toFloat(const PickleValue& v) const
{
    if (v.kind == PickleKind::Float)
        return std::bit_cast<double>(v.bits);
    if (v.kind == PickleKind::Int || v.kind == PickleKind::BigInt || v.kind == PickleKind::Bool)
        return static_cast<double>(static_cast<std::int64_t>(v.bits));
    return std::nullopt;
}

const PickleValue* PickleDocument::find(const PickleValue& dict, std::string_view key) const
{
    if (dict.kind != PickleKind::Dict)
        return nullptr;
    auto kv = items(dict);
    for (std::size_t i = kv.size(); i >= 2; i -= 2) {
        const PickleValue& k = kv[i - 2];
        if (k.kind == PickleKind::Str && k.length == key.size()
            && std::memcmp(m_bytes.data() + k.bits, key.data(), key.size()) == 0)
            return &kv[i - 1];
    }
    return nullptr;
}

nlohmann::json PickleDocument::toJson(const PickleValue& v, int maxDepth, std::uint64_t maxValues) const
{
    std::uint64_t budget = maxValues ? maxValues : 16 * (m_bytes.size() + m_items.size()) + (1u << 20);
    return toJsonBounded(v, maxDepth, budget);
}

nlohmann::json PickleDocument::toJsonBounded(const PickleValue& v, int depth, std::uint64_t& budget) const
{
    if (depth < 0)
        throw FormatError(m_source + ": the pickle nests deeper than gpumem converts (or contains a cycle)");
    if (budget == 0)
        throw FormatError(
            m_source + ": the pickle expands to more values than gpumem converts to JSON (shared containers)");
    --budget;
    switch (v.kind) {
    case PickleKind::None:
        return nullptr;
    case PickleKind::Bool:
        return v.bits != 0;
    case PickleKind::Int:
    case PickleKind::BigInt:
        return static_cast<std::int64_t>(v.bits);
    case PickleKind::Float:
        return std::bit_cast<double>(v.bits);
    case PickleKind::Str:
    case PickleKind::Binary:
        return sanitizeUtf8(text(v));
    case PickleKind::Dict: {
        nlohmann::json out = nlohmann::json::object();
        auto kv = items(v);
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            std::string key;
            if (kv[i].kind == PickleKind::Str || kv[i].kind == PickleKind::Binary)
                key = sanitizeUtf8(text(kv[i]));
            else if (kv[i].kind == PickleKind::Int || kv[i].kind == PickleKind::Bool)
                key = std::to_string(static_cast<std::int64_t>(kv[i].bits));
            else
                key = "<" + std::string(toString(kv[i].kind)) + ">";
            out[key] = toJsonBounded(kv[i + 1], depth - 1, budget);
        }
        return out;
    }
    default: {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& item : items(v))
            out.push_back(toJsonBounded(item, depth - 1, budget));
        return out;
    }
    }
}

} // namespace gpumem
