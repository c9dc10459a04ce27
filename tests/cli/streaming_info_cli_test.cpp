// `gpumem info` on a .gmt file reads it chunk by chunk (issue 22): its text and JSON are what the
// whole trace gives, byte for byte, on every hand-written trace of tests/data written as .gmt in
// chunks of 5 events; --strict sees the pairing anomalies too.
#include "analyze/summary_report.h"
#include "analyze/trace_summary.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;
using gpumem::test::runCli;
using gpumem::test::slurp;
using namespace gpumem;

namespace {

TEST(StreamingInfo, GmtInfoIsTheWholeTraceInfoOnEveryDataTrace)
{
    const fs::path dir = fs::temp_directory_path() / ("gpumem_streaming_info_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::size_t compared = 0;
    for (const auto& e : fs::directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / "tests/data")) {
        if (e.path().extension() != ".jsonl")
            continue;
        SCOPED_TRACE(e.path().string());
        const Trace trace = readJsonl(e.path().string());
        const std::string gmt = (dir / (e.path().stem().string() + ".gmt")).string();
        writeGmt(trace, gmt, 5);
        // What info printed before it streamed: the summary of the whole trace read back.
        const auto summary = analyze::summarize(readGmt(gmt));
        std::ostringstream text;
        analyze::writeSummaryText(summary, gmt, "gmt", text);
        const auto r = runCli("info " + gmt);
        EXPECT_EQ(r.exitCode, 0);
        EXPECT_EQ(r.err, "");
        EXPECT_EQ(r.out, text.str());
        nlohmann::json all = nlohmann::json::array({ analyze::summaryToJson(summary, gmt, "gmt") });
        const auto j = runCli("info --format json " + gmt);
        EXPECT_EQ(j.out, all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        ++compared;
    }
    EXPECT_GE(compared, 20u);
    fs::remove_all(dir);
}

TEST(StreamingInfo, StrictFailsOnAPairingAnomalyOfAGmtFile)
{
    // free_size_mismatch (a warning) exists only after pairing, which the streamed info does itself.
    const fs::path dir = fs::temp_directory_path() / ("gpumem_streaming_strict_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string jsonl = (dir / "mismatch.jsonl").string(), gmt = (dir / "mismatch.gmt").string();
    std::ofstream(jsonl) << R"({"format":"gpumem-jsonl","version":1,"metadata":{}})" "\n"
                         << R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" "\n"
                         << R"({"type":"stream","id":0,"device":0,"handle":0})" "\n"
                         << R"({"type":"mem","t":10,"kind":"alloc","addr":4096,"size":512})" "\n"
                         << R"({"type":"mem","t":20,"kind":"free","addr":4096,"size":256})" "\n";
    writeGmt(readJsonl(jsonl), gmt, 5);
    const auto loose = runCli("info " + gmt);
    EXPECT_EQ(loose.exitCode, 0) << loose.err;
    EXPECT_NE(loose.out.find("free_size_mismatch"), std::string::npos) << loose.out;
    const auto strict = runCli("info --strict " + gmt), strictJsonl = runCli("info --strict " + jsonl);
    EXPECT_EQ(strict.exitCode, 1);
    EXPECT_NE(strict.err.find("free_size_mismatch"), std::string::npos) << strict.err;
    EXPECT_EQ(strict.err, strictJsonl.err.substr(0, strictJsonl.err.find(jsonl)) + gmt
            + strictJsonl.err.substr(strictJsonl.err.find(jsonl) + jsonl.size()));
    fs::remove_all(dir);
}

} // namespace

// A damaged chunk length must not cost a buffer of the size it claims (review of issue 22): the
// streamed reader read the whole announced payload through its window before checking the checksum,
// so one length byte set to 2 GiB in a file that long (sparse here) took 2 GiB of memory, and under a
// memory limit the user saw only "out of memory". Now the checksum is computed piece by piece first.
TEST(StreamingInfo, ADamagedChunkLengthCostsNoBufferOfItsSize)
{
    const fs::path dir = fs::temp_directory_path() / ("gpumem_streaming_length_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string gmt = (dir / "length.gmt").string();
    writeGmt(readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/tiny_alloc_free.jsonl"), gmt, 5);
    std::string bytes = slurp(gmt);
    const std::uint32_t metaLen = std::uint8_t(bytes[12]) | std::uint8_t(bytes[13]) << 8 | std::uint8_t(bytes[14]) << 16
        | std::uint32_t(std::uint8_t(bytes[15])) << 24;
    const std::size_t firstChunk = 16 + metaLen + 4;
    const std::uint32_t claimed = 0x7ffffff0u;
    for (int i = 0; i < 4; ++i)
        bytes[firstChunk + 4 + i] = char(claimed >> (8 * i));
    std::ofstream(gmt, std::ios::binary | std::ios::trunc) << bytes;
    fs::resize_file(gmt, firstChunk + 16 + std::uintmax_t(claimed) + 1024); // holes: no disk
    const fs::path err = dir / "err.txt";
    // 1 GiB of address space: enough for gpumem, not for a 2 GiB buffer.
    const std::string cmd = "ulimit -v 1048576 && '" GPUMEM_CLI "' info '" + gmt + "' >/dev/null 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 0);
    const std::string message = slurp(err);
    EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
    EXPECT_NE(message.find("offset " + std::to_string(firstChunk)), std::string::npos) << message;
    EXPECT_EQ(message.find("out of memory"), std::string::npos) << message;
    fs::remove_all(dir);
}
