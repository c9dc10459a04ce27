// `gpumem info` on an imported Kineto trace and on its .gmt copy gives the same figures
// (what `gpumem convert X -o x.gmt && gpumem info x.gmt` does, at library level).
#include "analyze/trace_summary.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

using namespace gpumem;

namespace {
std::string publicTrace(const std::string& relative) { return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative; }

const analyze::DeviceSummary& deviceNamed(const analyze::TraceSummary& s, const std::string& label)
{
    for (const auto& d : s.devices)
        if (d.label == label)
            return d;
    throw std::runtime_error("no device " + label);
}

std::optional<analyze::Peak> recorded(const analyze::DeviceSummary& d, const std::string& name)
{
    for (const auto& [n, p] : d.recordedPeaks)
        if (n == name)
            return p;
    return std::nullopt;
}

void expectSameSummary(const analyze::TraceSummary& a, const analyze::TraceSummary& b)
{
    EXPECT_EQ(a.sourceFormat, b.sourceFormat);
    EXPECT_EQ(a.start, b.start);
    EXPECT_EQ(a.end, b.end);
    EXPECT_EQ(a.memoryEvents, b.memoryEvents);
    EXPECT_EQ(a.kernels, b.kernels);
    EXPECT_EQ(a.annotations, b.annotations);
    EXPECT_EQ(a.counterSamples, b.counterSamples);
    EXPECT_EQ(a.allocations, b.allocations);
    ASSERT_EQ(a.devices.size(), b.devices.size());
    for (std::size_t i = 0; i < a.devices.size(); ++i) {
        const auto &x = a.devices[i], &y = b.devices[i];
        EXPECT_EQ(x.label, y.label);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.eventsByKind, y.eventsByKind);
        EXPECT_EQ(x.kernels, y.kernels);
        EXPECT_EQ(x.allocatedBeforeTrace, y.allocatedBeforeTrace);
        EXPECT_EQ(x.liveAtEnd, y.liveAtEnd);
        ASSERT_EQ(x.peakAllocated.has_value(), y.peakAllocated.has_value());
        if (x.peakAllocated) {
            EXPECT_EQ(x.peakAllocated->bytes, y.peakAllocated->bytes);
        }
        ASSERT_EQ(x.recordedPeaks.size(), y.recordedPeaks.size());
        for (std::size_t j = 0; j < x.recordedPeaks.size(); ++j) {
            EXPECT_EQ(x.recordedPeaks[j].first, y.recordedPeaks[j].first);
            EXPECT_EQ(x.recordedPeaks[j].second.bytes, y.recordedPeaks[j].second.bytes);
            EXPECT_EQ(x.recordedPeaks[j].second.time, y.recordedPeaks[j].second.time);
        }
    }
    ASSERT_EQ(a.anomalies.size(), b.anomalies.size());
    for (std::size_t i = 0; i < a.anomalies.size(); ++i) {
        EXPECT_EQ(a.anomalies[i].code, b.anomalies[i].code);
        EXPECT_EQ(a.anomalies[i].count, b.anomalies[i].count);
    }
}
} // namespace

TEST(KinetoSummary, InfoOfTheImportAndOfItsGmtCopyAgree)
{
    const auto path = publicTrace("hta/df_index_resolver.json.gz");
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    const Trace t = loadTrace(path);
    const auto gmt
        = (std::filesystem::temp_directory_path() / ("kineto-summary-" + std::to_string(::getpid()) + ".gmt")).string();
    writeGmt(t, gmt);
    const Trace back = loadTrace(gmt);
    std::filesystem::remove(gmt);
    const auto a = analyze::summarize(t);
    const auto b = analyze::summarize(back);
    expectSameSummary(a, b);

    const auto& gpu = deviceNamed(a, "cuda:1");
    EXPECT_EQ(gpu.name, "Tesla V100-SXM2-32GB");
    EXPECT_EQ(gpu.eventsByKind[static_cast<std::size_t>(EventKind::Alloc)], 13385u);
    EXPECT_EQ(gpu.eventsByKind[static_cast<std::size_t>(EventKind::Free)], 13385u);
    EXPECT_EQ(gpu.liveAtEnd, 0u);
    EXPECT_EQ(gpu.kernels, 19370u);
    EXPECT_EQ(recorded(gpu, "Total Allocated")->bytes, 6629508096u);
    EXPECT_EQ(recorded(gpu, "Total Reserved")->bytes, 12782141440u);
    // Memory allocated before the profiler started: the recorded Total Allocated peak is exactly the
    // in-trace peak plus it (both peaks at +0.194461 s), which `info` now says ('before trace').
    ASSERT_TRUE(gpu.peakAllocated);
    EXPECT_EQ(gpu.peakAllocated->bytes, 2532893696u);
    EXPECT_EQ(gpu.allocatedBeforeTrace, 4096614400u);
    EXPECT_EQ(gpu.peakAllocated->bytes + gpu.allocatedBeforeTrace, recorded(gpu, "Total Allocated")->bytes);
    EXPECT_EQ(deviceNamed(a, "cpu").allocatedBeforeTrace, 0u);
}

TEST(KinetoSummary, LegacyCountsReachInfoThroughTheNoAddressesAnomaly)
{
    const auto path = publicTrace("kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz");
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent";
    const auto s = analyze::summarize(loadTrace(path));
    const auto it = std::find_if(
        s.anomalies.begin(), s.anomalies.end(), [](const Anomaly& a) { return a.code == "no_addresses"; });
    ASSERT_NE(it, s.anomalies.end());
    EXPECT_NE(it->detail.find("cuda:0 4110 allocs / 4110 frees"), std::string::npos) << it->detail;
    EXPECT_EQ(recorded(deviceNamed(s, "cuda:0"), "Allocated (sum of Bytes)")->bytes, 2791636480u);
}
