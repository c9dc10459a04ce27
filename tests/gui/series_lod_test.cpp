// Levels of detail: the per-pixel buckets and interval boxes drawn through them are those of a
// walk over every point (analyze::DeviceTimeline::buckets) and every kernel.
#include "importers/importer_registry.h"
#include "gui/models/series_lod.h"
#include "gui/models/timeline_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

using namespace gpumem;
using namespace gpumem::gui;

namespace {
std::shared_ptr<LoadedTrace> loadPublic(const std::string& relative)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative;
    if (!std::filesystem::exists(path))
        return nullptr;
    auto t = std::make_shared<LoadedTrace>();
    t->trace = loadTrace(path);
    t->summary = analyze::summarize(t->trace);
    t->analysis = analyze::analyzeTrace(t->trace);
    t->lod = std::make_shared<const TimelineLod>(
        t->trace, t->analysis.timeline.device(t->analysis.device), t->analysis.device);
    return t;
}
} // namespace

TEST(SeriesLod, BucketsEqualTheTimelinesOnARealProfilerTrace)
{
    auto t = loadPublic("hta/df_index_resolver.json.gz"); // 26,770 CUDA memory events
    if (!t)
        GTEST_SKIP() << "public traces not found at " << GPUMEM_PUBLIC_TRACES;
    const auto* d = t->analysis.timeline.device(t->analysis.device);
    ASSERT_NE(d, nullptr);
    ASSERT_GT(d->size(), SeriesLod::kCoarse * 4) << "the trace must span several coarse blocks";
    std::mt19937_64 rng(1);
    const TimeNs t0 = d->time.front() - 1000, t1 = d->time.back() + 1000;
    std::uniform_int_distribution<TimeNs> when(t0, t1);
    int compared = 0;
    for (auto kind : { analyze::SeriesKind::Allocated, analyze::SeriesKind::Active, analyze::SeriesKind::Reserved }) {
        const SeriesLod* lod = t->lod->series(kind);
        ASSERT_NE(lod, nullptr) << toString(kind);
        for (int trial = 0; trial < 60; ++trial) {
            TimeNs a = when(rng), b = when(rng);
            if (trial == 0)
                a = t0, b = t1; // the whole trace: most points inside coarse blocks
            if (a > b)
                std::swap(a, b);
            const std::size_t n = 1 + std::size_t(rng() % 1500);
            const auto expected = d->buckets(kind, a, b + 1, n);
            const auto got = lod->buckets(a, b + 1, n);
            ASSERT_EQ(got.size(), expected.size());
            for (std::size_t i = 0; i < n; ++i) {
                ASSERT_EQ(got[i].valid, expected[i].valid) << toString(kind) << " trial " << trial << " bucket " << i;
                ASSERT_EQ(got[i].min, expected[i].min) << toString(kind) << " trial " << trial << " bucket " << i;
                ASSERT_EQ(got[i].max, expected[i].max) << toString(kind) << " trial " << trial << " bucket " << i;
                ASSERT_EQ(got[i].last, expected[i].last) << toString(kind) << " trial " << trial << " bucket " << i;
                ASSERT_EQ(got[i].begin, expected[i].begin);
                ASSERT_EQ(got[i].end, expected[i].end);
            }
            ++compared;
        }
    }
    EXPECT_EQ(compared, 180);
}

TEST(TimelineLod, KernelBoxesCoverEveryPixelAKernelCovers)
{
    auto t = loadPublic("hta/df_index_resolver.json.gz"); // 19,370 kernels on 2 streams
    if (!t)
        GTEST_SKIP() << "public traces not found at " << GPUMEM_PUBLIC_TRACES;
    const TimeRange full = fullRangeOf(*t);
    const int width = 1200;
    for (TimeRange range :
        { full, TimeRange { full.start + full.length() / 3, full.start + full.length() / 3 + full.length() / 50 } }) {
        TimelineFrame frame = computeFrame(*t, range, width);
        TimeAxis axis(range, width);
        axis.setVisible(range);
        std::size_t kernelRows = 0;
        for (const auto& lane : t->lod->kernelStreams) {
            const QString title = "stream " + QString::number(t->trace.streams()[lane.stream].handle);
            auto row = std::find_if(
                frame.rows.begin(), frame.rows.end(), [&](const IntervalRow& r) { return r.title == title; });
            ASSERT_NE(row, frame.rows.end()) << title.toStdString();
            ++kernelRows;
            std::vector<char> byKernels(width, 0), byBoxes(width, 0);
            auto mark = [&](std::vector<char>& v, double x0, double x1) {
                for (int x = std::max(0, int(x0)); x < std::min(width, std::max(int(x0) + 1, int(std::ceil(x1)))); ++x)
                    v[std::size_t(x)] = 1;
            };
            for (auto i : lane.items) {
                const Kernel& k = t->trace.kernels()[i];
                if (k.end < range.start || k.start >= range.end)
                    continue;
                mark(byKernels, std::max(0.0, axis.toX(k.start)),
                    std::min(double(width), axis.toX(std::max(k.end, k.start + 1))));
            }
            for (const auto& b : row->boxes)
                mark(byBoxes, b.x0, b.x1);
            int missing = 0, extra = 0, covered = 0;
            for (int x = 0; x < width; ++x) {
                missing += byKernels[std::size_t(x)] && !byBoxes[std::size_t(x)];
                extra += !byKernels[std::size_t(x)] && byBoxes[std::size_t(x)];
                covered += byKernels[std::size_t(x)];
            }
            EXPECT_GT(covered, 0) << title.toStdString();
            EXPECT_EQ(missing, 0) << title.toStdString() << ": a column with a kernel has no box";
            // Boxes closer than a pixel merge (addBox), so a gap of up to one column may be filled.
            EXPECT_LE(extra, covered / 10 + 2) << title.toStdString();
        }
        EXPECT_EQ(kernelRows, 2u);
    }
}
