#pragma once
// Appending one Unicode code point to a UTF-8 string (RFC 3629), shared by the pickle reader (decoded
// protocol-0 text) and the tracer (NVTX wide strings). Header-only, stateless, thread-safe.
#include <cstdint>
#include <string>

namespace gpumem::detail {

// Appends `cp` (at most U+10FFFF; the caller replaces larger values) in 1–4 bytes. A surrogate
// (U+D800–U+DFFF) is encoded as its 3 bytes, which is not valid UTF-8: readers that need valid text
// sanitize it (sanitizeUtf8, importers/pickle_reader.h).
inline void appendUtf8(std::string& out, std::uint32_t cp)
{
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

} // namespace gpumem::detail
