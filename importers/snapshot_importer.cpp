#include "importers/snapshot_importer.h"

#include "core/detail/flat_id_index.h"
#include "core/detail/round_to_multiple.h"
#include "core/file_io.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace gpumem {

namespace {

    constexpr Bytes kMinBlockSize = 512; // CUDACachingAllocator.cpp kMinBlockSize
    constexpr Bytes kSmallSize = 1024 * 1024; // kSmallSize: requests ≤ 1 MiB use the small pool
    constexpr std::size_t kMaxFields = 64; // fields of one snapshot dict (a dozen in practice)
    constexpr std::size_t kMaxHistory = 16; // generation-A history entries searched per block
    constexpr std::size_t kMaxHistoryFields = 8; // fields of one history entry (addr, real_size, frames, cpp_frames)

    enum class Action : std::uint8_t {
        Alloc,
        FreeRequested,
        FreeCompleted,
        SegmentAlloc,
        SegmentFree,
        SegmentMap,
        SegmentUnmap,
        Snapshot,
        Oom,
        Unknown,
    };

    Action actionFromString(std::string_view s)
    {
        if (s == "alloc")
            return Action::Alloc;
        if (s == "free_requested")
            return Action::FreeRequested;
        if (s == "free_completed")
            return Action::FreeCompleted;
        if (s == "segment_alloc")
            return Action::SegmentAlloc;
        if (s == "segment_free")
            return Action::SegmentFree;
        if (s == "segment_map")
            return Action::SegmentMap;
        if (s == "segment_unmap")
            return Action::SegmentUnmap;
        if (s == "snapshot")
            return Action::Snapshot;
        if (s == "oom")
            return Action::Oom;
        return Action::Unknown;
    }

    struct Entry { // 80 bytes (action after framesClass: no padding after it)
        Address addr = 0;
        Bytes size = 0;
        std::uint64_t stream = 0;
        TimeNs time = 0;
        std::uint64_t index = 0; // position in device_traces[d]
        PickleValue frames;
        PickleValue compileContext;    // a str; "N/A" outside torch.compile (generation D)
        std::uint32_t framesClass = 0; // SnapshotReader::listClass(frames)
        Action action = Action::Unknown;
    };

    // A recorded segment plus what the Trace needs beyond SnapshotSegment.
    struct DumpSegment {
        SnapshotSegment seg;
        Bytes allocatedSize = 0, activeSize = 0, requestedSize = 0;
        bool hasPool = false;
        std::vector<PickleValue> blockFrames; // parallel to seg.blocks
    };

    // A block live before the window.
    struct PreBlock {
        Bytes size = 0;
        Bytes requested = 0;
        SnapshotBlockState state = SnapshotBlockState::ActiveAllocated;
        bool inferred = false; // size from round_size(request), not from the dump
        std::uint64_t stream = 0;
        PickleValue frames;
    };

    // Sorted, disjoint [start, end) ranges (mapped ranges of expandable segments).
    class RangeSet {
    public:
        void add(Address a, Address end)
        {
            auto it = m_ranges.upper_bound(a);
            if (it != m_ranges.begin() && std::prev(it)->second >= a) {
                --it;
                a = it->first;
                end = std::max(end, it->second);
                it = m_ranges.erase(it);
            }
            while (it != m_ranges.end() && it->first <= end) {
                end = std::max(end, it->second);
                it = m_ranges.erase(it);
            }
            m_ranges.emplace(a, end);
        }
        void remove(Address a, Address end)
        {
            auto it = m_ranges.upper_bound(a);
            if (it != m_ranges.begin())
                --it;
            while (it != m_ranges.end() && it->first < end) {
                Address s = it->first, e = it->second;
                if (e <= a) {
                    ++it;
                    continue;
                }
                it = m_ranges.erase(it);
                if (s < a)
                    m_ranges.emplace(s, a);
                if (e > end)
                    m_ranges.emplace(end, e);
            }
        }
        const std::map<Address, Address>& ranges() const { return m_ranges; }

    private:
        std::map<Address, Address> m_ranges;
    };

    // Where a field is, spelled out only when an error needs it ("segments[3].blocks[0]").
    struct Where {
        Where(const char* text)
            : fixed(text)
        {
        }
        Where(std::string text)
            : fixed(std::move(text))
        {
        }
        Where(const char* l, std::size_t i, const char* s = nullptr, std::size_t j = 0)
            : list(l)
            , index(i)
            , sub(s)
            , subIndex(j)
        {
        }
        std::string str() const
        {
            if (!list)
                return fixed;
            std::string out = std::string(list) + "[" + std::to_string(index) + "]";
            if (sub)
                out += (*sub ? "." + std::string(sub) : std::string()) + "[" + std::to_string(subIndex) + "]";
            return out;
        }
        std::string fixed;
        const char* list = nullptr;
        std::size_t index = 0;
        const char* sub = nullptr;
        std::size_t subIndex = 0;
    };

    // A set of container indexes: open addressing, no allocation per element (one per segment and
    // blocks list; std::unordered_set allocated a node for each).
    class FlatSet {
    public:
        explicit FlatSet(std::size_t expected)
            : m_slots(std::bit_ceil(std::max<std::size_t>(16, 2 * expected)), kEmpty)
        {
        }
        // True if `v` was not in the set.
        bool insert(std::uint64_t v)
        {
            if (v == kEmpty) {
                bool fresh = !m_hasEmptyValue;
                m_hasEmptyValue = true;
                return fresh;
            }
            if (2 * (m_count + 1) > m_slots.size()) {
                std::vector<std::uint64_t> old(m_slots.size() * 2, kEmpty);
                old.swap(m_slots);
                m_count = 0;
                for (std::uint64_t o : old)
                    if (o != kEmpty)
                        insert(o);
            }
            const std::size_t mask = m_slots.size() - 1;
            for (std::size_t i = static_cast<std::size_t>(detail::mix64(v)) & mask;; i = (i + 1) & mask) {
                if (m_slots[i] == v)
                    return false;
                if (m_slots[i] == kEmpty) {
                    m_slots[i] = v;
                    ++m_count;
                    return true;
                }
            }
        }

    private:
        static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
        std::vector<std::uint64_t> m_slots;
        std::size_t m_count = 0;
        bool m_hasEmptyValue = false;
    };

    // Blocks by address for the backward walk: open addressing (linear probing, deletion by backward
    // shift) over indexes into a vector of values, so an insert or erase allocates nothing (the
    // unordered_map it replaces allocated a node per block). An erased value's place is reused.
    template <typename T> class AddressMap {
    public:
        explicit AddressMap(std::size_t expected)
            : m_slots(std::bit_ceil(std::max<std::size_t>(16, 2 * expected)))
        {
            m_values.reserve(expected);
        }
        T* find(Address key)
        {
            const std::size_t mask = m_slots.size() - 1;
            for (std::size_t i = home(key, mask);; i = (i + 1) & mask) {
                const Slot& s = m_slots[i];
                if (s.indexPlusOne == 0)
                    return nullptr;
                if (s.key == key)
                    return &m_values[s.indexPlusOne - 1].value;
            }
        }
        // The value at `key`, default-constructed if absent; true if it was inserted.
        std::pair<T*, bool> tryEmplace(Address key)
        {
            if (2 * (m_count + 1) > m_slots.size())
                grow();
            const std::size_t mask = m_slots.size() - 1;
            std::size_t i = home(key, mask);
            for (; m_slots[i].indexPlusOne != 0; i = (i + 1) & mask)
                if (m_slots[i].key == key)
                    return { &m_values[m_slots[i].indexPlusOne - 1].value, false };
            // An erased value's place is taken again: the vector stays as large as the map was at most
            // (the backward walk inserts and erases a block per allocation in the trace).
            std::uint32_t index = 0;
            if (!m_free.empty()) {
                index = m_free.back();
                m_free.pop_back();
                m_values[index] = Value { key, T {}, true };
            } else {
                index = static_cast<std::uint32_t>(m_values.size());
                m_values.push_back(Value { key, T {}, true });
            }
            m_slots[i] = Slot { key, index + 1 };
            ++m_count;
            return { &m_values[index].value, true };
        }
        void erase(Address key)
        {
            const std::size_t mask = m_slots.size() - 1;
            std::size_t i = home(key, mask);
            for (; m_slots[i].indexPlusOne != 0; i = (i + 1) & mask)
                if (m_slots[i].key == key)
                    break;
            if (m_slots[i].indexPlusOne == 0)
                return;
            m_values[m_slots[i].indexPlusOne - 1].alive = false;
            m_free.push_back(m_slots[i].indexPlusOne - 1);
            --m_count;
            // Backward shift: move later members of the probe run into the hole where they may go.
            for (std::size_t j = (i + 1) & mask; m_slots[j].indexPlusOne != 0; j = (j + 1) & mask) {
                const std::size_t k = home(m_slots[j].key, mask);
                if (((j - k) & mask) >= ((j - i) & mask)) {
                    m_slots[i] = m_slots[j];
                    i = j;
                }
            }
            m_slots[i] = Slot {};
        }
        std::size_t size() const { return m_count; }
        // Calls f(key, value&) for every member, in no particular order (erased places are reused).
        template <typename F> void forEach(F&& f)
        {
            for (Value& v : m_values)
                if (v.alive)
                    f(v.key, v.value);
        }

    private:
        struct Slot {
            Address key = 0;
            std::uint32_t indexPlusOne = 0; // 0 = empty
        };
        struct Value {
            Address key;
            T value;
            bool alive;
        };
        static std::size_t home(Address key, std::size_t mask) { return static_cast<std::size_t>(detail::mix64(key)) & mask; }
        void grow()
        {
            std::vector<Slot> old(m_slots.size() * 2);
            old.swap(m_slots);
            const std::size_t mask = m_slots.size() - 1;
            for (const Slot& s : old)
                if (s.indexPlusOne != 0) {
                    std::size_t i = home(s.key, mask);
                    while (m_slots[i].indexPlusOne != 0)
                        i = (i + 1) & mask;
                    m_slots[i] = s;
                }
        }
        std::vector<Slot> m_slots;
        std::vector<Value> m_values;
        std::vector<std::uint32_t> m_free; // erased places in m_values
        std::size_t m_count = 0;
    };

    // The field a dict key names. PyTorch builds its dicts with the same keys in the same order, and
    // the pickle shares the key strings through the memo, so the key at a position is nearly always
    // the very string (same offset) seen there before: that is checked first, and the text is
    // compared only on a miss. `ByText` maps a key's text to the field.
    template <typename Field, Field (*ByText)(std::string_view)> class KeyFieldCache {
    public:
        explicit KeyFieldCache(const PickleDocument* doc)
            : m_doc(doc)
        {
        }
        Field field(const PickleValue& key, std::size_t position)
        {
            return field(key, position, [&] { return m_doc->text(key); });
        }
        // The same with the key's text from `textOf()` (a sink reads the pickle before the document exists).
        template <typename TextOf> Field field(const PickleValue& key, std::size_t position, TextOf&& textOf)
        {
            if (position < kSlots) {
                const Slot& s = m_slots[position];
                if (key.bits == s.bits && key.length == s.length && key.kind == s.kind) [[likely]]
                    return s.field;
            }
            Field f = ByText(textOf());
            if (position < kSlots)
                m_slots[position] = Slot { key.bits, key.length, key.kind, f };
            return f;
        }

    private:
        struct Slot {
            std::uint64_t bits = 0;
            std::uint32_t length = 0;
            PickleKind kind = PickleKind::None; // None never matches a key (keys are Str or Binary)
            Field field {};
        };
        static constexpr std::size_t kSlots = 16;
        const PickleDocument* m_doc;
        std::array<Slot, kSlots> m_slots {};
    };

    enum class EntryField : std::uint8_t { Other, Addr, Size, Action, Stream, Frames, TimeUs, CompileContext };
    EntryField entryFieldByText(std::string_view key)
    {
        if (key == "addr")
            return EntryField::Addr;
        if (key == "size")
            return EntryField::Size;
        if (key == "action")
            return EntryField::Action;
        if (key == "stream")
            return EntryField::Stream;
        if (key == "frames")
            return EntryField::Frames;
        if (key == "time_us")
            return EntryField::TimeUs;
        if (key == "compile_context")
            return EntryField::CompileContext;
        return EntryField::Other;
    }
    using EntryFieldCache = KeyFieldCache<EntryField, entryFieldByText>;

    // The keys of the last trace entry read the slow way, and where each field sits among them.
    // PyTorch writes every entry with the same keys in the same order (memoized strings), so nearly
    // every entry matches: its fields are then read by position, without a branch per key. An entry
    // with a repeated field, more than 16 keys or an integer field that is not a plain Int takes the slow way.
    class EntryShape {
    public:
        EntryShape() = default;
        explicit EntryShape(const PickleDocument&) { }
        bool matches(std::span<const PickleValue> kv) const
        {
            if (m_pairs == 0 || kv.size() != 2 * m_pairs)
                return false;
            bool same = true;
            for (std::size_t k = 0; k < m_pairs; ++k) {
                const PickleValue& key = kv[2 * k];
                same &= key.bits == m_keys[k].bits && key.length == m_keys[k].length && key.kind == m_keys[k].kind;
            }
            return same;
        }
        // Whether an integer field holds anything but a plain Int (a BigInt to count, a wrongly typed
        // value to reject), or `addr` or `size` is negative (to reject): such an entry takes the slow
        // way, which does all three.
        bool anyNotInt(std::span<const PickleValue> kv) const
        {
            bool other = false;
            for (EntryField f : { EntryField::Addr, EntryField::Size, EntryField::Stream, EntryField::TimeUs }) {
                const std::int8_t p = position[static_cast<std::size_t>(f)];
                other |= p >= 0 && kv[2 * static_cast<std::size_t>(p) + 1].kind != PickleKind::Int;
            }
            for (EntryField f : { EntryField::Addr, EntryField::Size }) {
                const std::int8_t p = position[static_cast<std::size_t>(f)];
                other |= p >= 0 && static_cast<std::int64_t>(kv[2 * static_cast<std::size_t>(p) + 1].bits) < 0;
            }
            return other;
        }
        void learn(std::span<const PickleValue> kv, EntryFieldCache& fields)
        {
            learn(kv, fields, [&](const PickleValue& key, std::size_t k) { return fields.field(key, k); });
        }
        // `fieldOf(key, k)`: the field of the k-th key.
        template <typename FieldOf> void learn(std::span<const PickleValue> kv, EntryFieldCache&, FieldOf&& fieldOf)
        {
            m_pairs = 0;
            if (kv.size() / 2 > m_keys.size() || kv.size() % 2 != 0)
                return;
            position.fill(-1);
            for (std::size_t k = 0; k < kv.size() / 2; ++k) {
                const EntryField f = fieldOf(kv[2 * k], k);
                if (f != EntryField::Other) {
                    if (position[static_cast<std::size_t>(f)] >= 0)
                        return; // a repeated field: the last one wins, which the slow way handles
                    position[static_cast<std::size_t>(f)] = static_cast<std::int8_t>(k);
                }
                m_keys[k] = kv[2 * k];
            }
            m_pairs = kv.size() / 2;
        }
        std::array<std::int8_t, 8> position {}; // by EntryField; -1 = absent

    private:
        std::size_t m_pairs = 0; // 0 = no shape
        std::array<PickleValue, 16> m_keys {};
    };

    enum class SegmentField : std::uint8_t {
        Other,
        Device,
        Address,
        TotalSize,
        AllocatedSize,
        ActiveSize,
        RequestedSize,
        Stream,
        SegmentType,
        IsExpandable,
        SegmentPoolId,
        Blocks,
    };
    SegmentField segmentFieldByText(std::string_view key)
    {
        static constexpr std::pair<std::string_view, SegmentField> kFields[] = {
            { "device", SegmentField::Device },
            { "address", SegmentField::Address },
            { "total_size", SegmentField::TotalSize },
            { "allocated_size", SegmentField::AllocatedSize },
            { "active_size", SegmentField::ActiveSize },
            { "requested_size", SegmentField::RequestedSize },
            { "stream", SegmentField::Stream },
            { "segment_type", SegmentField::SegmentType },
            { "is_expandable", SegmentField::IsExpandable },
            { "segment_pool_id", SegmentField::SegmentPoolId },
            { "blocks", SegmentField::Blocks },
        };
        for (const auto& [text, field] : kFields)
            if (key == text)
                return field;
        return SegmentField::Other;
    }

    enum class BlockField : std::uint8_t { Other, Size, Address, RequestedSize, State, Frames, History };
    BlockField blockFieldByText(std::string_view key)
    {
        if (key == "size")
            return BlockField::Size;
        if (key == "address")
            return BlockField::Address;
        if (key == "requested_size")
            return BlockField::RequestedSize;
        if (key == "state")
            return BlockField::State;
        if (key == "frames")
            return BlockField::Frames;
        if (key == "history")
            return BlockField::History;
        return BlockField::Other;
    }

    enum class FrameField : std::uint8_t { Other, Name, Filename, Line };
    FrameField frameFieldByText(std::string_view key)
    {
        if (key == "name")
            return FrameField::Name;
        if (key == "filename")
            return FrameField::Filename;
        if (key == "line")
            return FrameField::Line;
        return FrameField::Other;
    }

    class SnapshotReader {
    public:
        SnapshotReader(const PickleDocument& doc, TraceBuilder* builder)
            : m_doc(doc)
            , m_b(builder)
        {
        }

        [[noreturn]] void fail(const Where& where, const std::string& what) const
        {
            throw FormatError(m_doc.source() + ": " + where.str() + ": " + what
                + "; this does not look like a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot)");
        }

        static std::string at(const char* list, std::size_t i)
        {
            return std::string(list) + "[" + std::to_string(i) + "]";
        }

        const PickleValue& required(const PickleValue& dict, std::string_view key, const Where& where) const
        {
            const PickleValue* v = m_doc.find(dict, key);
            if (!v)
                fail(where, "the field '" + std::string(key) + "' is missing");
            return *v;
        }
        std::int64_t toInt(const PickleValue& v, std::string_view key, const Where& where)
        {
            if (v.kind == PickleKind::BigInt)
                stats().add("big_int_clamped", Severity::Warning,
                    where.str() + ": '" + std::string(key) + "' does not fit in 64 bits; it was clamped");
            auto i = m_doc.toInt(v);
            // Python's True is an int, but no snapshot field that is read as one is ever a bool: a
            // True 'size' is a damaged file, not a block of 1 byte.
            if (!i || v.kind == PickleKind::Float || v.kind == PickleKind::Bool)
                fail(where, "'" + std::string(key) + "' is " + std::string(withArticle(v.kind)) + ", not an int");
            return *i;
        }
        // toInt() of an address or a size (a size_t in PyTorch): a negative one is an error naming the field.
        std::uint64_t toUnsigned(const PickleValue& v, std::string_view key, const Where& where)
        {
            const std::int64_t n = toInt(v, key, where);
            if (n < 0)
                fail(where, "'" + std::string(key) + "' is negative (" + std::to_string(n) + ")");
            return static_cast<std::uint64_t>(n);
        }
        std::span<const PickleValue> listField(const PickleValue& dict, std::string_view key, const Where& where)
        {
            const PickleValue& v = required(dict, key, where);
            if (v.kind != PickleKind::List && v.kind != PickleKind::Tuple)
                fail(where, "'" + std::string(key) + "' is " + std::string(withArticle(v.kind)) + ", not a list");
            return m_doc.items(v);
        }
        // A dict of the snapshot (segment, block, trace entry, annotation): PyTorch writes a dozen
        // fields at most. Bounding them keeps the import linear in the file size even when a hostile
        // file shares one huge dict among many list items.
        const PickleValue& dictItem(const PickleValue& v, const Where& where) const
        {
            if (v.kind != PickleKind::Dict)
                fail(where, "is " + std::string(withArticle(v.kind)) + ", not a dict");
            if (m_doc.items(v).size() > 2 * kMaxFields)
                fail(where,
                    "has " + std::to_string(m_doc.items(v).size() / 2)
                        + " fields; a snapshot dict has at most a few dozen");
            return v;
        }

        ImportStats& stats() { return m_b ? m_b->stats() : m_ownStats; }

        // Text for the Trace's string table: writers emit JSON, which needs valid UTF-8.
        std::string utf8(const PickleValue& v) { return sanitizeUtf8(m_doc.text(v)); }
        // The same without a copy when the text is valid (the usual case); `scratch` holds a repair.
        std::string_view utf8View(const PickleValue& v, std::string& scratch)
        {
            std::string_view text = m_doc.text(v);
            if (isValidUtf8(text))
                return text;
            scratch = sanitizeUtf8(text);
            return scratch;
        }

        // ---- the recorded end state -------------------------------------------------------------
        std::vector<DumpSegment> readSegments(const PickleValue& root)
        {
            std::vector<DumpSegment> out;
            auto segments = listField(root, "segments", "top level");
            out.reserve(segments.size());
            // PyTorch builds a fresh dict per segment and a fresh list per segment's blocks; a file
            // that shares them would make the work quadratic, so sharing is refused.
            FlatSet seen(2 * segments.size());
            auto once = [&](const PickleValue& v, const Where& w) {
                if (m_doc.isContainer(v) && !seen.insert(v.bits))
                    fail(w, "is the same object as an earlier segment or blocks list");
            };
            bool firstBlocksHaveAddress = true; // for generation(): A has no block addresses
            std::uint64_t untiledSegments = 0;
            std::string firstUntiled;
            for (std::size_t si = 0; si < segments.size(); ++si) {
                const Where where("segments", si);
                const PickleValue& s = dictItem(segments[si], where);
                once(s, where);
                // One pass over the keys (as PickleDocument::find: Str keys, the last one wins); the
                // fields are then read in a fixed order, so errors and anomalies come as before.
                std::array<const PickleValue*, 12> f {};
                const auto skv = m_doc.items(s);
                for (std::size_t k = 0; k + 1 < skv.size(); k += 2)
                    if (skv[k].kind == PickleKind::Str)
                        f[static_cast<std::size_t>(m_segmentFields.field(skv[k], k / 2))] = &skv[k + 1];
                auto field = [&](SegmentField which) { return f[static_cast<std::size_t>(which)]; };
                auto req = [&](SegmentField which, std::string_view key) -> const PickleValue& {
                    if (!field(which))
                        fail(where, "the field '" + std::string(key) + "' is missing");
                    return *field(which);
                };
                auto opt = [&](SegmentField which, std::string_view key) -> std::int64_t {
                    const PickleValue* v = field(which);
                    return !v || v->kind == PickleKind::None ? 0 : toInt(*v, key, where);
                };
                DumpSegment d;
                d.seg.device = static_cast<std::int32_t>(toInt(req(SegmentField::Device, "device"), "device", where));
                d.seg.address = static_cast<Address>(toUnsigned(req(SegmentField::Address, "address"), "address", where));
                d.seg.totalSize
                    = static_cast<Bytes>(toUnsigned(req(SegmentField::TotalSize, "total_size"), "total_size", where));
                d.allocatedSize = static_cast<Bytes>(opt(SegmentField::AllocatedSize, "allocated_size"));
                d.activeSize = static_cast<Bytes>(opt(SegmentField::ActiveSize, "active_size"));
                d.requestedSize = static_cast<Bytes>(opt(SegmentField::RequestedSize, "requested_size"));
                d.seg.stream = static_cast<std::uint64_t>(opt(SegmentField::Stream, "stream"));
                if (const PickleValue* t = field(SegmentField::SegmentType)) {
                    // PyTorch writes 'small' or 'large'; another kind (None, an int) is a damaged file.
                    if (t->kind != PickleKind::Str)
                        fail(where,
                            "'segment_type' is " + std::string(withArticle(t->kind)) + ", not a str ('small' or 'large')");
                    d.seg.small = m_doc.text(*t) == "small";
                }
                if (const PickleValue* e = field(SegmentField::IsExpandable))
                    d.seg.expandable = e->kind == PickleKind::Bool && e->bits != 0;
                if (const PickleValue* p = field(SegmentField::SegmentPoolId); p && m_doc.items(*p).size() == 2) {
                    auto ids = m_doc.items(*p);
                    d.seg.poolId = { toInt(ids[0], "segment_pool_id", where), toInt(ids[1], "segment_pool_id", where) };
                    d.hasPool = true;
                }
                const PickleValue& blocksValue = req(SegmentField::Blocks, "blocks");
                once(blocksValue, where);
                if (blocksValue.kind != PickleKind::List && blocksValue.kind != PickleKind::Tuple)
                    fail(where, "'blocks' is " + std::string(withArticle(blocksValue.kind)) + ", not a list");
                auto blocks = m_doc.items(blocksValue);
                d.seg.blocks.reserve(blocks.size());
                d.blockFrames.reserve(blocks.size());
                Address cursor = d.seg.address;
                bool tiled = true;
                std::string untiled;
                for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
                    const Where bwhere("segments", si, "blocks", bi);
                    const PickleValue& b = dictItem(blocks[bi], bwhere);
                    SnapshotBlock block;
                    const PickleValue *size = nullptr, *address = nullptr, *requested = nullptr, *state = nullptr,
                                      *frames = nullptr, *history = nullptr;
                    auto kv = m_doc.items(b);
                    bool strAddressKey = false; // as PickleDocument::find sees it
                    for (std::size_t k = 0; k + 1 < kv.size(); k += 2) { // one pass: blocks are many
                        const PickleValue* v = &kv[k + 1];
                        switch (m_blockFields.field(kv[k], k / 2)) {
                        case BlockField::Size:
                            size = v;
                            break;
                        case BlockField::Address:
                            address = v;
                            strAddressKey = strAddressKey || kv[k].kind == PickleKind::Str;
                            break;
                        case BlockField::RequestedSize:
                            requested = v;
                            break;
                        case BlockField::State:
                            state = v;
                            break;
                        case BlockField::Frames:
                            frames = v;
                            break;
                        case BlockField::History:
                            history = v;
                            break;
                        case BlockField::Other:
                            break;
                        }
                    }
                    if (bi == 0)
                        firstBlocksHaveAddress = firstBlocksHaveAddress && strAddressKey;
                    if (!size)
                        fail(bwhere, "the field 'size' is missing");
                    if (!state)
                        fail(bwhere, "the field 'state' is missing");
                    block.size = static_cast<Bytes>(toUnsigned(*size, "size", bwhere));
                    // Generation A has no block address: blocks tile the segment in address order. A
                    // field that is there must be a non-negative int (None is as wrong as for 'size').
                    block.address = address ? static_cast<Address>(toUnsigned(*address, "address", bwhere)) : cursor;
                    block.requestedSize
                        = requested ? static_cast<Bytes>(toUnsigned(*requested, "requested_size", bwhere)) : 0;
                    std::string_view stateText = m_doc.text(*state);
                    if (stateText == "active_allocated")
                        block.state = SnapshotBlockState::ActiveAllocated;
                    else if (stateText == "active_pending_free" || stateText == "active_awaiting_free")
                        block.state = SnapshotBlockState::ActivePendingFree;
                    else if (stateText == "inactive")
                        block.state = SnapshotBlockState::Inactive;
                    else
                        fail(bwhere, "unknown block state '" + quoteForMessage(stateText) + "'");
                    PickleValue blockFrames;
                    if (frames)
                        blockFrames = *frames;
                    else if (history) {
                        // Generation A: the history entry at the block's address is its allocation.
                        auto entries = m_doc.items(*history);
                        for (const auto& entry : entries.first(std::min(entries.size(), kMaxHistory))) {
                            if (m_doc.items(entry).size() > 2 * kMaxHistoryFields)
                                continue;
                            const PickleValue* addr = m_doc.find(entry, "addr");
                            if (addr && m_doc.toInt(*addr) == static_cast<std::int64_t>(block.address)) {
                                if (const PickleValue* f2 = m_doc.find(entry, "frames"))
                                    blockFrames = *f2;
                                break;
                            }
                        }
                    }
                    if (block.address != cursor && tiled) {
                        tiled = false;
                        untiled = block.address < cursor ? "block " + std::to_string(bi) + " at "
                                + std::to_string(block.address) + " overlaps the block before it (which ends at "
                                + std::to_string(cursor) + ")"
                                                         : "a gap of " + std::to_string(block.address - cursor)
                                + " bytes lies before block " + std::to_string(bi);
                    }
                    cursor = block.address + std::min(block.size, ~Address(0) - block.address);
                    d.seg.blocks.push_back(block);
                    d.blockFrames.push_back(blockFrames);
                }
                // PyTorch's snapshot() lists every block of a segment, free ones included, in address
                // order: they tile [address, address + total_size) exactly. A file where they do not
                // is damaged or edited; the import goes on (the replay then warns where the blocks
                // do not fit), and this names the first such segment.
                const Address segmentEnd = d.seg.address + std::min(d.seg.totalSize, ~Address(0) - d.seg.address);
                if (tiled && cursor != segmentEnd && !blocks.empty()) {
                    tiled = false;
                    untiled = "its blocks end at " + std::to_string(cursor) + ", the segment at "
                        + std::to_string(segmentEnd);
                }
                if (!tiled) {
                    if (untiledSegments++ == 0)
                        firstUntiled = where.str() + ": " + untiled;
                    tiled = true;
                }
                out.push_back(std::move(d));
            }
            if (untiledSegments)
                stats().add("segment_blocks_do_not_tile", Severity::Warning,
                    firstUntiled + " (the blocks of a segment tile it exactly in a PyTorch snapshot)",
                    untiledSegments);
            m_firstBlocksHaveAddress = firstBlocksHaveAddress;
            return out;
        }

        // ---- generation ---------------------------------------------------------------------------
        std::string generation(
            const PickleValue& root, const std::vector<DumpSegment>& segs, bool anyTime, bool anyCompileContext)
        {
            const bool blockAddresses = m_firstBlocksHaveAddress;
            (void)segs;
            if (!blockAddresses)
                return "A";
            const PickleValue* settings = m_doc.find(root, "allocator_settings");
            if (anyCompileContext || (settings && m_doc.find(*settings, "graph_capture_record_stream_reuse")))
                return "D";
            if (anyTime || settings || m_doc.find(root, "external_annotations"))
                return "C";
            return "B";
        }

        // ---- sites ----------------------------------------------------------------------------------
        // Frame dicts are usually shared through the memo (one container per distinct frame), and
        // when they are not, their strings are: a frame is looked up by container first, then by the
        // identity of its strings, and only then interned (with its text made valid UTF-8).
        FrameId frameOf(const PickleValue& f)
        {
            // By items identity: the parser gives repeated identical frame dicts one identity.
            auto idx = static_cast<std::size_t>(m_doc.itemsIdentity(f));
            if (idx >= m_frameCache.size())
                m_frameCache.resize(std::max<std::size_t>(idx + 1, m_frameCache.size() * 2), 0);
            FrameId& id = m_frameCache[idx];
            if (id != 0)
                return id;
            PickleValue name, file;
            std::int64_t line = 0;
            auto kv = m_doc.items(f);
            for (std::size_t k = 0; k + 1 < kv.size(); k += 2) {
                switch (m_frameFields.field(kv[k], k / 2)) {
                case FrameField::Name:
                    name = kv[k + 1];
                    break;
                case FrameField::Filename:
                    file = kv[k + 1];
                    break;
                case FrameField::Line:
                    line = m_doc.toInt(kv[k + 1]).value_or(0);
                    break;
                case FrameField::Other:
                    break;
                }
            }
            const FrameKey key { name.bits ^ (std::uint64_t(name.kind) << 56),
                file.bits ^ (std::uint64_t(file.kind) << 56), name.length, file.length, line };
            // Open addressing (power-of-two table, at most half full): generation-A files have a fresh
            // dict per frame, so this runs for every frame reference there.
            if (2 * (m_frameCount + 1) > m_frameSlots.size()) {
                std::vector<FrameSlot> old(std::max<std::size_t>(256, m_frameSlots.size() * 2));
                old.swap(m_frameSlots);
                for (const FrameSlot& slot : old)
                    if (slot.id != 0)
                        *emptyFrameSlot(slot.key) = slot;
            }
            const std::size_t mask = m_frameSlots.size() - 1;
            std::size_t i = FrameKeyHash {}(key)&mask;
            for (; m_frameSlots[i].id != 0; i = (i + 1) & mask)
                if (m_frameSlots[i].key == key)
                    return id = m_frameSlots[i].id;
            // FrameIds from the builder start at 1 (0 is "no frame"), so 0 marks an empty slot.
            const FrameId created = m_b->frame(
                utf8View(name, m_scratchName), utf8View(file, m_scratchFile), static_cast<std::int32_t>(line));
            m_frameSlots[i] = FrameSlot { key, created };
            ++m_frameCount;
            return id = created;
        }

        // Stacks repeat (every allocation from one line has the same frames list, made of the same
        // memoized frame dicts), so a site is first looked up by the list's raw items. Two steps:
        // listClass() numbers the distinct item sequences (cheap; the importer calls it while it
        // reads each trace entry, whose frames list lies next to it in memory), and siteOfClass()
        // interns the frames and the site on the first use of a class, so sites and frames get
        // their ids in the order the events use them.
        static constexpr std::uint32_t kNoClass = std::numeric_limits<std::uint32_t>::max();
        std::uint32_t listClass(const PickleValue& frames)
        {
            if (frames.kind != PickleKind::List && frames.kind != PickleKind::Tuple)
                return kNoClass;
            auto items = m_doc.items(frames);
            if (items.empty())
                return kNoClass;
            // A list shared by many entries, or repeating the items of an earlier one (the parser
            // recognises repeated frames lists: itemsIdentity), is resolved once (keeps a hostile
            // file linear, and a real one reads each distinct stack once).
            auto idx = static_cast<std::size_t>(m_doc.itemsIdentity(frames));
            if (idx >= m_classByList.size())
                m_classByList.resize(std::max<std::size_t>(idx + 1, m_classByList.size() * 2), kNoClass);
            if (m_classByList[idx] == kNoClass)
                m_classByList[idx] = classOf(items);
            return m_classByList[idx];
        }
        SiteId siteOfClass(std::uint32_t cls)
        {
            if (cls == kNoClass)
                return 0;
            SiteId& id = m_classSite[cls];
            if (id == kNoSite) {
                m_frameIds.clear();
                for (const auto& f : classItems(cls)) {
                    if (f.kind == PickleKind::Dict)
                        m_frameIds.push_back(frameOf(f));
                    else // PyTorch writes each frame as a dict; a list here read as "(no stack)" silently
                        m_b->stats().add("frame_not_a_dict", Severity::Warning,
                            "a 'frames' list holds " + std::string(withArticle(f.kind))
                                + " where a frame dict {name, filename, line} belongs; left out of the stack");
                }
                id = m_b->site(m_frameIds);
            }
            return id;
        }
        SiteId site(const PickleValue& frames) { return siteOfClass(listClass(frames)); }

        // Open addressing over a flat copy of each distinct list's items: one probe sequence and one
        // contiguous compare per lookup, no allocation per list (this runs once per trace entry).
        std::uint32_t classOf(std::span<const PickleValue> items)
        {
            const std::uint64_t h = siteHash(items);
            if (m_siteSlots.empty())
                m_siteSlots.resize(256);
            std::size_t mask = m_siteSlots.size() - 1;
            for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
                const SiteSlot& slot = m_siteSlots[i];
                if (slot.count == 0)
                    break;
                if (slot.hash == h && slot.count == items.size() && sameItems(items, classItems(slot.cls)))
                    return slot.cls;
            }
            if (2 * (m_classSite.size() + 1) > m_siteSlots.size()) {
                std::vector<SiteSlot> old(m_siteSlots.size() * 2);
                old.swap(m_siteSlots);
                mask = m_siteSlots.size() - 1;
                for (const SiteSlot& slot : old)
                    if (slot.count != 0)
                        insertSlot(slot, mask);
            }
            const auto cls = static_cast<std::uint32_t>(m_classSite.size());
            insertSlot(SiteSlot { h, items.size(), cls }, mask);
            m_classOffset.push_back(m_siteItems.size());
            m_siteItems.insert(m_siteItems.end(), items.begin(), items.end());
            m_classSite.push_back(kNoSite);
            return cls;
        }
        std::span<const PickleValue> classItems(std::uint32_t cls) const
        {
            const std::size_t begin = m_classOffset[cls];
            const std::size_t end = cls + 1 < m_classOffset.size() ? m_classOffset[cls + 1] : m_siteItems.size();
            return std::span<const PickleValue>(m_siteItems.data() + begin, end - begin);
        }
        struct SiteSlot {
            std::uint64_t hash = 0;
            std::size_t count = 0; // items; 0 = empty slot (lists with no items never get here)
            std::uint32_t cls = 0;
        };
        void insertSlot(const SiteSlot& slot, std::size_t mask)
        {
            std::size_t i = static_cast<std::size_t>(slot.hash) & mask;
            while (m_siteSlots[i].count != 0)
                i = (i + 1) & mask;
            m_siteSlots[i] = slot;
        }
        std::uint64_t siteHash(std::span<const PickleValue> key) const
        {
            // Four independent lanes: a single multiply chain would cost its latency per item, and
            // this hashes every frame reference of the trace (hundreds of thousands).
            constexpr std::uint64_t kMul = 0x9e3779b97f4a7c15ULL;
            // Items by identity: frame dicts the parser found identical share one (itemsIdentity).
            auto mix = [this](const PickleValue& v) {
                return m_doc.itemsIdentity(v) ^ (static_cast<std::uint64_t>(v.kind) << 58);
            };
            std::uint64_t l0 = key.size(), l1 = 0x632be59bd9b4e019ULL, l2 = 0xbf58476d1ce4e5b9ULL,
                          l3 = 0x94d049bb133111ebULL;
            std::size_t i = 0;
            for (; i + 4 <= key.size(); i += 4) {
                l0 = (l0 ^ mix(key[i])) * kMul;
                l1 = (l1 ^ mix(key[i + 1])) * kMul;
                l2 = (l2 ^ mix(key[i + 2])) * kMul;
                l3 = (l3 ^ mix(key[i + 3])) * kMul;
                l0 ^= l0 >> 29;
                l1 ^= l1 >> 29;
                l2 ^= l2 >> 29;
                l3 ^= l3 >> 29;
            }
            for (; i < key.size(); ++i)
                l0 = ((l0 ^ mix(key[i])) * kMul) ^ (l0 >> 29);
            std::uint64_t h = l0 ^ std::rotl(l1, 17) ^ std::rotl(l2, 31) ^ std::rotl(l3, 47);
            h ^= h >> 33; // fmix64 (MurmurHash3): the table uses the low bits
            h *= 0xff51afd7ed558ccdULL;
            h ^= h >> 33;
            return h;
        }
        bool sameItems(std::span<const PickleValue> a, std::span<const PickleValue> b) const
        {
            for (std::size_t i = 0; i < a.size(); ++i)
                if (a[i].kind != b[i].kind || a[i].length != b[i].length
                    || (a[i].bits != b[i].bits && m_doc.itemsIdentity(a[i]) != m_doc.itemsIdentity(b[i])))
                    return false;
            return true;
        }

        const PickleDocument& m_doc;
        TraceBuilder* m_b;
        ImportStats m_ownStats;
        KeyFieldCache<SegmentField, segmentFieldByText> m_segmentFields { &m_doc };
        KeyFieldCache<BlockField, blockFieldByText> m_blockFields { &m_doc };
        KeyFieldCache<FrameField, frameFieldByText> m_frameFields { &m_doc };
        // Set by readSegments: every segment's first block has an "address" key (not generation A).
        bool m_firstBlocksHaveAddress = true;
        struct FrameKey {
            std::uint64_t name, file; // string offsets (tagged with the kind)
            std::uint32_t nameLength, fileLength;
            std::int64_t line;
            bool operator==(const FrameKey&) const = default;
        };
        struct FrameKeyHash {
            std::size_t operator()(const FrameKey& k) const
            {
                std::uint64_t h
                    = k.name * 0x9e3779b97f4a7c15ULL ^ (k.file + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL;
                h ^= (static_cast<std::uint64_t>(k.line) << 17) ^ k.nameLength;
                h ^= h >> 33; // fmix64 (MurmurHash3): the table uses the low bits
                h *= 0xff51afd7ed558ccdULL;
                return static_cast<std::size_t>(h ^ (h >> 33));
            }
        };
        struct FrameSlot {
            FrameKey key {};
            FrameId id = 0; // 0 = empty
        };
        FrameSlot* emptyFrameSlot(const FrameKey& key)
        {
            const std::size_t mask = m_frameSlots.size() - 1;
            std::size_t i = FrameKeyHash {}(key)&mask;
            while (m_frameSlots[i].id != 0)
                i = (i + 1) & mask;
            return &m_frameSlots[i];
        }
        std::string m_scratchName, m_scratchFile;
        // A frames list is identified by its raw items (the frame dicts' container ids).
        std::vector<SiteSlot> m_siteSlots; // power-of-two size, at most half full
        std::vector<PickleValue> m_siteItems; // the items of each class (distinct list), back to back
        std::vector<std::size_t> m_classOffset; // class → its first item in m_siteItems
        std::vector<SiteId> m_classSite; // class → SiteId (kNoSite until first used)
        std::vector<std::uint32_t> m_classByList; // container index of a frames list → class
        static constexpr SiteId kNoSite = std::numeric_limits<SiteId>::max();
        std::vector<FrameId> m_frameCache; // container index of a frame dict → FrameId (0 = not yet)
        std::vector<FrameSlot> m_frameSlots; // frame by the identity of its strings and line
        std::size_t m_frameCount = 0;
        std::vector<FrameId> m_frameIds;
    };

    // time_us → ns, saturating at the int64 range (a corrupt file may hold any integer; the overflow
    // would be undefined behaviour).
    TimeNs microsecondsToNs(std::int64_t us)
    {
        TimeNs ns = 0;
        if (__builtin_mul_overflow(us, std::int64_t(1000), &ns))
            return us < 0 ? std::numeric_limits<TimeNs>::min() : std::numeric_limits<TimeNs>::max();
        return ns;
    }

    // actionFromString by the action string's identity: entries share the few action strings
    // through the memo. Direct-mapped on the string's offset; a miss compares the text.
    class ActionCache {
    public:
        Action of(const PickleValue& value, std::string_view text)
        {
            Slot& s = m_slots[(value.bits * 0x9e3779b97f4a7c15ULL) >> 60];
            if (s.kind == value.kind && s.bits == value.bits && s.length == value.length) [[likely]]
                return s.action;
            s = Slot { value.bits, value.length, value.kind, actionFromString(text) };
            return s.action;
        }

    private:
        struct Slot {
            std::uint64_t bits = 0;
            std::uint32_t length = 0;
            PickleKind kind = PickleKind::None; // matches nothing: None has no text
            Action action = Action::Unknown;
        };
        std::array<Slot, 16> m_slots {};
    };

    // The trace entries taken out of the pickle while it is parsed (PickleDictSink; issue 22): each one
    // decoded as the import's fast path decodes it (same keys as the entry before, plain Int fields),
    // so the document never holds the entries' items. It declines every entry that path would not
    // take (other keys, a BigInt, a missing or unknown action, frames that are not a list, a string
    // outside the pickle's bytes): the import then reads it from the document, with its errors and
    // anomalies, as without a sink. Per list of device_traces, in the order of the list.
    class EntrySink final : public PickleDictSink {
    public:
        struct List {
            std::vector<Entry> entries; // index and framesClass are set by the import
            std::vector<std::uint64_t> containers; // the dicts they came from, to check the list against
            std::vector<std::uint8_t> flags; // kHasTime | kHasContext
        };
        static constexpr std::uint8_t kHasTime = 1, kHasContext = 2;
        std::vector<List> lists;

        bool take(std::span<const PickleValue> kv, std::uint64_t container, std::size_t list,
            std::string_view bytes) override
        {
            if (kv.size() > 2 * kMaxFields || kv.size() % 2 != 0)
                return false;
            // Text in the pickle's bytes (a protocol 0/1 string with escapes is decoded elsewhere).
            bool outside = false;
            auto textOf = [&](const PickleValue& v) -> std::string_view {
                if (v.kind != PickleKind::Str && v.kind != PickleKind::Binary)
                    return {};
                if (v.bits > bytes.size() || v.length > bytes.size() - v.bits) {
                    outside = true;
                    return {};
                }
                return bytes.substr(v.bits, v.length);
            };
            if (!m_shape.matches(kv)) {
                m_shape.learn(kv, m_fields,
                    [&](const PickleValue& key, std::size_t k) { return m_fields.field(key, k, [&] { return textOf(key); }); });
                if (outside || !m_shape.matches(kv)) {
                    m_shape = EntryShape(); // learnt from a key outside the bytes: learn again next time
                    m_fields = EntryFieldCache(nullptr);
                    return false;
                }
            }
            if (m_shape.anyNotInt(kv))
                return false;
            auto at = [&](EntryField f) -> const PickleValue* {
                const std::int8_t p = m_shape.position[static_cast<std::size_t>(f)];
                return p < 0 ? nullptr : &kv[2 * static_cast<std::size_t>(p) + 1];
            };
            const PickleValue *addr = at(EntryField::Addr), *size = at(EntryField::Size), *act = at(EntryField::Action),
                              *stream = at(EntryField::Stream), *frames = at(EntryField::Frames),
                              *time = at(EntryField::TimeUs), *context = at(EntryField::CompileContext);
            if (!act)
                return false;
            const std::string_view action = textOf(*act);
            if (outside)
                return false;
            auto intOf = [&](const PickleValue* v) { return v ? static_cast<std::int64_t>(v->bits) : 0; }; // Int
            Entry entry;
            entry.action = m_actions.of(*act, action);
            if (entry.action == Action::Unknown)
                return false;
            if (frames) {
                if (frames->kind != PickleKind::None && frames->kind != PickleKind::List && frames->kind != PickleKind::Tuple)
                    return false;
                entry.frames = *frames;
            }
            entry.addr = static_cast<Address>(intOf(addr));
            entry.size = static_cast<Bytes>(intOf(size)); // not negative: anyNotInt
            entry.stream = static_cast<std::uint64_t>(intOf(stream));
            if (time)
                entry.time = microsecondsToNs(intOf(time));
            // Kept only when the import will read it (a str other than "" and "N/A"): its bytes then need
            // not stay in memory (the parser gives back the pages it has read; PickleDocument::parse).
            if (context && context->kind == PickleKind::Str) {
                const std::string_view text = textOf(*context);
                if (outside)
                    return false;
                if (!text.empty() && text != "N/A")
                    entry.compileContext = *context;
            }
            if (list >= lists.size())
                lists.resize(list + 1);
            List& l = lists[list];
            l.entries.push_back(entry);
            l.containers.push_back(container);
            l.flags.push_back(static_cast<std::uint8_t>((time ? kHasTime : 0)
                | (m_shape.position[static_cast<std::size_t>(EntryField::CompileContext)] >= 0 ? kHasContext : 0)));
            return true;
        }

    private:
        EntryFieldCache m_fields { nullptr };
        EntryShape m_shape;
        ActionCache m_actions;
    };

    struct RoundingConfig {
        std::vector<std::int64_t> divisions; // 16 entries
        Bytes maxSplitSize = std::numeric_limits<Bytes>::max();
        bool expandable = false;
    };

    EventKind kindOf(Action a)
    {
        switch (a) {
        case Action::Alloc:
            return EventKind::Alloc;
        case Action::FreeRequested:
            return EventKind::Free;
        case Action::FreeCompleted:
            return EventKind::FreeCompleted;
        case Action::SegmentAlloc:
            return EventKind::SegmentAlloc;
        case Action::SegmentFree:
            return EventKind::SegmentFree;
        case Action::SegmentMap:
            return EventKind::SegmentMap;
        case Action::SegmentUnmap:
            return EventKind::SegmentUnmap;
        case Action::Oom:
            return EventKind::Oom;
        default:
            return EventKind::Marker;
        }
    }

} // namespace

Bytes pytorchRoundSize(Bytes n, std::span<const std::int64_t> divisions)
{
    if (n < kMinBlockSize)
        return kMinBlockSize;
    int log2 = std::bit_width(n) - 1;
    std::size_t index = static_cast<std::size_t>(std::clamp(log2 - 20, 0, 15));
    std::int64_t d = index < divisions.size() ? divisions[index] : 0;
    if (d > 1 && n > kMinBlockSize * static_cast<Bytes>(d)) {
        if (std::has_single_bit(n))
            return n;
        Bytes floor2 = std::bit_floor(n);
        Bytes step = floor2 / static_cast<Bytes>(d);
        if (step == 0)
            return floor2 * 2;
        return detail::roundUpToMultiple(n, step);
    }
    return detail::roundUpToMultiple(n, kMinBlockSize);
}

PickleDocument readSnapshotDocument(const std::string& path)
{
    PickleDocument::Input input = PickleDocument::readInput(path); // the file is read once
    auto first = input.bytes.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && input.bytes[first] == '{')
        return PickleDocument::fromJsonText(std::move(input), path); // frees the file's bytes when done
    return PickleDocument::parse(std::move(input), path);
}

std::vector<SnapshotSegment> snapshotSegments(const PickleDocument& doc)
{
    SnapshotReader r(doc, nullptr);
    const PickleValue& root = r.dictItem(doc.root(), "top level");
    std::vector<SnapshotSegment> out;
    for (auto& d : r.readSegments(root))
        out.push_back(std::move(d.seg));
    return out;
}

namespace {
    // `release`, when given, is the document `doc` itself, which the import empties once it has read
    // all it needs from it (before the scopes and TraceBuilder::build, the peak of its memory).
    Trace importDocument(const PickleDocument& doc, EntrySink* streamed, const LoadOptions& options,
        PickleDocument* release = nullptr);
}

Trace importPytorchSnapshot(PickleDocument::Input input, std::string_view source, const LoadOptions& options)
{
    auto first = input.bytes.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && input.bytes[first] == '{') {
        PickleDocument doc = PickleDocument::fromJsonText(std::move(input), source);
        return importDocument(doc, nullptr, options, &doc);
    }
    try {
        EntrySink sink;
        PickleDocument doc = PickleDocument::parse(input, source, sink);
        return importDocument(doc, &sink, options, &doc);
    } catch (const PickleSinkRefused&) {
        // The pickle refers to an entry taken out of it, or its lists are not where the sink saw them
        // (never in a snapshot PyTorch wrote): read it whole.
    }
    PickleDocument doc = PickleDocument::parse(std::move(input), source);
    return importDocument(doc, nullptr, options, &doc);
}

Trace importPytorchSnapshot(const std::string& path, const LoadOptions& options)
{
    return importPytorchSnapshot(PickleDocument::readInput(path), path, options); // the file is read once
}

namespace {
    // Annotation ranges (external_annotations: "AdamW.step", a user's record_function on the allocator's
    // side) and compile_context become scopes (issue 18), so the peak breakdown by module says what was
    // running: an event inside a range gets the range's scope, nested as the ranges are (an outer range
    // first, by start, then by the longer); an entry's compile_context (other than "N/A") is a scope below
    // them. The rebuilt blocks from before the trace are dated before every range and keep scope 0.
    // Ranges of events numbered by index (no time_us) are not compared with them (`ranges` is empty then).
    struct ScopeRange {
        TimeNs start = 0, end = 0;
        DeviceId device = 0;
        std::string name;
    };
    void applySnapshotScopes(TraceBuilder& b, std::span<const ScopeRange> ranges,
        const std::vector<std::pair<std::size_t, std::string>>& compileContexts)
    {
        if (ranges.empty() && compileContexts.empty())
            return;
        auto& m = b.memoryColumns();
        const std::size_t n = m.count();
        std::vector<std::size_t> byTime(n);
        for (std::size_t i = 0; i < n; ++i)
            byTime[i] = i;
        std::stable_sort(byTime.begin(), byTime.end(), [&](std::size_t x, std::size_t y) { return m.time[x] < m.time[y]; });
        std::vector<ScopeRange> sorted(ranges.begin(), ranges.end());
        std::stable_sort(sorted.begin(), sorted.end(), [](const ScopeRange& x, const ScopeRange& y) {
            return x.start != y.start ? x.start < y.start : x.end > y.end;
        });
        for (const auto& a : sorted) {
            auto first = std::lower_bound(byTime.begin(), byTime.end(), a.start, [&](std::size_t i, TimeNs t) { return m.time[i] < t; });
            for (auto it = first; it != byTime.end() && m.time[*it] <= a.end; ++it)
                if (m.device[*it] == a.device)
                    m.scope[*it] = b.scope(m.scope[*it], a.name, ScopeKind::Range);
        }
        for (const auto& [event, context] : compileContexts)
            if (event < n)
                m.scope[event] = b.scope(m.scope[event], context, ScopeKind::Range);
    }
} // namespace

Trace importPytorchSnapshot(const PickleDocument& doc, const LoadOptions& options)
{
    return importDocument(doc, nullptr, options);
}

namespace {
Trace importDocument(const PickleDocument& doc, EntrySink* streamed, const LoadOptions& options, PickleDocument* release)
{
    TraceBuilder b;
    SnapshotReader r(doc, &b);
    if (doc.bytesAfterStop() > 0) // torch.cuda.memory._dump_snapshot writes one pickle and nothing after it
        b.stats().add("bytes_after_pickle", Severity::Warning,
            doc.source() + ": " + std::to_string(doc.bytesAfterStop())
                + " bytes follow the pickle's STOP opcode and were not read (a second pickle appended, or damage)");
    auto progress = [&](double f) {
        if (options.progress && !options.progress(f))
            throw Cancelled();
    };
    const PickleValue& root = r.dictItem(doc.root(), "top level");
    std::vector<DumpSegment> dump = r.readSegments(root);
    progress(0.2);

    // ---- allocator settings: rounding and splitting rules ------------------------------------------
    RoundingConfig rounding;
    rounding.divisions.assign(16, 0);
    const PickleValue* settings = doc.find(root, "allocator_settings");
    if (settings && settings->kind == PickleKind::Dict) {
        b.metadata()["allocator_settings"] = doc.toJson(*settings);
        if (auto ms = doc.find(*settings, "max_split_size");
            ms && ms->kind != PickleKind::Bool && doc.toInt(*ms).value_or(-1) > 0) // True is no size
            rounding.maxSplitSize = static_cast<Bytes>(*doc.toInt(*ms));
        if (auto ex = doc.find(*settings, "expandable_segments"); ex && ex->kind == PickleKind::Bool)
            rounding.expandable = ex->bits != 0;
        if (auto rp = doc.find(*settings, "roundup_power2_divisions")) {
            if (rp->kind == PickleKind::Dict) {
                auto kv = doc.items(*rp);
                for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
                    // Keys are the interval's lower bound in MiB ("1", "2", "4", …, "32768").
                    std::string_view key = doc.text(kv[i]);
                    std::uint64_t mib = 0;
                    for (char c : key)
                        mib = (c >= '0' && c <= '9') ? mib * 10 + static_cast<std::uint64_t>(c - '0') : mib;
                    if (mib == 0)
                        continue;
                    auto index = static_cast<std::size_t>(std::bit_width(mib) - 1);
                    if (index < 16)
                        rounding.divisions[index] = doc.toInt(kv[i + 1]).value_or(0);
                }
            } else if (auto d = doc.toInt(*rp)) {
                rounding.divisions.assign(16, *d);
            }
        }
    }

    // ---- trace entries --------------------------------------------------------------------------------
    auto traces = r.listField(root, "device_traces", "top level");
    EntryFieldCache entryFields(&doc);
    EntryShape shape(doc);
    ActionCache actions;
    std::vector<std::vector<Entry>> entries(traces.size());
    bool anyTime = false, anyMissingTime = false, anyCompileContext = false;
    std::uint64_t unknownActions = 0;
    std::string firstUnknown;
    for (std::size_t d = 0; d < traces.size(); ++d) {
        auto list = doc.items(traces[d]);
        if (traces[d].kind != PickleKind::List && traces[d].kind != PickleKind::Tuple)
            r.fail(SnapshotReader::at("device_traces", d),
                "is " + std::string(withArticle(traces[d].kind)) + ", not a list");
        // Entries the sink took: checked against the list (the same dicts in the same order), then
        // used as they are (no copy when the sink took them all, the usual case).
        EntrySink::List* taken = streamed && d < streamed->lists.size() ? &streamed->lists[d] : nullptr;
        std::size_t nextTaken = 0;
        auto useTaken = [&](Entry& entry, std::size_t i) {
            const std::uint8_t flags = taken->flags[nextTaken];
            entry.index = i;
            anyTime = anyTime || (flags & EntrySink::kHasTime);
            anyMissingTime = anyMissingTime || !(flags & EntrySink::kHasTime);
            anyCompileContext = anyCompileContext || (flags & EntrySink::kHasContext);
            entry.framesClass = r.listClass(entry.frames);
            ++nextTaken;
        };
        if (taken && taken->containers.size() == list.size()) {
            bool all = true;
            for (std::size_t i = 0; i < list.size() && all; ++i)
                all = doc.isTaken(list[i]) && list[i].bits == taken->containers[i];
            if (all) {
                entries[d] = std::move(taken->entries);
                for (std::size_t i = 0; i < list.size(); ++i)
                    useTaken(entries[d][i], i);
                taken->containers = {};
                taken->flags = {};
                continue;
            }
        }
        entries[d].reserve(list.size());
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (doc.isTaken(list[i])) {
                if (!taken || nextTaken >= taken->containers.size() || taken->containers[nextTaken] != list[i].bits)
                    throw PickleSinkRefused {}; // taken, but not here (shared, or another list's)
                Entry entry = taken->entries[nextTaken];
                useTaken(entry, i);
                entries[d].push_back(entry);
                continue;
            }
            const PickleValue& e = r.dictItem(list[i], Where("device_traces", d, "", i));
            Entry entry;
            entry.index = i;
            std::string_view action;
            bool hasAction = false, hasTime = false;
            const auto kv = doc.items(e);
            const PickleValue* actionValue = nullptr;
            if (shape.matches(kv) && !shape.anyNotInt(kv)) {
                // The keys are those of the shape: the values are where the shape says.
                auto at = [&](EntryField f) -> const PickleValue* {
                    const std::int8_t p = shape.position[static_cast<std::size_t>(f)];
                    return p < 0 ? nullptr : &kv[2 * static_cast<std::size_t>(p) + 1];
                };
                const PickleValue *addr = at(EntryField::Addr), *size = at(EntryField::Size),
                                  *act = at(EntryField::Action), *stream = at(EntryField::Stream),
                                  *frames = at(EntryField::Frames), *time = at(EntryField::TimeUs),
                                  *context = at(EntryField::CompileContext);
                auto intOf = [&](const PickleValue* v) { return v ? static_cast<std::int64_t>(v->bits) : 0; }; // Int
                entry.addr = static_cast<Address>(intOf(addr));
                entry.size = static_cast<Bytes>(intOf(size)); // not negative: anyNotInt
                entry.stream = static_cast<std::uint64_t>(intOf(stream));
                if (time) {
                    entry.time = microsecondsToNs(intOf(time));
                    hasTime = true;
                }
                if (frames)
                    entry.frames = *frames;
                if (context)
                    entry.compileContext = *context;
                if (act) {
                    action = doc.text(*act);
                    actionValue = act;
                    hasAction = true;
                }
                anyCompileContext = anyCompileContext || shape.position[static_cast<std::size_t>(EntryField::CompileContext)] >= 0;
            } else {
                // One pass over the entry's keys (faster than a lookup per field).
                for (std::size_t k = 0; k + 1 < kv.size(); k += 2) {
                    const PickleValue& v = kv[k + 1];
                    // An integer field: Int or BigInt (clamped, counted); any other kind (a str, None,
                    // a float, a bool) is an error naming the field, as for the segments' fields.
                    // unsignedField: a size_t (addr, size), clamped to 2^64 - 1 above it, and so reported.
                    auto asInt = [&](bool unsignedField = false) {
                        const bool high = static_cast<std::int64_t>(v.bits) > 0;
                        if (v.kind == PickleKind::BigInt)
                            r.stats().add("big_int_clamped", Severity::Warning,
                                SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i) + ": '"
                                    + sanitizeUtf8(doc.text(kv[k])) + "' was clamped to "
                                    + (high ? (unsignedField ? "2^64 - 1" : "2^63 - 1") : "-2^63"));
                        else if (v.kind != PickleKind::Int)
                            r.fail(SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i),
                                "'" + sanitizeUtf8(doc.text(kv[k])) + "' is " + std::string(withArticle(v.kind))
                                    + ", not an int");
                        return static_cast<std::int64_t>(v.bits);
                    };
                    // An address or a size is a size_t in PyTorch (TraceEntry): a negative one is a
                    // damaged file, not a block at 2^64 - 1 or of 0 bytes.
                    auto asUnsigned = [&] {
                        const std::int64_t n = asInt(true);
                        if (v.kind == PickleKind::BigInt && n > 0)
                            return ~std::uint64_t(0);
                        if (n < 0)
                            r.fail(SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i),
                                "'" + sanitizeUtf8(doc.text(kv[k])) + "' is negative (" + std::to_string(n) + ")");
                        return static_cast<std::uint64_t>(n);
                    };
                    switch (entryFields.field(kv[k], k / 2)) {
                    case EntryField::Addr:
                        entry.addr = static_cast<Address>(asUnsigned());
                        break;
                    case EntryField::Size:
                        entry.size = static_cast<Bytes>(asUnsigned());
                        break;
                    case EntryField::Action:
                        action = doc.text(v);
                        actionValue = &v;
                        hasAction = true;
                        break;
                    case EntryField::Stream:
                        entry.stream = static_cast<std::uint64_t>(asInt());
                        break;
                    case EntryField::Frames:
                        entry.frames = v;
                        break;
                    case EntryField::TimeUs:
                        entry.time = microsecondsToNs(asInt());
                        hasTime = true;
                        break;
                    case EntryField::CompileContext:
                        anyCompileContext = true;
                        entry.compileContext = v;
                        break;
                    case EntryField::Other:
                        break;
                    }
                }
                shape.learn(kv, entryFields);
            }
            if (!hasAction)
                r.fail(SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i),
                    "the field 'action' is missing");
            entry.action = actions.of(*actionValue, action);
            if (entry.action == Action::Unknown) {
                if (unknownActions++ == 0)
                    firstUnknown = SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i)
                        + (actionValue->kind == PickleKind::Str
                                ? ": action '" + quoteForMessage(action) + "'"
                                : ": action (" + std::string(withArticle(actionValue->kind)) + ", not a str)");
                continue;
            }
            // PyTorch's frames are a list of dicts (or absent); any other value is a damaged entry.
            if (entry.frames.kind != PickleKind::None && entry.frames.kind != PickleKind::List
                && entry.frames.kind != PickleKind::Tuple)
                r.fail(SnapshotReader::at("device_traces", d) + SnapshotReader::at("", i),
                    "'frames' is " + std::string(withArticle(entry.frames.kind)) + ", not a list");
            anyTime = anyTime || hasTime;
            anyMissingTime = anyMissingTime || !hasTime;
            entry.framesClass = r.listClass(entry.frames);
            entries[d].push_back(entry);
        }
        if (taken && nextTaken != taken->containers.size())
            throw PickleSinkRefused {}; // some taken entries are not in this list
    }
    if (streamed)
        for (std::size_t d = traces.size(); d < streamed->lists.size(); ++d)
            if (!streamed->lists[d].containers.empty())
                throw PickleSinkRefused {}; // entries taken from a list the document does not have
    if (unknownActions)
        b.stats().add("unknown_action", Severity::Info, firstUnknown + " is not a memory action gpumem knows; skipped",
            unknownActions);
    const bool timestamps = anyTime && !anyMissingTime;
    if (!timestamps) {
        std::uint64_t n = 0;
        for (auto& list : entries) {
            for (auto& e : list)
                e.time = static_cast<TimeNs>(e.index) + 1;
            n += list.size();
        }
        if (n > 0)
            b.stats().add("no_timestamps", Severity::Info,
                "the trace entries carry no time_us (snapshot generation A/B); entry i is placed at i + 1 ns", n);
    }
    progress(0.4);

    const std::string gen = r.generation(root, dump, anyTime, anyCompileContext);
    b.metadata()["source_format"] = "pytorch-snapshot";
    b.metadata()["snapshot_generation"] = gen;
    b.metadata()["pickle_protocol"] = doc.protocol();

    // ---- devices -------------------------------------------------------------------------------------
    std::map<std::int32_t, std::vector<const DumpSegment*>> segmentsByDevice;
    for (const auto& d : dump)
        segmentsByDevice[d.seg.device].push_back(&d);
    std::vector<std::int32_t> ordinals;
    for (std::size_t d = 0; d < entries.size(); ++d)
        if (!entries[d].empty() || segmentsByDevice.count(static_cast<std::int32_t>(d)))
            ordinals.push_back(static_cast<std::int32_t>(d));
    for (const auto& [ordinal, segs] : segmentsByDevice)
        if (ordinal < 0 || static_cast<std::size_t>(ordinal) >= entries.size())
            ordinals.push_back(ordinal);

    nlohmann::json reconstruction = nlohmann::json::array();
    // (builder event index, compile_context) of the recorded entries made under torch.compile: scopes below.
    std::vector<std::pair<std::size_t, std::string>> compileContexts;
    {
        // One event per entry, plus the rebuilt segments and blocks (the recorded ones; blocks known
        // only from a free may add more): reserved once instead of growing twelve columns step by step.
        std::size_t events = b.memoryEventCount() + dump.size();
        for (const auto& list : entries)
            events += list.size();
        for (const auto& d : dump)
            events += d.seg.blocks.size();
        b.memoryColumns().reserve(events);
    }
    std::string detail;
    // Three marks per device (after the backward walk, the pre-window state, the forward replay), from
    // 0.4 to 0.8; bench/snapshot_import_bench --phases names the phases by them.
    std::size_t deviceMarks = 0;
    auto deviceProgress = [&] { progress(0.4 + 0.4 * double(++deviceMarks) / double(3 * ordinals.size())); };
    for (std::int32_t ordinal : ordinals) {
        const DeviceId device = b.device(DeviceType::Cuda, ordinal);
        static const std::vector<Entry> kNoEntries;
        const auto& list = (ordinal >= 0 && static_cast<std::size_t>(ordinal) < entries.size())
            ? entries[static_cast<std::size_t>(ordinal)]
            : kNoEntries;
        const auto& segs = segmentsByDevice[ordinal];
        // Entries come in runs on one stream: the builder's map is asked only when the handle changes.
        std::optional<std::uint64_t> lastHandle;
        StreamId lastStream = 0;
        auto streamOf = [&](std::uint64_t handle) {
            if (handle != lastHandle) {
                lastStream = b.stream(device, handle);
                lastHandle = handle;
            }
            return lastStream;
        };
        auto warn = [&](const std::string& code, const Entry* e, const std::string& what) {
            b.stats().add(code, Severity::Warning,
                "device " + std::to_string(ordinal) + (e ? ", trace entry " + std::to_string(e->index) : std::string())
                    + ": " + what);
        };

        // Pools (segment_pool_id). The trace entries carry none: an event takes the pool of the recorded
        // segment it falls in, for the segment that lives to the dump (the last incarnation at its address;
        // an earlier one, freed in the trace, is of an unknown pool and counted as the default one).
        std::map<Address, std::pair<Bytes, PoolId>> dumpPool; // non-expandable segments of a private pool
        std::map<Address, std::pair<Bytes, PoolId>> dumpMappedPool; // expandable ranges of a private pool
        for (const DumpSegment* s : segs) {
            const auto [first, second] = s->seg.poolId;
            if (first == 0 && second == 0)
                continue;
            const PoolKind kind = first != 0 && second == 0 ? PoolKind::Graph
                : first == 0 && second != 0                 ? PoolKind::MemPool
                                                            : PoolKind::Other;
            (s->seg.expandable ? dumpMappedPool : dumpPool)[s->seg.address] = { s->seg.totalSize, b.pool(kind, first, second) };
        }
        const bool pools = !dumpPool.empty() || !dumpMappedPool.empty();
        // Per segment_alloc entry: whether its segment lives to the dump (no segment_free at its address later).
        std::vector<std::uint8_t> survives(pools ? list.size() : 0, 0);
        std::set<Address> freedInTrace;
        if (pools)
            for (std::size_t k = list.size(); k-- > 0;) {
                if (list[k].action == Action::SegmentFree)
                    freedInTrace.insert(list[k].addr);
                else if (list[k].action == Action::SegmentAlloc && !freedInTrace.count(list[k].addr))
                    survives[k] = 1;
            }
        std::map<Address, std::pair<Bytes, PoolId>> livePool; // live segments of a private pool, by base
        auto containingPool = [](const std::map<Address, std::pair<Bytes, PoolId>>& m, Address a) -> PoolId {
            auto it = m.upper_bound(a);
            if (it == m.begin())
                return 0;
            --it;
            return a - it->first < it->second.first ? it->second.second : 0;
        };
        auto poolAt = [&](Address a) -> PoolId {
            if (!pools)
                return 0;
            if (PoolId p = containingPool(livePool, a))
                return p;
            return containingPool(dumpMappedPool, a);
        };

        // Backward walk over segments.
        struct PreSegment {
            Bytes size;
            std::uint64_t stream;
        };
        std::map<Address, PreSegment> segLive;
        RangeSet mapped;
        std::map<Address, std::uint64_t> mappedStream;
        for (const DumpSegment* s : segs) {
            if (s->seg.expandable) {
                mapped.add(s->seg.address, s->seg.address + s->seg.totalSize);
                mappedStream[s->seg.address] = s->seg.stream;
            } else
                segLive[s->seg.address] = PreSegment { s->seg.totalSize, s->seg.stream };
        }
        // Backward walk over blocks.
        std::size_t dumpBlocks = 0;
        for (const DumpSegment* s : segs)
            dumpBlocks += s->seg.blocks.size();
        // Sized for the recorded blocks; it grows with the blocks live at once in the walk, not with the entries.
        AddressMap<PreBlock> live(dumpBlocks + 1024);
        for (const DumpSegment* s : segs)
            for (std::size_t bi = 0; bi < s->seg.blocks.size(); ++bi) {
                const SnapshotBlock& blk = s->seg.blocks[bi];
                if (blk.state != SnapshotBlockState::Inactive)
                    *live.tryEmplace(blk.address).first
                        = PreBlock { blk.size, blk.requestedSize, blk.state, false, s->seg.stream, s->blockFrames[bi] };
            }
        for (auto it = list.rbegin(); it != list.rend(); ++it) {
            const Entry& e = *it;
            switch (e.action) {
            case Action::SegmentAlloc:
                if (segLive.erase(e.addr) == 0)
                    warn("segment_alloc_not_live_after", &e,
                        "segment_alloc at " + std::to_string(e.addr)
                            + " is neither in `segments` nor freed later in the trace");
                break;
            case Action::SegmentFree:
                if (!segLive.emplace(e.addr, PreSegment { e.size, e.stream }).second)
                    warn("segment_free_of_live_segment", &e,
                        "segment_free at " + std::to_string(e.addr)
                            + " of a segment that exists later without a segment_alloc");
                break;
            case Action::SegmentMap:
                mapped.remove(e.addr, e.addr + e.size);
                break;
            case Action::SegmentUnmap:
                mapped.add(e.addr, e.addr + e.size);
                mappedStream[e.addr] = e.stream;
                break;
            case Action::Alloc: {
                PreBlock* found = live.find(e.addr);
                if (!found || found->state != SnapshotBlockState::ActiveAllocated)
                    warn("alloc_not_live_after", &e,
                        "alloc at " + std::to_string(e.addr)
                            + " is neither active in `segments` nor freed later in the trace");
                else
                    live.erase(e.addr);
                break;
            }
            case Action::FreeRequested: {
                auto [found, inserted] = live.tryEmplace(e.addr);
                PreBlock& blk = *found;
                if (inserted)
                    blk = PreBlock { pytorchRoundSize(e.size, rounding.divisions), e.size,
                        SnapshotBlockState::ActiveAllocated, true, e.stream, e.frames };
                else if (blk.state == SnapshotBlockState::ActiveAllocated)
                    warn("free_of_live_block", &e,
                        "free_requested at " + std::to_string(e.addr)
                            + " of a block that is allocated again later without an alloc");
                blk.state = SnapshotBlockState::ActiveAllocated;
                break;
            }
            case Action::FreeCompleted: {
                auto [found, inserted] = live.tryEmplace(e.addr);
                if (!inserted)
                    warn("free_of_live_block", &e,
                        "free_completed at " + std::to_string(e.addr)
                            + " of a block that is active later without an alloc");
                *found = PreBlock { pytorchRoundSize(e.size, rounding.divisions), e.size,
                    SnapshotBlockState::ActivePendingFree, true, e.stream, e.frames };
                break;
            }
            default:
                break;
            }
        }

        deviceProgress();

        // The pre-window state, as a map, and the events that create it.
        SegmentBlockMap state;
        const TimeNs preTime = list.empty() ? 0
            : list.front().time == std::numeric_limits<TimeNs>::min()
            ? list.front().time // a saturated (corrupt) first time: no earlier instant exists
            : list.front().time - 1;
        std::uint64_t preSequence = 0; // also the number of events before the trace
        auto preEvent = [&](EventKind kind, Address addr, Bytes size, Bytes requested, std::uint64_t stream, SiteId site,
                            PoolId pool = 0) {
                  MemoryEvent ev;
                  ev.time = preTime;
                  ev.kind = kind;
                  ev.device = device;
                  ev.stream = streamOf(stream);
                  ev.address = addr;
                  ev.size = size;
                  ev.requestedSize = requested;
                  ev.site = site;
                  ev.sequence = preSequence++;
                  ev.pool = pool;
                  b.add(ev); // in this order: what the builder does with it does not depend on the map
              };
        for (const auto& [addr, s] : segLive) {
            if (auto code = state.addSegment(addr, s.size, false, detail); !code.empty())
                warn(code, nullptr, detail);
            PoolId pool = 0;
            if (auto it = dumpPool.find(addr); it != dumpPool.end() && !freedInTrace.count(addr)) {
                pool = it->second.second;
                livePool[addr] = { s.size, pool };
            }
            preEvent(EventKind::SegmentAlloc, addr, s.size, 0, s.stream, 0, pool);
        }
        for (const auto& [start, end] : mapped.ranges()) {
            if (auto code = state.addSegment(start, end - start, true, detail); !code.empty())
                warn(code, nullptr, detail);
            auto st = mappedStream.find(start);
            preEvent(EventKind::SegmentMap, start, end - start, 0, st == mappedStream.end() ? 0 : st->second, 0, poolAt(start));
        }
        std::vector<std::pair<Address, PreBlock*>> preBlocks;
        preBlocks.reserve(live.size());
        live.forEach([&](Address addr, PreBlock& blk) { preBlocks.emplace_back(addr, &blk); });
        std::sort(preBlocks.begin(), preBlocks.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        // Exact blocks first, so that a guessed size cannot push out a known block.
        for (int pass = 0; pass < 2; ++pass)
            for (auto& [addr, blk] : preBlocks) {
                if (blk->inferred != (pass == 1))
                    continue;
                if (auto code = state.allocate(addr, blk->size, blk->requested, detail); !code.empty())
                    warn(code, nullptr, "reconstructing the state before the trace: " + detail);
            }
        std::uint64_t grown = 0;
        for (auto& [addr, blk] : preBlocks) {
            if (!blk->inferred || blk->size <= kSmallSize || state.inExpandable(addr))
                continue;
            // A free gap of ≤ 1 MiB cannot be a large-pool free block: the block was not split.
            auto slack = state.slackAfter(addr);
            if (slack && *slack > 0 && *slack <= kSmallSize) {
                state.growBlock(addr, *slack);
                blk->size += *slack;
                ++grown;
            }
        }
        // Blocks pending a free (freed by the user, waiting on stream events) first: alloc and free_requested,
        // so that they never count as allocated at the pre-trace instant (PyTorch CUDACachingAllocator.cpp
        // free(): allocated and requested bytes drop at the user's free; the memory stays reserved until
        // free_completed, which the trace records). Then the blocks still allocated.
        std::uint64_t pending = 0;
        for (auto& [addr, blk] : preBlocks)
            if (blk->state == SnapshotBlockState::ActivePendingFree) {
                preEvent(EventKind::Alloc, addr, blk->size, blk->requested, blk->stream, r.site(blk->frames), poolAt(addr));
                preEvent(EventKind::Free, addr, blk->size, blk->requested, blk->stream, 0, poolAt(addr));
                if (auto code = state.freeRequested(addr, detail); !code.empty())
                    warn(code, nullptr, detail);
                ++pending;
            }
        for (auto& [addr, blk] : preBlocks)
            if (blk->state != SnapshotBlockState::ActivePendingFree)
                preEvent(EventKind::Alloc, addr, blk->size, blk->requested, blk->stream, r.site(blk->frames), poolAt(addr));
        if (preSequence != 0)
            b.stats().add("reconstructed_initial_state", Severity::Info,
                "device " + std::to_string(ordinal) + ": "
                    + counted(segLive.size() + mapped.ranges().size(), "segment", "segments") + " and "
                    + counted(preBlocks.size(), "block", "blocks")
                    + " existed before the first trace entry; they were rebuilt from `segments` and the trace",
                preSequence);
        nlohmann::json rec = {
            { "device", ordinal },
            { "trace_entries", list.size() },
            { "segments_before_trace", segLive.size() + mapped.ranges().size() },
            { "blocks_before_trace", preBlocks.size() },
            { "pending_blocks_before_trace", pending },
            { "blocks_sized_from_free",
                std::count_if(preBlocks.begin(), preBlocks.end(), [](const auto& p) { return p.second->inferred; }) },
            { "blocks_grown_unsplit", grown },
            { "events_before_trace", preSequence },
        };
        reconstruction.push_back(std::move(rec));
        deviceProgress();

        // Forward: the recorded events, with block sizes from the allocator's rule.
        TimeNs last = std::numeric_limits<TimeNs>::min();
        std::uint64_t backwards = 0, unsplit = 0, emptyCacheCalls = 0, oomRecoveries = 0;
        auto releases = [](Action a) { return a == Action::SegmentFree || a == Action::SegmentUnmap; };
        for (std::size_t k = 0; k < list.size(); ++k) {
            const Entry& e = list[k];
            MemoryEvent ev;
            ev.time = e.time;
            if (ev.time < last) {
                ++backwards;
                ev.time = last; // keep the entries' order: a replay depends on it
            }
            last = ev.time;
            if (releases(e.action) && (k == 0 || !releases(list[k - 1].action))) {
                // A burst of releases. empty_cache() is not recorded (allocators.md §1.17); the burst is one,
                // unless the next entry is the retry of an OOM recovery (release_cached_blocks before
                // alloc_block(isRetry): a segment_alloc, segment_map or oom follows at once) [choice].
                std::size_t after = k;
                while (after < list.size() && releases(list[after].action))
                    ++after;
                const bool retry = after < list.size()
                    && (list[after].action == Action::SegmentAlloc || list[after].action == Action::SegmentMap
                        || list[after].action == Action::Oom);
                if (retry)
                    ++oomRecoveries;
                else {
                    MemoryEvent call;
                    call.time = ev.time;
                    call.kind = EventKind::EmptyCache;
                    call.device = device;
                    call.stream = streamOf(e.stream);
                    call.sequence = e.index; // ties with the burst's first release, and added before it
                    b.add(call);
                    ++emptyCacheCalls;
                }
            }
            ev.kind = kindOf(e.action);
            ev.device = device;
            ev.stream = streamOf(e.stream);
            ev.address = e.addr;
            ev.size = e.size;
            ev.sequence = e.index;
            ev.site = r.siteOfClass(e.framesClass);
            if (e.compileContext.kind == PickleKind::Str)
                if (const auto text = doc.text(e.compileContext); !text.empty() && text != "N/A")
                    compileContexts.emplace_back(b.memoryEventCount(), r.utf8(e.compileContext));
            std::string code;
            switch (e.action) {
            case Action::Alloc: {
                ev.requestedSize = e.size;
                Bytes rounded = pytorchRoundSize(e.size, rounding.divisions);
                ev.size = rounded;
                if (auto free = state.freeBlockAt(e.addr)) {
                    if (*free < rounded) {
                        warn("alloc_larger_than_free_block", &e,
                            "alloc of " + std::to_string(rounded) + " bytes at " + std::to_string(e.addr)
                                + " where only " + std::to_string(*free) + " bytes are free");
                    } else {
                        Bytes rest = *free - rounded;
                        bool split = (rounded <= kSmallSize || rounding.expandable || state.inExpandable(e.addr))
                            ? rest >= kMinBlockSize
                            : rounded < rounding.maxSplitSize && rest > kSmallSize;
                        if (!split && *free != rounded) {
                            ev.size = *free;
                            ++unsplit;
                        }
                    }
                } else {
                    warn("alloc_not_at_free_block", &e,
                        "alloc at " + std::to_string(e.addr) + " is not the start of a free block in a known segment");
                }
                code = state.allocate(e.addr, ev.size, ev.requestedSize, detail);
                ev.pool = poolAt(e.addr);
                break;
            }
            case Action::FreeRequested:
            case Action::FreeCompleted: {
                ev.pool = poolAt(e.addr);
                ev.requestedSize = e.size;
                const SnapshotBlock* blk = state.activeBlock(e.addr);
                ev.size = blk ? blk->size : pytorchRoundSize(e.size, rounding.divisions);
                code = e.action == Action::FreeRequested ? state.freeRequested(e.addr, detail)
                                                         : state.freeCompleted(e.addr, detail);
                break;
            }
            case Action::SegmentAlloc:
                code = state.addSegment(e.addr, e.size, false, detail);
                if (pools && survives[k])
                    if (auto it = dumpPool.find(e.addr); it != dumpPool.end()) {
                        ev.pool = it->second.second;
                        livePool[e.addr] = { e.size, ev.pool };
                    }
                break;
            case Action::SegmentFree:
                code = state.removeSegment(e.addr, e.size, false, detail);
                if (pools)
                    if (auto it = livePool.find(e.addr); it != livePool.end()) {
                        ev.pool = it->second.second;
                        livePool.erase(it);
                    }
                break;
            case Action::SegmentMap:
                code = state.addSegment(e.addr, e.size, true, detail);
                ev.pool = poolAt(e.addr);
                break;
            case Action::SegmentUnmap:
                code = state.removeSegment(e.addr, e.size, true, detail);
                break;
            case Action::Oom:
                ev.address = 0;
                break;
            case Action::Snapshot:
                ev.address = 0;
                break;
            default:
                break;
            }
            if (!code.empty())
                warn(code, &e, detail);
            b.add(ev);
        }
        reconstruction.back()["trace_allocs_unsplit"] = unsplit;
        // Release bursts of the trace: replayed as empty_cache calls, or left to the replay's own OOM recovery.
        if (emptyCacheCalls + oomRecoveries > 0) {
            reconstruction.back()["empty_cache_calls"] = emptyCacheCalls;
            reconstruction.back()["oom_recovery_bursts"] = oomRecoveries;
        }
        if (backwards)
            b.stats().add("time_goes_backwards", Severity::Warning,
                "device " + std::to_string(ordinal)
                    + ": time_us decreases between entries; those entries keep their order (time clamped)",
                backwards);
        deviceProgress();
    }
    b.metadata()["reconstruction"] = std::move(reconstruction);
    if (ordinals.empty())
        progress(0.8);

    // ---- segments at dump (for the replay engine: pool, type, expandable), as columns ----------------
    {
        auto column = [&] {
            nlohmann::json j = nlohmann::json::array();
            j.get_ref<nlohmann::json::array_t&>().reserve(dump.size());
            return j;
        };
        nlohmann::json device = column(), address = column(), total = column(), allocated = column(),
                       activeSize = column(), requested = column(), stream = column(), type = column(),
                       pool = column(), expandable = column(), blocks = column();
        for (const auto& d : dump) {
            device.push_back(d.seg.device);
            address.push_back(d.seg.address);
            total.push_back(d.seg.totalSize);
            allocated.push_back(d.allocatedSize);
            activeSize.push_back(d.activeSize);
            requested.push_back(d.requestedSize);
            stream.push_back(d.seg.stream);
            type.push_back(d.seg.small ? "small" : "large");
            pool.push_back(d.hasPool ? nlohmann::json::array({ d.seg.poolId.first, d.seg.poolId.second })
                                     : nlohmann::json(nullptr));
            expandable.push_back(d.seg.expandable);
            blocks.push_back(d.seg.blocks.size());
        }
        b.metadata()["segments_at_dump"] = nlohmann::json {
            { "device", std::move(device) },
            { "address", std::move(address) },
            { "total_size", std::move(total) },
            { "allocated_size", std::move(allocated) },
            { "active_size", std::move(activeSize) },
            { "requested_size", std::move(requested) },
            { "stream", std::move(stream) },
            { "segment_type", std::move(type) },
            { "segment_pool_id", std::move(pool) },
            { "is_expandable", std::move(expandable) },
            { "blocks", std::move(blocks) },
        };
    }

    // ---- external annotations ----------------------------------------------------------------------
    std::vector<ScopeRange> ranges; // the annotation ranges, which become scopes below
    if (const PickleValue* ann = doc.find(root, "external_annotations")) {
        std::map<std::pair<std::int64_t, std::string>, std::vector<TimeNs>> open;
        TimeNs firstTime = std::numeric_limits<TimeNs>::max(), lastTime = std::numeric_limits<TimeNs>::min();
        for (const auto& list : entries)
            if (!list.empty()) {
                firstTime = std::min(firstTime, list.front().time);
                lastTime = std::max(lastTime, list.back().time);
            }
        auto items = doc.items(*ann);
        std::uint64_t skipped = 0;
        for (std::size_t i = 0; i < items.size(); ++i) {
            const PickleValue& a = r.dictItem(items[i], Where("external_annotations", i));
            const PickleValue* time = doc.find(a, "time_us");
            const PickleValue* stage = doc.find(a, "stage");
            if (!time || !doc.toInt(*time) || !stage) {
                ++skipped;
                continue;
            }
            const PickleValue* nameValue = doc.find(a, "name");
            std::string name = nameValue ? r.utf8(*nameValue) : std::string("annotation");
            std::int64_t dev = 0;
            if (const PickleValue* dv = doc.find(a, "device"))
                dev = doc.toInt(*dv).value_or(0);
            TimeNs t = microsecondsToNs(*doc.toInt(*time));
            auto& stack = open[{ dev, name }];
            if (doc.text(*stage) == "START") {
                stack.push_back(t);
                continue;
            }
            TimeNs start = firstTime == std::numeric_limits<TimeNs>::max() ? t : std::min(firstTime, t);
            if (!stack.empty()) {
                start = stack.back();
                stack.pop_back();
            }
            const DeviceId deviceId = b.device(DeviceType::Cuda, static_cast<std::int32_t>(dev));
            b.add(Annotation { start, t, b.intern(name), AnnotationKind::Range, deviceId, 0 });
            ranges.push_back({ start, t, deviceId, name });
        }
        for (auto& [key, stack] : open)
            for (TimeNs start : stack) {
                const DeviceId deviceId = b.device(DeviceType::Cuda, static_cast<std::int32_t>(key.first));
                b.add(Annotation { start, std::max(start, lastTime), b.intern(key.second), AnnotationKind::Range, deviceId, 0 });
                ranges.push_back({ start, std::max(start, lastTime), deviceId, key.second });
            }
        if (skipped)
            b.stats().add("annotation_without_time", Severity::Info,
                "external_annotations entries without time_us or stage were skipped", skipped);
    }
    // Nothing below reads the entries or the document.
    std::vector<std::vector<Entry>>().swap(entries);
    if (release)
        *release = PickleDocument();
    applySnapshotScopes(b, timestamps ? std::span<const ScopeRange>(ranges) : std::span<const ScopeRange>(), compileContexts);
    progress(1.0);
    return b.build();
}
} // namespace

namespace {
    // `c` + module + '\n' + name + '\n' at the start (after an optional MARK '('): pickle protocol 0's GLOBAL.
    bool startsWithProtocol0Global(std::string_view c)
    {
        if (c.starts_with('('))
            c.remove_prefix(1);
        if (!c.starts_with('c'))
            return false;
        c.remove_prefix(1);
        for (int operand = 0; operand < 2; ++operand) {
            std::size_t n = 0;
            while (n < c.size() && n < 256
                && (std::isalnum(static_cast<unsigned char>(c[n])) || c[n] == '_' || (c[n] == '.' && n > 0)))
                ++n;
            if (n == 0 || n >= c.size() || c[n] != '\n' || std::isdigit(static_cast<unsigned char>(c[0])))
                return false;
            c.remove_prefix(n + 1);
        }
        return true;
    }

    bool isSnapshotKey(std::string_view key)
    {
        return key == "segments" || key == "device_traces" || key == "allocator_settings"
            || key == "external_annotations";
    }

    // A pickle of protocol 0 or 1 (no PROTO opcode) whose top-level dict begins with a snapshot key, as
    // pickle.dumps(snapshot, protocol=0 or 1) writes it, with or without memo PUTs (pickletools.optimize):
    //   protocol 0: MARK DICT [PUT n\n] UNICODE key\n | STRING 'key'\n
    //   protocol 1: EMPTY_DICT [BINPUT n | LONG_BINPUT n] [MARK] BINUNICODE | SHORT_BINSTRING | BINSTRING key
    bool startsWithTextProtocolSnapshotDict(std::string_view c)
    {
        auto le32 = [&](std::size_t at) {
            std::uint32_t n = 0;
            for (std::size_t i = 0; i < 4; ++i)
                n |= std::uint32_t(static_cast<unsigned char>(c[at + i])) << (8 * i);
            return n;
        };
        if (c.starts_with("(d")) {
            c.remove_prefix(2);
            if (c.starts_with('p')) {
                const std::size_t nl = c.find('\n');
                if (nl == std::string_view::npos || nl > 20)
                    return false;
                c.remove_prefix(nl + 1);
            }
            const std::size_t nl = c.find('\n');
            if (nl == std::string_view::npos || nl < 1)
                return false;
            const std::string_view arg = c.substr(1, nl - 1);
            if (c[0] == 'V')
                return isSnapshotKey(arg);
            return c[0] == 'S' && arg.size() >= 2 && (arg[0] == '\'' || arg[0] == '"') && arg.back() == arg[0]
                && isSnapshotKey(arg.substr(1, arg.size() - 2));
        }
        if (!c.starts_with('}'))
            return false;
        c.remove_prefix(1);
        if (c.starts_with('q') && c.size() >= 2)
            c.remove_prefix(2);
        else if (c.starts_with('r') && c.size() >= 5)
            c.remove_prefix(5);
        if (c.starts_with('('))
            c.remove_prefix(1);
        std::size_t length = 0, at = 0;
        if ((c.starts_with('X') || c.starts_with('T')) && c.size() >= 5)
            length = le32(1), at = 5;
        else if (c.starts_with('U') && c.size() >= 2)
            length = static_cast<unsigned char>(c[1]), at = 2;
        else
            return false;
        return length <= 32 && at + length <= c.size() && isSnapshotKey(c.substr(at, length));
    }

    class SnapshotImporter final : public Importer {
    public:
        std::string_view name() const override { return "pytorch-snapshot"; }
        std::string_view description() const override
        {
            return "PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle, or the same dict as JSON)";
        }
        bool sniff(const SniffInput& in) const override
        {
            std::string_view c = in.content;
            // Every pickle is claimed: snapshots are the only pickles gpumem reads, so any other one gets
            // this importer's precise refusal (a named global opcode and its offset, or the missing key)
            // instead of "not a trace format".
            if (c.size() >= 2 && static_cast<unsigned char>(c[0]) == 0x80 && c[1] >= 2 && c[1] <= 5)
                return true;
            // A protocol-0 pickle that starts by importing a global ("cos\nsystem\n…", optionally after a
            // MARK) is claimed too, so that it is refused by name and offset rather than as "not a trace
            // format": GLOBAL's two operands are dotted identifiers, each ended by a newline.
            if (startsWithProtocol0Global(c))
                return true;
            // Protocols 0 and 1 have no PROTO opcode: such a snapshot is known by its first key.
            if (startsWithTextProtocolSnapshotDict(c))
                return true;
            auto first = c.find_first_not_of(" \t\r\n");
            if (first == std::string_view::npos || c[first] != '{')
                return false;
            // The first key must be a snapshot key (json.dump keeps the dict's order, which starts with
            // "segments"; a sorted dump starts with "allocator_settings" or "device_traces"), and the
            // head must name the segments or the traces.
            auto quote = c.find_first_not_of(" \t\r\n", first + 1);
            if (quote == std::string_view::npos || c[quote] != '"')
                return false;
            std::string_view rest = c.substr(quote);
            bool snapshotKey = rest.starts_with("\"segments\"") || rest.starts_with("\"device_traces\"")
                || rest.starts_with("\"allocator_settings\"") || rest.starts_with("\"external_annotations\"");
            return snapshotKey
                && (rest.find("\"segments\"") != std::string_view::npos
                    || rest.find("\"device_traces\"") != std::string_view::npos);
        }
        Trace load(const std::string& path, const LoadOptions& options) const override
        {
            return importPytorchSnapshot(path, options);
        }
    };
} // namespace

std::unique_ptr<Importer> makePytorchSnapshotImporter() { return std::make_unique<SnapshotImporter>(); }

} // namespace gpumem
