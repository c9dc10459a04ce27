#include "core/gmt_format.h"

#include "core/detail/json_limits.h"
#include "core/detail/trace_body.h"
#include "core/detail/varint.h"
#include "core/event_source.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>
#ifdef GPUMEM_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <limits>
#include <optional>
#include <type_traits>
#include <cstring>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

namespace gpumem {

using detail::addDelta;
using detail::Cursor;
using detail::putU16;
using detail::putU32;
using detail::putVarint;
using detail::unzigzag;
using detail::varintLength;
using detail::writeVarint;
using detail::zigzag;
using detail::zigzagDelta;

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
    constexpr std::uint32_t kMemoryExtension = fourcc("MEVX"); // 1.1: pool and operation of the MEMV chunk before it
    constexpr std::uint32_t kPools = fourcc("POOL"); // 1.1
    // Kinds a MEMV kind column may hold: those of 1.0. empty_cache (9) is stored as a marker whose MEVX
    // operation is 1, so that a 1.0 reader reads the chunk (as a marker) instead of refusing it (§5.1).
    constexpr std::uint64_t kMemvKindLimit = static_cast<std::uint64_t>(EventKind::EmptyCache);
    constexpr std::uint64_t kMevxColumns = 2; // pool, operation
    enum MevxOperation : std::uint8_t { kAsKind = 0, kEmptyCache = 1 };
    constexpr std::uint32_t kKernels = fourcc("KERN");
    constexpr std::uint32_t kAnnotations = fourcc("ANNO");
    constexpr std::uint32_t kSamples = fourcc("CSMP");
    constexpr std::uint32_t kStats = fourcc("STAT");
    constexpr std::uint32_t kMetaPatch = fourcc("META");
    constexpr std::uint32_t kEnd = fourcc("END ");
    constexpr std::size_t kChunkHeaderSize = 16;
    constexpr std::size_t kFileHeaderFixed = sizeof kGmtMagic + 2 + 2 + 4; // magic, major, minor, metadata length

    // Column encodings (docs/trace-format.md §5).
    enum ColumnEncoding : std::uint8_t { kConst = 0, kRaw = 1, kDelta = 2, kLinear = 3, kDiffSize = 4 };

    // CRC-32 (ISO-HDLC, zlib's crc32), continued from `c` (0 to start).
    std::uint32_t crcUpdate(std::uint32_t c, std::string_view bytes)
    {
#ifdef GPUMEM_HAVE_LIBDEFLATE
        return libdeflate_crc32(c, bytes.data(), bytes.size());
#else
        uLong z = c;
        const char* p = bytes.data();
        std::size_t n = bytes.size();
        while (n > 0) {
            auto step = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
            z = crc32(z, reinterpret_cast<const Bytef*>(p), step);
            p += step;
            n -= step;
        }
        return static_cast<std::uint32_t>(z);
#endif
    }
    // A chunk's checksum covers its type, length and record count (the first 12 header bytes) and its payload.
    std::uint32_t chunkCrc(const char* header12, std::string_view payload)
    {
        return crcUpdate(crcUpdate(0, std::string_view(header12, 12)), payload);
    }

    template <typename T> std::uint64_t bits(T v) { return static_cast<std::uint64_t>(v); }

    // Values the encoder looks at to choose between kRaw, kDelta and kDiffSize (kConst and kLinear
    // are exact): computing every value's length in each encoding doubled the write time.
    constexpr std::size_t kEncodingSample = 4096;
    // Worst-case bytes of one encoded column of n values: encoding byte, length varint (reserved as
    // kLengthSlot bytes), n 10-byte varints, and the 8 bytes writeVarintShort may store past the end.
    constexpr std::size_t kLengthSlot = 5; // a column is < 2^35 bytes (≤ 2^20 values of ≤ 10 bytes)
    constexpr std::size_t columnBound(std::size_t n) { return 1 + kLengthSlot + n * detail::kMaxVarintLength + 8; }

    // Writes one column of the n ≥ 1 values v[0..n) (as uint64 bit patterns) at `out`, which has
    // columnBound(n) bytes; returns the byte after it. `sizes` (the size column of the same events)
    // enables kDiffSize.
    template <typename T> char* encodeColumn(char* out, const T* v, std::size_t n, const Bytes* sizes = nullptr)
    {
        const std::uint64_t first = bits(v[0]);
        const std::uint64_t step = n >= 2 ? bits(v[1]) - first : 0;
        std::size_t same = 1; // the prefix that follows first + i·step
        while (same < n && bits(v[same]) - bits(v[same - 1]) == step)
            ++same;
        std::uint8_t enc;
        if (same == n) {
            enc = step == 0 ? kConst : kLinear;
        } else {
            std::size_t rawLen = 0, deltaLen = 0, diffLen = 0;
            std::uint64_t prev = 0;
            for (std::size_t i = 0; i < std::min(n, kEncodingSample); ++i) {
                const std::uint64_t x = bits(v[i]);
                rawLen += varintLength(x);
                deltaLen += varintLength(zigzag(static_cast<std::int64_t>(x - prev)));
                if (sizes)
                    diffLen += varintLength(zigzag(static_cast<std::int64_t>(x - sizes[i])));
                prev = x;
            }
            enc = sizes && diffLen < rawLen && diffLen < deltaLen ? kDiffSize : rawLen <= deltaLen ? kRaw : kDelta;
        }
        out[0] = static_cast<char>(enc);
        char* const data = out + 1 + kLengthSlot;
        char* p = data;
        auto put = [&p](std::uint64_t x) { p = x < (std::uint64_t(1) << 56) ? detail::writeVarintShort(p, x) : writeVarint(p, x); };
        switch (enc) {
        case kConst:
            p = writeVarint(p, first);
            break;
        case kLinear:
            p = writeVarint(writeVarint(p, first), zigzag(static_cast<std::int64_t>(step)));
            break;
        case kDiffSize:
            for (std::size_t i = 0; i < n; ++i)
                put(zigzag(static_cast<std::int64_t>(bits(v[i]) - sizes[i])));
            break;
        case kRaw: {
            std::uint64_t max = 0;
            for (std::size_t i = 0; i < n; ++i)
                max = std::max(max, bits(v[i]));
            if (max < 0x80) { // one byte each: a loop the compiler vectorises
                for (std::size_t i = 0; i < n; ++i)
                    p[i] = static_cast<char>(bits(v[i]));
                p += n;
                break;
            }
            for (std::size_t i = 0; i < n; ++i)
                put(bits(v[i]));
            break;
        }
        default: {
            std::uint64_t prev = 0;
            for (std::size_t i = 0; i < n; ++i) {
                put(zigzag(static_cast<std::int64_t>(bits(v[i]) - prev)));
                prev = bits(v[i]);
            }
            break;
        }
        }
        // The length goes before the data: write it, then close the gap left in the reserved slot.
        const auto len = static_cast<std::size_t>(p - data);
        char* afterLength = writeVarint(out + 1, len);
        if (afterLength != data)
            std::memmove(afterLength, data, len);
        return afterLength + len;
    }

    // The n varints of a column in blocks (detail::readVarintBlocks): with AVX-512 where the CPU has it, else
    // with pext where the CPU runs it fast.
    template <typename G> void readVarintColumn(const unsigned char*& p, const unsigned char* end, std::size_t n, bool& bad, G&& g)
    {
#ifdef GPUMEM_HAVE_AVX512_VARINTS
        if (detail::fastAvx512Varints()) {
            detail::readVarintBlocksAvx512(p, end, n, bad, g);
            return;
        }
#endif
#ifdef GPUMEM_HAVE_PEXT_VARINTS
        if (detail::fastPext()) {
            detail::readVarintBlocksPext(p, end, n, bad, g);
            return;
        }
#endif
        detail::readVarintBlocks(p, end, n, bad, g);
    }

    // Decodes one column of n values and appends them to `column`. With Bounded, every value must be below
    // `limit` (checked on the 64-bit value, before narrowing to T). Returns false on malformed data (then
    // some values may have been appended: the caller drops the chunk). Values are constructed in place in
    // the capacity readGmt reserved for the whole file (announcedEvents), never zero-filled first: a
    // resize before the overwrite wrote every value twice (6 % of a read). With `inPlace`, the column holds
    // exactly n values already (a streamed chunk in reused columns: GmtSource) and they are overwritten, each
    // written once where appending copied every block of varints twice more (into a block, then into the
    // column: 4 % of `analyze --format json`, issue 22).
    //
    // `constFill` (inPlace only): the value every element of the column holds, if one does (a const column the
    // chunk before): a const column of that value again is not written (issue 22: the const columns of a
    // chunk — device, stream, scope, site, thread, category — rewritten chunk after chunk were a quarter of a
    // megabyte of stores per 10⁴ events). Updated to what the column holds after this call.
    template <bool Bounded, typename T>
    bool decodeColumn(Cursor& c, std::size_t n, std::vector<T>& column, std::uint64_t limit = 0, const Bytes* sizes = nullptr,
        bool inPlace = false, std::optional<std::uint64_t>* constFill = nullptr)
    {
        const std::uint8_t enc = c.byte();
        const std::uint64_t len = c.varint();
        std::string_view data = c.bytes(len);
        if (c.failed())
            return false;
        T* const direct = inPlace ? column.data() : nullptr;
        // What the column held throughout before (a plain pair: GCC 12 warns of a copied optional's value as
        // maybe uninitialised).
        const bool held = constFill && constFill->has_value();
        const std::uint64_t heldValue = held ? **constFill : 0;
        if (constFill)
            constFill->reset(); // until the column holds one value again
        if (!inPlace && column.capacity() - column.size() < n) // a file whose chunk headers announced fewer events
            column.reserve(std::max(column.size() + n, 2 * column.capacity()));
        // Room for n values at the end of the column: its own (inPlace), or n more values (filled, then overwritten).
        auto room = [&]() -> T* {
            if (direct)
                return direct;
            const std::size_t at = column.size();
            column.resize(at + n); // filled then overwritten: a loop the compiler vectorises (push_back reloaded the end)
            return column.data() + at;
        };
        const auto* p = reinterpret_cast<const unsigned char*>(data.data());
        const auto* end = p + data.size();
        bool bad = false;
        std::uint64_t max = 0;
        std::size_t written = 0; // inPlace: values written so far
        // A block of k ≤ kVarintBlock decoded values, each turned into the column's value by `value`: written in
        // place, or appended at once.
        auto appendBlock = [&](const std::uint64_t* v, std::size_t k, auto&& value) {
            T block[detail::kVarintBlock];
            T* const out = direct ? direct + written : block;
            for (std::size_t i = 0; i < k; ++i) {
                const std::uint64_t x = value(v[i]);
                if constexpr (Bounded)
                    max = std::max(max, x);
                out[i] = static_cast<T>(x);
            }
            if (direct)
                written += k;
            else
                column.insert(column.end(), block, block + k);
        };
        switch (enc) {
        case kConst:
            max = detail::readVarint(p, end, bad);
            if (direct) {
                if (!held || heldValue != max)
                    std::fill_n(direct, n, static_cast<T>(max));
                if (constFill && !bad)
                    *constFill = max;
            } else
                column.insert(column.end(), n, static_cast<T>(max));
            break;
        case kLinear: {
            std::uint64_t v = detail::readVarint(p, end, bad);
            const auto step = static_cast<std::uint64_t>(unzigzag(detail::readVarint(p, end, bad)));
            if constexpr (Bounded) { // the last value is not the largest where the step wraps
                std::uint64_t w = v;
                for (std::size_t i = 0; i < n; ++i, w += step)
                    max = std::max(max, w);
            }
            T* const out = room();
            for (std::size_t i = 0; i < n; ++i, v += step)
                out[i] = static_cast<T>(v);
            break;
        }
        case kRaw:
            if (len < n) // every value takes at least one byte
                return false;
            if (len == n) { // then every value is one byte (< 128) or the column is malformed
                unsigned seen = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    seen |= p[i];
                    if constexpr (Bounded)
                        max = std::max<std::uint64_t>(max, p[i]);
                }
                bad = seen >= 0x80;
                // Two loops the compiler vectorises, where push_back was one it could not.
                T* const out = room();
                for (std::size_t i = 0; i < n; ++i)
                    out[i] = static_cast<T>(p[i]);
                p = end;
                break;
            }
            readVarintColumn(p, end, n, bad, [&](const std::uint64_t* v, std::size_t k) { appendBlock(v, k, [](std::uint64_t x) { return x; }); });
            break;
        case kDelta: {
            if (len < n)
                return false;
            std::uint64_t v = 0;
            readVarintColumn(p, end, n, bad, [&](const std::uint64_t* x, std::size_t k) {
                appendBlock(x, k, [&](std::uint64_t d) { return v += static_cast<std::uint64_t>(unzigzag(d)); });
            });
            break;
        }
        case kDiffSize: {
            if (!sizes || len < n)
                return false;
            std::size_t i = 0;
            readVarintColumn(p, end, n, bad, [&](const std::uint64_t* x, std::size_t k) {
                appendBlock(x, k, [&](std::uint64_t d) { return sizes[i++] + static_cast<std::uint64_t>(unzigzag(d)); });
            });
            break;
        }
        default:
            return false;
        }
        return !bad && p == end && (!Bounded || n == 0 || max < limit);
    }

    // Whether decodeColumn<false>(c, n, column, 0, sizes) would accept the column (and leave c where it would),
    // without storing a value: opening a streamed .gmt (openGmtSource) checks the columns that its index
    // does not read this way, and decodes them in each pass. `hasSizes`: decodeColumn's sizes would be given.
    bool checkColumn(Cursor& c, std::size_t n, bool hasSizes = false)
    {
        const std::uint8_t enc = c.byte();
        const std::uint64_t len = c.varint();
        std::string_view data = c.bytes(len);
        if (c.failed())
            return false;
        const auto* p = reinterpret_cast<const unsigned char*>(data.data());
        const auto* end = p + data.size();
        bool bad = false;
        switch (enc) {
        case kConst:
            detail::readVarint(p, end, bad);
            return !bad && p == end;
        case kLinear:
            detail::readVarint(p, end, bad);
            detail::readVarint(p, end, bad);
            return !bad && p == end;
        case kRaw:
        case kDelta:
            return detail::varintsExactly(p, end, n);
        case kDiffSize:
            return hasSizes && detail::varintsExactly(p, end, n);
        default:
            return false;
        }
    }

    std::string jsonText(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

    template <typename Columns, typename F> void forEachColumn(Columns& m, F f)
    {
        f(m.time), f(m.kind), f(m.device), f(m.stream), f(m.address), f(m.size), f(m.requestedSize), f(m.scope), f(m.site),
            f(m.thread), f(m.sequence), f(m.category), f(m.pool);
    }
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
    putU32(header, crcUpdate(0, header));
    try {
        writeAll(header.data(), header.size());
    } catch (...) { // no destructor runs for a throwing constructor
        ::close(m_fd);
        throw;
    }
}

GmtWriter::~GmtWriter()
{
    if (m_fd >= 0) {
        try {
            finish();
        } catch (...) {
            if (m_fd >= 0)
                ::close(m_fd);
        }
    }
}

void GmtWriter::writeAll(const char* data, std::size_t size, const char* more, std::size_t moreSize)
{
    if (m_fd < 0)
        throw Error(m_path + ": write after finish()");
    // One writev for header and payload: a reader (or a crash) sees the chunk whole or cut, never interleaved.
    iovec iov[2] = { { const_cast<char*>(data), size }, { const_cast<char*>(more), moreSize } };
    int count = more ? 2 : 1;
    iovec* v = iov;
    while (count > 0) {
        ssize_t n = ::writev(m_fd, v, count);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw IoError(m_path + ": cannot write: " + std::strerror(errno));
        }
        m_bytesWritten += static_cast<std::size_t>(n);
        auto left = static_cast<std::size_t>(n);
        while (count > 0 && left >= v->iov_len) {
            left -= v->iov_len;
            ++v, --count;
        }
        if (count > 0) {
            v->iov_base = static_cast<char*>(v->iov_base) + left;
            v->iov_len -= left;
        }
    }
}

void GmtWriter::writeChunk(std::uint32_t type, std::uint32_t records, std::string_view payload)
{
    if (payload.size() > 0xffffffffu)
        throw Error(m_path + ": chunk larger than 4 GiB; write fewer records per chunk");
    std::string header;
    putU32(header, type);
    putU32(header, static_cast<std::uint32_t>(payload.size()));
    putU32(header, records);
    putU32(header, chunkCrc(header.data(), payload));
    writeAll(header.data(), header.size(), payload.data(), payload.size());
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

void GmtWriter::appendPools(std::span<const MemoryPool> pools)
{
    if (pools.empty())
        return;
    std::string p;
    for (const auto& pool : pools) {
        p.push_back(static_cast<char>(pool.kind));
        putVarint(p, zigzag(pool.idFirst));
        putVarint(p, zigzag(pool.idSecond));
        p.push_back(static_cast<char>(pool.useOnOom ? 1 : 0));
    }
    writeChunk(kPools, static_cast<std::uint32_t>(pools.size()), p);
}

void GmtWriter::appendMemoryEvents(const MemoryEventColumns& m, std::size_t begin, std::size_t end)
{
    std::vector<EventKind> storedKinds;
    std::vector<PoolId> pools;
    std::vector<std::uint8_t> operations;
    while (end > begin) {
        const std::size_t n = std::min<std::size_t>(end - begin, kGmtMaxEventsPerChunk);
        const std::size_t bound = 12 * columnBound(n);
        if (m_payloadCapacity < bound) { // uninitialised and reused: no zero-fill, no page faults after the first chunk
            m_payload = std::make_unique_for_overwrite<char[]>(bound);
            m_payloadCapacity = bound;
        }
        // The 1.1 columns: written only for a chunk that has a pool or an empty_cache.
        bool extended = false;
        for (std::size_t i = begin; i < begin + n && !extended; ++i)
            extended = m.kind[i] == EventKind::EmptyCache || (i < m.pool.size() && m.pool[i] != 0);
        const EventKind* kinds = m.kind.data() + begin;
        if (extended) {
            storedKinds.assign(kinds, kinds + n);
            pools.assign(n, 0);
            operations.assign(n, kAsKind);
            for (std::size_t i = 0; i < n; ++i) {
                if (begin + i < m.pool.size())
                    pools[i] = m.pool[begin + i];
                if (storedKinds[i] == EventKind::EmptyCache) {
                    storedKinds[i] = EventKind::Marker;
                    operations[i] = kEmptyCache;
                }
            }
            kinds = storedKinds.data();
        }
        char* p = m_payload.get();
        p = encodeColumn(p, m.time.data() + begin, n);
        p = encodeColumn(p, kinds, n);
        p = encodeColumn(p, m.device.data() + begin, n);
        p = encodeColumn(p, m.stream.data() + begin, n);
        p = encodeColumn(p, m.address.data() + begin, n);
        p = encodeColumn(p, m.size.data() + begin, n);
        p = encodeColumn(p, m.requestedSize.data() + begin, n, m.size.data() + begin);
        p = encodeColumn(p, m.scope.data() + begin, n);
        p = encodeColumn(p, m.site.data() + begin, n);
        p = encodeColumn(p, m.thread.data() + begin, n);
        p = encodeColumn(p, m.sequence.data() + begin, n);
        p = encodeColumn(p, m.category.data() + begin, n);
        writeChunk(kMemory, static_cast<std::uint32_t>(n), std::string_view(m_payload.get(), static_cast<std::size_t>(p - m_payload.get())));
        if (extended) {
            p = m_payload.get();
            *p++ = static_cast<char>(kMevxColumns);
            p = encodeColumn(p, pools.data(), n);
            p = encodeColumn(p, operations.data(), n);
            writeChunk(kMemoryExtension, static_cast<std::uint32_t>(n),
                std::string_view(m_payload.get(), static_cast<std::size_t>(p - m_payload.get())));
        }
        m_memoryEvents += n;
        begin += n;
    }
}

void GmtWriter::appendKernels(std::span<const Kernel> kernels)
{
    if (kernels.empty())
        return;
    std::string p;
    TimeNs prev = 0;
    for (const auto& k : kernels) {
        putVarint(p, zigzagDelta(k.start, prev));
        putVarint(p, zigzagDelta(k.end, k.start));
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
        putVarint(p, zigzagDelta(a.start, prev));
        putVarint(p, zigzagDelta(a.end, a.start));
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
        putVarint(p, zigzagDelta(s.time, prev));
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

void GmtWriter::appendMetadataPatch(const nlohmann::json& patch)
{
    if (!patch.is_object())
        throw Error("GmtWriter::appendMetadataPatch: the patch must be a JSON object");
    writeChunk(kMetaPatch, 1, jsonText(patch));
}

void GmtWriter::finish()
{
    if (m_fd < 0)
        return;
    if (!m_headerless) {
        std::string p;
        putVarint(p, m_memoryEvents);
        writeChunk(kEnd, 0, p);
    }
    int fd = m_fd;
    m_fd = -1;
    if (::close(fd) != 0)
        throw IoError(m_path + ": cannot close: " + std::strerror(errno));
}

void GmtWriter::appendTables(const Trace& trace)
{
    appendStrings(trace.strings(), 1, trace.strings().size() - 1);
    appendDevices(trace.devices());
    appendStreams(trace.streams());
    appendFrames(trace.frames().subspan(1));
    appendSites(trace, 1, trace.siteCount() - 1);
    appendScopes(trace.scopes().subspan(1));
    appendCounterSeries(trace.counterSeries());
    appendPools(trace.pools().subspan(1));
}

namespace {
    template <typename T, typename Append> void appendChunked(std::span<const T> records, std::size_t perChunk, Append append)
    {
        for (std::size_t i = 0; i < records.size(); i += perChunk)
            append(records.subspan(i, std::min(perChunk, records.size() - i)));
    }
} // namespace

void GmtWriter::appendRecordsAfterKernels(const Trace& trace, std::size_t perChunk)
{
    appendChunked(trace.annotations(), perChunk, [&](auto s) { appendAnnotations(s); });
    appendChunked(trace.counterSamples(), perChunk, [&](auto s) { appendCounterSamples(s); });
    appendStats(trace.importStats());
}

GmtWriter::GmtWriter(int fd, const std::string& name, Headerless)
    : m_fd(fd)
    , m_headerless(true)
    , m_path(name)
{
}

void GmtWriter::appendSpool(GmtChunkSpool& spool)
{
    GmtWriter& from = *spool.m_writer;
    if (from.m_fd < 0)
        throw Error(m_path + ": the spool was closed");
    if (m_fd < 0)
        throw Error(m_path + ": write after finish()");
    copyDescriptor(from.m_fd, from.m_bytesWritten, m_fd, from.m_path, m_path);
    m_bytesWritten += from.m_bytesWritten;
    m_memoryEvents += from.m_memoryEvents;
}

GmtChunkSpool::GmtChunkSpool(const std::string& folder)
{
    const std::string dir = folder.empty() ? std::string(".") : folder;
    int fd = -1;
#ifdef O_TMPFILE
    fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) { // a filesystem without O_TMPFILE: a fresh name, removed before anything is written
        std::string name = dir + "/.gpumem-spool-XXXXXX";
        fd = ::mkostemp(name.data(), O_CLOEXEC);
        if (fd >= 0)
            ::unlink(name.c_str());
    }
    if (fd < 0)
        throw IoError(dir + ": cannot create a temporary file for the chunks written before the tables: " + std::strerror(errno));
    m_writer.reset(new GmtWriter(fd, dir + " (spool)", GmtWriter::Headerless {}));
}

GmtChunkSpool::~GmtChunkSpool() = default; // the writer closes the file, which had no name: it is gone

void writeGmt(const Trace& trace, const std::string& path, std::size_t eventsPerChunk)
{
    GmtWriter w(path, trace.metadata());
    w.appendTables(trace);
    const auto& m = trace.memory();
    eventsPerChunk = std::clamp<std::size_t>(eventsPerChunk, 1, kGmtMaxEventsPerChunk);
    for (std::size_t i = 0; i < m.count(); i += eventsPerChunk)
        w.appendMemoryEvents(m, i, std::min(m.count(), i + eventsPerChunk));
    appendChunked(trace.kernels(), eventsPerChunk, [&](auto s) { w.appendKernels(s); });
    w.appendRecordsAfterKernels(trace, eventsPerChunk);
    w.finish();
}

// ---------------------------------------------------------------------------------------------- reader

namespace {
    // The sizes of the tables that a MEMV chunk's reference columns point into.
    struct MemvLimits {
        std::uint64_t devices = 0, streams = 0, scopes = 0, sites = 0;
    };

    // Appends the n events of a MEMV chunk's payload to `m`, pool 0 (a MEVX chunk after it may set
    // them). False on a malformed payload; `m` is then as before. With checkOnly (opening a streamed
    // file: the index reads time, kind and sequence only) the address, size, requested size and thread
    // columns are checked as decodeColumn would and left empty: the same payloads are accepted, at a
    // third of the cost (docs/streaming.md).
    // With inPlace, `m` holds one chunk's columns reused (GmtSource): each is resized to n and overwritten
    // (decodeColumn's inPlace), and a malformed payload leaves them empty. `held` (inPlace only): the value
    // each column of `m` holds throughout, where one does (decodeColumn's constFill), kept up to date; the
    // caller resets it where it changes the columns itself.
    struct HeldValues {
        std::array<std::optional<std::uint64_t>, 13> column; // in forEachColumn's order
        void reset() { column.fill(std::nullopt); }
    };
    bool decodeMemv(Cursor& c, std::uint32_t n, MemoryEventColumns& m, const MemvLimits& limits, bool checkOnly = false,
        bool inPlace = false, HeldValues* held = nullptr)
    {
        if (inPlace) { // the same size chunk after chunk: no fill but the first and the last
            if (held && m.count() < n) // the elements added are zeros
                held->reset();
            forEachColumn(m, [&](auto& v) { v.resize(n); });
        }
        const std::size_t before = inPlace ? 0 : m.count();
        auto heldOf = [&](std::size_t k) { return held ? &held->column[k] : nullptr; };
        // The requested sizes may be coded as differences from the sizes (kDiffSize); an empty chunk reads none,
        // so it needs no size column (whether one was allocated before must not decide what is accepted).
        static constexpr Bytes kNoSizes[1] = { 0 };
        auto wide = [&](std::vector<std::uint64_t>& column, std::size_t k, bool diffFromSize = false) {
            const Bytes* sizes = !diffFromSize ? nullptr : n == 0 ? kNoSizes : m.size.data() + before;
            return checkOnly ? checkColumn(c, n, diffFromSize) : decodeColumn<false>(c, n, column, 0, sizes, inPlace, heldOf(k));
        };
        // Reference columns must point at table rows read before this chunk.
        bool ok = (n == 0 || (limits.devices > 0 && limits.streams > 0))
            && decodeColumn<false>(c, n, m.time, 0, nullptr, inPlace, heldOf(0))
            && decodeColumn<true>(c, n, m.kind, kMemvKindLimit, nullptr, inPlace, heldOf(1))
            && decodeColumn<true>(c, n, m.device, limits.devices, nullptr, inPlace, heldOf(2))
            && decodeColumn<true>(c, n, m.stream, limits.streams, nullptr, inPlace, heldOf(3)) && wide(m.address, 4)
            && wide(m.size, 5) && wide(m.requestedSize, 6, true)
            && decodeColumn<true>(c, n, m.scope, limits.scopes, nullptr, inPlace, heldOf(7))
            && decodeColumn<true>(c, n, m.site, limits.sites, nullptr, inPlace, heldOf(8)) && wide(m.thread, 9)
            && decodeColumn<false>(c, n, m.sequence, 0, nullptr, inPlace, heldOf(10))
            && decodeColumn<true>(c, n, m.category, kCategoryCount, nullptr, inPlace, heldOf(11)) && c.atEnd();
        if (!ok) { // drop the partly decoded chunk so every column keeps the same length
            forEachColumn(m, [&](auto& v) { v.resize(before); });
            if (held)
                held->reset();
        } else if (inPlace) {
            if (!held || held->column[12] != 0)
                std::fill(m.pool.begin(), m.pool.end(), PoolId(0));
            if (held)
                held->column[12] = 0;
        } else
            m.pool.resize(m.count(), 0);
        return ok;
    }

    // Applies the MEVX payload of the n events m[begin, begin + n) that its MEVX chunk follows (§5.1):
    // pool, and the operation that turns a marker into an empty_cache. False (nothing changed) on a
    // malformed payload.
    bool decodeMevx(Cursor& c, std::uint32_t n, MemoryEventColumns& m, std::size_t begin, std::uint64_t poolCount)
    {
        const std::uint64_t columns = c.varint();
        if (c.failed() || columns < kMevxColumns)
            return false;
        std::vector<PoolId> pools;
        std::vector<std::uint8_t> operations;
        if (!decodeColumn<true>(c, n, pools, poolCount) || !decodeColumn<true>(c, n, operations, kEmptyCache + 1))
            return false;
        // Columns a later minor version appends are skipped: each is self-delimiting (§5).
        for (std::uint64_t k = kMevxColumns; k < columns; ++k) {
            c.byte();
            c.bytes(c.varint());
            if (c.failed())
                return false;
        }
        if (!c.atEnd())
            return false;
        for (std::uint32_t i = 0; i < n; ++i)
            if (operations[i] == kEmptyCache && m.kind[begin + i] != EventKind::Marker)
                return false;
        for (std::uint32_t i = 0; i < n; ++i) {
            m.pool[begin + i] = pools[i];
            if (operations[i] == kEmptyCache)
                m.kind[begin + i] = EventKind::EmptyCache;
        }
        return true;
    }

    // Appends the kernels of a KERN chunk's payload to `out`; false on a bad value or reference (the
    // caller drops what was appended). The caller checks that the payload ends there.
    bool decodeKernels(Cursor& c, std::uint32_t records, std::vector<Kernel>& out, std::uint64_t devices, std::uint64_t streams,
        std::uint64_t strings)
    {
        TimeNs prev = 0;
        for (std::uint32_t i = 0; i < records; ++i) {
            Kernel k;
            k.start = addDelta(prev, c.varint());
            k.end = addDelta(k.start, c.varint());
            std::uint64_t dev = c.varint(), stream = c.varint(), name = c.varint();
            k.correlation = c.varint();
            if (c.failed() || dev >= devices || stream >= streams || name >= strings)
                return false;
            k.device = static_cast<DeviceId>(dev);
            k.stream = static_cast<StreamId>(stream);
            k.name = static_cast<StringId>(name);
            out.push_back(k);
            prev = k.start;
        }
        return true;
    }

    // Decodes chunk payloads into a TraceBuilder. Every decode returns false on a malformed payload or
    // a reference to a table entry not read yet; the builder is then left as before the chunk.
    struct ChunkReader {
        TraceBuilder& b;
        // Streaming (openGmtSource): the builder's memory columns hold only the MEMV chunk just read.
        bool streaming = false;
        std::uint64_t events = 0; // memory events of the MEMV chunks read
        std::size_t strings = 1;
        std::size_t series = 0;
        bool afterMemv = false; // the chunk just decoded was MEMV, holding events [memvBegin, memvEnd)
        std::size_t memvBegin = 0, memvEnd = 0;

        bool str(std::uint64_t id) const { return id < strings; }
        // The table rows a MEMV chunk read now may refer to.
        MemvLimits limits() const { return MemvLimits { b.deviceCount(), b.streamCount(), b.scopeCount(), b.siteCount() }; }

        // Applies a chunk. Events of a malformed chunk are all dropped (memory events, kernels,
        // annotations, samples); table rows decoded before a malformed record may remain, unused,
        // since reading stops there.
        bool decode(std::uint32_t type, std::uint32_t records, std::string_view payload, nlohmann::json& metadata)
        {
            const std::size_t kernels = b.kernels().size(), annotations = b.annotations().size(), samples = b.counterSamples().size();
            const bool ok = decodeRecords(type, records, payload, metadata);
            afterMemv = ok && type == kMemory; // a MEVX chunk must follow its MEMV chunk directly (§5.1)
            if (ok)
                return true;
            b.kernels().resize(kernels);
            b.annotations().resize(annotations);
            b.counterSamples().resize(samples);
            return false;
        }

        bool decodeRecords(std::uint32_t type, std::uint32_t records, std::string_view payload, nlohmann::json& metadata)
        {
            // Every record of the other types takes at least one payload byte: a larger count is hostile.
            if (type == kMemory || type == kMemoryExtension ? records > kGmtMaxEventsPerChunk : records > payload.size())
                return false;
            Cursor c(payload);
            switch (type) {
            case kStrings:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::string_view s = c.bytes(c.varint());
                    if (c.failed())
                        return false;
                    if (b.intern(s) != strings)
                        return false; // empty or duplicate: the table's ids would shift
                    ++strings;
                }
                break;
            case kDevices:
                for (std::uint32_t i = 0; i < records; ++i) {
                    Device d;
                    std::uint8_t type8 = c.byte();
                    std::int64_t ordinal = unzigzag(c.varint());
                    std::uint64_t name = c.varint();
                    d.totalMemory = c.varint();
                    if (c.failed() || type8 > static_cast<std::uint8_t>(DeviceType::Other) || !str(name) || ordinal < INT32_MIN
                        || ordinal > INT32_MAX || b.deviceCount() >= kNoDevice)
                        return false;
                    d.type = static_cast<DeviceType>(type8);
                    d.ordinal = static_cast<std::int32_t>(ordinal);
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
                    if (c.failed() || n > c.remaining())
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
                    ++series;
                    b.addCounterSeries(CounterSeries { static_cast<StringId>(name), static_cast<DeviceId>(dev) });
                }
                break;
            case kMemory:
                return decodeMemory(c, records);
            case kMemoryExtension:
                return decodeMemoryExtension(c, records);
            case kPools:
                for (std::uint32_t i = 0; i < records; ++i) {
                    std::uint8_t kind = c.byte();
                    std::int64_t first = unzigzag(c.varint()), second = unzigzag(c.varint());
                    std::uint8_t flags = c.byte();
                    if (c.failed() || kind >= kPoolKindCount || kind == static_cast<std::uint8_t>(PoolKind::Default) || flags > 1)
                        return false;
                    b.appendPool(MemoryPool { static_cast<PoolKind>(kind), first, second, flags == 1 });
                }
                break;
            case kKernels:
                if (!decodeKernels(c, records, b.kernels(), b.deviceCount(), b.streamCount(), strings))
                    return false;
                break;
            case kAnnotations: {
                TimeNs prev = 0;
                for (std::uint32_t i = 0; i < records; ++i) {
                    Annotation a;
                    a.start = addDelta(prev, c.varint());
                    a.end = addDelta(a.start, c.varint());
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
                    s.time = addDelta(prev, c.varint());
                    std::uint64_t index = c.varint();
                    s.value = unzigzag(c.varint());
                    if (c.failed() || index >= series)
                        return false;
                    s.series = static_cast<std::uint32_t>(index);
                    b.add(s);
                    prev = s.time;
                }
                break;
            }
            case kStats:
                return decodeStats(records, payload);
            case kMetaPatch: {
                bool tooDeep = false;
                auto patch = detail::parseShallowJson(payload, tooDeep);
                if (!patch.is_object()) // a non-object patch would replace the metadata object itself
                    return false;
                metadata.merge_patch(patch);
                return true;
            }
            default:
                return true; // unknown chunk types are skipped (added by a newer minor version)
            }
            return !c.failed() && c.atEnd();
        }

        bool decodeStats(std::uint32_t records, std::string_view payload)
        {
            auto arr = nlohmann::json::parse(payload, nullptr, false);
            if (!arr.is_array() || arr.size() != records)
                return false;
            for (const auto& a : arr) {
                if (!a.is_object())
                    return false;
                auto code = a.find("code"), count = a.find("count"), severity = a.find("severity"), detail = a.find("detail");
                if (code == a.end() || !code->is_string() || count == a.end() || !count->is_number_unsigned()
                    || (severity != a.end() && !severity->is_string()) || (detail != a.end() && !detail->is_string()))
                    return false;
            }
            for (const auto& a : arr) {
                auto sev = severityFromString(a.value("severity", std::string("warning")));
                b.stats().add(a["code"].get<std::string>(), sev.value_or(Severity::Warning), a.value("detail", std::string()),
                    a["count"].get<std::uint64_t>());
            }
            return true;
        }

        // The 1.1 columns of the MEMV chunk just read (§5.1).
        bool decodeMemoryExtension(Cursor& c, std::uint32_t n)
        {
            return afterMemv && n == memvEnd - memvBegin && decodeMevx(c, n, b.memoryColumns(), memvBegin, b.poolCount());
        }

        bool decodeMemory(Cursor& c, std::uint32_t n)
        {
            auto& m = b.memoryColumns();
            if (streaming)
                m.clear();
            const std::size_t before = m.count();
            if (!decodeMemv(c, n, m, limits(), streaming))
                return false;
            memvBegin = before;
            memvEnd = m.count();
            events += n;
            return true;
        }
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

    // The bytes of a whole file in memory (readGmtBytes; readGmt maps the file).
    struct WholeBytes {
        std::string_view all;
        std::size_t size() const { return all.size(); }
        // [offset, offset + length), which the caller has checked lies in the file.
        std::string_view view(std::size_t offset, std::size_t length) const { return all.substr(offset, length); }
        std::string_view peek(std::size_t offset, std::size_t length) const { return view(offset, length); }
    };

    // Sums the events that the MEMV chunk headers announce (no checksums), so the columns are
    // allocated once. Bounded by the file size: a hostile header cannot make it reserve much.
    std::size_t announcedEvents(std::string_view bytes, std::size_t offset)
    {
        std::size_t total = 0;
        while (bytes.size() - offset >= kChunkHeaderSize) {
            const char* h = bytes.data() + offset;
            std::uint32_t length = detail::getU32(h + 4);
            if (length > bytes.size() - offset - kChunkHeaderSize)
                break;
            if (detail::getU32(h) == kMemory)
                total += std::min(detail::getU32(h + 8), kGmtMaxEventsPerChunk);
            offset += kChunkHeaderSize + length;
        }
        return std::min(total, bytes.size());
    }

    bool checksumOk(std::uint32_t stored, std::uint32_t computed)
    {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        // Fuzzing builds accept any checksum so that mutated inputs reach the decoders.
        (void)stored, (void)computed;
        return true;
#else
        return stored == computed;
#endif
    }

    // The whole chunk at `at` (header and payload) when its header and announced payload lie in the
    // file; empty otherwise. Bytes is WholeBytes or FileWindow; the view lasts until the next one.
    template <typename Bytes> std::string_view wholeChunk(const Bytes& bytes, std::size_t at)
    {
        if (bytes.size() - at < kChunkHeaderSize)
            return {};
        const std::uint32_t length = detail::getU32(bytes.view(at, kChunkHeaderSize).data() + 4);
        if (length > bytes.size() - at - kChunkHeaderSize)
            return {};
        return bytes.view(at, kChunkHeaderSize + length);
    }

    // Whether the chunk at `at` (which wholeChunk found whole in the file) has a valid checksum, computed
    // over pieces of at most 4 MiB: a damaged length must not cost a buffer of the size it claims, which a
    // FileWindow view of the whole chunk would allocate (up to 4 GiB) before the checksum could refuse it.
    template <typename Bytes> bool chunkIntact(const Bytes& bytes, std::size_t at)
    {
        char header[kChunkHeaderSize];
        std::memcpy(header, bytes.view(at, kChunkHeaderSize).data(), kChunkHeaderSize);
        const std::uint32_t length = detail::getU32(header + 4);
        std::uint32_t c = crcUpdate(0, std::string_view(header, 12));
        constexpr std::size_t kPiece = std::size_t(4) << 20;
        for (std::size_t done = 0; done < length;) {
            const std::size_t n = std::min<std::size_t>(kPiece, length - done);
            c = crcUpdate(c, bytes.view(at + kChunkHeaderSize + done, n));
            done += n;
        }
        return checksumOk(detail::getU32(header + 12), c);
    }

    // Whether the chunk at `at` lies whole in the file (its header and announced payload).
    template <typename Bytes> bool chunkInFile(const Bytes& bytes, std::size_t at)
    {
        if (bytes.size() - at < kChunkHeaderSize)
            return false;
        return detail::getU32(bytes.peek(at, kChunkHeaderSize).data() + 4) <= bytes.size() - at - kChunkHeaderSize;
    }

    // Where a file whose reading stopped at `stop` before any memory event was read shows that it holds
    // memory events: the chunk at `stop` is a MEMV chunk (its type is readable), or a whole chunk further on
    // with a valid checksum is a MEMV chunk or an END chunk counting events. The search looks at every
    // offset, not along the chunk lengths, since the damage at `stop` may be in a length; the checksums it
    // computes are bounded by the file size, so a file of many false "MEMV" headers stays linear. Empty
    // when none is found.
    // The first offset at or after `from` where a whole chunk with a valid checksum is a MEMV chunk of events
    // or an END chunk counting some, and what it is (in `what`); npos when none is found. Every offset is
    // looked at, not along the chunk lengths; the bytes checksummed come out of `budget` (the file's size for
    // one search, shared by the searches of one file), so that false "MEMV" headers keep every search linear.
    template <typename Bytes> std::size_t nextMemoryEvidence(const Bytes& bytes, std::size_t from, std::string& what, std::size_t& budget)
    {
        for (std::size_t at = from; bytes.size() - at >= kChunkHeaderSize; ++at) {
            const char* h = bytes.view(at, kChunkHeaderSize).data();
            const std::uint32_t type = detail::getU32(h);
            if (type != kMemory && type != kEnd)
                continue;
            const std::uint32_t length = detail::getU32(h + 4);
            if (length > bytes.size() - at - kChunkHeaderSize)
                continue;
            if (length > budget)
                break;
            budget -= length;
            h = bytes.view(at, kChunkHeaderSize + length).data();
            std::string_view payload(h + kChunkHeaderSize, length);
            if (!checksumOk(detail::getU32(h + 12), chunkCrc(h, payload)))
                continue;
            if (type == kMemory && detail::getU32(h + 8) > 0) {
                what = "a whole MEMV chunk of " + std::to_string(detail::getU32(h + 8)) + " events follows at offset " + std::to_string(at);
                return at;
            }
            if (type == kEnd) {
                Cursor c(payload);
                std::uint64_t expected = c.varint();
                if (!c.failed() && expected > 0) {
                    what = "its end chunk at offset " + std::to_string(at) + " counts " + std::to_string(expected) + " memory events";
                    return at;
                }
            }
        }
        return std::string::npos;
    }

    // Where a file whose reading stopped at `stop` before any memory event was read shows that it holds
    // memory events: the chunk at `stop` is a MEMV chunk (its type is readable), or a whole chunk further on
    // with a valid checksum is a MEMV chunk or an END chunk counting events (nextMemoryEvidence: the damage at
    // `stop` may be in a length, so a file of many false "MEMV" headers stays linear). Empty when none is found.
    template <typename Bytes> std::string memoryEvidence(const Bytes& bytes, std::size_t stop)
    {
        if (bytes.size() - stop >= 4 && detail::getU32(bytes.view(stop, 4).data()) == kMemory)
            return "the chunk at offset " + std::to_string(stop) + " is a MEMV chunk";
        std::string what;
        std::size_t budget = bytes.size();
        nextMemoryEvidence(bytes, stop, what, budget);
        return what;
    }

    // What a stop at `stop` left unread, from the end chunk when the file still ends with an intact one (a chunk
    // damaged in the middle; a cut file has none): "; the end chunk at offset E counts N memory events: M of
    // them, in the chunks from offset S to it, were not read", or "" when the end chunk is the stop itself,
    // absent, or counts no more than `read` (the memory events kept). An end chunk's payload is one varint.
    template <typename Bytes> std::string unreadAfter(const Bytes& bytes, std::size_t stop, std::uint64_t read)
    {
        for (std::size_t payload = 1; payload <= 10 && bytes.size() >= kChunkHeaderSize + payload; ++payload) {
            const std::size_t at = bytes.size() - kChunkHeaderSize - payload;
            if (at <= stop)
                break;
            const char* h = bytes.view(at, kChunkHeaderSize + payload).data();
            const std::string_view body(h + kChunkHeaderSize, payload);
            if (detail::getU32(h) != kEnd || detail::getU32(h + 4) != payload || !checksumOk(detail::getU32(h + 12), chunkCrc(h, body)))
                continue;
            Cursor c(body);
            const std::uint64_t total = c.varint();
            if (c.failed() || total <= read)
                return {};
            return "; the end chunk at offset " + std::to_string(at) + " counts " + std::to_string(total) + " memory events: "
                + std::to_string(total - read) + " of them, in the chunks from offset " + std::to_string(stop)
                + " to it, were not read";
        }
        return {};
    }

    // Where a chunk lies in the file: its header's offset, payload length and record count.
    struct ChunkRef {
        std::size_t offset = 0;
        std::uint32_t length = 0, records = 0;
        std::size_t payload() const { return offset + kChunkHeaderSize; }
    };
    // A MEMV chunk of a streamed file, with its MEVX chunk if one follows, holding events
    // [first, first + memv.records) of the trace.
    struct MemoryChunkRef {
        ChunkRef memv;
        std::optional<ChunkRef> mevx;
        std::uint64_t first = 0;
        // The table rows read before the MEMV chunk and before its MEVX chunk: what their references may
        // point at (ChunkReader::decodeMemory). The whole file's counts would accept a row defined after
        // the chunk, which readGmt refuses.
        MemvLimits limits;
        std::uint64_t pools = 0;
    };
    // TraceBuilder::build's test (sortMemory), event by event across chunks: (time, sequence) never goes back.
    struct EventOrder {
        TimeNs lastTime = 0;
        std::uint64_t lastSequence = 0;
        // Whether the events of a chunk holding events [first, first + m.count()) follow those seen before.
        bool follows(const MemoryEventColumns& m, std::uint64_t first)
        {
            const std::size_t n = m.count();
            if (n == 0)
                return true;
            const TimeNs* const time = m.time.data();
            const std::uint64_t* const sequence = m.sequence.data();
            const bool sorted = first == 0 || lastTime < time[0] || (lastTime == time[0] && lastSequence <= sequence[0]);
            lastTime = time[n - 1];
            lastSequence = sequence[n - 1];
            return sorted && inOrder(time, sequence, n);
        }

        // Whether the n events are in (time, sequence) order: each pair of neighbours compared on its own, without
        // a branch, so that the loop vectorises — with AVX2 where the CPU has it (64-bit compares are not in the
        // baseline SSE2), chosen once by the loader (issue 22: the loop that carried the last time and sequence
        // from event to event was 3 % of `analyze --format json`).
        [[gnu::target_clones("avx2", "default")]] static bool inOrder(const TimeNs* time, const std::uint64_t* sequence, std::size_t n)
        {
            std::uint64_t disorder = 0;
            for (std::size_t i = 1; i < n; ++i)
                disorder |= static_cast<std::uint64_t>(time[i - 1] > time[i])
                    | (static_cast<std::uint64_t>(time[i - 1] == time[i]) & static_cast<std::uint64_t>(sequence[i - 1] > sequence[i]));
            return disorder == 0;
        }
    };

    // What the opening pass of openGmtSource keeps of the chunks it does not hold.
    struct StreamIndex {
        std::vector<MemoryChunkRef> memory;
        std::vector<ChunkRef> kernels;
        std::uint64_t kernelCount = 0;
        // GmtChecks::InFirstPass: MEMV and MEVX chunks are indexed from their headers alone (no checksum, no
        // decode); GmtSource checks each in the first pass that reaches it.
        bool deferred = false;
        // Whether the events are in (time, sequence) order.
        bool sorted = true;
        EventOrder order;

        void addMemory(const ChunkRef& ref, const MemoryEventColumns& m, std::uint64_t first, const MemvLimits& limits)
        {
            memory.push_back(MemoryChunkRef { ref, std::nullopt, first, limits, 0 });
            if (sorted)
                sorted = order.follows(m, first);
        }
    };

    // Reads a .gmt file's header and chunks into `b` (readGmt's whole reading, docs/trace-format.md §8).
    // With an index (openGmtSource) MEMV, MEVX and KERN chunks are decoded to check them and are
    // indexed rather than kept: afterwards `b` holds no memory event and no kernel. Errors and
    // anomalies are the same either way.
    template <typename Bytes>
    void readChunks(const Bytes& bytes, const std::string& path, const LoadOptions& options, TraceBuilder& b, StreamIndex* index)
    {
        auto fail = [&](const std::string& message) { throw FormatError(path + ": " + message); };
        if (bytes.size() == 0)
            fail("empty file (0 bytes); a .gmt file starts with a header — was the writer killed before it started?");
        const std::size_t magicBytes = std::min(bytes.size(), sizeof kGmtMagic);
        if (std::memcmp(bytes.view(0, magicBytes).data(), kGmtMagic, magicBytes) != 0)
            fail("not a .gmt file (wrong magic bytes at offset 0); give a .gmt trace or a format that `gpumem help formats` lists");
        if (bytes.size() < kFileHeaderFixed)
            fail("the file ends at offset " + std::to_string(bytes.size()) + " inside the " + std::to_string(kFileHeaderFixed)
                + "-byte fixed header: the file is truncated");
        const char* fixed = bytes.view(0, kFileHeaderFixed).data();
        const std::uint16_t major = detail::getU16(fixed + 8);
        const std::uint16_t minor = detail::getU16(fixed + 10);
        if (major > kGmtMajorVersion)
            fail("written in .gmt format " + std::to_string(major) + "." + std::to_string(minor) + " by a newer gpumem; this gpumem reads format "
                + std::to_string(kGmtMajorVersion) + ".x — upgrade gpumem to read it");
        if (major == 0)
            fail(".gmt format version 0 at offset 8 is invalid; the file is damaged");
        const std::uint32_t metaLen = detail::getU32(fixed + 12);
        if (metaLen > bytes.size() - kFileHeaderFixed || bytes.size() - kFileHeaderFixed - metaLen < 4)
            fail("the header's metadata (" + std::to_string(metaLen) + " bytes at offset 16) and checksum run past the end of the file ("
                + std::to_string(bytes.size()) + " bytes): the file is truncated or damaged");
        const std::size_t headerEnd = kFileHeaderFixed + metaLen;
        const std::string_view header = bytes.view(0, headerEnd + 4);
        if (!checksumOk(detail::getU32(header.data() + headerEnd), crcUpdate(0, header.substr(0, headerEnd))))
            fail("header checksum mismatch at offset " + std::to_string(headerEnd) + "; the file is damaged");
        bool tooDeep = false;
        auto meta = detail::parseShallowJson(header.substr(kFileHeaderFixed, metaLen), tooDeep);
        if (tooDeep)
            fail("the header metadata at offset 16 nests deeper than " + std::to_string(detail::kMaxMetadataDepth) + " levels; the file is damaged");
        if (!meta.is_object())
            fail("the header metadata at offset 16 is not a JSON object; the file is damaged");
        b.metadata() = std::move(meta);

        ChunkReader reader { b };
        reader.streaming = index != nullptr;
        std::size_t offset = headerEnd + 4;
        if constexpr (std::is_same_v<Bytes, WholeBytes>) {
            // Not advised as transparent huge pages: that read 10 M events in 1.0–1.9 s in a fresh process on the
            // development VM, against 0.47 s with the kernel's default (each 2 MiB fault is slow there to first
            // touch; only a process that reused its freed memory, as gmt_bench's best-of-N did, gained).
            b.memoryColumns().reserve(announcedEvents(bytes.all, offset));
        }
        bool ended = false;
        std::uint64_t chunks = 0;
        // A cut or damage after some chunks keeps what was read (counted as an error anomaly); when not
        // one chunk could be read there is nothing to keep, and that is a FormatError. So is a stop before
        // the first memory event of a file that shows it holds some: device and table chunks alone would
        // read as an empty trace (and `gpumem convert` would exit 0) where the events were lost.
        auto stop = [&](std::string_view code, const std::string& detail, std::size_t at) {
            if (chunks == 0)
                fail(detail + "; not one chunk could be read (the file is damaged or was cut before its first chunk)");
            if (reader.events == 0)
                if (std::string evidence = memoryEvidence(bytes, at); !evidence.empty())
                    fail(detail + "; not one memory event could be read, yet the file holds some (" + evidence
                        + "): it is damaged or was cut in or before its first MEMV chunk");
            b.stats().add(code, Severity::Error,
                path + ": " + detail + "; read " + std::to_string(chunks) + " whole chunks (" + std::to_string(reader.events)
                    + " memory events) before it" + unreadAfter(bytes, at, reader.events));
        };
        // Progress at most ~1000 times (the callback may post to a GUI thread), then 1.0 at the end.
        const std::size_t progressStep = std::max<std::size_t>(bytes.size() / 1000, 1);
        std::size_t nextProgress = 0;
        while (offset < bytes.size()) {
            if (options.progress && offset >= nextProgress) {
                if (!options.progress(double(offset) / double(bytes.size())))
                    throw Cancelled();
                nextProgress = offset + progressStep;
            }
            if (bytes.size() - offset < kChunkHeaderSize) {
                stop("truncated", "the file ends at offset " + std::to_string(bytes.size()) + " inside the header of a chunk at offset " + std::to_string(offset), offset);
                break;
            }
            if (!chunkInFile(bytes, offset)) {
                const char* h = bytes.view(offset, kChunkHeaderSize).data();
                stop("truncated", "the file ends at offset " + std::to_string(bytes.size()) + " inside chunk " + chunkName(detail::getU32(h)) + " at offset "
                        + std::to_string(offset) + " (" + std::to_string(detail::getU32(h + 4)) + " payload bytes announced)",
                    offset);
                break;
            }
            if (index && index->deferred) {
                // Deferred checks: a MEMV (and its MEVX) chunk is indexed from its header; the first pass over it
                // checks its checksum and payload and the event order (GmtSource::check). What would need a
                // decision here (a MEVX chunk not right after its MEMV chunk, a count over the limit) is left
                // to the checked opening.
                const char* h = bytes.peek(offset, kChunkHeaderSize).data();
                const std::uint32_t type = detail::getU32(h), length = detail::getU32(h + 4), records = detail::getU32(h + 8);
                if (type == kMemory || type == kMemoryExtension) {
                    if (records > kGmtMaxEventsPerChunk
                        || (type == kMemoryExtension
                            && (!reader.afterMemv || index->memory.empty() || index->memory.back().memv.records != records)))
                        throw DeferredCheckFailed();
                    const ChunkRef ref { offset, length, records };
                    if (type == kMemory) {
                        index->memory.push_back(MemoryChunkRef { ref, std::nullopt, reader.events, reader.limits(), 0 });
                        reader.events += records;
                    } else {
                        index->memory.back().mevx = ref;
                        index->memory.back().pools = b.poolCount();
                    }
                    reader.afterMemv = type == kMemory;
                    ++chunks;
                    offset += kChunkHeaderSize + length;
                    continue;
                }
            }
            if (!chunkIntact(bytes, offset)) {
                const std::uint32_t type = detail::getU32(bytes.view(offset, kChunkHeaderSize).data());
                stop("corrupt_chunk", "checksum mismatch in chunk " + chunkName(type) + " at offset " + std::to_string(offset) + ": the rest of the file is ignored", offset);
                break;
            }
            const std::string_view chunk = wholeChunk(bytes, offset);
            const char* h = chunk.data();
            const std::uint32_t type = detail::getU32(h), length = detail::getU32(h + 4), records = detail::getU32(h + 8);
            std::string_view payload = chunk.substr(kChunkHeaderSize);
            if (type == kEnd) {
                Cursor c(payload);
                std::uint64_t expected = c.varint();
                if (c.failed() || expected != reader.events)
                    stop("corrupt_chunk", "the end chunk at offset " + std::to_string(offset) + " counts " + (c.failed() ? "an unreadable number of" : std::to_string(expected))
                            + " memory events but the chunks before it hold " + std::to_string(reader.events) + " (a chunk was lost or skipped)",
                        offset);
                ended = true;
                offset += kChunkHeaderSize + length;
                break;
            }
            if (!reader.decode(type, records, payload, b.metadata())) {
                stop("corrupt_chunk", "malformed " + chunkName(type) + " chunk at offset " + std::to_string(offset)
                        + " (bad value, count or reference): the rest of the file is ignored",
                    offset);
                break;
            }
            if (index) {
                const ChunkRef ref { offset, length, records };
                if (type == kMemory)
                    index->addMemory(ref, b.memoryColumns(), reader.events - records, reader.limits());
                else if (type == kMemoryExtension) {
                    index->memory.back().mevx = ref; // decode() accepts a MEVX chunk only right after its MEMV chunk
                    index->memory.back().pools = b.poolCount();
                }
                else if (type == kKernels) {
                    index->kernels.push_back(ref);
                    index->kernelCount += b.kernels().size();
                    b.kernels().clear();
                }
            }
            ++chunks;
            offset += kChunkHeaderSize + length;
        }
        if (!ended && !b.stats().find("truncated") && !b.stats().find("corrupt_chunk"))
            stop("truncated", "no end chunk after offset " + std::to_string(offset) + ": the writer did not finish (killed or crashed?)", offset);
        if (ended && offset < bytes.size()) {
            // Whole chunks with valid checksums after the end chunk are data an early END hides (a damaged or
            // joined file; issue 21): said as an error naming them, not as a warning about stray bytes.
            // `cat a.gmt b.gmt` puts b's file header after a's end chunk: the chunks are counted past each file
            // header, and where what follows is no chunk (a byte between the files, a damaged header) from the
            // next whole chunk of memory events, so that a join is named as an error instead of a trailing_bytes
            // warning, which analyze does not print (review of issue 22).
            std::size_t whole = 0, events = 0, headers = 0, firstHeader = 0, firstChunk = std::string::npos;
            auto skipFileHeader = [&](std::size_t& at) {
                if (bytes.size() - at < sizeof kGmtMagic || std::memcmp(bytes.view(at, sizeof kGmtMagic).data(), kGmtMagic, sizeof kGmtMagic) != 0)
                    return false;
                if (headers++ == 0)
                    firstHeader = at;
                std::uint64_t metaLen2 = 0;
                if (bytes.size() - at >= kFileHeaderFixed)
                    metaLen2 = detail::getU32(bytes.view(at + 12, 4).data());
                // A header cut, or whose metadata length runs past the file: the search below goes on after its magic.
                at += bytes.size() - at >= kFileHeaderFixed && metaLen2 + 4 <= bytes.size() - at - kFileHeaderFixed
                    ? kFileHeaderFixed + metaLen2 + 4
                    : sizeof kGmtMagic;
                return true;
            };
            auto countFrom = [&](std::size_t at) {
                for (;;) {
                    if (chunkInFile(bytes, at) && chunkIntact(bytes, at)) {
                        const std::string_view c = wholeChunk(bytes, at);
                        if (firstChunk == std::string::npos)
                            firstChunk = at;
                        ++whole;
                        if (detail::getU32(c.data()) == kMemory)
                            events += detail::getU32(c.data() + 8);
                        at += c.size();
                    } else if (!skipFileHeader(at))
                        return at;
                }
            };
            std::size_t stoppedAt = countFrom(offset);
            bool searched = false;
            std::size_t budget = bytes.size();
            for (std::string what; stoppedAt < bytes.size();) {
                const std::size_t next = nextMemoryEvidence(bytes, stoppedAt, what, budget);
                if (next == std::string::npos)
                    break;
                searched = true;
                stoppedAt = countFrom(next);
            }
            const std::string unread = std::to_string(whole) + " whole chunks, " + std::to_string(events) + " memory events";
            if (headers == 1)
                b.stats().add("chunks_after_end", Severity::Error,
                    path + ": a second .gmt trace (its file header at offset " + std::to_string(firstHeader) + ", then "
                        + unread + ") follows the end chunk and was not read: the file joins two traces (cat a.gmt b.gmt?); "
                          "the trace holds only the first. Give each trace as its own file");
            else if (headers > 1)
                b.stats().add("chunks_after_end", Severity::Error,
                    path + ": " + std::to_string(headers) + " more .gmt traces (file headers from offset " + std::to_string(firstHeader)
                        + "; " + unread + " in all) follow the end chunk and were not read: the file joins "
                        + std::to_string(headers + 1) + " traces (cat a.gmt b.gmt …?); the trace holds only the first. Give each "
                          "trace as its own file");
            else if (whole > 0)
                b.stats().add("chunks_after_end", Severity::Error,
                    path + ": " + std::to_string(whole) + " whole chunks (" + std::to_string(events)
                        + " memory events) follow the end chunk that ends at offset " + std::to_string(offset) + " and were not read"
                        + (searched ? " (the first at offset " + std::to_string(firstChunk) + ", after bytes that are no chunk)" : "")
                        + ": an early end chunk (a damaged or concatenated file); the trace holds only the chunks before it");
            else
                b.stats().add("trailing_bytes", Severity::Warning, path + ": " + std::to_string(bytes.size() - offset) + " bytes after the end chunk were ignored");
        }
        if (index)
            b.memoryColumns().clear();
        if (options.progress && !options.progress(1.0))
            throw Cancelled();
    }
} // namespace

Trace readGmtBytes(std::string_view bytes, std::string_view name, const LoadOptions& options)
{
    TraceBuilder b;
    readChunks(WholeBytes { bytes }, std::string(name), options, b, nullptr);
    return b.build();
}

Trace readGmt(const std::string& path, const LoadOptions& options)
{
    MappedFile file(path);
    return readGmtBytes(file.bytes(), path, options);
}

// ---------------------------------------------------------------------------------------------- source

namespace {
    // A .gmt file streamed chunk by chunk (core/event_source.h).
    class GmtSource final : public MemoryEventSource {
    public:
        GmtSource(FileWindow file, Trace skeleton, StreamIndex index)
            : m_file(std::move(file))
            , m_skeleton(std::move(skeleton))
            , m_index(std::move(index))
            , m_limits { m_skeleton.devices().size(), m_skeleton.streams().size(), m_skeleton.scopes().size(), m_skeleton.siteCount() }
        {
            for (const auto& c : m_index.memory)
                m_events += c.memv.records;
        }
        const Trace& skeleton() const override { return m_skeleton; }
        std::uint64_t eventCount() const override { return m_events; }
        std::uint64_t kernelCount() const override { return m_index.kernelCount; }

        void forEachChunk(const std::function<void(const MemoryEventColumns&, std::uint64_t)>& visit) const override
        {
            for (std::size_t k = 0; k < m_index.memory.size(); ++k) {
                const auto& c = m_index.memory[k];
                if (c.memv.records > 0)
                    visit(decode(k), c.first);
                else if (k == m_checked)
                    decode(k); // an empty chunk is checked too, so the checked prefix goes on past it
            }
        }

        std::optional<std::pair<TimeNs, TimeNs>> firstAndLastTime() const override
        {
            const MemoryChunkRef *first = nullptr, *last = nullptr;
            for (const auto& c : m_index.memory)
                if (c.memv.records > 0) {
                    first = first ? first : &c;
                    last = &c;
                }
            if (!first)
                return std::nullopt;
            const TimeNs start = decode(static_cast<std::size_t>(first - m_index.memory.data())).time.front();
            return std::pair(start, decode(static_cast<std::size_t>(last - m_index.memory.data())).time.back());
        }

        void forEachKernelChunk(const std::function<void(std::span<const Kernel>)>& visit) const override
        {
            std::vector<Kernel> kernels;
            for (const auto& c : m_index.kernels) {
                kernels.clear();
                Cursor cursor(m_file.view(c.payload(), c.length));
                if (!decodeKernels(cursor, c.records, kernels, m_limits.devices, m_limits.streams, m_skeleton.strings().size())
                    || !cursor.atEnd())
                    throw changed(c);
                if (!kernels.empty())
                    visit(kernels);
            }
        }

    private:
        // The events of MEMV chunk k (and its MEVX chunk) in the reused columns. With deferred checks
        // (GmtChecks::InFirstPass), a chunk not checked yet has its checksums checked here, and chunk
        // m_checked — the first of those the passes have not reached in order — also the order of its events
        // after the chunk before it; a failure throws DeferredCheckFailed.
        const MemoryEventColumns& decode(std::size_t k) const
        {
            const MemoryChunkRef& c = m_index.memory[k];
            const bool check = m_index.deferred && k >= m_checked;
            // A chunk that does not decode: not checked yet, or rewritten since it was.
            auto failed = [&](const ChunkRef& chunk) {
                if (check)
                    throw DeferredCheckFailed();
                throw changed(chunk);
            };
            if (check && (!chunkIntact(m_file, c.memv.offset) || (c.mevx && !chunkIntact(m_file, c.mevx->offset))))
                throw DeferredCheckFailed();
            Cursor memv(m_file.view(c.memv.payload(), c.memv.length));
            if (!decodeMemv(memv, c.memv.records, m_columns, c.limits, false, true, &m_held))
                failed(c.memv);
            if (c.mevx) {
                m_held.reset(); // it sets pools and kinds
                Cursor mevx(m_file.view(c.mevx->payload(), c.mevx->length));
                if (!decodeMevx(mevx, c.mevx->records, m_columns, 0, c.pools))
                    failed(*c.mevx);
            }
            if (check && k == m_checked) {
                if (!m_order.follows(m_columns, c.first))
                    throw DeferredCheckFailed();
                ++m_checked;
            }
            return m_columns;
        }

        // The chunks were checked when the file was opened: one that no longer decodes was rewritten since. An
        // IoError, as FileWindow's for a file that shrank: the reading failed, not the format (a verdict that
        // drops what it cannot prove must not drop this silently: analyze::verdictFor).
        IoError changed(const ChunkRef& chunk) const
        {
            return IoError(m_file.path() + ": the chunk at offset " + std::to_string(chunk.offset)
                + " no longer decodes as it did when the file was opened: the file changed while it was read");
        }

        FileWindow m_file;
        Trace m_skeleton;
        StreamIndex m_index;
        MemvLimits m_limits;
        std::uint64_t m_events = 0;
        mutable MemoryEventColumns m_columns; // the chunk of the pass, reused
        mutable HeldValues m_held; // what its columns hold throughout, where one value (decodeMemv)
        // Deferred checks: chunks [0, m_checked) passed them in order, the last event seen being chunk m_checked - 1's.
        mutable std::size_t m_checked = 0;
        mutable EventOrder m_order;
    };
} // namespace

std::unique_ptr<MemoryEventSource> openGmtSource(const std::string& path, const LoadOptions& options, GmtChecks checks)
{
    FileWindow file(path);
    TraceBuilder b;
    StreamIndex index;
    index.deferred = checks == GmtChecks::InFirstPass;
    readChunks(file, path, options, b, &index);
    if (!index.sorted) // trace order needs the whole trace sorted: read it as readGmt does
        return memorySource(readGmt(path, options));
    std::uint64_t events = 0;
    for (const auto& c : index.memory)
        events += c.memv.records;
    if (events > std::numeric_limits<std::uint32_t>::max()) // TraceBuilder::build's limit, so both readers agree
        throw FormatError("trace has more than 4,294,967,295 memory events; split it");
    Trace skeleton = b.build();
    return std::make_unique<GmtSource>(std::move(file), std::move(skeleton), std::move(index));
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
