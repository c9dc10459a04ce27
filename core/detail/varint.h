#pragma once
// LEB128 varints and zigzag coding for the .gmt chunk payloads (docs/trace-format.md §3). A varint
// holds 7 bits per byte, least significant group first, high bit set on every byte but the last;
// at most 10 bytes, and a 10th byte may only be 0 or 1 (the 64th bit). Header-only: the codec's
// inner loops need these inlined.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace gpumem::detail {

inline constexpr int kMaxVarintLength = 10;
static_assert(std::endian::native == std::endian::little, "the varint fast paths load and store little-endian words");

// Bytes of the varint of v: a table on the bit width (faster than dividing by 7 in the encoder's loops).
inline constexpr std::uint8_t kVarintLengthByClz[64] = { 10, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6,
    6, 6, 6, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1 };
inline int varintLength(std::uint64_t v) { return kVarintLengthByClz[__builtin_clzll(v | 1)]; }

// Writes the varint of v < 2^56 as one unaligned 8-byte store (p needs 8 writable bytes) and returns
// the byte after it: spreads 7-bit groups into bytes, then sets the continuation bits. Branch-free,
// which matters because column values of mixed lengths defeat branch prediction.
inline char* writeVarintShort(char* p, std::uint64_t v)
{
    const int len = varintLength(v);
    std::uint64_t x = (v & 0x000000000FFFFFFFull) | ((v & 0x00FFFFFFF0000000ull) << 4);
    x = (x & 0x00003FFF00003FFFull) | ((x & 0x0FFFC0000FFFC000ull) << 2);
    x = (x & 0x007F007F007F007Full) | ((x & 0x3F803F803F803F80ull) << 1);
    x |= 0x8080808080808080ull & ((std::uint64_t(1) << (8 * (len - 1))) - 1);
    __builtin_memcpy(p, &x, 8); // little-endian targets only (x86-64, aarch64)
    return p + len;
}

// Writes v at p (which has room for kMaxVarintLength bytes); returns the byte after it.
inline char* writeVarint(char* p, std::uint64_t v)
{
    if (v < 0x80) {
        *p = static_cast<char>(v);
        return p + 1;
    }
    if (v < 0x4000) {
        p[0] = static_cast<char>(v | 0x80);
        p[1] = static_cast<char>(v >> 7);
        return p + 2;
    }
    while (v >= 0x80) {
        *p++ = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = static_cast<char>(v);
    return p;
}

inline void putVarint(std::string& out, std::uint64_t v)
{
    char buf[kMaxVarintLength];
    out.append(buf, static_cast<std::size_t>(writeVarint(buf, v) - buf));
}



inline std::uint64_t zigzag(std::int64_t v) { return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63); }
inline std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }
// Wrapping differences and sums of signed times (two's complement, no signed overflow).
inline std::uint64_t zigzagDelta(std::int64_t value, std::int64_t base)
{
    return zigzag(static_cast<std::int64_t>(static_cast<std::uint64_t>(value) - static_cast<std::uint64_t>(base)));
}
inline std::int64_t addDelta(std::int64_t base, std::uint64_t zigzagged)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(unzigzag(zigzagged)));
}

inline void putU32(std::string& out, std::uint32_t v)
{
    char b[4] = { char(v), char(v >> 8), char(v >> 16), char(v >> 24) };
    out.append(b, 4);
}
inline void putU16(std::string& out, std::uint16_t v)
{
    char b[2] = { char(v), char(v >> 8) };
    out.append(b, 2);
}
inline std::uint32_t getU32(const char* p)
{
    auto u = reinterpret_cast<const unsigned char*>(p);
    return std::uint32_t(u[0]) | std::uint32_t(u[1]) << 8 | std::uint32_t(u[2]) << 16 | std::uint32_t(u[3]) << 24;
}
inline std::uint16_t getU16(const char* p)
{
    auto u = reinterpret_cast<const unsigned char*>(p);
    return static_cast<std::uint16_t>(u[0] | u[1] << 8);
}

// Reads one varint at p (advancing it); on a cut or malformed varint sets `bad`, moves p to `end`
// and returns 0. The common case (10 bytes readable) is unrolled without bounds checks.
std::uint64_t readVarintSlow(const unsigned char*& p, const unsigned char* end, bool& bad);

[[gnu::always_inline]] inline std::uint64_t readVarint(const unsigned char*& p, const unsigned char* end, bool& bad)
{
    if (end - p < kMaxVarintLength) [[unlikely]]
        return readVarintSlow(p, end, bad);
    // One and two bytes by branches: predictable within a column, and a correctly predicted branch
    // lets the next load start before this one is decoded.
    if (p[0] < 0x80)
        return *p++;
    if (p[1] < 0x80) {
        std::uint64_t v = (p[0] & 0x7fu) | std::uint64_t(p[1]) << 7;
        p += 2;
        return v;
    }
    // Up to 8 bytes branch-free: find the first byte without the continuation bit, mask the bytes
    // after it, then gather the 7-bit groups (the inverse of writeVarintShort).
    std::uint64_t x;
    __builtin_memcpy(&x, p, 8);
    const std::uint64_t stops = ~x & 0x8080808080808080ull;
    if (stops != 0) [[likely]] {
        p += (__builtin_ctzll(stops) >> 3) + 1;
        x &= (stops ^ (stops - 1)) & 0x7F7F7F7F7F7F7F7Full;
        x = (x & 0x007F007F007F007Full) | ((x & 0x7F007F007F007F00ull) >> 1);
        x = (x & 0x00003FFF00003FFFull) | ((x & 0x3FFF00003FFF0000ull) >> 2);
        return (x & 0x000000000FFFFFFFull) | ((x & 0x0FFFFFFF00000000ull) >> 4);
    }
    return readVarintSlow(p, end, bad); // 9 or 10 bytes, or malformed
}

// Reads n varints at p (advancing it past them) and calls f(value) for each, as n calls of readVarint would:
// on a cut or malformed varint sets `bad` and moves p to `end`, calling f no more. While 72 bytes or more
// remain, 64 bytes at a time: the stop bytes (high bit clear) of the block as a 64-bit mask, then each
// varint that ends in the block is cut out of an 8-byte load at its start. Where readVarint's next read
// waits on the length of the one before, here only the mask's bits do, so the loads and the gathers of
// consecutive values overlap (a column of addresses or sizes reads about twice as fast). A varint of 9
// or 10 bytes ends the block reading; the rest goes one varint at a time.
template <typename F>
[[gnu::always_inline]] inline void readVarints(const unsigned char*& p, const unsigned char* end, std::size_t n, bool& bad, F&& f)
{
    std::size_t i = 0;
    while (i < n && end - p >= 72) {
        std::uint64_t stops = 0;
        for (int w = 0; w < 8; ++w) {
            std::uint64_t x;
            __builtin_memcpy(&x, p + 8 * w, 8);
            // bit 7 of each byte clear → one bit per stop byte, gathered into 8 bits by the multiply
            const std::uint64_t s8 = ((~x & 0x8080808080808080ull) >> 7) * 0x0102040810204080ull >> 56;
            stops |= s8 << (8 * w);
        }
        if (stops == 0)
            break; // a varint of over 64 bytes: malformed, said by the loop below
        std::size_t start = 0;
        while (stops != 0 && i < n) {
            const std::size_t last = static_cast<std::size_t>(__builtin_ctzll(stops));
            const std::size_t length = last - start + 1;
            if (length > 8) {
                p += start;
                goto rest; // 9 or 10 bytes, or malformed: readVarint's slow path decides
            }
            std::uint64_t x;
            __builtin_memcpy(&x, p + start, 8);
            x &= ~std::uint64_t(0) >> (64 - 8 * length);
            x &= 0x7F7F7F7F7F7F7F7Full;
            x = (x & 0x007F007F007F007Full) | ((x & 0x7F007F007F007F00ull) >> 1);
            x = (x & 0x00003FFF00003FFFull) | ((x & 0x3FFF00003FFF0000ull) >> 2);
            f((x & 0x000000000FFFFFFFull) | ((x & 0x0FFFFFFF00000000ull) >> 4));
            ++i;
            start = last + 1;
            stops &= stops - 1;
        }
        p += start;
    }
rest:
    for (; i < n; ++i) {
        const std::uint64_t v = readVarint(p, end, bad);
        if (bad)
            return;
        f(v);
    }
}

// readVarints in blocks: g(values, k) for each run of k ≤ kVarintBlock values, in order, so that the caller
// appends a block at a time (a push_back per value reloaded the vector's end pointer at every value).
inline constexpr std::size_t kVarintBlock = 64;
template <typename G> void readVarintBlocks(const unsigned char*& p, const unsigned char* end, std::size_t n, bool& bad, G&& g)
{
    std::uint64_t values[kVarintBlock];
    std::size_t k = 0;
    readVarints(p, end, n, bad, [&](std::uint64_t v) {
        values[k++] = v;
        if (k == kVarintBlock) {
            g(static_cast<const std::uint64_t*>(values), k);
            k = 0;
        }
    });
    if (k > 0)
        g(static_cast<const std::uint64_t*>(values), k);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GPUMEM_HAVE_PEXT_VARINTS 1
// readVarintBlocks with BMI2: the stop bytes of each 8-byte word gathered by one pext, and each varint of up
// to 8 bytes by one pext under a bzhi mask of its 7-bit groups, where readVarints spends a dozen shifts and
// masks; the values of each 64-byte block into a local array, handed over at once (issue 22: the decode was
// a quarter of `gpumem analyze`'s instructions). The same values, end position and verdict as readVarints
// (tests/core/varint_test.cpp runs both). Only where fastPext() says so: compiled for BMI2 in a binary
// that must run without it, so called (not inlined) behind that test.
template <typename G>
[[gnu::target("bmi2")]] void readVarintBlocksPext(const unsigned char*& p, const unsigned char* end, std::size_t n, bool& bad, G&& g)
{
    std::uint64_t values[kVarintBlock];
    std::size_t i = 0, k = 0;
    while (i < n && end - p >= 72) {
        std::uint64_t stops = 0;
        for (int w = 0; w < 8; ++w) {
            std::uint64_t x;
            __builtin_memcpy(&x, p + 8 * w, 8);
            stops |= __builtin_ia32_pext_di(~x, 0x8080808080808080ull) << (8 * w);
        }
        if (stops == 0)
            break;
        std::size_t start = 0;
        const std::size_t room = n - i; // values still wanted: at most 64 end in this block
        k = 0;
        while (stops != 0 && k < room) {
            const std::size_t last = static_cast<std::size_t>(__builtin_ctzll(stops));
            const std::size_t length = last - start + 1;
            if (length > 8)
                break; // 9 or 10 bytes, or malformed: the one-at-a-time loop decides
            std::uint64_t x;
            __builtin_memcpy(&x, p + start, 8);
            values[k++] = __builtin_ia32_pext_di(x, __builtin_ia32_bzhi_di(0x7F7F7F7F7F7F7F7Full, static_cast<unsigned>(8 * length)));
            start = last + 1;
            stops &= stops - 1;
        }
        p += start;
        i += k;
        if (k > 0)
            g(static_cast<const std::uint64_t*>(values), k);
        if (stops != 0 && i < n)
            break; // stopped at a long varint
    }
    if (i < n) // the last bytes, or a varint of 9 or 10 bytes: the portable reader from there
        readVarintBlocks(p, end, n - i, bad, g);
}

// Whether readVarintBlocksPext is the faster reader here: the CPU has BMI2 and runs pext in a cycle or so —
// Intel since Haswell, AMD since Zen 3 (family 19h); AMD's earlier BMI2 CPUs microcode it (tens to
// hundreds of cycles). GPUMEM_NO_PEXT=1 in the environment says no (tests and benchmarks of the portable
// reader). Decided once.
bool fastPext();

#define GPUMEM_HAVE_AVX512_VARINTS 1
// readVarintBlocks with AVX-512 (F, BW, VBMI, VBMI2): 64 bytes at once, eight varints a vector (issue 22: the
// varint decode was a quarter of `gpumem analyze --format json`, and readVarintBlocksPext spends about five
// cycles a value in a chain of tzcnt, load, bzhi and pext per varint). For each 64-byte block:
//   - the stop bytes (high bit clear) are one vpmovb2m; the block is taken whole when every varint that
//     ends in it is at most 8 bytes long (no run of 8 continuation bytes before its last stop) and no more
//     values end in it than are wanted; otherwise readVarint takes one value (a 9- or 10-byte varint, a
//     malformed one, the column's end: its verdict is the reference's) and the loop goes on after it;
//   - the start and end offset of each varint are vpcompressb of 0…63 under the stop mask and under the
//     mask of the bytes after a stop (and byte 0);
//   - for each eight varints, vpermb broadcasts the k-th start and length over the k-th 64-bit lane, a
//     masked vpermb gathers each varint's bytes into its lane (bytes past its length zero), and three
//     select-and-shift steps (vpternlogq) join the 7-bit groups: 2×7 → 14 bits in each 16-bit word,
//     2×14 → 28 in each 32-bit, 2×28 → 56 in the 64-bit lane — the value of a varint of up to 8 bytes.
// The same values, blocks of at most kVarintBlock, end position and verdict as readVarints
// (tests/core/varint_test.cpp runs every reader on the same inputs). Only where fastAvx512Varints() says
// so: compiled for those extensions in a binary that must run without them, so called behind that test.
template <typename G>
[[gnu::target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt,lzcnt")]] void readVarintBlocksAvx512(
    const unsigned char*& p, const unsigned char* end, std::size_t n, bool& bad, G&& g)
{
    alignas(64) std::uint64_t values[kVarintBlock];
    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43,
        42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
        12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    // Byte b of lane k: k (which varint of the eight the lane holds), and b (the byte within the varint).
    const __m512i laneIndex = _mm512_set_epi64(0x0707070707070707ll, 0x0606060606060606ll, 0x0505050505050505ll,
        0x0404040404040404ll, 0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    const __m512i byteIndex = _mm512_set1_epi64(0x0706050403020100ll);
    const __m512i eight = _mm512_set1_epi8(8), one = _mm512_set1_epi8(1), low7 = _mm512_set1_epi8(0x7f);
    const __m512i keep14 = _mm512_set1_epi16(0x007f), keep28 = _mm512_set1_epi32(0x3fff), keep56 = _mm512_set1_epi64(0x0fffffff);
    constexpr int kSelect = 0xca; // vpternlogq: A ? B : C, bit by bit
    // The zero-masked forms under an all-ones mask: GCC 12's unmasked ones start from _mm512_undefined_epi32()
    // and warn of it as maybe uninitialised (GCC bug 105593); the same instructions.
    constexpr __mmask64 kAll = ~__mmask64(0);
    std::size_t i = 0;
    while (i < n) {
        if (end - p < 64)
            break;
        const __m512i data = _mm512_loadu_si512(p);
        const std::uint64_t continuation = _mm512_movepi8_mask(data), stops = ~continuation;
        std::size_t count = 0;
        unsigned last = 0;
        if (stops != 0) {
            last = 63 - static_cast<unsigned>(__builtin_clzll(stops));
            // Bit j of run: bytes j … j + 7 are all continuation bytes before the last stop (a varint of 9+).
            std::uint64_t run = continuation & (last == 63 ? ~std::uint64_t(0) : (std::uint64_t(2) << last) - 1);
            run &= run >> 1;
            run &= run >> 2;
            run &= run >> 4;
            count = run == 0 ? static_cast<std::size_t>(__builtin_popcountll(stops)) : 0;
        }
        if (count == 0 || count > n - i) { // one value the exact way, then on
            const std::uint64_t v = readVarint(p, end, bad);
            if (bad)
                return;
            values[0] = v;
            ++i;
            g(static_cast<const std::uint64_t*>(values), std::size_t(1));
            continue;
        }
        const __m512i ends = _mm512_maskz_compress_epi8(stops, iota);
        const __m512i starts = _mm512_maskz_compress_epi8((stops << 1) | 1, iota);
        const __m512i lengths = _mm512_add_epi8(_mm512_sub_epi8(ends, starts), one);
        __m512i pick = laneIndex;
        for (std::size_t k = 0; k < count; k += 8) {
            const __m512i start = _mm512_maskz_permutexvar_epi8(kAll, pick, starts);
            const __m512i length = _mm512_maskz_permutexvar_epi8(kAll, pick, lengths);
            const __mmask64 inVarint = _mm512_cmplt_epu8_mask(byteIndex, length);
            __m512i x = _mm512_maskz_permutexvar_epi8(inVarint, _mm512_add_epi8(start, byteIndex), data);
            x = _mm512_and_si512(x, low7);
            x = _mm512_ternarylogic_epi64(keep14, x, _mm512_maskz_srli_epi16(__mmask32(0xffffffffu), x, 1), kSelect);
            x = _mm512_ternarylogic_epi64(keep28, x, _mm512_maskz_srli_epi32(__mmask16(0xffff), x, 2), kSelect);
            x = _mm512_ternarylogic_epi64(keep56, x, _mm512_maskz_srli_epi64(__mmask8(0xff), x, 4), kSelect);
            _mm512_store_si512(values + k, x);
            pick = _mm512_add_epi8(pick, eight);
        }
        p += last + 1;
        i += count;
        g(static_cast<const std::uint64_t*>(values), count);
    }
    if (i < n) // the last bytes of the input: the portable reader
        readVarintBlocks(p, end, n - i, bad, g);
}

// Whether readVarintBlocksAvx512 can run here and is the reader to use: the CPU has AVX-512 F, BW, VBMI and
// VBMI2 (Intel since Ice Lake, AMD since Zen 4), the operating system saves the vector state (what
// __builtin_cpu_supports checks), and neither GPUMEM_NO_PEXT=1 (the portable reader) nor
// GPUMEM_NO_AVX512=1 (readVarintBlocksPext, where fastPext()) is in the environment. Decided once.
bool fastAvx512Varints();
#endif

inline std::uint64_t readVarintSlow(const unsigned char*& p, const unsigned char* end, bool& bad)
{
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64 && p != end; shift += 7) {
        std::uint64_t b = *p++;
        if (shift == 63 && b > 1)
            break;
        v |= (b & 0x7f) << shift;
        if (b < 0x80)
            return v;
    }
    bad = true;
    p = end;
    return 0;
}

// Whether [p, end) is exactly n well-formed varints (what n calls of readVarint accept, ending at end),
// without decoding them: n stop bytes (high bit clear), the last byte one of them, and no run of 9
// continuation bytes or more (a 10-byte varint, legal only when its last byte is 0 or 1: such runs take
// the exact byte-wise loop). Eight bytes at a time; a run of 9 must cross a word boundary, so only the
// run carried into each word and the one it ends with need looking at.
inline bool varintsExactly(const unsigned char* p, const unsigned char* end, std::size_t n)
{
    const std::size_t len = static_cast<std::size_t>(end - p);
    if (len < n || (len > 0 && end[-1] >= 0x80) || (len == 0 && n > 0))
        return false;
    std::size_t stops = 0, run = 0; // run: continuation bytes just before the current word
    bool longRun = false;
    const unsigned char* q = p;
    for (; end - q >= 8; q += 8) {
        std::uint64_t x;
        __builtin_memcpy(&x, q, 8);
        const std::uint64_t s = ~x & 0x8080808080808080ull;
        stops += static_cast<std::size_t>(((s >> 7) * 0x0101010101010101ull) >> 56); // the stop bytes, one bit each: summed by the multiply
        if (s == 0) {
            run += 8;
        } else {
            longRun |= run + (static_cast<std::size_t>(__builtin_ctzll(s)) >> 3) >= 9;
            run = 7 - (static_cast<std::size_t>(63 - __builtin_clzll(s)) >> 3);
        }
    }
    for (; q != end; ++q) {
        if (*q < 0x80) {
            ++stops;
            longRun |= run >= 9;
            run = 0;
        } else
            ++run;
    }
    if (stops != n)
        return false;
    if (!longRun)
        return true;
    bool bad = false; // a 9-byte varint, a legal 10-byte one or a malformed one: read them as readVarint does
    for (std::size_t i = 0; i < n && !bad; ++i)
        detail::readVarint(p, end, bad);
    return !bad && p == end;
}

// A bounds-checked cursor over a chunk payload. Every read past the end (or a malformed varint)
// sets failed() and returns 0, so decoders check once per record or column instead of per byte.
class Cursor {
public:
    Cursor(const char* begin, const char* end)
        : m_p(reinterpret_cast<const unsigned char*>(begin))
        , m_end(reinterpret_cast<const unsigned char*>(end))
    {
    }
    explicit Cursor(std::string_view bytes)
        : Cursor(bytes.data(), bytes.data() + bytes.size())
    {
    }
    std::uint64_t varint() { return readVarint(m_p, m_end, m_failed); }
    std::uint8_t byte()
    {
        if (m_p == m_end) {
            m_failed = true;
            return 0;
        }
        return *m_p++;
    }
    std::string_view bytes(std::uint64_t n)
    {
        if (n > static_cast<std::uint64_t>(m_end - m_p)) {
            m_failed = true;
            m_p = m_end;
            return {};
        }
        std::string_view s(reinterpret_cast<const char*>(m_p), n);
        m_p += n;
        return s;
    }
    bool failed() const { return m_failed; }
    bool atEnd() const { return m_p == m_end; }
    std::size_t remaining() const { return static_cast<std::size_t>(m_end - m_p); }

private:
    const unsigned char* m_p;
    const unsigned char* m_end;
    bool m_failed = false;
};

} // namespace gpumem::detail
