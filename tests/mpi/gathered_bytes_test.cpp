// What the job what-if gathers (analyze/job_whatif.h) survives the bytes mapGather() carries, and the
// job verdicts follow their rules on hand-made rows.
#include "analyze/job_whatif.h"
#include "mpi/process_group.h"

#include <gtest/gtest.h>

namespace {
using namespace gpumem::analyze;

RankReplay row(gpumem::Bytes peak, std::uint64_t ooms)
{
    RankReplay r;
    r.policy = "pytorch";
    r.peakReserved = peak;
    r.peakAllocated = peak / 2;
    r.deviceCalls = 7;
    r.ooms = ooms;
    if (ooms) {
        r.firstOom = 3000;
        r.firstOomSize = 12 << 20;
    }
    return r;
}

TEST(GatheredBytes, RankReplaysRoundTripThroughMapGather)
{
    gpumem::mpi::MapOptions o;
    o.to = gpumem::mpi::GatherTo::All;
    const auto got = gpumem::mpi::processGroup().mapGather(5, [](std::size_t i) {
        RankRows<RankReplay> rows { i == 3 ? std::nullopt : std::optional<std::int64_t>(std::int64_t(i) * 10),
            { row(i << 20, i % 2), row((i + 1) << 30, 0) } };
        rows.rows[1].reservedIsLowerBound = true;
        return toBytes(rows);
    }, o);
    ASSERT_EQ(got.size(), 5u);
    const auto back = rankReplaysFromBytes(got[1]);
    ASSERT_EQ(back.rows.size(), 2u);
    EXPECT_EQ(back.namedRank, 10);
    EXPECT_EQ(back.rows[0].peakReserved, 1u << 20);
    EXPECT_EQ(back.rows[0].ooms, 1u);
    EXPECT_EQ(back.rows[0].firstOom, 3000);
    EXPECT_EQ(back.rows[0].firstOomSize, 12u << 20);
    EXPECT_TRUE(back.rows[1].reservedIsLowerBound);
    EXPECT_FALSE(back.rows[1].firstOom);
    EXPECT_FALSE(rankReplaysFromBytes(got[3]).namedRank);
    std::vector<std::optional<std::int64_t>> named;
    for (const auto& b : got)
        named.push_back(rankReplaysFromBytes(b).namedRank);
    // One trace names no rank: every rank is its position (as `gpumem ranks` numbers them).
    EXPECT_EQ(jobRankNames(named), (std::vector<std::string> { "rank 0", "rank 1", "rank 2", "rank 3", "rank 4" }));
    named[3] = 30;
    EXPECT_EQ(jobRankNames(named)[4], "rank 40");
}

TEST(GatheredBytes, RankFitsRoundTrip)
{
    RankRows<RankFit> fits { 7, { { "pytorch", true, 40 << 20, 38 << 20, false, true } } };
    const auto back = rankFitsFromBytes(toBytes(fits));
    ASSERT_EQ(back.rows.size(), 1u);
    EXPECT_EQ(back.namedRank, 7);
    EXPECT_EQ(back.rows[0].capacity, 40u << 20);
    EXPECT_TRUE(back.rows[0].nonMonotone);
    EXPECT_THROW(rankFitsFromBytes("not cbor"), std::exception);
}

TEST(GatheredBytes, TheWorstRankHasTheMostOomsThenTheHighestPeak)
{
    JobSetting s { "pytorch", { row(30, 0), row(20, 2), row(25, 2), row(40, 0) } };
    const auto v = judgeSetting(s);
    EXPECT_FALSE(v.fits);
    EXPECT_EQ(v.worst, 2u); // two OOMs like rank 1, and the higher peak
    EXPECT_EQ(v.ranksWithOom, 2u);
    EXPECT_EQ(v.ooms, 4u);
    EXPECT_EQ(v.medianPeakReserved, 25u); // the lower median of 20, 25, 30, 40
    JobSetting fine { "ideal", { row(30, 0), row(10, 0) } };
    EXPECT_TRUE(judgeSetting(fine).fits);
    EXPECT_EQ(judgeSetting(fine).worst, 0u);
    EXPECT_EQ(jobSweepOrder({ s, fine }), (std::vector<std::size_t> { 1, 0 }));
}

TEST(GatheredBytes, TheJobCapacityIsTheLargestRanksOwnAndNoFitWhenOneRankFitsNowhere)
{
    JobFit f { "pytorch", { { "p", true, 24, 24, false, false }, { "p", true, 40, 40, false, false },
                               { "p", true, 26, 26, false, false } },
        {} };
    auto v = judgeFit(f);
    EXPECT_TRUE(v.fits);
    EXPECT_EQ(v.capacity, 40u);
    EXPECT_EQ(v.worst, 1u);
    f.ranks[2].fits = false;
    f.ranks[2].capacity = 0;
    v = judgeFit(f);
    EXPECT_FALSE(v.fits);
    EXPECT_EQ(v.worst, 2u);
    EXPECT_EQ(v.capacity, 0u);
}
} // namespace
