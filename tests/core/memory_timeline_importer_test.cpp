// PyTorch memory-timeline raw export importer. Public-file figures from SOURCES.md §2 and
// tests/core/kineto_reference.py (running sums over the records in file order).
#include "core/error.h"
#include "core/gmt_format.h"
#include "core/importer.h"
#include "core/importers/memory_timeline_importer.h"
#include "tests/core/kineto_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>

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
             std::string("[[1, 2, \"x\", 4]]"), std::string("[[1, 2, 3, 4], "), std::string("{\"a\": 1}") }) {
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
