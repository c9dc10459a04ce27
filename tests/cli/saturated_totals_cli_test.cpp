// Byte totals past 2^64 − 1 saturate and say so in every output of info, analyze and diff
// (core/byte_total.h). tests/data/live_bytes_past_2pow64.jsonl: three blocks of 9223372036854775000 B
// (their sum is 27670116110564325000 B, which wrapped to 9223372036854773384 in uint64: "8.00 EiB")
// and one of 1 KiB, none freed. The golden info output is tests/cli/golden/tests_data_live_bytes_past_2pow64.jsonl.info.txt.
#include "tests/cli/cli_runner.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using gpumem::test::runCli;

namespace {
constexpr const char* kTrace = "tests/data/live_bytes_past_2pow64.jsonl";
}

TEST(SaturatedTotals, InfoJsonClampsAndFlagsTheLiveBytes)
{
    const auto r = runCli(std::string("info --format json ") + kTrace);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto d = nlohmann::json::parse(r.out).at(0).at("devices").at(0);
    EXPECT_EQ(d.at("live_at_end").at("bytes").get<std::uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(d.at("peak_allocated").at("bytes").get<std::uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(d.at("peak_allocated").at("time_ns").get<std::int64_t>(), 3); // the third block saturates it
    EXPECT_TRUE(d.at("bytes_saturated").get<bool>());
}

TEST(SaturatedTotals, AnalyzeShowsNoWrappedTotalAndNoFreesThatDidNotHappen)
{
    const auto r = runCli(std::string("analyze --by size ") + kTrace);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // Formerly "Tot Freed" showed a nonzero figure although the trace frees nothing.
    EXPECT_NE(r.out.find("| Allocated memory      |   ≥ 16 EiB |   ≥ 16 EiB |   ≥ 16 EiB |      0 B   |\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| Requested memory      |   ≥ 16 EiB |   ≥ 16 EiB |   ≥ 16 EiB |      0 B   |\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| ≥ 16 EiB: saturated, the trace's byte total is at least 2^64 - 1 B (the   |\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| Lower bound: max live requested bytes         |                  ≥ 16 EiB |\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("| Live at peak allocated +0.000000 s: ≥ 16 EiB (saturated: the trace's byte |\n"
                         "|   total is at least 2^64 - 1 B) in 3 blocks                               |\n"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("| [4.00 EiB, 8.00 EiB)                  |            |   ≥ 16 EiB | 100.0 % |\n"), std::string::npos) << r.out;

    const auto j = runCli(std::string("analyze --format json ") + kTrace);
    ASSERT_EQ(j.exitCode, 0) << j.err;
    const auto a = nlohmann::json::parse(j.out);
    EXPECT_TRUE(a.at("bytes_saturated").get<bool>());
    EXPECT_EQ(a.at("stats").at("allocated_bytes").at("freed").get<std::uint64_t>(), 0u);
    EXPECT_EQ(a.at("stats").at("allocated_bytes").at("allocated").get<std::uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(a.at("breakdowns").at(0).at("live_bytes").get<std::uint64_t>(), 18446744073709551615ull);

    const auto c = runCli(std::string("analyze --format csv --by site ") + kTrace);
    ASSERT_EQ(c.exitCode, 0) << c.err;
    EXPECT_EQ(c.out, "trace,instant,time_ns,group,depth,key,label,self_bytes,total_bytes,self_blocks,total_blocks\n"
                     "tests/data/live_bytes_past_2pow64.jsonl,peak allocated,3,site,0,(no stack),(no stack),18446744073709551615,"
                     "18446744073709551615,3,3\n");
}

TEST(SaturatedTotals, DiffPrintsABoundNotAWrappedChange)
{
    const auto r = runCli(std::string("diff tests/data/tiny_alloc_free.jsonl ") + kTrace);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("  peak allocated   4.00 MiB -> ≥ 16 EiB (≥ +16.00 EiB)\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    ≥ +16.00 EiB  (no scope)  (4.00 MiB -> ≥ 16 EiB)\n"), std::string::npos) << r.out;
    const auto back = runCli(std::string("diff ") + kTrace + " tests/data/tiny_alloc_free.jsonl");
    EXPECT_NE(back.out.find("  peak allocated   ≥ 16 EiB -> 4.00 MiB (≤ -16.00 EiB)\n"), std::string::npos) << back.out;

    const auto j = runCli(std::string("diff --format json tests/data/tiny_alloc_free.jsonl ") + kTrace);
    ASSERT_EQ(j.exitCode, 0) << j.err;
    const auto d = nlohmann::json::parse(j.out);
    EXPECT_TRUE(d.at("bytes_saturated").get<bool>());
    EXPECT_EQ(d.at("peak_allocated_after").get<std::uint64_t>(), 18446744073709551615ull);
    EXPECT_EQ(d.at("changed").at(0).at("delta_bytes").get<std::int64_t>(), std::numeric_limits<std::int64_t>::max());
}

TEST(SaturatedTotals, ReportMarksTheSaturatedFigures)
{
    const auto dir = gpumem::test::scratchDir("saturated-report");
    const auto html = (dir / "r.html").string();
    const auto r = runCli("report -o '" + html + "' " + kTrace);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto page = gpumem::test::slurp(html);
    EXPECT_NE(page.find("<p class='note'>≥ 16 EiB: saturated, the trace&#39;s byte total is at least 2^64 - 1 B (the exact figure may be "
                        "larger)</p>"),
        std::string::npos);
    EXPECT_NE(page.find("≥ 16 EiB in 3 blocks"), std::string::npos);
    EXPECT_EQ(page.find("8.00 EiB in"), std::string::npos); // the wrapped sum of the three blocks
}
