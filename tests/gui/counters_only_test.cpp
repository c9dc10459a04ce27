// A trace that records memory as counters only (PyTorch <= 1.9 profiler: [memory] events with Bytes but
// no Addr, docs/kineto-import.md): the Timeline draws the recorded counter of the busiest device, and
// every page that has nothing to show says why in words.
#include "core/trace_builder.h"
#include "gui/models/timeline_model.h"
#include "gui/views/breakdown_page.h"
#include "gui/views/memory_map_page.h"
#include "gui/views/timeline_view.h"
#include "gui/views/what_if_page.h"
#include "tests/gui/gui_test_support.h"

#include <QAction>
#include <QEventLoop>
#include <QMenu>
#include <QTest>
#include <QTimer>

#include <algorithm>
#include <tuple>
#include <vector>

using namespace gpumem;
using namespace gpumem::gui;
using gpumem::gui::test::publicTrace;
using gpumem::gui::test::waitLoaded;

namespace {
const char* const kHandMade = GPUMEM_SOURCE_DIR "/tests/data/kineto/legacy_counters_only.json";
const char* const kLegacy = "kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz";

// The frame the Timeline page's model computes for the whole trace, `width` pixels wide.
TimelineFrame modelFrame(const std::shared_ptr<const LoadedTrace>& trace, int width)
{
    TimelineModel model;
    model.setTrace(trace);
    TimelineFrame frame;
    QEventLoop loop;
    QObject::connect(&model, &TimelineModel::frameReady, &loop, [&](TimelineFrame f) {
        frame = std::move(f);
        loop.quit();
    });
    QTimer::singleShot(30000, &loop, &QEventLoop::quit);
    model.request(fullRangeOf(*trace), width); // computed on a worker thread
    loop.exec();
    return frame;
}

double peakOf(const PixelSeries& s)
{
    double peak = 0;
    for (const auto& b : s.buckets)
        if (b.valid)
            peak = std::max(peak, b.max);
    return peak;
}

// The pixel column where the series first reaches `value`, or -1.
int firstColumnAt(const PixelSeries& s, double value)
{
    for (std::size_t i = 0; i < s.buckets.size(); ++i)
        if (s.buckets[i].valid && s.buckets[i].max == value)
            return int(i);
    return -1;
}

std::shared_ptr<const LoadedTrace> open(MainWindow& w, const std::string& path, std::optional<DeviceId> device = {})
{
    w.setQuietErrors(true);
    w.openTrace(QString::fromStdString(path), device);
    if (!waitLoaded(w))
        return nullptr;
    return w.session().current();
}
} // namespace

TEST(CountersOnlyTrace, TimelineDrawsTheRecordedCounterOfTheBusiestDevice)
{
    MainWindow w;
    auto t = open(w, kHandMade);
    ASSERT_TRUE(t);
    // cpu is device 0 (its first event comes first), but cuda:0's counter peaks higher: it is the one shown.
    ASSERT_EQ(t->trace.devices().size(), 2u);
    EXPECT_EQ(t->analysis.deviceLabel, "cuda:0");
    const TimelineFrame f = modelFrame(t, 100);
    ASSERT_EQ(f.lanes.size(), 1u); // no fragmentation lane: there is no reserved counter
    const ValueLane& lane = f.lanes[0];
    EXPECT_EQ(lane.title, "memory cuda:0 (recorded counters)");
    ASSERT_EQ(lane.series.size(), 1u);
    const PixelSeries& s = lane.series[0];
    EXPECT_EQ(s.name, "Allocated (sum of Bytes) (recorded)");
    ASSERT_EQ(s.buckets.size(), 100u);
    // The running sum of Bytes: 1, 4, 3, 5, 2, 0 MiB at +10, 20, 30, 40, 50, 60 µs of a 100 µs span.
    EXPECT_DOUBLE_EQ(peakOf(s), 5242880.0);
    EXPECT_DOUBLE_EQ(lane.maxValue, 5242880.0);
    EXPECT_EQ(firstColumnAt(s, 5242880.0), 40);
    EXPECT_FALSE(s.buckets[9].valid); // before the first sample
    EXPECT_DOUBLE_EQ(s.buckets[10].last, 1048576.0);
    EXPECT_DOUBLE_EQ(s.buckets[25].last, 4194304.0);
    EXPECT_DOUBLE_EQ(s.buckets[35].last, 3145728.0);
    EXPECT_DOUBLE_EQ(s.buckets[55].last, 2097152.0);
    EXPECT_DOUBLE_EQ(s.buckets[99].last, 0.0);
    EXPECT_TRUE(lane.note.startsWith("This trace has memory counters only:")) << lane.note.toStdString();
    EXPECT_TRUE(lane.note.contains("cuda:0")) << lane.note.toStdString();
    // The step and the kernel still have their rows.
    ASSERT_EQ(f.rows.size(), 2u);
    EXPECT_EQ(f.rows[0].title, "steps");
    EXPECT_EQ(f.rows[1].title, "stream 7");
}

TEST(CountersOnlyTrace, TheDeviceMenuSwitchesToTheOtherDevicesCounter)
{
    MainWindow w;
    auto t = open(w, kHandMade);
    ASSERT_TRUE(t);
    const auto actions = w.deviceMenu()->actions();
    ASSERT_EQ(actions.size(), 2);
    EXPECT_TRUE(w.deviceMenu()->isEnabled());
    EXPECT_EQ(actions[0]->text(), "cpu");
    EXPECT_FALSE(actions[0]->isChecked());
    EXPECT_TRUE(actions[1]->isChecked());
    actions[0]->trigger();
    ASSERT_TRUE(waitLoaded(w));
    auto cpu = w.session().current();
    EXPECT_EQ(cpu->analysis.deviceLabel, "cpu");
    const TimelineFrame f = modelFrame(cpu, 100);
    ASSERT_EQ(f.lanes.size(), 1u);
    ASSERT_EQ(f.lanes[0].series.size(), 1u);
    EXPECT_DOUBLE_EQ(peakOf(f.lanes[0].series[0]), 512.0); // +512 B at +5 µs, freed at +25 µs
    EXPECT_EQ(firstColumnAt(f.lanes[0].series[0], 512.0), 5);
    EXPECT_DOUBLE_EQ(f.lanes[0].series[0].buckets[30].last, 0.0);
}

TEST(CountersOnlyTrace, EveryOtherPageSaysWhyItHasNothingToShow)
{
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    auto t = open(w, kHandMade);
    ASSERT_TRUE(t);
    EXPECT_TRUE(
        w.summaryText().startsWith("This trace has memory counters only: its memory events record sizes without "
                                   "addresses (PyTorch <= 1.9 profiler)"))
        << w.summaryText().toStdString();
    EXPECT_TRUE(w.summaryText().contains("recorded peak   Allocated (sum of Bytes): 5.00 MiB (5242880 B)"))
        << w.summaryText().toStdString();
    EXPECT_TRUE(w.memoryMapPage()->instantText().contains("no block can be placed on an address axis"))
        << w.memoryMapPage()->instantText().toStdString();
    EXPECT_TRUE(w.breakdownPage()->headline().contains("no live blocks to break down"))
        << w.breakdownPage()->headline().toStdString();
    EXPECT_FALSE(w.whatIfPage()->canReplay());
    EXPECT_TRUE(w.whatIfPage()->statusText().contains("nothing to replay"))
        << w.whatIfPage()->statusText().toStdString();
    EXPECT_FALSE(w.whatIfPage()->run()); // no replay with 0 B results
    EXPECT_TRUE(w.whatIfPage()->statusText().startsWith("This trace has memory counters only"));
    EXPECT_EQ(w.whatIfPage()->table().rowCount(), 0);
    // The note is drawn on the Timeline page, above the curve.
    ASSERT_TRUE(w.showPage("timeline"));
    QTest::qWait(300); // the frame is computed on a worker thread
    const QImage image = w.timelineView()->grab().toImage();
    int blue = 0;
    for (int y = TimelineView::kAxisHeight; y < image.height(); ++y)
        for (int x = TimelineView::kLeftMargin; x < image.width(); ++x) {
            const QColor c = image.pixelColor(x, y);
            blue += c.blue() > 150 && c.blue() > c.red() + 40;
        }
    EXPECT_GT(blue, 1000) << "the recorded counter should be drawn as a filled area";
}

// The real PyTorch 1.9 profiler trace (SOURCES.md: no Addr, 4,110 allocs / 4,110 frees on cuda:0). Its
// figures are the ones `gpumem analyze` prints and docs/kineto-import.md lists: the running sum of Bytes
// peaks at 2,791,636,480 B on cuda:0 and ends at 0; on the cpu it peaks at 57,803,264 B and ends at 19,267,840 B.
TEST(CountersOnlyTrace, TheLegacyResnetTraceShowsItsRecordedPeaks)
{
    const std::string path = publicTrace(kLegacy);
    REQUIRE_PUBLIC(path);
    MainWindow w;
    auto t = open(w, path);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->analysis.deviceLabel, "cuda:0");
    const TimelineFrame f = modelFrame(t, 1000);
    ASSERT_EQ(f.lanes.size(), 1u);
    ASSERT_EQ(f.lanes[0].series.size(), 1u);
    const PixelSeries& s = f.lanes[0].series[0];
    EXPECT_EQ(s.name, "Allocated (sum of Bytes) (recorded)");
    EXPECT_DOUBLE_EQ(peakOf(s), 2791636480.0);
    EXPECT_DOUBLE_EQ(s.buckets.back().last, 0.0);
    // The peak is drawn where `gpumem info` puts it: +0.121962 s into the 1.065604 s span.
    const auto range = fullRangeOf(*t);
    const int column = firstColumnAt(s, 2791636480.0);
    const TimeNs peakAt = t->summary.start + 121962000;
    const double width = double(range.end - range.start) / 1000.0;
    EXPECT_LE(range.start + TimeNs(column * width), peakAt);
    EXPECT_GE(range.start + TimeNs((column + 1) * width), peakAt);
    // One ResNet-50 step after another: six rising curves, as the six ProfilerSteps.
    ASSERT_FALSE(f.rows.empty());
    EXPECT_EQ(f.rows[0].boxes.size(), 6u);

    auto cpu = open(w, path, DeviceId(0));
    ASSERT_TRUE(cpu);
    EXPECT_EQ(cpu->analysis.deviceLabel, "cpu");
    const TimelineFrame c = modelFrame(cpu, 1000);
    ASSERT_EQ(c.lanes.size(), 1u);
    EXPECT_DOUBLE_EQ(peakOf(c.lanes[0].series[0]), 57803264.0);
    EXPECT_DOUBLE_EQ(c.lanes[0].series[0].buckets.back().last, 19267840.0);
}

// Counters only, but the allocator's own pair (PyTorch profiler names): the reserved counter is drawn as a
// line over the filled allocated one, each with its recorded values, and the note says there are no
// memory events at all.
TEST(CountersOnlyTrace, AReservedCounterIsDrawnAsALineBesideTheAllocatedOne)
{
    TraceBuilder b;
    const DeviceId gpu = b.device(DeviceType::Cuda, 0);
    const std::uint32_t allocated = b.addCounterSeries({ b.intern("Total Allocated"), gpu });
    const std::uint32_t reserved = b.addCounterSeries({ b.intern("Total Reserved"), gpu });
    const std::uint32_t ratio = b.addCounterSeries({ b.intern("fragmentation (ppm)"), gpu });
    const TimeNs t0 = 1'000'000'000;
    for (const auto& [t, a, r] : std::vector<std::tuple<TimeNs, std::int64_t, std::int64_t>> {
             { 0, 1 << 20, 2 << 20 }, { 250, 3 << 20, 4 << 20 }, { 500, 2 << 20, 4 << 20 }, { 999, 0, 4 << 20 } }) {
        b.add(CounterSample { t0 + t, allocated, a });
        b.add(CounterSample { t0 + t, reserved, r });
        b.add(CounterSample { t0 + t, ratio, 500000 });
    }
    auto loaded = std::make_shared<LoadedTrace>();
    loaded->trace = b.build();
    loaded->summary = analyze::summarize(loaded->trace);
    analyze::AnalysisOptions options;
    options.device = analyze::busiestCounterDevice(loaded->summary);
    ASSERT_EQ(options.device, std::optional<DeviceId>(gpu));
    loaded->analysis = analyze::analyzeTrace(loaded->trace, options);
    const TimelineFrame f = computeFrame(*loaded, fullRangeOf(*loaded), 100);
    ASSERT_EQ(f.lanes.size(), 1u);
    const ValueLane& lane = f.lanes[0];
    ASSERT_EQ(lane.series.size(), 2u); // the (ppm) ratio is not bytes: left out
    EXPECT_EQ(lane.series[0].name, "Total Allocated (recorded)");
    EXPECT_TRUE(lane.series[0].filled);
    EXPECT_EQ(lane.series[1].name, "Total Reserved (recorded)");
    EXPECT_FALSE(lane.series[1].filled);
    EXPECT_DOUBLE_EQ(peakOf(lane.series[0]), 3145728.0);
    EXPECT_DOUBLE_EQ(peakOf(lane.series[1]), 4194304.0);
    EXPECT_DOUBLE_EQ(lane.maxValue, 4194304.0);
    EXPECT_EQ(firstColumnAt(lane.series[0], 3145728.0), 25);
    EXPECT_DOUBLE_EQ(lane.series[0].buckets[99].last, 0.0);
    EXPECT_DOUBLE_EQ(lane.series[1].buckets[99].last, 4194304.0);
    EXPECT_TRUE(lane.note.startsWith("This trace has memory counters only: it records no memory events"))
        << lane.note.toStdString();
}
