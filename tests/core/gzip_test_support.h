#pragma once
// Test helpers for gzip inputs, written with zlib independently of core/file_io.cpp: compress a text
// into one gzip member (10-byte header without a name, RFC 1952), and inflate what a cut gzip file
// holds. Header-only; no shared state.
#include <zlib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace gpumem::test {

// Size of the gzip header deflateInit2(windowBits 15 + 16) writes: magic, method, flags, mtime, xfl, os.
inline constexpr std::size_t kGzipHeaderBytes = 10;
// Size of the gzip trailer: CRC-32 and ISIZE.
inline constexpr std::size_t kGzipTrailerBytes = 8;

inline std::string gzipOf(const std::string& text)
{
    z_stream zs {};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&zs, text.size()) + 32, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

// Everything the first gzip member in `gz` inflates to before its bytes run out or turn bad (one
// inflate() call per 64 KiB of output).
inline std::string inflatedPrefix(std::string_view gz)
{
    z_stream zs {};
    inflateInit2(&zs, 15 + 16);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    zs.avail_in = static_cast<uInt>(gz.size());
    std::string out;
    for (;;) {
        char buf[1 << 16];
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        const int rc = inflate(&zs, Z_SYNC_FLUSH);
        out.append(buf, sizeof buf - zs.avail_out);
        if (rc != Z_OK)
            break;
    }
    inflateEnd(&zs);
    return out;
}

} // namespace gpumem::test
