#pragma once
// LEB128 varints and zigzag coding for the .gmt chunk payloads (docs/trace-format.md §Encoding).
#include <cstdint>
#include <string>

namespace gpumem::detail {

inline void putVarint(std::string& out, std::uint64_t v)
{
    char buf[10];
    int n = 0;
    while (v >= 0x80) {
        buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out.append(buf, n);
}

inline int varintLength(std::uint64_t v) { return v == 0 ? 1 : (64 - __builtin_clzll(v) + 6) / 7; }

inline std::uint64_t zigzag(std::int64_t v) { return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63); }
inline std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }

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

// A bounds-checked cursor over a chunk payload. Every read past the end sets failed() and returns 0,
// so decoders check once per record or column instead of per byte.
class Cursor {
public:
    Cursor(const char* begin, const char* end)
        : m_p(reinterpret_cast<const unsigned char*>(begin))
        , m_end(reinterpret_cast<const unsigned char*>(end))
    {
    }
    std::uint64_t varint()
    {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_p == m_end) {
                m_failed = true;
                return 0;
            }
            unsigned char b = *m_p++;
            v |= std::uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80))
                return v;
        }
        m_failed = true;
        return 0;
    }
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
    const char* position() const { return reinterpret_cast<const char*>(m_p); }

private:
    const unsigned char* m_p;
    const unsigned char* m_end;
    bool m_failed = false;
};

} // namespace gpumem::detail
