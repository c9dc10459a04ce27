// gpumem ranks on the generated job (bench/job_generator.h from traces/mlp_train.jsonl): the answer, the formats,
// --jobs, -o, and the errors that name the file.
#include "bench/job_generator.h"
#include "cli_runner.h"
#include "core/display_width.h"
#include "importers/importer_registry.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

using namespace gpumem;
using namespace gpumem::test;

namespace {
ScratchCleanup cleanup;

// An 8-rank job (leak on rank 7, extra buffer on rank 4), written once per test program.
const std::filesystem::path& jobDir()
{
    static const std::filesystem::path dir = [] {
        auto d = scratchDir("ranks-job");
        bench::RankJobGenerator job(loadTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl"), {});
        job.write(d.string(), "gmt");
        return d;
    }();
    return dir;
}
std::string q(const std::filesystem::path& p) { return "'" + p.string() + "'"; }
} // namespace

TEST(RanksCli, OpensWithTheWorstRankAndNamesTheLeakAndTheExtraBufferSites)
{
    const auto r = runCli("ranks " + q(jobDir()));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.rfind("gpumem ranks: 8 ranks (rank numbers from RANK)\nrank 7 peaks highest", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("and leaks"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("remember_batch (leaky_cache.py:17)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rank 4 against the median rank"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("allocate_extra_buffer (extra_buffer.py:9)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("outliers: rank 4 ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n7 *L "), std::string::npos) << r.out; // the leak rank's row, marked
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        EXPECT_LE(displayWidth(line), 100u) << line;
}

TEST(RanksCli, JsonAndCsvCarryTheSameAnswer)
{
    const auto j = runCli("ranks --format json " + q(jobDir()));
    ASSERT_EQ(j.exitCode, 0) << j.err;
    const auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["imbalance"]["peak_allocated"]["outliers"], nlohmann::json::array({ 4, 7 }));
    EXPECT_EQ(doc["ranks"].size(), 8u);
    const std::string headline = doc["headline"].get<std::string>();
    EXPECT_EQ(headline.rfind("rank 7 peaks highest", 0), 0u) << headline;
    EXPECT_NE(headline.find("site remember_batch (leaky_cache.py:17) +"), std::string::npos) << headline;
    EXPECT_NE(headline.find("module nn.Module: LeakyCache +"), std::string::npos) << headline;
    EXPECT_EQ(doc["step_alignment"], "ProfilerStep# number");
    EXPECT_TRUE(doc["ranks"][7]["leaking"].get<bool>());
    ASSERT_EQ(doc["differences"].size(), 2u);
    std::set<std::string> sites;
    for (const auto& d : doc["differences"])
        for (const auto& row : d["rows"])
            if (row["group"] == "site" && row["delta_bytes"].get<std::int64_t>() > 0)
                sites.insert(row["label"].get<std::string>());
    EXPECT_TRUE(sites.count("remember_batch (leaky_cache.py:17)")) << j.out;
    EXPECT_TRUE(sites.count("allocate_extra_buffer (extra_buffer.py:9)")) << j.out;

    const auto c = runCli("ranks --format csv " + q(jobDir()));
    ASSERT_EQ(c.exitCode, 0) << c.err;
    std::istringstream lines(c.out);
    std::vector<std::string> rows;
    for (std::string line; std::getline(lines, line);)
        rows.push_back(line);
    ASSERT_EQ(rows.size(), 9u) << c.out;
    EXPECT_EQ(rows[0].rfind("rank,path,device,peak_allocated_bytes,", 0), 0u);
    EXPECT_NE(rows[8].find(",true,"), std::string::npos) << rows[8]; // rank 7 leaks
    EXPECT_EQ(rows[8].substr(rows[8].size() - 5), ",true"); // and is an outlier
    EXPECT_EQ(rows[1].substr(rows[1].size() - 6), ",false");
}

TEST(RanksCli, TheOutputDoesNotDependOnJobsAndGoesToTheFileGiven)
{
    const auto one = runCli("ranks --jobs 1 " + q(jobDir()));
    const auto three = runCli("ranks -j 3 " + q(jobDir()));
    ASSERT_EQ(one.exitCode, 0) << one.err;
    EXPECT_EQ(one.out, three.out);
    const auto out = scratchDir("ranks-out") / "job.json";
    const auto f = runCli("ranks --format json -o " + q(out) + " " + q(jobDir()));
    ASSERT_EQ(f.exitCode, 0) << f.err;
    EXPECT_EQ(f.out, "");
    EXPECT_EQ(slurp(out), runCli("ranks --format json " + q(jobDir())).out);
}

TEST(RanksCli, BadInputStopsWithAnErrorNamingTheFile)
{
    const auto missing = runCli("ranks " + q(jobDir() / "nope.gmt"));
    EXPECT_EQ(missing.exitCode, 1);
    EXPECT_NE(missing.err.find("nope.gmt: no such file or folder"), std::string::npos) << missing.err;

    const auto empty = scratchDir("ranks-empty");
    const auto none = runCli("ranks " + q(empty));
    EXPECT_EQ(none.exitCode, 1); // the input's fault, as a missing file (was 2)
    for (const char* verb : { "replay", "fit" })
        EXPECT_EQ(runCli(std::string(verb) + " " + q(empty)).exitCode, 1) << verb;
    EXPECT_NE(none.err.find("no traces in this folder"), std::string::npos) << none.err;

    const auto rank3 = jobDir() / bench::RankJobGenerator::fileName(3, "gmt");
    const auto twice = runCli("ranks " + q(rank3) + " " + q(rank3));
    EXPECT_EQ(twice.exitCode, 1);
    EXPECT_NE(twice.err.find("two traces name rank 3"), std::string::npos) << twice.err;

    const auto bad = scratchDir("ranks-bad") / "rank1.jsonl";
    std::ofstream(bad) << "{\"format\":\"gpumem-jsonl\",\"version\":1}\n{\"type\":\"mem\",\"t\":\"soon\"}\n";
    const auto unreadable = runCli("ranks " + q(rank3) + " " + q(bad));
    EXPECT_EQ(unreadable.exitCode, 1);
    EXPECT_NE(unreadable.err.find("rank1.jsonl"), std::string::npos) << unreadable.err;

    // --device takes a position (labels differ between ranks); the job's one device is 0, the default.
    EXPECT_EQ(runCli("ranks --device 0 " + q(jobDir())).out, runCli("ranks " + q(jobDir())).out);
    const auto label = runCli("ranks --device cuda:0 " + q(jobDir()));
    EXPECT_EQ(label.exitCode, 2);
    EXPECT_NE(label.err.find("--device 'cuda:0': give the device's position"), std::string::npos) << label.err;
    const auto past = runCli("ranks --device 3 " + q(rank3));
    EXPECT_EQ(past.exitCode, 2) << past.err;
    EXPECT_NE(past.err.find(rank3.filename().string()), std::string::npos) << past.err;

    const auto help = runCli("help ranks");
    EXPECT_EQ(help.exitCode, 0);
    EXPECT_NE(help.out.find("ranks [--format text|json|csv] [--jobs N]"), std::string::npos) << help.out;
}

TEST(RanksCli, TheReportOfAJobsTracesOpensWithTheRanksSection)
{
    std::string traces;
    for (std::size_t r = 0; r < 8; ++r)
        traces += " " + q(jobDir() / bench::RankJobGenerator::fileName(r, "gmt"));
    const auto html = scratchDir("ranks-report") / "job.html";
    const auto r = runCli("report" + traces + " -o " + q(html));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string page = slurp(html);
    const auto ranks = page.find("<h2 id='ranks'>Ranks of one job</h2>");
    ASSERT_NE(ranks, std::string::npos);
    EXPECT_LT(ranks, page.find("<h2>", ranks + 1)); // before the first trace's section
    EXPECT_NE(page.find("<strong>Answer:</strong> rank 7 peaks highest"), std::string::npos);
    EXPECT_NE(page.find("<h3>rank 4 against the median rank"), std::string::npos);
    EXPECT_NE(page.find("allocate_extra_buffer (extra_buffer.py:9)"), std::string::npos);
    // One trace is no job; --ranks adds the section anyway.
    const auto one = runCli("report " + q(jobDir() / bench::RankJobGenerator::fileName(0, "gmt")) + " -o " + q(html));
    ASSERT_EQ(one.exitCode, 0) << one.err;
    EXPECT_EQ(slurp(html).find("Ranks of one job"), std::string::npos);
    const auto forced = runCli("report --ranks " + q(jobDir() / bench::RankJobGenerator::fileName(0, "gmt")) + " -o " + q(html));
    ASSERT_EQ(forced.exitCode, 0) << forced.err;
    EXPECT_NE(slurp(html).find("Ranks of one job"), std::string::npos);
}

// docs/ranks.md shows the start of this output: it must stay what `gpumem ranks` prints.
TEST(RanksCli, TheOutputShownInTheDocsIsWhatItPrints)
{
    const std::string doc = slurp(GPUMEM_SOURCE_DIR "/docs/ranks.md");
    const std::string open = "which opens with\n\n```\n";
    const auto from = doc.find(open);
    ASSERT_NE(from, std::string::npos);
    const auto to = doc.find("```", from + open.size());
    const std::string shown = doc.substr(from + open.size(), to - from - open.size());
    const auto r = runCli("ranks " + q(jobDir()));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, shown.size()), shown);
}

// Review defect H2 (2026-12-02): a damaged rank file in a folder was skipped, so the job silently
// shrank to the readable ranks. Smallest case: one good rank and a `rank1.gmt` of garbage.
TEST(RanksCli, AFileNamedLikeATraceThatNoImporterReadsIsAnErrorNotASkippedRank)
{
    const auto dir = scratchDir("ranks-garbage");
    std::filesystem::copy_file(GPUMEM_SOURCE_DIR "/tests/data/job/rank0.jsonl", dir / "rank0.jsonl");
    std::ofstream(dir / "rank1.gmt") << "XXXXgarbage";
    std::ofstream(dir / "README.txt") << "notes, not a trace"; // still skipped: not named like a trace
    const auto r = runCli("ranks " + q(dir));
    EXPECT_EQ(r.exitCode, 1) << r.out;
    EXPECT_NE(r.err.find("rank1.gmt: named like a trace, but no format gpumem reads matches"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
}

// Review defect H3 (2026-12-02): a truncated rank (an error-severity anomaly) entered the median and
// the outliers with the figures of part of the run. Smallest case: rank 1 as .gmt cut 10 bytes short,
// inside the header of its last chunk.
TEST(RanksCli, ADamagedRankIsRefusedNamingTheAnomaly)
{
    const auto dir = scratchDir("ranks-truncated");
    std::filesystem::copy_file(GPUMEM_SOURCE_DIR "/tests/data/job/rank0.jsonl", dir / "rank0.jsonl");
    ASSERT_EQ(runCli("convert tests/data/job/rank1.jsonl -o " + q(dir / "full.gmt")).exitCode, 0);
    {
        std::ifstream in(dir / "full.gmt", std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_GT(bytes.size(), 10u);
        std::ofstream(dir / "rank1.gmt", std::ios::binary) << bytes.substr(0, bytes.size() - 10);
    }
    std::filesystem::remove(dir / "full.gmt");
    const auto r = runCli("ranks " + q(dir));
    EXPECT_EQ(r.exitCode, 1) << r.out;
    EXPECT_NE(r.err.find("rank1.gmt: the trace is damaged (truncated: "), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
}

// Review defect M2 (2026-12-02): with 3 ranks the extra-buffer rank (1) is the median, no rank is an
// outlier, and the answer said "balanced" without the leak rank 2 carries (the table's L mark and the
// leaks section named it). The answer now names the leak and its site.
TEST(RanksCli, ABalancedJobStillNamesTheLeakingRankInItsAnswer)
{
    const auto dir = scratchDir("ranks-balanced-leak");
    bench::RankJobOptions options;
    options.ranks = 3;
    bench::RankJobGenerator job(loadTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl"), options);
    ASSERT_EQ(job.leakRank(), 2u);
    ASSERT_EQ(job.extraBufferRank(), 1u);
    job.write(dir.string(), "gmt");
    const auto r = runCli("ranks " + q(dir));
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("the 3 ranks are balanced"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("But rank 2 leaks "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("a step (remember_batch (leaky_cache.py:17))."), std::string::npos) << r.out;
}
