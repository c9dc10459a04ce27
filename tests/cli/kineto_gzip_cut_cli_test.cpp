// `gpumem info` on a Kineto .json.gz cut short (docs/kineto-import.md, "Damaged files"): exit 0 with the
// "truncated" anomaly naming the compressed byte where the stream ends; `--strict` refuses the file
// (exit 1, one line), as for a plain cut .json.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;

namespace {
// The first `keep` bytes of a gzip file holding `text` in one stored deflate block (RFC 1951 §3.2.4:
// BFINAL=1, BTYPE=00, LEN, NLEN, the bytes): a cut needs no CRC-32, and no zlib in the test.
std::string cutStoredGzip(const std::string& text, std::size_t keep)
{
    std::string gz("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
    const auto len = static_cast<unsigned>(text.size());
    gz += '\x01';
    gz += static_cast<char>(len & 0xff);
    gz += static_cast<char>(len >> 8);
    gz += static_cast<char>(~len & 0xff);
    gz += static_cast<char>((~len >> 8) & 0xff);
    gz += text;
    return gz.substr(0, keep);
}
} // namespace

TEST(Cli, InfoKeepsTheEventsOfACutKinetoGzipAndStrictRefusesIt)
{
    const std::string json = slurp(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/kineto/gzip_cut_small.json");
    ASSERT_GT(json.size(), 1000u);
    ASSERT_LT(json.size(), 65535u); // one stored block
    const std::size_t keep = 15 + json.size() * 3 / 4;
    const auto path = scratchDir("gzipcut") / "cut.pt.trace.json.gz";
    std::ofstream(path, std::ios::binary) << cutStoredGzip(json, keep);

    const auto info = runCli("info '" + path.string() + "'");
    EXPECT_EQ(info.exitCode, 0) << info.err;
    EXPECT_NE(info.out.find("format          kineto"), std::string::npos) << info.out;
    // Wrapped at 100 columns (issue 16 item 5): the line breaks after "the JSON ends".
    EXPECT_NE(info.out.find("error truncated ×1: the gzip stream ends early at compressed byte " + std::to_string(keep)
                  + "; inflated,"),
        std::string::npos)
        << info.out;
    EXPECT_NE(info.out.find("at byte " + std::to_string(keep - 15) + ", inside traceEvents"),
        std::string::npos)
        << info.out;

    const auto strict = runCli("info --strict '" + path.string() + "'");
    EXPECT_EQ(strict.exitCode, 1);
    EXPECT_NE(strict.err.find("truncated (1×, error): the gzip stream ends early"), std::string::npos) << strict.err;
    EXPECT_NE(strict.err.find("rerun without --strict"), std::string::npos) << strict.err;
    EXPECT_EQ(strict.out, "");
}

// A .json.gz cut inside its 10-byte gzip header holds nothing: one line naming the file and the gzip
// header, not "matches no format".
TEST(Cli, InfoRefusesAGzipCutInsideItsHeader)
{
    const auto path = scratchDir("gzipcut") / "head.pt.trace.json.gz";
    std::ofstream(path, std::ios::binary) << cutStoredGzip("{\"traceEvents\": []}", 6);
    const auto r = runCli("info '" + path.string() + "'");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find(path.string() + ": the gzip stream ends early at compressed byte 6"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
}
