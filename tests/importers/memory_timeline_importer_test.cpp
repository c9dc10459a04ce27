// PyTorch memory-timeline raw export importer. Public-file figures from SOURCES.md §2 and
// tests/importers/kineto_reference.py (running sums over the records in file order).
#include "core/error.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "importers/memory_timeline_importer.h"
#include "tests/core/gzip_test_support.h"
#include "tests/importers/kineto_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>

using namespace gpumem;
using namespace gpumem::test;

namespace {

const std::string kTimeline = "hta/memory_timeline.raw.gz";

using CategorySums = std::array<std::int64_t, kCategoryCount>;

CategorySums sumsOf(std::initializer_list<std::pair<Category, std::int64_t>> values)
{
    CategorySums s {};
    for (auto [c, v] : values)
        s[static_cast<std::size_t>(c)] = v;
    return s;
}

// Running sums per category from the events alone (Σ alloc − Σ free), the peak of their total
// judged after each timestamp, and the sums at that peak.
struct Running {
    std::int64_t peak = 0, end = 0;
    TimeNs peakTime = 0;
    CategorySums atPeak {};
};
Running runningSums(const Trace& t)
{
    const auto& m = t.memory();
    Running r;
    CategorySums sums {};
    std::int64_t total = 0;
    for (std::size_t i = 0; i < m.count(); ++i) {
        const auto delta = (m.kind[i] == EventKind::Alloc ? 1 : -1) * static_cast<std::int64_t>(m.size[i]);
        sums[static_cast<std::size_t>(m.category[i])] += delta;
        total += delta;
        if ((i + 1 == m.count() || m.time[i + 1] != m.time[i]) && total > r.peak)
            r.peak = total, r.peakTime = m.time[i], r.atPeak = sums;
    }
    r.end = total;
    return r;
}

// Bytes live at `time` (after every event at that time) by category, from the paired allocations.
CategorySums liveByCategory(const Trace& t, TimeNs time)
{
    const auto& m = t.memory();
    CategorySums sums {};
    for (const auto& a : t.allocations()) {
        if (a.allocEvent == kNoIndex || m.time[a.allocEvent] > time)
            continue;
        if (a.freeEvent != kNoIndex && m.time[a.freeEvent] <= time)
            continue;
        sums[static_cast<std::size_t>(m.category[a.allocEvent])] += static_cast<std::int64_t>(m.size[a.allocEvent]);
    }
    return sums;
}

} // namespace

TEST(MemoryTimelineImporter, HtaExportKeepsCategorySumsExactAtThePeak)
{
    const auto path = publicTrace(kTimeline);
    GPUMEM_REQUIRE_PUBLIC(path);
    ASSERT_EQ(detectFormat(path)->name(), "pytorch-memory-timeline");
    Trace t = loadTrace(path);
    const auto& meta = t.metadata()["memory_timeline"];
    EXPECT_EQ(meta["records"], 16845);
    EXPECT_EQ(meta["preexisting"], 645);
    EXPECT_EQ(meta["create"], 3345);
    EXPECT_EQ(meta["destroy"], 3345);
    EXPECT_EQ(meta["increment_version"], 9510);
    // 645 + 3345 + 4755 positive records, 3345 + 4755 negative ones.
    EXPECT_EQ(countEvents(t, 0, EventKind::Alloc), 8745u);
    EXPECT_EQ(countEvents(t, 0, EventKind::Free), 8100u);
    EXPECT_EQ(t.stats().count("unmatched_free"), 0u);
    EXPECT_EQ(t.stats().count("unmatched_destroy"), 0u);
    EXPECT_EQ(t.stats().count("alloc_at_live_address"), 0u);
    EXPECT_EQ(t.stats().find("synthetic_addresses")->severity, Severity::Info);

    const Running r = runningSums(t);
    EXPECT_EQ(r.peak, 3082832104);
    EXPECT_EQ(r.peakTime, 1696966047194486198);
    EXPECT_EQ(r.end, 332060904);
    const CategorySums expected = sumsOf({ { Category::Parameter, 102440608 }, { Category::OptimizerState, 102228128 },
        { Category::Input, 19395584 }, { Category::Temporary, 0 }, { Category::Activation, 2592465920 },
        { Category::Gradient, 67858432 }, { Category::AutogradDetail, 64225280 }, { Category::Unknown, 134218152 } });
    EXPECT_EQ(r.atPeak, expected);
    // The same sums from the live set of the synthetic pairing: every pair has one size and category.
    EXPECT_EQ(liveByCategory(t, r.peakTime), expected);

    // PREEXISTING (ts −1) records sit at the first real timestamp, in file order, before the rest.
    const auto& m = t.memory();
    for (std::size_t i = 0; i < 645; ++i) {
        ASSERT_EQ(m.time[i], 1696966047096061874) << i;
        ASSERT_EQ(m.sequence[i], i);
    }
    EXPECT_EQ(m.time.back(), 1696966048083248105);
}

TEST(MemoryTimelineImporter, IncrementVersionReopensTheSameAddressUnderItsNewCategory)
{
    // Two activations of one size: LIFO pairing; then the later one becomes a gradient and dies.
    std::string json
        = "[[-1, 1, 4096, 0], [1000, 2, 2048, 4], [1100, 2, 2048, 4], [1200, 3, -2048, 4], [1200, 3, 2048, 5],"
          " [1300, 4, -2048, 5], [1400, 4, -2048, 4], [1500, 4, -4096, 0]]";
    Trace t = importMemoryTimelineJson(json, "hand.raw");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 8u);
    EXPECT_EQ(m.time[0], 1000); // PREEXISTING at the first real ts
    EXPECT_EQ(m.category[0], Category::Parameter);
    EXPECT_EQ(m.address[3], m.address[2]); // −half closes the latest activation (LIFO)
    EXPECT_EQ(m.address[4], m.address[2]); // +half reopens it as a gradient
    EXPECT_EQ(m.category[4], Category::Gradient);
    EXPECT_EQ(m.address[5], m.address[2]);
    EXPECT_EQ(m.address[6], m.address[1]);
    EXPECT_EQ(m.address[7], m.address[0]);
    std::set<Address> distinct(m.address.begin(), m.address.end());
    EXPECT_EQ(distinct.size(), 3u);
    ASSERT_EQ(t.allocations().size(), 4u);
    for (const auto& a : t.allocations()) {
        ASSERT_NE(a.freeEvent, kNoIndex);
        EXPECT_EQ(m.size[a.allocEvent], m.size[a.freeEvent]);
        EXPECT_EQ(m.category[a.allocEvent], m.category[a.freeEvent]);
    }
}

TEST(MemoryTimelineImporter, CountsDestroysWithoutALiveTensorAndBadRecords)
{
    std::string json = "[[10, 4, -512, 3], [20, 9, 512, 3], [30, 2, 512, 12], [40, 2, -512, 3]]";
    Trace t = importMemoryTimelineJson(json, "odd.raw");
    EXPECT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.stats().count("unmatched_destroy"), 1u);
    EXPECT_EQ(t.stats().count("unknown_action"), 1u);
    EXPECT_EQ(t.stats().count("unknown_category"), 1u);
    EXPECT_EQ(t.stats().count("bad_size_sign"), 1u);
    EXPECT_EQ(t.memory().category[1], Category::Unknown);
    EXPECT_EQ(t.stats().count("unmatched_free"), 1u); // pairing agrees
}

TEST(MemoryTimelineImporter, RejectsRecordsThatAreNotFourIntegers)
{
    for (std::string bad : { std::string("[[1, 2, 3]]"), std::string("[[1, 2, 3, 4, 5]]"),
             std::string("[[1, 2, \"x\", 4]]"), std::string("{\"a\": 1}") }) {
        try {
            importMemoryTimelineJson(bad, "bad.raw");
            ADD_FAILURE() << bad;
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find("bad.raw"), std::string::npos) << e.what();
        }
    }
}

TEST(MemoryTimelineImporter, GmtRoundTripKeepsCategories)
{
    const auto path = publicTrace(kTimeline);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    TempFile gmt("t.gmt");
    writeGmt(t, gmt.path());
    expectSameTrace(t, loadTrace(gmt.path()));
}

namespace {
// What importing `json` as a memory-timeline export named "cut.raw" gave: the FormatError, or the
// records kept and the "truncated" anomaly's detail ("" when none).
struct TimelineOutcome {
    bool error = false;
    std::string message;
    std::uint64_t records = 0;
};
TimelineOutcome timelineOutcome(const std::function<Trace()>& import)
{
    TimelineOutcome o;
    try {
        Trace t = import();
        o.records = t.metadata()["memory_timeline"]["records"].get<std::uint64_t>();
        if (const Anomaly* a = t.stats().find("truncated")) {
            o.message = a->detail;
            EXPECT_EQ(a->severity, Severity::Error);
        }
    } catch (const FormatError& e) {
        o.error = true;
        o.message = e.what();
    }
    return o;
}
TimelineOutcome importText(std::string json)
{
    return timelineOutcome([&] { return importMemoryTimelineJson(json, "cut.raw"); });
}
} // namespace

// A cut export used to say "invalid JSON at record 0" wherever the cut fell, without a byte offset.
TEST(MemoryTimelineImporter, FileCutAtEveryByteKeepsItsCompleteRecordsAndNamesTheByte)
{
    const std::string json = "[[-1, 1, 4096, 0], [1000, 2, 2048, 4], [1100, 4, -2048, 4]]";
    ASSERT_FALSE(importText(json).error);
    EXPECT_EQ(importText(json).message, "");
    for (std::size_t cut = 1; cut < json.size(); ++cut) {
        SCOPED_TRACE("cut at " + std::to_string(cut));
        const std::string prefix = json.substr(0, cut);
        // Each record closes with the only ']' it holds, and the list's own ']' is the last byte.
        const auto complete = static_cast<std::uint64_t>(std::count(prefix.begin(), prefix.end(), ']'));
        const TimelineOutcome o = importText(prefix);
        const std::string at = "the JSON ends at byte " + std::to_string(cut) + ", ";
        if (complete == 0) {
            EXPECT_TRUE(o.error);
            EXPECT_EQ(o.message.rfind("cut.raw: " + at, 0), 0u) << o.message;
            EXPECT_NE(o.message.find("the file was cut before its first complete record"), std::string::npos)
                << o.message;
            continue;
        }
        ASSERT_FALSE(o.error) << o.message;
        EXPECT_EQ(o.records, complete);
        EXPECT_EQ(o.message.rfind("cut.raw: " + at, 0), 0u) << o.message;
        std::size_t end = 0;
        for (std::uint64_t k = 0; k < complete; ++k)
            end = prefix.find(']', end) + 1;
        EXPECT_NE(o.message.find(complete == 1
                          ? "the 1 complete record before it (record 0, bytes up to 17) was kept"
                          : "the " + std::to_string(complete) + " complete records before it (records 0.."
                              + std::to_string(complete - 1) + ", bytes up to " + std::to_string(end) + ") were kept"),
            std::string::npos)
            << o.message;
    }
    EXPECT_EQ(importText(json.substr(0, 24)).message,
        "cut.raw: the JSON ends at byte 24, in a number inside record 1: the file was cut; the 1 complete record "
        "before "
        "it (record 0, bytes up to 17) was kept");
    EXPECT_EQ(importText(json.substr(0, 39)).message,
        "cut.raw: the JSON ends at byte 39, after record 1: the file was cut; the 2 complete records before it "
        "(records "
        "0..1, bytes up to 37) were kept");
    EXPECT_EQ(importText(json.substr(0, 5)).message,
        "cut.raw: the JSON ends at byte 5, inside record 0: the file was cut before its first complete record, so it "
        "holds nothing to import; export it again");
}

TEST(MemoryTimelineImporter, DamagedJsonNamesTheByteOffsetAndTheRecord)
{
    const std::string tail = "; the file is damaged or not a memory-timeline export";
    auto message = [](std::string json) { return importText(std::move(json)).message; };
    // Bytes after the list (the on-demand parser used to stop at its ']' and ignore them), a bracket that
    // closes the wrong container (it used to read as a record of 5 fields), invalid UTF-8 in a string.
    EXPECT_EQ(message("[[1, 2, 512, 3]] x"),
        "cut.raw: invalid JSON at byte 17 (record 1): bytes follow the list's closing ']'" + tail);
    EXPECT_EQ(message("[[1, 2, 512, 3], [2, 2, 512, 3]]]"),
        "cut.raw: invalid JSON at byte 32 (record 2): bytes follow the list's closing ']'" + tail);
    EXPECT_EQ(message("[[1, 2, 512, 3], [2, 2, 512, 3}]"),
        "cut.raw: invalid JSON at byte 30 (record 1): '}' closes a container it did not open" + tail);
    EXPECT_EQ(message("[[1, 2, 512, 3], [\"\xff\"]]"),
        "cut.raw: invalid JSON at byte 19 (record 1): The input is not valid UTF-8" + tail);
    EXPECT_EQ(message(" {\"a\": 1}"),
        "cut.raw: invalid JSON at byte 1 (record 0): the document is not a JSON list (a memory-timeline raw export "
        "starts with '[')"
            + tail);
    // A missing comma: the parser knows where it stopped.
    const std::string comma = message("[[1, 2, 512, 3], [2, 2, 512, 3] [3, 4, -512, 3]]");
    EXPECT_EQ(comma.rfind("cut.raw: invalid JSON at byte 32 (record 2): ", 0), 0u) << comma;
    EXPECT_EQ(comma.substr(comma.size() - tail.size()), tail);
    // Damage before a cut is damage: nothing is kept.
    const std::string both = message("[[1, 2, 512, 3] [2, 2, 512, 3], [3, 4");
    EXPECT_EQ(both.rfind("cut.raw: invalid JSON at byte 16 (record 1): ", 0), 0u) << both;
    // A record of the wrong shape before a cut is reported as such.
    EXPECT_EQ(message("[[1, 2, 512], [2, 2, 512, 3], [3"),
        "cut.raw: record 0 has 3 fields instead of 4 ([ts_ns, action, bytes, category])");
}

TEST(MemoryTimelineImporter, HtaExportCutInTheMiddleKeepsEveryRecordBeforeTheCut)
{
    const auto path = publicTrace(kTimeline);
    GPUMEM_REQUIRE_PUBLIC(path);
    std::ifstream in(path, std::ios::binary);
    const std::string gz { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
    ASSERT_EQ(gz.size(), 64683u); // SOURCES.md §2
    const std::string json = inflatedPrefix(gz);
    ASSERT_EQ(std::count(json.begin(), json.end(), ']'), 16845 + 1);

    // The inflated JSON cut at half its length.
    const std::string half = json.substr(0, json.size() / 2);
    const auto complete = static_cast<std::uint64_t>(std::count(half.begin(), half.end(), ']'));
    const TimelineOutcome plain = importText(half);
    ASSERT_FALSE(plain.error) << plain.message;
    EXPECT_EQ(plain.records, complete);
    EXPECT_GT(complete, 8000u);
    EXPECT_EQ(plain.message.rfind("cut.raw: the JSON ends at byte " + std::to_string(half.size()) + ", ", 0), 0u)
        << plain.message;
    EXPECT_NE(
        plain.message.find("the " + std::to_string(complete) + " complete records before it (records 0.."
            + std::to_string(complete - 1) + ", bytes up to " + std::to_string(half.rfind(']') + 1) + ") were kept"),
        std::string::npos)
        << plain.message;

    // The .raw.gz itself cut at half its bytes: the records the inflated prefix holds are kept.
    TempFile cutGz("memory_timeline.raw.gz", gz.substr(0, gz.size() / 2));
    const std::string inflated = inflatedPrefix(std::string_view(gz).substr(0, gz.size() / 2));
    const auto inGz = static_cast<std::uint64_t>(std::count(inflated.begin(), inflated.end(), ']'));
    const TimelineOutcome o = timelineOutcome([&] { return loadTrace(cutGz.path()); });
    ASSERT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.records, inGz);
    EXPECT_EQ(o.message.rfind(cutGz.path() + ": the gzip stream ends early at compressed byte "
                      + std::to_string(gz.size() / 2) + "; inflated, the JSON ends at byte "
                      + std::to_string(inflated.size()) + ", ",
                  0),
        0u)
        << o.message;

    // Cut inside the gzip trailer: the JSON is whole, every record is kept, and the anomaly says why.
    TempFile trailer("memory_timeline.raw.gz", gz.substr(0, gz.size() - 4));
    const TimelineOutcome whole = timelineOutcome([&] { return loadTrace(trailer.path()); });
    EXPECT_EQ(whole.records, 16845u);
    EXPECT_EQ(whole.message,
        trailer.path() + ": the gzip stream ends early at compressed byte " + std::to_string(gz.size() - 4)
            + "; the JSON inflated from it is whole (the cut fell in the gzip trailer): every record was kept, but the "
              "stream's CRC-32 could not be checked");
}

// INT64_MIN used to be "not an integer"; as a DESTROY's size its magnitude does not fit in int64.
TEST(MemoryTimelineImporter, ValuesBeyondInt64AreOutOfRangeNamingTheFieldAndRecord)
{
    const std::string tail = "; a memory-timeline raw export's values lie within ±9223372036854775807";
    EXPECT_EQ(importText("[[1, 2, 512, 3], [2, 4, -9223372036854775808, 3]]").message,
        "cut.raw: record 1: field bytes is out of range (-9223372036854775808)" + tail);
    EXPECT_EQ(importText("[[18446744073709551616, 2, 512, 3]]").message,
        "cut.raw: record 0: field ts is out of range (18446744073709551616)" + tail);
    EXPECT_EQ(importText("[[1, 2, 512, 1e300]]").message, "cut.raw: record 0: field category is out of range (1e300)" + tail);
    // The extremes that fit are read (and judged as values: a DESTROY of 2^63−1 bytes with no live tensor).
    const TimelineOutcome edge = importText("[[1, 4, -9223372036854775807, 3], [2, 2, 9223372036854775807, 3]]");
    EXPECT_FALSE(edge.error) << edge.message;
    EXPECT_EQ(edge.records, 2u);
    // Not a number at all is still "not an integer".
    EXPECT_EQ(importText("[[1, 2, \"512\", 3]]").message,
        "cut.raw: record 0: field bytes is not an integer; a memory-timeline raw export holds [ts_ns, action, bytes, "
        "category] lists");
}

// Brief esc item 4: one bad record is counted in the singular (core's counted()).
TEST(MemoryTimelineImporter, CountsOneBadRecordInTheSingular)
{
    std::string one = "[[0, 1, 100, 7], [1, 1, 200, 99], [2, 2, 100, 7]]";
    Trace t = importMemoryTimelineJson(one, "mt1.raw");
    const Anomaly* a = t.stats().find("unknown_category");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->detail, "1 record has a category index outside 0–7; imported as unknown");
    std::string two = "[[0, 1, 0, 7], [1, 1, 100, 7]]";
    Trace u = importMemoryTimelineJson(two, "mt2.raw");
    const Anomaly* b = u.stats().find("bad_size_sign");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->detail, "1 record has a zero size or a sign that contradicts the action; skipped");
}
