// `gpumem report` of one .gmt runs the bounded analysis, its time charts bucketed in the first pass
// (analyze/bounded_analysis.h ChartRequest): under the in-memory budget, with its verdict proven in passes, the
// page equals the one made from the trace held whole (GPUMEM_REPLAY_IN_MEMORY=1); over it (here 0 events), but
// the verdict, which says its remedies were not proven by replay. Traces
// with two devices, marker and ProfilerStep# steps (mlp_train), stacks for the flame graph (line_trace, the
// snapshot), segments (the snapshot), a ring-buffer window, annotated steps, and one the passes cannot analyse (step-like user ranges: read whole).
#include "cli_runner.h"
#include "damaged_gmt.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::runCliWith;

namespace {
    // The page without its verdict paragraphs (one line each).
    std::string withoutVerdicts(const std::string& html, std::string* verdicts)
    {
        std::istringstream in(html);
        std::string line, out;
        while (std::getline(in, line))
            (line.find("<p class='verdict'>") != std::string::npos ? *verdicts : out) += line + '\n';
        return out;
    }

    // `gpumem report GMT` read whole (GPUMEM_REPLAY_IN_MEMORY=1), streamed with its verdict proven in passes (the
    // default, under the budget) and streamed over the budget (0 events), the pages without their verdicts.
    struct Reports {
        gpumem::test::CliResult whole, proven, streamed;
        std::string page, provenPage, streamedPage, wholeVerdict, provenVerdict, streamedVerdict;
    };
    Reports reportThreeWays(const std::filesystem::path& dir, const std::string& gmt)
    {
        const std::string whole = (dir / "whole.html").string(), proven = (dir / "proven.html").string(),
                          streamed = (dir / "streamed.html").string();
        Reports r;
        r.whole = runCliWith("GPUMEM_REPLAY_IN_MEMORY", "1", "report '" + gmt + "' -o '" + whole + "'");
        r.proven = runCli("report '" + gmt + "' -o '" + proven + "'");
        r.streamed = runCliWith("GPUMEM_ANALYZE_IN_MEMORY_EVENTS", "0", "report '" + gmt + "' -o '" + streamed + "'");
        if (r.whole.exitCode == 0 && r.proven.exitCode == 0 && r.streamed.exitCode == 0) {
            r.page = withoutVerdicts(gpumem::test::slurp(whole), &r.wholeVerdict);
            r.provenPage = withoutVerdicts(gpumem::test::slurp(proven), &r.provenVerdict);
            r.streamedPage = withoutVerdicts(gpumem::test::slurp(streamed), &r.streamedVerdict);
        }
        return r;
    }
} // namespace

TEST(BoundedReportCli, AStreamedPageEqualsTheWholeOneButItsVerdict)
{
    const auto dir = gpumem::test::scratchDir("bounded_report");
    for (const char* trace : { "tests/data/tiny_alloc_free.jsonl", "tests/data/two_devices_streams.jsonl", "tests/data/marker_steps.jsonl",
             "traces/mlp_train.jsonl", "tests/data/snapshot/protocol_2.pickle", "tests/data/ring_buffer_window.jsonl",
             "tests/data/stacks/line_trace.jsonl", "tests/data/annotated_step.jsonl", "tests/data/hostile_names.jsonl" }) {
        SCOPED_TRACE(trace);
        const std::string gmt = (dir / "trace.gmt").string();
        const auto converted = runCli(std::string("convert ") + trace + " -o '" + gmt + "'");
        ASSERT_EQ(converted.exitCode, 0) << converted.err;
        const auto r = reportThreeWays(dir, gmt);
        const auto& s = r.streamed;
        const std::string &page = r.page, &wholeVerdict = r.wholeVerdict, &streamedVerdict = r.streamedVerdict;
        ASSERT_EQ(r.whole.exitCode, 0) << r.whole.err;
        ASSERT_EQ(r.proven.exitCode, 0) << r.proven.err;
        ASSERT_EQ(s.exitCode, 0) << s.err;
        EXPECT_EQ(r.streamedPage, page);
        // Under the budget the streamed page is the whole one, verdict and all, and says nothing more on stderr.
        EXPECT_EQ(r.provenPage, page);
        EXPECT_EQ(r.provenVerdict, wholeVerdict);
        EXPECT_EQ(r.proven.err, r.whole.err);
        EXPECT_NE(page.find("<svg"), std::string::npos); // the charts are there to compare
        if (std::string(trace).find("stacks") != std::string::npos || std::string(trace).find("pickle") != std::string::npos) {
            EXPECT_NE(page.find("class='flame'"), std::string::npos); // and the flame graph, from the kept live blocks
        }
        if (std::string(trace).find("hostile_names") != std::string::npos) {
            // step-like user ranges need the trace whole: said on stderr, and the page is the whole one
            EXPECT_NE(s.err.find("is read whole"), std::string::npos) << s.err;
            EXPECT_EQ(streamedVerdict, wholeVerdict);
        } else {
            EXPECT_NE(streamedVerdict.find("remedies were not proven by replay"), std::string::npos) << streamedVerdict;
            EXPECT_EQ(s.err, "");
        }
    }
}

TEST(BoundedReportCli, ADamagedGmtStreamedReadsAsTheWholeOne)
{
    // The streamed report checks the chunks in its first pass; the second MEMV chunk fails its CRC there, and
    // the report starts that trace over with the file opened checked: the page is the whole one's but its
    // verdict, the 4 events before the damage (without the retry the report failed on the deferred check).
    const auto dir = gpumem::test::scratchDir("bounded_report_damaged");
    const std::string gmt = (dir / "damaged.gmt").string();
    ASSERT_NE(gpumem::test::writeDamagedTiny(gmt).first, 0u);
    const auto r = reportThreeWays(dir, gmt);
    ASSERT_EQ(r.whole.exitCode, 0) << r.whole.err;
    ASSERT_EQ(r.proven.exitCode, 0) << r.proven.err;
    ASSERT_EQ(r.streamed.exitCode, 0) << r.streamed.err;
    EXPECT_EQ(r.streamed.err, r.whole.err);
    EXPECT_EQ(r.streamedPage, r.page);
    EXPECT_EQ(r.proven.err, r.whole.err);
    EXPECT_EQ(r.provenPage, r.page);
    EXPECT_EQ(r.provenVerdict, r.wholeVerdict);
    EXPECT_NE(r.streamedVerdict.find("remedies were not proven by replay"), std::string::npos) << r.streamedVerdict;
}
