// The viewer's Diagnosis page (gui/views/diagnosis_page.h): gpumem explain's diagnosis of the loaded trace,
// the window opening it first when the trace has an OOM, and its moment link driving the memory map.
#include "gui/views/diagnosis_page.h"
#include "gui/views/memory_map_page.h"
#include "tests/gui/gui_test_support.h"

#include <QSignalSpy>
#include <QTabWidget>
#include <QTextBrowser>

using namespace gpumem;
using namespace gpumem::gui;

namespace {
const std::string kRecordedOom = GPUMEM_SOURCE_DIR "/tests/data/explain/recorded_oom.jsonl";
}

TEST(DiagnosisPage, ShowsExplainsVerdictAndFindingsForTheLoadedTrace)
{
    DiagnosisPage page;
    QSignalSpy ready(&page, &DiagnosisPage::ready);
    page.setTrace(gui::test::load(kRecordedOom));
    ASSERT_TRUE(ready.wait(30000));
    EXPECT_TRUE(ready.takeFirst().at(0).toBool()); // the trace records an OOM
    ASSERT_TRUE(page.diagnosis());
    EXPECT_EQ(page.diagnosis()->moment.kind, analyze::Moment::Kind::RecordedOom);
    const QString text = page.browser()->toPlainText();
    EXPECT_TRUE(text.startsWith("Verdict: The recorded OOM at +0.000002 s a 40.00 GiB request failed")) << text.toStdString();
    EXPECT_TRUE(text.contains("outside_allocator")) << text.toStdString();
    EXPECT_TRUE(text.contains("Show this moment in the memory map")) << text.toStdString();
    QSignalSpy picked(&page, &DiagnosisPage::instantPicked);
    page.showMoment();
    ASSERT_EQ(picked.count(), 1);
    EXPECT_EQ(picked.takeFirst().at(0).value<TimeNs>(), page.diagnosis()->moment.time);
}

TEST(DiagnosisPage, TheWindowOpensItFirstWhenTheTraceHasAnOom)
{
    MainWindow w;
    w.setQuietErrors(true);
    auto* page = w.findChild<DiagnosisPage*>("diagnosisPage");
    ASSERT_NE(page, nullptr);
    QSignalSpy ready(page, &DiagnosisPage::ready);
    w.openTrace(QString::fromStdString(kRecordedOom));
    ASSERT_TRUE(gui::test::waitLoaded(w));
    ASSERT_TRUE(ready.count() > 0 || ready.wait(30000));
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    EXPECT_EQ(tabs->currentWidget(), page);
    page->showMoment(); // the moment link opens the memory map
    EXPECT_EQ(tabs->currentWidget(), w.memoryMapPage());
}
