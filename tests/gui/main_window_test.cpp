#include "gui/views/main_window.h"
#include "gui/views/timeline_view.h"
#include "gui/models/timeline_model.h"

#include <QApplication>
#include <QSignalSpy>
#include <QTest>
#include <gtest/gtest.h>

using gpumem::gui::MainWindow;

namespace {
bool waitLoaded(MainWindow& w, bool& ok)
{
    QSignalSpy spy(&w, &MainWindow::loadFinished);
    if (!spy.wait(30000))
        return false;
    ok = spy.takeFirst().at(0).toBool();
    return true;
}
} // namespace

TEST(MainWindow, OpensATraceAndShowsItsSummary)
{
    MainWindow w;
    w.setQuietErrors(true);
    w.openTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl");
    bool ok = false;
    ASSERT_TRUE(waitLoaded(w, ok));
    EXPECT_TRUE(ok);
    EXPECT_TRUE(w.summaryText().contains("peak allocated  640.72 MiB (671843328 B)")) << w.summaryText().toStdString();
    EXPECT_TRUE(w.windowTitle().startsWith("mlp_train.jsonl"));
}

TEST(MainWindow, TimelinePageDrawsTheTracesMemoryLanes)
{
    MainWindow w;
    w.setQuietErrors(true);
    w.resize(1200, 800);
    w.show();
    ASSERT_TRUE(w.showPage("timeline"));
    QSignalSpy frames(w.timelineView(), &gpumem::gui::TimelineView::frameRequested);
    w.openTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl");
    bool ok = false;
    ASSERT_TRUE(waitLoaded(w, ok));
    ASSERT_TRUE(ok);
    QTest::qWait(300); // the frame is computed on a worker thread
    QImage image = w.timelineView()->grab().toImage();
    ASSERT_FALSE(image.isNull());
    // Allocated is drawn in (50, 110, 200) blended; count strongly blue pixels inside the memory lane.
    int blue = 0;
    for (int y = gpumem::gui::TimelineView::kAxisHeight; y < gpumem::gui::TimelineView::kAxisHeight + gpumem::gui::TimelineView::kLaneHeight; ++y)
        for (int x = gpumem::gui::TimelineView::kLeftMargin; x < image.width(); ++x) {
            QColor c = image.pixelColor(x, y);
            blue += c.blue() > 150 && c.blue() > c.red() + 40; // the translucent fill over white, or its line
        }
    EXPECT_GT(blue, 1000) << "the allocated area should be drawn";
}

TEST(TimelineFrame, MemoryLaneMaximumIsThePeakReserved)
{
    MainWindow w;
    w.setQuietErrors(true);
    w.openTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl");
    bool ok = false;
    ASSERT_TRUE(waitLoaded(w, ok));
    auto loaded = w.session().current();
    ASSERT_TRUE(loaded);
    auto range = gpumem::gui::fullRangeOf(*loaded);
    auto frame = gpumem::gui::computeFrame(*loaded, range, 400);
    ASSERT_EQ(frame.lanes.size(), 2u); // memory and fragmentation
    EXPECT_DOUBLE_EQ(frame.lanes[0].maxValue, 765460480.0); // 730 MiB, as gpumem info reports
    ASSERT_EQ(frame.lanes[0].series[0].buckets.size(), 400u);
    double peakAllocated = 0;
    for (const auto& b : frame.lanes[0].series[0].buckets)
        peakAllocated = std::max(peakAllocated, b.max);
    EXPECT_DOUBLE_EQ(peakAllocated, 671843328.0);
    ASSERT_FALSE(frame.rows.empty());
    EXPECT_EQ(frame.rows[0].title, "steps");
    EXPECT_EQ(frame.rows[0].boxes.size(), 4u); // ProfilerStep#0..3
}

TEST(MainWindow, ReportsABadFileWithoutCrashing)
{
    MainWindow w;
    w.setQuietErrors(true);
    w.openTrace("/nonexistent/trace.gmt");
    bool ok = true;
    ASSERT_TRUE(waitLoaded(w, ok));
    EXPECT_FALSE(ok);
    EXPECT_TRUE(w.summaryText().isEmpty());
}

int main(int argc, char** argv)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    qRegisterMetaType<std::shared_ptr<const gpumem::gui::LoadedTrace>>();
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
