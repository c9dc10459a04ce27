// Issue 21 item 4: gzip input is bounded by inflateLimit() (core/file_io.h): at most inflateRatio() ×
// the compressed bytes + 16 MiB, never more than maxDecompressedBytes(). Inputs are generated here.
#include "core/error.h"
#include "core/file_io.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>

using namespace gpumem;

TEST(InputLimit, IsTheRatioTimesTheCompressedSizeCappedByTheMachineLimit)
{
    EXPECT_EQ(inflateRatio(), kDefaultInflateRatio); // GPUMEM_INFLATE_RATIO is not set under CTest
    EXPECT_EQ(inflateLimit(1000), std::min<std::size_t>(200 * 1000 + (16u << 20), maxDecompressedBytes()));
    EXPECT_EQ(inflateLimit(std::size_t(-1)), maxDecompressedBytes()); // no overflow
}

// A single gzip member of 40 MiB of blanks compresses ~1000×: far past 200× + 16 MiB.
TEST(InputLimit, AWhitespaceBombStopsAtTheLimitNamingItAndHowToRaiseIt)
{
    const std::string gz = test::gzipOf(std::string(std::size_t(40) << 20, ' '));
    ASSERT_LT(gz.size(), std::size_t(100) << 10);
    try {
        (void)gunzip(gz, "bomb.json.gz");
        FAIL() << "a 40 MiB whitespace bomb of " << gz.size() << " bytes was inflated";
    } catch (const FormatError& e) {
        const std::string m = e.what();
        EXPECT_EQ(m,
            "bomb.json.gz: decompresses to more than " + std::to_string(inflateLimit(gz.size()) >> 20)
                + " MiB, gpumem's limit for a gzip input of " + std::to_string(gz.size())
                + " bytes (200× its compressed size + 16 MiB; real traces inflate 9–30×, a gzip bomb 1,000×); if the "
                  "trace is real, set GPUMEM_INFLATE_RATIO to a larger ratio (e.g. 800)");
    }
    // The importers' overload (a cut stream returns a prefix) refuses it the same way.
    GzipEnd end;
    EXPECT_THROW((void)gunzip(gz, "bomb.json.gz", end), FormatError);
    // Within the limit: 4 MiB of blanks (under the 16 MiB every file may reach) inflate.
    EXPECT_EQ(gunzip(test::gzipOf(std::string(std::size_t(4) << 20, ' ')), "ok.gz").size(), std::size_t(4) << 20);
}
