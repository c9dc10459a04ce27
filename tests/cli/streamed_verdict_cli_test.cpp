// The verdict of a streamed `analyze` (text) and `report` (a .gmt over the in-memory budget, here 0 events;
// cli streamedVerdict) opens with the facts explain's verdict opens with, as the trace recorded them: the
// first recorded OOM (when, the request, the device's size, reserved and allocated then), else the reserved
// peak, else the allocated peak; then that the remedies were not replayed. Review finding (2026-12-02): it
// named only the fragmentation headline, so an OOM went unsaid and a trace without a reserved series got a
// verdict without a figure.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>

using gpumem::test::runCli;

namespace {
    // The verdict paragraph of text analyze, its continuation lines joined.
    std::string verdictOf(const std::string& out)
    {
        std::string v = out.substr(0, out.find("\n\n"));
        if (v.rfind("verdict: ", 0) != 0)
            return "(no verdict) " + out.substr(0, 200);
        return gpumem::test::replaceAll(v.substr(9), "\n         ", " ");
    }

    struct Verdicts {
        std::string whole, streamed, report;
    };

    Verdicts verdictsOf(const std::string& jsonl)
    {
        const auto dir = gpumem::test::scratchDir("streamed_verdict");
        const std::string gmt = (dir / "trace.gmt").string(), html = (dir / "report.html").string();
        EXPECT_EQ(runCli("convert " + jsonl + " -o '" + gmt + "'").exitCode, 0) << jsonl;
        Verdicts v;
        v.whole = verdictOf(runCli("analyze '" + gmt + "'").out);
        ::setenv("GPUMEM_ANALYZE_IN_MEMORY_EVENTS", "0", 1);
        const auto streamed = runCli("analyze '" + gmt + "'");
        const auto report = runCli("report '" + gmt + "' -o '" + html + "'");
        ::unsetenv("GPUMEM_ANALYZE_IN_MEMORY_EVENTS");
        EXPECT_EQ(streamed.exitCode, 0) << streamed.err;
        EXPECT_EQ(report.exitCode, 0) << report.err;
        v.streamed = verdictOf(streamed.out);
        const std::string page = gpumem::test::slurp(html);
        const std::string open = "<p class='verdict'><strong>Verdict:</strong> ";
        if (const auto at = page.find(open); at != std::string::npos)
            v.report = page.substr(at + open.size(), page.find("</p>", at) - at - open.size());
        return v;
    }

    std::string notReplayed(const std::string& events)
    {
        return "remedies were not proven by replay: the trace (" + events
            + ") is over the in-memory budget; 'gpumem explain' replays them.";
    }
    std::string inHtml(const std::string& s) { return gpumem::test::replaceAll(s, "'", "&#39;"); }
} // namespace

TEST(StreamedVerdictCli, NamesTheRecordedOomItsRequestAndTheAllocatedBytesThen)
{
    // 40 GiB asked for with 110 MiB live on an 80 GiB device, no segment events (so no headline figure).
    const auto v = verdictsOf("tests/data/explain/recorded_oom.jsonl");
    EXPECT_EQ(v.whole.rfind("At the recorded OOM (+0.000002 s), a 40.00 GiB request failed on a device of 80.00 GiB with ", 0), 0u) << v.whole;
    EXPECT_EQ(v.streamed,
        "At the recorded OOM (+0.000002 s), a 40.00 GiB request failed on a device of 80.00 GiB with 110.00 MiB "
        "allocated (the trace "
        "records no reserved series); "
            + notReplayed("3 events"));
    EXPECT_EQ(v.report, inHtml(v.streamed));
}

TEST(StreamedVerdictCli, NamesTheReservedAndAllocatedBytesAtTheRecordedOom)
{
    // One 20 MiB segment, 2 MiB allocated when the 16 MiB request fails: the whole verdict's opening, then the
    // recorded allocated bytes and the headline, reserved beyond live at that OOM.
    const auto v = verdictsOf("tests/data/explain/recorded_oom_segments.jsonl");
    const std::string opening = "At the recorded OOM (+0.000004 s), a 16.00 MiB request failed on a device of 39.59 GiB with "
                                "20.00 MiB reserved";
    EXPECT_EQ(v.whole.rfind(opening, 0), 0u) << v.whole;
    EXPECT_EQ(v.streamed, opening + " for 2.00 MiB allocated: 18.00 MiB (90.0 %) reserved beyond live; " + notReplayed("5 events"));
    EXPECT_EQ(v.report, inHtml(v.streamed));
}

TEST(StreamedVerdictCli, WithoutAnOomNamesThePeak)
{
    // No reserved series (no segment events): the allocated peak, where the verdict had no figure at all.
    const auto b = verdictsOf("tests/data/colocate_b.jsonl");
    EXPECT_EQ(b.streamed,
        "No recorded OOM; the allocated peak is 16.00 MiB at +0.000000 s (the trace records no reserved series); "
            + notReplayed("2 events"));
    EXPECT_EQ(b.report, inHtml(b.streamed));
    // Segments: the reserved peak at its fullest instant (22 MiB once the 4 MiB block is in the new segment), as
    // the whole verdict's "the reserved peak is 22.00 MiB at +0.000003 s for 4.00 MiB allocated".
    const auto t = verdictsOf("tests/data/tiny_alloc_free.jsonl");
    const std::string peak = "the reserved peak is 22.00 MiB at +0.000003 s for 4.00 MiB allocated";
    EXPECT_NE(t.whole.find(peak), std::string::npos) << t.whole;
    EXPECT_EQ(t.streamed, "No recorded OOM; " + peak + ": 18.00 MiB (81.8 %) reserved beyond live; " + notReplayed("10 events"));
    EXPECT_EQ(t.report, inHtml(t.streamed));
}
