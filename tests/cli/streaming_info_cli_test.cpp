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
