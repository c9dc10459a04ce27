// Issue 21 through the CLI: gzip bombs end quickly with a message naming the limit (item 4), and an
// initial state that cannot be adopted names its file (item 5). Inputs are generated here.
#include "core/jsonl_format.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"
#include "tests/cli/cli_runner.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

using namespace gpumem;
using gpumem::test::runCli;
using gpumem::test::scratchDir;
namespace fs = std::filesystem;

namespace {
// About 913 KB that inflate to ~900 MiB: `head`, 900 gzip members of 1 MiB of blanks, `tail` (concatenated
// members are one valid gzip file, RFC 1952 §2.2). The blank member is compressed once.
std::string whitespaceBomb(const std::string& head, const std::string& tail)
{
    const std::string blanks = gpumem::test::gzipOf(std::string(std::size_t(1) << 20, ' '));
    std::string out = gpumem::test::gzipOf(head);
    out.reserve(out.size() + 900 * blanks.size() + 64);
    for (int i = 0; i < 900; ++i)
        out += blanks;
    return out + gpumem::test::gzipOf(tail);
}

void expectLimitMessage(const fs::path& path)
{
    const auto start = std::chrono::steady_clock::now();
    const auto r = runCli("info '" + path.string() + "'");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %zu bytes, ended in %.2f s\n", path.filename().c_str(), static_cast<std::size_t>(fs::file_size(path)), seconds);
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_NE(r.err.find(path.string() + ": decompresses to more than "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" MiB, gpumem's limit for a gzip input of " + std::to_string(fs::file_size(path)) + " bytes (200×"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("set GPUMEM_INFLATE_RATIO to a larger ratio"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("damaged"), std::string::npos) << r.err; // it used to blame the file
}
} // namespace

// Regression: a 913 KB .json.gz of whitespace reached 1.8 GB and said "the file is damaged"; a .jsonl.gz
// took over 20 s and 3.5 GB. Both stop at 200× their size (about 180 MiB) now, in well under 2 s.
TEST(HardeningCli, WhitespaceBombsStopAtTheInflateLimitWithAMessageNamingIt)
{
    const auto dir = scratchDir("bombs");
    const auto json = dir / "bomb.json.gz";
    std::ofstream(json, std::ios::binary) << whitespaceBomb("{\"traceEvents\": [", "]}");
    ASSERT_LT(fs::file_size(json), std::size_t(1) << 20);
    expectLimitMessage(json);
    const auto jsonl = dir / "bomb.jsonl.gz";
    std::ofstream(jsonl, std::ios::binary) << whitespaceBomb(
        "{\"format\":\"gpumem-jsonl\",\"version\":1,\"metadata\":{}}\n", "\n");
    expectLimitMessage(jsonl);
    // The ratio can be raised: then the machine's own limit (GPUMEM_MAX_INPUT_MIB) is the one named.
    ::setenv("GPUMEM_INFLATE_RATIO", "100000", 1);
    ::setenv("GPUMEM_MAX_INPUT_MIB", "64", 1);
    const auto raised = runCli("info '" + json.string() + "'");
    ::unsetenv("GPUMEM_INFLATE_RATIO");
    ::unsetenv("GPUMEM_MAX_INPUT_MIB");
    EXPECT_EQ(raised.exitCode, 1);
    EXPECT_NE(raised.err.find("decompresses to more than 64 MiB, the limit GPUMEM_MAX_INPUT_MIB sets; if the trace is "
                              "real, set it higher"),
        std::string::npos)
        << raised.err;
}

// Regression: "initial state: segment at address … overlaps another segment" named no file. Since issue 16
// the what-if verbs allocate a snapshot's rebuilt blocks as requests (start recorded) and never adopt the
// recorded segments, so they replay this trace; the replay that still adopts them (InitialStateMode::Adopt,
// what --fidelity uses on a snapshot) names the file.
TEST(HardeningCli, AnInitialStateThatCannotBeAdoptedNamesItsFile)
{
    const auto path = scratchDir("initial") / "overlap.jsonl";
    std::ofstream(path) << R"({"format":"gpumem-jsonl","version":1,"metadata":{"allocator_settings":{},"reconstruction":[{"device":0,"events_before_trace":2}]}}
{"type":"device","id":0,"kind":"cuda","ordinal":0,"name":"d","total_memory":0}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"mem","t":1,"kind":"segment_alloc","addr":2097152,"size":2097152}
{"type":"mem","t":2,"kind":"segment_alloc","addr":3145728,"size":2097152}
{"type":"mem","t":3,"kind":"alloc","addr":2097152,"size":512}
{"type":"mem","t":4,"kind":"free","addr":2097152,"size":512}
)";
    for (const std::string verb : { "replay --capacity 1GiB", "fit", "sweep --capacity 1GiB --policy pytorch" }) {
        const auto r = runCli(verb + " '" + path.string() + "'");
        EXPECT_EQ(r.exitCode, 0) << verb << ": " << r.err;
    }
    const Trace trace = readJsonl(path.string());
    replay::ReplayOptions options;
    options.initialState = replay::InitialStateMode::Adopt;
    options.source = path.string();
    try {
        replay::Replayer(options).run(trace, replay::parsePolicySpec("pytorch"));
        ADD_FAILURE() << "overlapping segments before the window were adopted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path.string() + ": initial state: segment at address 3145728 overlaps "
                                             "another segment"),
            std::string::npos)
            << e.what();
    }
}
