// Acceptance checks on the shared public traces (skipped with a message where they are absent).
#include "analyze/analysis.h"
#include "analyze/trace_summary.h"
#include "core/file_io.h"
#include "importers/importer_registry.h"
#include "tests/analyze/public_trace_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::publicTrace;

namespace {
const GroupRow& row(const Breakdown& b, GroupBy g, std::string_view key)
{
    for (const auto& r : b.by(g))
        if (r.key == key)
            return r;
    static const GroupRow none;
    ADD_FAILURE() << "no " << toString(g) << " row " << key;
    return none;
}
} // namespace

TEST(PublicTraces, Owlv2ModuleBreakdownAtPeakSumsToTheLiveBytes)
{
    const auto path = publicTrace("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    auto a = analyzeTrace(t);
    ASSERT_FALSE(a.breakdowns.empty());
    const auto& b = a.breakdowns.front();
    EXPECT_EQ(a.deviceLabel, "cuda:0");
    // The live set at the peak is exactly the timeline's allocated value there.
    EXPECT_EQ(b.liveBytes, a.timeline.device(a.device)->allocated[b.instant.point]);
    EXPECT_EQ(b.liveBytes, a.stats.allocatedBytes.peak);
    EXPECT_EQ(b.liveBytes, 1790402560u);
    EXPECT_EQ(b.liveBlocks, 12u);
    Bytes top = 0, self = 0;
    for (const auto& r : b.by(GroupBy::Module)) {
        self += r.selfBytes;
        if (r.depth == 0)
            top += r.totalBytes;
    }
    EXPECT_EQ(top, b.liveBytes);
    EXPECT_EQ(self, b.liveBytes);
    // The attention of encoder layer 1 holds the bmm scores and their softmax (2 × 820 MiB).
    const auto& mods = b.by(GroupBy::Module);
    ASSERT_GE(mods.size(), 6u);
    EXPECT_EQ(mods[0].key, "Owlv2ForObjectDetection_0");
    EXPECT_EQ(mods[0].totalBytes, 1784304640u);
    EXPECT_EQ(mods[0].totalBlocks, 8u);
    EXPECT_EQ(row(b, GroupBy::Module, "Owlv2ForObjectDetection_0/Owlv2Model_0/Owlv2VisionTransformer_0/Owlv2Encoder_0").totalBytes, 1773685760u);
    EXPECT_EQ(row(b, GroupBy::Module, "Owlv2ForObjectDetection_0/Owlv2Model_0/Owlv2VisionTransformer_0/Owlv2Encoder_0/Owlv2EncoderLayer_1")
                  .totalBytes,
        1763066880u);
    EXPECT_EQ(mods[5].label, "Owlv2Attention_1");
    EXPECT_EQ(mods[5].totalBytes, 1752448000u);
    EXPECT_EQ(b.by(GroupBy::Site)[0].totalBytes, 860295680u);
    EXPECT_EQ(b.by(GroupBy::Site)[1].totalBytes, 860295680u);
    EXPECT_EQ(b.by(GroupBy::Site)[0].label.substr(0, 7), "bmm in ");
    // No object address survives in a stack key (they differ between runs and would defeat diff).
    for (const auto& r : b.by(GroupBy::Site))
        EXPECT_EQ(r.key.find(" at 0x"), std::string::npos) << r.key;
    // Reserved comes from the profiler's "Total Reserved" counter; the ratios use its "Total Allocated"
    // counter (it includes the weights loaded before profiling). Both peaks agree with gpumem info's.
    const auto summary = summarize(t);
    std::map<std::string, Bytes> recorded;
    for (const auto& [name, peak] : summary.devices[a.device].recordedPeaks)
        recorded[name] = peak.bytes;
    EXPECT_EQ(a.timeline.device(a.device)->reservedSource, "counter: Total Reserved");
    EXPECT_EQ(a.fragmentation.peakReserved, recorded["Total Reserved"]);
    EXPECT_EQ(a.fragmentation.peakRecordedAllocated, recorded["Total Allocated"]);
    EXPECT_GT(*a.fragmentation.peakRecordedAllocated, a.fragmentation.peakAllocated);
    // Inference run: periodicity finds the repeated pipeline calls.
    EXPECT_EQ(a.steps.source, StepSource::Periodicity);
    EXPECT_GE(a.steps.steps.size(), 4u);
    EXPECT_FALSE(a.leaks.leaking);
}

TEST(PublicTraces, HtaMemoryTimelineCategorySumsAtPeakEqualTheRecordedOnes)
{
    const auto path = publicTrace("hta/memory_timeline.raw.gz");
    REQUIRE_PUBLIC_TRACE(path);
    // The recorded running sums, straight from the export ([ts, action, bytes, category] records in
    // time order; bytes are signed), at the first record where the total is largest.
    const auto records = nlohmann::json::parse(readFileMaybeGzip(path));
    const char* names[] = { "parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown" };
    std::int64_t sums[8] = {}, atPeak[8] = {}, total = 0, peak = 0;
    for (const auto& r : records) {
        const auto bytes = r[2].get<std::int64_t>();
        sums[r[3].get<int>()] += bytes;
        total += bytes;
        if (total > peak) {
            peak = total;
            std::copy(std::begin(sums), std::end(sums), std::begin(atPeak));
        }
    }
    ASSERT_EQ(peak, 3082832104);

    Trace t = loadTrace(path);
    auto a = analyzeTrace(t);
    ASSERT_TRUE(a.categoriesRecorded);
    ASSERT_FALSE(a.breakdowns.empty());
    const auto& b = a.breakdowns.front();
    EXPECT_EQ(b.liveBytes, static_cast<Bytes>(peak));
    for (int c = 0; c < 8; ++c) {
        Bytes got = 0;
        for (const auto& r : b.by(GroupBy::Category))
            if (r.key == names[c])
                got = r.totalBytes;
        EXPECT_EQ(got, static_cast<Bytes>(atPeak[c])) << names[c];
    }
    // Inference without annotations (steps by periodicity, phases by the transient peak), measured
    // against PyTorch's own categories on the bytes whose category PyTorch knew.
    EXPECT_EQ(a.steps.source, StepSource::Periodicity);
    EXPECT_EQ(a.steps.steps.size(), 5u);
    ASSERT_TRUE(a.agreementAtPeak && a.agreementAll);
    EXPECT_GE(a.agreementAtPeak->share(), 0.90); // measured 95.6 %
    EXPECT_GE(a.agreementAll->share(), 0.90);    // measured 97.6 %
    std::printf("inference agreement: %.2f %% of %llu bytes at the peak, %.2f %% of %llu bytes over all blocks\n",
        100 * a.agreementAtPeak->share(), static_cast<unsigned long long>(a.agreementAtPeak->comparedBytes),
        100 * a.agreementAll->share(), static_cast<unsigned long long>(a.agreementAll->comparedBytes));
}
