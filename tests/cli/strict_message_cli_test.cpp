// --strict's refusal names the trace once (review finding 2026-12-02: "X: trailing_bytes (1×, warning): X: 4
// bytes …"): the importers start their details with the file, so the message opens with the detail's own
// place — with its line where it has one — and the rest of the detail follows the code.
#include "cli_runner.h"

#include "core/import_stats.h"

#include <gtest/gtest.h>

#include <fstream>

using gpumem::test::runCli;

TEST(StrictMessageCli, NamesTheFileOnceForAGmtWithBytesAfterItsEnd)
{
    // The smallest trace with a warning anomaly: tiny_alloc_free as .gmt and four bytes after its end chunk.
    const auto dir = gpumem::test::scratchDir("strict_message");
    const std::string gmt = (dir / "tiny.gmt").string(), trailing = (dir / "trailing.gmt").string();
    ASSERT_EQ(runCli("convert tests/data/tiny_alloc_free.jsonl -o '" + gmt + "'").exitCode, 0);
    std::ofstream(trailing, std::ios::binary) << gpumem::test::slurp(gmt) << "junk";
    for (const char* verb : { "info", "analyze", "convert" }) {
        SCOPED_TRACE(verb);
        const auto r = runCli(std::string(verb) + " --strict '" + trailing + "'"
            + (std::string(verb) == "convert" ? " -o '" + (dir / "out.gmt").string() + "'" : std::string()));
        EXPECT_EQ(r.exitCode, 1);
        EXPECT_EQ(r.err,
            "gpumem " + std::string(verb) + ": error: " + trailing
                + ": trailing_bytes (1×, warning): 4 bytes after the end chunk were ignored — rerun without --strict to "
                  "import anyway\n");
    }
}

TEST(StrictMessageCli, OpensWithTheLineOfAJsonlRecord)
{
    // tiny_alloc_free.jsonl and a record of a type this gpumem does not know, on line 14.
    const auto dir = gpumem::test::scratchDir("strict_message_jsonl");
    const std::string jsonl = (dir / "unknown.jsonl").string();
    std::ofstream(jsonl) << gpumem::test::slurp(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl")
                         << "{\"type\":\"future_record\"}\n";
    const auto r = runCli("analyze --strict '" + jsonl + "'");
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_EQ(r.err,
        "gpumem analyze: error: " + jsonl
            + ":14: unknown_record (1×, warning): record type \"future_record\" is not known to this gpumem; skipped — "
              "rerun without --strict to import anyway\n");
}

TEST(StrictMessageCli, PlaceOfSplitsOnlyADetailThatStartsWithTheSource)
{
    using gpumem::placeOf;
    EXPECT_EQ(placeOf("a.gmt: 4 bytes", "a.gmt").where, "a.gmt");
    EXPECT_EQ(placeOf("a.gmt: 4 bytes", "a.gmt").rest, "4 bytes");
    EXPECT_EQ(placeOf("a.jsonl:14: skipped", "a.jsonl").where, "a.jsonl:14");
    EXPECT_EQ(placeOf("a.jsonl:14: skipped", "a.jsonl").rest, "skipped");
    // Not the source, or not followed by ": " / ":LINE: ": the detail as it is, with no place.
    for (const char* detail : { "hand-written: dropped", "a.gmtx: 4 bytes", "a.gmt:x: 4", "a.gmt:14 bytes", "a.gmt" }) {
        SCOPED_TRACE(detail);
        EXPECT_EQ(placeOf(detail, "a.gmt").where, "");
        EXPECT_EQ(placeOf(detail, "a.gmt").rest, detail);
    }
}
