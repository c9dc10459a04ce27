#include "gui/views/main_window.h"

#include <QApplication>
#include <QSignalSpy>
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
