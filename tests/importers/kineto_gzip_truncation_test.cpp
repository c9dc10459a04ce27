// A gzip-compressed Kineto trace cut short (a `.pt.trace.json.gz` whose writer was killed) recovers like
// a plain one (docs/kineto-import.md, "Damaged files"): everything the cut stream holds is inflated, then
// the plain-JSON cut rule applies to it, and the message names the compressed byte where the stream ends
// before the byte where the JSON ends. A cut inside the gzip header and a damaged complete stream stay
// FormatErrors. The oracle is importKinetoJson() on the prefix inflated independently (zlib, in the test).
#include "core/error.h"
#include "core/file_io.h"
#include "importers/importer_registry.h"
#include "importers/kineto_importer.h"
#include "tests/core/gzip_test_support.h"
#include "tests/importers/kineto_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace gpumem;
using gpumem::test::gzipOf;
using gpumem::test::inflatedPrefix;
using gpumem::test::kGzipHeaderBytes;
using gpumem::test::kGzipTrailerBytes;
using gpumem::test::publicTrace;
using gpumem::test::TempFile;

namespace {

using Outcome = gpumem::test::CutOutcome;
using gpumem::test::cutOutcomeOf;

// The Kineto importer's load() on `bytes` written to a file named `name`.
Outcome loadBytes(const std::string& name, const std::string& bytes)
{
    TempFile file(name, bytes);
    return cutOutcomeOf([&] { return makeKinetoImporter()->load(file.path(), {}); });
}

// The plain-JSON rule on `json`, named `source` in messages.
Outcome plainRule(std::string json, const std::string& source)
{
    return cutOutcomeOf([&] { return importKinetoJson(json, source); });
}

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string gzipNote(std::size_t cut)
{
    return "the gzip stream ends early at compressed byte " + std::to_string(cut);
}

// Checks the .gz cut after `cut` compressed bytes against the plain rule on what it inflates to, and
// returns the events kept (0 for an error).
std::uint64_t checkGzipCut(const std::string& gz, std::size_t cut, std::uint64_t allEvents)
{
    SCOPED_TRACE("gzip cut at compressed byte " + std::to_string(cut) + " of " + std::to_string(gz.size()));
    const std::string cutGz = gz.substr(0, cut);
    const std::string prefix = inflatedPrefix(cutGz);

    GzipEnd end;
    EXPECT_EQ(gunzip(cutGz, "cut.json.gz", end), prefix);
    EXPECT_TRUE(end.endsEarly);
    EXPECT_EQ(end.compressedBytes, cut);

    TempFile file("cut.json.gz", cutGz);
    const Outcome o = cutOutcomeOf([&] { return makeKinetoImporter()->load(file.path(), {}); });
    const Outcome plain = plainRule(prefix, file.path());
    EXPECT_TRUE(has(o.message, gzipNote(cut))) << o.message;
    EXPECT_EQ(o.error, plain.error) << o.message << "\nplain: " << plain.message;
    EXPECT_EQ(o.events, plain.events);
    EXPECT_EQ(o.memoryEvents, plain.memoryEvents);
    if (plain.error) {
        const std::string head = file.path() + ": ";
        EXPECT_EQ(o.message, head + gzipNote(cut) + "; inflated, " + plain.message.substr(head.size()));
        return 0;
    }
    if (plain.message.empty()) { // the cut fell in the trailer: the JSON is whole
        EXPECT_EQ(o.events, allEvents);
        EXPECT_TRUE(has(o.message, "the JSON inflated from it is whole")) << o.message;
        EXPECT_TRUE(has(o.message, "CRC-32 could not be checked")) << o.message;
        return o.events;
    }
    EXPECT_EQ(o.message, gzipNote(cut) + "; inflated, " + plain.message);
    return o.events;
}

const std::string kSmall = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/kineto/gzip_cut_small.json";

} // namespace

TEST(KinetoGzipTruncation, TheWholeSmallTraceGzippedHasNoAnomaly)
{
    const std::string json = readText(kSmall);
    const Outcome whole = loadBytes("whole.json.gz", gzipOf(json));
    EXPECT_FALSE(whole.error) << whole.message;
    EXPECT_EQ(whole.message, "");
    EXPECT_EQ(whole.events, 9u);
    EXPECT_EQ(whole.memoryEvents, 4u);
    GzipEnd end;
    EXPECT_EQ(gunzip(gzipOf(json), "whole.json.gz", end), json);
    EXPECT_FALSE(end.endsEarly);
}

// Every byte of the compressed file past its header: the plain rule on the inflated prefix, the
// compressed offset in the message, and a kept-event count that never falls as the cut moves later.
TEST(KinetoGzipTruncation, ASmallTraceCutAtEveryCompressedByteFollowsThePlainRule)
{
    const std::string gz = gzipOf(readText(kSmall));
    std::uint64_t previous = 0;
    std::set<std::uint64_t> seen;
    for (std::size_t cut = kGzipHeaderBytes; cut < gz.size(); ++cut) {
        const std::uint64_t kept = checkGzipCut(gz, cut, 9);
        EXPECT_GE(kept, previous) << "fewer events kept at compressed byte " << cut << " than one byte earlier";
        previous = kept;
        seen.insert(kept);
        if (::testing::Test::HasFailure())
            return; // one cut's failures say enough
    }
    // The window spans the whole range: nothing kept, every count in between, all of them.
    EXPECT_EQ(seen.size(), 10u);
    EXPECT_EQ(*seen.rbegin(), 9u);
}

TEST(KinetoGzipTruncation, ACutInTheTrailerKeepsEveryEventWithTheAnomaly)
{
    const std::string gz = gzipOf(readText(kSmall));
    for (std::size_t cut : { gz.size() - kGzipTrailerBytes, gz.size() - 1 }) {
        const Outcome o = loadBytes("trailer.json.gz", gz.substr(0, cut));
        EXPECT_FALSE(o.error) << o.message;
        EXPECT_EQ(o.events, 9u);
        EXPECT_EQ(o.memoryEvents, 4u);
        EXPECT_TRUE(has(o.message, gzipNote(cut) + "; the JSON inflated from it is whole")) << o.message;
    }
}

TEST(KinetoGzipTruncation, ACutInsideTheGzipHeaderIsAFormatError)
{
    const std::string gz = gzipOf(readText(kSmall));
    for (std::size_t cut = 2; cut < kGzipHeaderBytes; ++cut) {
        SCOPED_TRACE("cut at " + std::to_string(cut));
        const std::string cutGz = gz.substr(0, cut);
        GzipEnd end;
        try {
            gunzip(cutGz, "head.json.gz", end);
            FAIL() << "a stream cut in its header must not read";
        } catch (const FormatError& e) {
            EXPECT_TRUE(has(e.what(), "head.json.gz: the gzip stream ends inside its header (after "
                    + std::to_string(cut) + " compressed bytes)"))
                << e.what();
        }
        const Outcome o = loadBytes("head.json.gz", cutGz);
        EXPECT_TRUE(o.error);
        EXPECT_TRUE(has(o.message, "ends inside its header")) << o.message;
    }
}

// Damage to a complete stream is no cut: every flipped byte of the deflate data and of the trailer gives
// a FormatError naming the file, never a shortened trace. Mostly zlib refuses the data or its CRC-32
// ("corrupt gzip data near compressed offset N"); a flip that desynchronises the decoder near the end can
// make it read past the stream's end, which at the gzip layer looks like a cut; the JSON inflated from
// the garbage is then refused as damaged (a few bytes of this file do that).
TEST(KinetoGzipTruncation, AFlippedByteInACompleteStreamIsAFormatError)
{
    const std::string gz = gzipOf(readText(kSmall));
    std::size_t corrupt = 0;
    for (std::size_t at = kGzipHeaderBytes; at < gz.size(); ++at) {
        SCOPED_TRACE("byte " + std::to_string(at) + " flipped");
        std::string damaged = gz;
        damaged[at] = static_cast<char>(damaged[at] ^ 0xff);
        const Outcome o = loadBytes("flipped.json.gz", damaged);
        EXPECT_TRUE(o.error) << o.events << " events kept; " << o.message;
        EXPECT_TRUE(has(o.message, "flipped.json.gz: ")) << o.message;
        if (has(o.message, "ends early"))
            EXPECT_TRUE(has(o.message, "the file is damaged")) << o.message;
        else
            corrupt += has(o.message, "corrupt gzip data near compressed offset ") ? 1 : 0;
        if (::testing::Test::HasFailure())
            return;
    }
    EXPECT_GT(corrupt, (gz.size() - kGzipHeaderBytes) * 9 / 10) << "most flips are refused by zlib itself";
}

// Through format detection and --strict (what `gpumem info` does).
TEST(KinetoGzipTruncation, LoadTraceKeepsTheCutAndStrictRefusesIt)
{
    const std::string gz = gzipOf(readText(kSmall));
    TempFile file("cut.pt.trace.json.gz", gz.substr(0, gz.size() * 3 / 4));
    const Importer* used = nullptr;
    Trace t = loadTrace(file.path(), {}, &used);
    ASSERT_NE(used, nullptr);
    EXPECT_EQ(used->name(), "kineto");
    const Anomaly* a = t.stats().find("truncated");
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(has(a->detail, gzipNote(gz.size() * 3 / 4))) << a->detail;
    LoadOptions strict;
    strict.strict = true;
    EXPECT_THROW(loadTrace(file.path(), strict), FormatError);
}

// A real trace (BERT-small, TraceLens, 2,551 events) cut at 30% and 70% of its compressed bytes.
TEST(KinetoGzipTruncation, ARealTraceCutAtTwoFractionsFollowsThePlainRule)
{
    const std::string path = publicTrace("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    GPUMEM_REQUIRE_PUBLIC(path);
    const std::string gz = readText(path);
    const std::uint64_t at30 = checkGzipCut(gz, gz.size() * 3 / 10, 2551);
    const std::uint64_t at70 = checkGzipCut(gz, gz.size() * 7 / 10, 2551);
    EXPECT_GT(at30, 0u);
    EXPECT_GT(at70, at30);
    EXPECT_LT(at70, 2551u);
}

TEST(KinetoGzipTruncation, AStreamCutBeforeItsContentCanBeRecognisedSaysSo)
{
    // Cut after a few compressed bytes, a .json.gz inflates to a head no format recognises: detection said
    // "not a trace format"; the file is a gzip whose stream is cut, and the error says so.
    const std::string gz = gzipOf(R"({"hello": ")" + std::string(300, 'x') + "\"}");
    std::size_t cut = kGzipHeaderBytes + 1;
    while (inflatedPrefix(gz.substr(0, cut)).size() < 2)
        ++cut;
    ASSERT_LT(cut, gz.size() - kGzipTrailerBytes);
    TempFile file("early.json.gz", gz.substr(0, cut));
    try {
        loadTrace(file.path());
        FAIL() << "a cut stream with no recognisable content must not load";
    } catch (const FormatError& e) {
        EXPECT_EQ(
            std::string(e.what()), file.path() + ": " + gzipNote(cut) + ": the file is truncated — copy it again");
    }
    // Content that begins like a Kineto file goes to the Kineto importer, which names the cut too.
    const std::string kineto = gzipOf(R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": ")"
        + std::string(300, 'x') + "\"}], \"traceEvents\": []}");
    std::size_t early = kGzipHeaderBytes + 1;
    while (inflatedPrefix(kineto.substr(0, early)).size() < 20)
        ++early;
    TempFile cutKineto("early_kineto.json.gz", kineto.substr(0, early));
    const std::size_t inflated = inflatedPrefix(kineto.substr(0, early)).size();
    try {
        loadTrace(cutKineto.path());
        FAIL() << "a file cut before its first event holds nothing";
    } catch (const FormatError& e) {
        EXPECT_TRUE(has(e.what(),
            cutKineto.path() + ": " + gzipNote(early) + "; inflated, the JSON ends at byte " + std::to_string(inflated)
                + ", before \"traceEvents\" began"))
            << e.what();
    }
}
