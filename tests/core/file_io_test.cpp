#include "core/error.h"
#include "core/file_io.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace gpumem;

namespace {
std::string gzipOf(const std::string& text)
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
} // namespace

// Regression: a forged gzip trailer (ISIZE = 0xfffffff0) made the fast path allocate 4 GiB for a
// 38-byte file before finding the data corrupt.
TEST(Gunzip, DoesNotTrustAForgedSizeInTheTrailer)
{
    std::string gz = gzipOf("{\"traceEvents\":[]}");
    gz.replace(gz.size() - 4, 4, "\xf0\xff\xff\xff", 4);
    EXPECT_THROW(gunzip(gz, "forged.json.gz"), FormatError);
}

TEST(Gunzip, RoundTripsAndReportsACutStream)
{
    std::string text(100000, 'x');
    std::string gz = gzipOf(text);
    EXPECT_EQ(gunzip(gz, "ok.gz"), text);
    try {
        gunzip(gz.substr(0, gz.size() / 2), "cut.gz");
        FAIL() << "expected FormatError";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("cut.gz"), std::string::npos);
    }
}

TEST(Gunzip, HasAPositiveDecompressionLimit)
{
    EXPECT_GE(maxDecompressedBytes(), std::size_t(1) << 30);
}
