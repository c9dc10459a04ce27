// The job view of many ranks (analyze/job_view.h) on the generated job (bench/job_generator.h) made from
// traces/mlp_train.jsonl, and on the HTA trace (rank 1 of a 2-GPU DDP run) beside a perturbed copy as rank 0.
#include "analyze/job_view.h"
#include "analyze/steps.h"
#include "bench/job_generator.h"
#include "core/display_width.h"
#include "core/error.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace gpumem;
using namespace gpumem::analyze;

namespace {
const std::string kSample = GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl";

std::vector<RankSummary> summariesOf(const bench::RankJobGenerator& job)
{
    std::vector<RankSummary> out;
    for (std::size_t r = 0; r < job.ranks(); ++r)
        out.push_back(summarizeRank(job.rank(r), bench::RankJobGenerator::fileName(r, "gmt"), r));
    return out;
}

// The bytes of the injected block(s) live at the rank's allocated peak, from the rank's own trace.
Bytes injectedAtPeak(const Trace& t, std::string_view function)
{
    AnalysisOptions o;
    o.instants = { InstantSpec {} };
    const auto a = analyzeTrace(t, o);
    Bytes sum = 0;
    for (auto i : a.breakdowns.front().liveAllocations) {
        const auto e = t.allocations()[i].allocEvent;
        if (siteLabel(t, t.memory().site[e]).find(function) != std::string::npos)
            sum += t.memory().size[e];
    }
    return sum;
}

std::string textOf(const JobView& v)
{
    std::ostringstream s;
    writeJobViewText(v, 5, s);
    return s.str();
}

std::filesystem::path scratch(const std::string& name)
{
    auto dir = std::filesystem::temp_directory_path() / ("gpumem-job-view-" + std::to_string(::getpid())) / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}
} // namespace

TEST(JobView, NamesTheLeakingAndTheExtraBufferRanksAndTheSitesResponsible)
{
    bench::RankJobGenerator job(loadTrace(kSample), {});
    ASSERT_EQ(job.leakRank(), 7u);
    ASSERT_EQ(job.extraBufferRank(), 4u);
    const JobView v = buildJobView(summariesOf(job));
    ASSERT_EQ(v.ranks.size(), 8u);
    EXPECT_FALSE(v.ranksFromOrder);
    for (std::size_t r = 0; r < 8; ++r) {
        EXPECT_EQ(v.rankNumbers[r], std::int64_t(r));
        EXPECT_EQ(v.ranks[r].rankSource, "RANK");
    }
    // Exactly the two injected ranks are outliers; the leak rank leaks, from its own site, and no other does.
    EXPECT_EQ(v.allocated->outliers, (std::vector<std::size_t> { 4, 7 }));
    for (std::size_t r = 0; r < 8; ++r)
        EXPECT_EQ(v.ranks[r].leaking, r == 7) << r;
    ASSERT_FALSE(v.ranks[7].leakSites.empty());
    EXPECT_NE(v.ranks[7].leakSites.front().label.find(bench::kLeakFunction), std::string::npos) << v.ranks[7].leakSites.front().label;
    // The leak grows by one injected block a step (within the ±1 % size map of rank 7).
    EXPECT_NEAR(v.ranks[7].leakGrowthPerStep, double(job.leakBytesPerStep()), 0.011 * double(job.leakBytesPerStep()));

    // Each outlier against the median rank: the largest site growth is its injected block, byte for byte.
    ASSERT_EQ(v.differences.size(), 2u);
    for (const auto& d : v.differences) {
        const std::size_t rank = v.rankNumbers[d.rank];
        const std::string_view function = rank == 7 ? bench::kLeakFunction : bench::kExtraFunction;
        const std::string_view module = rank == 7 ? bench::kLeakModule : bench::kExtraModule;
        const DiffRow* site = nullptr;
        const DiffRow* mod = nullptr;
        for (const auto& r : d.rows) {
            if (r.group == GroupBy::Site && !site)
                site = &r;
            if (r.group == GroupBy::Module && !mod)
                mod = &r;
        }
        ASSERT_TRUE(site && mod) << rank;
        EXPECT_NE(site->label.find(function), std::string::npos) << site->label;
        EXPECT_EQ(site->before, 0u);
        EXPECT_EQ(site->after, injectedAtPeak(job.rank(rank), function)) << rank;
        EXPECT_EQ(mod->key, module);
        EXPECT_EQ(mod->after, site->after);
        EXPECT_TRUE(d.complete);
    }
    const std::string text = textOf(v);
    // The first sentence names the worst rank and its site; the leak line names the leak's site.
    const std::string first = text.substr(text.find('\n') + 1);
    EXPECT_EQ(first.rfind("rank " + std::to_string(v.rankNumbers[v.differences[0].rank]) + " peaks highest", 0), 0u) << text;
    EXPECT_NE(text.find("rank 7: +"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string(bench::kExtraFunction)), std::string::npos) << text;
    EXPECT_NE(text.find(std::string(bench::kLeakFunction)), std::string::npos) << text;
    EXPECT_NE(text.find("steps, aligned by ProfilerStep# number (4 steps, 4 on every rank)"), std::string::npos) << text;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        EXPECT_LE(displayWidth(line), 100u) << line;
}

TEST(JobView, SummariesRoundTripThroughJsonAndGiveTheSameViewByteForByte)
{
    bench::RankJobGenerator job(loadTrace(kSample), { .ranks = 5 });
    const auto summaries = summariesOf(job);
    std::vector<RankSummary> again;
    for (const auto& s : summaries) {
        // Through text, as an MPI gather would carry it.
        again.push_back(rankSummaryFromJson(nlohmann::json::parse(toJson(s).dump())));
        EXPECT_EQ(again.back(), s) << s.path;
    }
    // Given in another order, the view is the same: it sorts by the position given, then by rank.
    std::reverse(again.begin(), again.end());
    const JobView a = buildJobView(summaries), b = buildJobView(again);
    EXPECT_EQ(textOf(a), textOf(b));
    EXPECT_EQ(jobViewToJson(a).dump(), jobViewToJson(b).dump());
    std::ostringstream ca, cb;
    writeJobViewCsv(a, ca);
    writeJobViewCsv(b, cb);
    EXPECT_EQ(ca.str(), cb.str());
    EXPECT_THROW(rankSummaryFromJson(nlohmann::json::parse(R"({"path":"x"})")), FormatError);
}

TEST(JobView, ThreadedSummariesOfTheWrittenJobMatchOneThread)
{
    const auto dir = scratch("threads");
    bench::RankJobGenerator job(loadTrace(kSample), { .ranks = 6, .seed = 7 });
    const auto paths = job.write(dir.string(), "gmt");
    EXPECT_EQ(rankTracePaths({ dir.string() }), paths);
    const auto one = summarizeRanks(paths, {}, {}, 1);
    const auto four = summarizeRanks(paths, {}, {}, 4);
    EXPECT_EQ(one, four);
    EXPECT_EQ(textOf(buildJobView(one)), textOf(buildJobView(four)));
    // The files read back give what the generator's traces give in memory.
    EXPECT_EQ(one[5].peakAllocated, summarizeRank(job.rank(5), paths[5], 5).peakAllocated);
}

TEST(JobView, TwoTracesNamingOneRankAreAnErrorNamingBothFiles)
{
    bench::RankJobGenerator job(loadTrace(kSample), { .ranks = 3 });
    auto s = summariesOf(job);
    s.push_back(summarizeRank(job.rank(1), "copy-of-rank1.gmt", 3));
    try {
        buildJobView(s);
        FAIL() << "no error";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("two traces name rank 1"), std::string::npos) << what;
        EXPECT_NE(what.find(bench::RankJobGenerator::fileName(1, "gmt")), std::string::npos) << what;
        EXPECT_NE(what.find("copy-of-rank1.gmt"), std::string::npos) << what;
    }
}

TEST(JobView, AnUnreadableTraceStopsTheRunNamingItsFile)
{
    const auto dir = scratch("bad");
    bench::RankJobGenerator job(loadTrace(kSample), { .ranks = 3 });
    auto paths = job.write(dir.string(), "jsonl");
    std::ofstream(dir / "broken.jsonl") << "{\"format\":\"gpumem-jsonl\",\"version\":1}\n{\"type\":\"mem\",\"t\":\"soon\"}\n";
    paths.insert(paths.begin() + 1, (dir / "broken.jsonl").string());
    try {
        summarizeRanks(paths, {}, {}, 2);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("broken.jsonl"), std::string::npos) << e.what();
    }
    EXPECT_THROW(rankTracePaths({ (dir / "missing.gmt").string() }), IoError);
    const auto empty = scratch("empty");
    std::ofstream(empty / "notes.txt") << "not a trace\n";
    try {
        rankTracePaths({ empty.string() });
        FAIL() << "no error";
    } catch (const UsageError& e) {
        FAIL() << "a usage error, not the input's: " << e.what();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no traces in this folder"), std::string::npos) << e.what();
    }
}

TEST(JobView, RankNumbersComeFromMetadataThenTheFileNameThenTheOrderGiven)
{
    TraceBuilder b;
    b.alloc(10, 4096, 512);
    b.free(20, 4096, 512);
    const Trace plain = b.build();
    EXPECT_FALSE(namedRankOf(plain, "/x/trace.gmt"));
    EXPECT_EQ(namedRankOf(plain, "/x/gpumem.host.12.rank3.local1.gmt")->first, 3);
    EXPECT_EQ(namedRankOf(plain, "/x/rank-12.json.gz")->first, 12);
    EXPECT_EQ(namedRankOf(plain, "/x/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz")->first, 0);
    EXPECT_FALSE(namedRankOf(plain, "/x/frank5.gmt")); // "rank" inside a word is no rank
    EXPECT_EQ(namedRankOf(plain, "/x/frank5.gmt").has_value(), false);
    // Without names, ranks are the positions given.
    const JobView v = buildJobView({ summarizeRank(plain, "b.gmt", 0), summarizeRank(plain, "a.gmt", 1) });
    EXPECT_TRUE(v.ranksFromOrder);
    EXPECT_EQ(v.ranks[0].path, "b.gmt");
    EXPECT_EQ(v.allocated->outliers.size(), 0u);
}

TEST(JobView, HtaRankOneAndAPerturbedCopyAsRankZeroAlignByProfilerStep)
{
    const std::string path = GPUMEM_PUBLIC_TRACES "/hta/df_index_resolver.json.gz";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public traces absent: " << path;
    const Trace hta = loadTrace(path);
    bench::RankJobGenerator job(hta, { .ranks = 2, .leakRank = bench::kNoRank, .extraBufferRank = bench::kNoRank });
    const JobView v = buildJobView({ summarizeRank(hta, path, 0), summarizeRank(job.rank(0), "rank0.gmt", 1) });
    ASSERT_EQ(v.rankNumbers, (std::vector<std::int64_t> { 0, 1 }));
    EXPECT_EQ(v.ranks[0].rankSource, "RANK");
    EXPECT_EQ(v.ranks[1].rankSource, "distributedInfo");
    EXPECT_EQ(v.ranks[1].path, path);
    EXPECT_EQ(v.stepAlignment, "ProfilerStep# number");
    // The HTA trace holds ProfilerStep#2 … #6; detectSteps takes the ranges it can close.
    ASSERT_GE(v.steps.size(), 4u);
    for (const auto& s : v.steps) {
        EXPECT_EQ(s.ranksWithStep, 2u) << s.number;
        EXPECT_GE(s.number, 2);
        EXPECT_LE(s.number, 6);
        // The copy's sizes are within 1 % of the original's in each step.
        const double a = double(*s.peakAllocated[0]), b = double(*s.peakAllocated[1]);
        EXPECT_NEAR(a, b, 0.0101 * b) << s.number;
    }
    // Aligned by number, not by time: the copy's clock starts elsewhere, yet its steps match.
    for (std::size_t k = 0; k < v.ranks[0].steps.size(); ++k)
        EXPECT_EQ(v.ranks[0].steps[k].number, v.ranks[1].steps[k].number);
    const std::string text = textOf(v);
    EXPECT_NE(text.find("steps, aligned by ProfilerStep# number"), std::string::npos) << text;
    EXPECT_NE(text.find("rank numbers from RANK, distributedInfo"), std::string::npos) << text;
}

// Two hand-written ranks (tests/data/ranks/): rank 1 runs out in step 2, rank 0 only in step 3, although rank 1's
// clock is 100 ms later: "first" is by aligned step, then by time from each rank's start.
TEST(JobView, TheRankThatRunsOutFirstIsTheOneWhoseOomComesInTheEarliestStep)
{
    const std::string a = GPUMEM_SOURCE_DIR "/tests/data/ranks/oom_rank_a.jsonl", b = GPUMEM_SOURCE_DIR "/tests/data/ranks/oom_rank_b.jsonl";
    const JobView v = buildJobView(summarizeRanks({ a, b }, {}, {}, 2));
    ASSERT_EQ(v.rankNumbers, (std::vector<std::int64_t> { 0, 1 }));
    ASSERT_TRUE(v.ranks[0].firstOom && v.ranks[1].firstOom);
    EXPECT_EQ(v.ranks[0].firstOom->step, 3);
    EXPECT_EQ(v.ranks[0].firstOom->request, 6ull << 30);
    EXPECT_EQ(v.ranks[0].firstOom->time, 3'200'000 - 900'000); // from the rank's start (its first step begins at 0.9 ms)
    EXPECT_EQ(v.ranks[1].firstOom->step, 2);
    EXPECT_EQ(v.ranks[1].firstOom->request, 7ull << 30);
    ASSERT_TRUE(v.firstOom);
    EXPECT_EQ(*v.firstOom, 1u);
    EXPECT_EQ(jobViewHeadline(v).rfind("rank 1 runs out of memory first (+0.001800 s, step 2, a 7.00 GiB request); ", 0), 0u)
        << jobViewHeadline(v);
    EXPECT_EQ(v.stepAlignment, "ProfilerStep# number");
    ASSERT_EQ(v.steps.size(), 3u);
    EXPECT_EQ(v.steps[0].number, 1);
    EXPECT_EQ(v.steps[0].max, 2ull << 30);
    EXPECT_EQ(v.steps[0].min, 1ull << 30);
    EXPECT_EQ(v.allocated->ratio, 2.0);
    const std::string text = textOf(v);
    EXPECT_NE(text.find("+0.002s #3 6.00 GiB"), std::string::npos) << text;
    EXPECT_NE(text.find("+0.002s #2 7.00 GiB"), std::string::npos) << text;
}
