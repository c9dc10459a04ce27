// The viewer's Diagnosis page (gui/views/diagnosis_page.h): gpumem explain's diagnosis of the loaded trace,
// the window opening it first when the trace has an OOM, and its moment link and finding links driving
// the memory map.
#include "gui/views/diagnosis_page.h"
#include "gui/views/memory_map_page.h"
#include "gui/views/memory_map_view.h"
#include "tests/gui/gui_test_support.h"

#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>
#include <QTextBrowser>
#include <QUrl>

#include <utility>
#include <vector>

using namespace gpumem;
using namespace gpumem::gui;

namespace {
const std::string kRecordedOom = GPUMEM_SOURCE_DIR "/tests/data/explain/recorded_oom.jsonl";
constexpr Bytes MiB = Bytes(1) << 20;
const std::string kFragmented = GPUMEM_SOURCE_DIR "/tests/data/explain/external_fragmentation.jsonl";

// Opens `path` in the window and waits for the load and the diagnosis: the Diagnosis page, or nullptr
// (with a test failure) when either does not come.
DiagnosisPage* openAndDiagnose(MainWindow& w, const std::string& path)
{
    w.setQuietErrors(true);
    auto* page = w.findChild<DiagnosisPage*>("diagnosisPage");
    if (!page)
        return nullptr;
    QSignalSpy ready(page, &DiagnosisPage::ready);
    w.openTrace(QString::fromStdString(path));
    const bool loaded = gui::test::waitLoaded(w);
    const bool diagnosed = loaded && (ready.count() > 0 || ready.wait(30000));
    EXPECT_TRUE(diagnosed) << path;
    return diagnosed ? page : nullptr;
}
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
    EXPECT_TRUE(text.startsWith("Verdict: At the recorded OOM (+0.000002 s), a 40.00 GiB request failed on a device of 80.00 GiB")) << text.toStdString();
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
    DiagnosisPage* page = openAndDiagnose(w, kRecordedOom);
    ASSERT_NE(page, nullptr);
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    EXPECT_EQ(tabs->currentWidget(), page);
    page->showMoment(); // the moment link opens the memory map
    EXPECT_EQ(tabs->currentWidget(), w.memoryMapPage());
}

TEST(DiagnosisPage, AFindingOpensTheMemoryMapAtTheMomentWithItsBlocksOutlined)
{
    // external_fragmentation.jsonl, no OOM at unlimited capacity: the moment is the reserved peak (the
    // 30 MiB alloc at +0.000025 s); the finding names the five 6 MiB `keep` blocks (site 2) pinning the
    // five 20 MiB segments, recorded at 0x7f0000800000 + k · 24 MiB.
    MainWindow w;
    gui::test::showPage(w, "memory-map", { 1200, 800 });
    DiagnosisPage* page = openAndDiagnose(w, kFragmented);
    ASSERT_NE(page, nullptr);
    ASSERT_TRUE(page->diagnosis());
    const auto& d = *page->diagnosis();
    EXPECT_EQ(d.moment.kind, analyze::Moment::Kind::PeakReserved);
    EXPECT_EQ(d.moment.time, TimeNs(1732000000000026000));
    ASSERT_FALSE(d.findings.empty());
    ASSERT_EQ(d.findings.front().id, "external_fragmentation");
    // The finding's id is a link.
    EXPECT_TRUE(page->browser()->toHtml().contains("gpumem:finding/0")) << page->browser()->toHtml().toStdString();

    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    tabs->setCurrentWidget(page);
    QSignalSpy picked(page, &DiagnosisPage::findingPicked);
    emit page->browser()->anchorClicked(QUrl("gpumem:finding/0")); // what a click on the link does
    ASSERT_EQ(picked.count(), 1);
    MemoryMapPage* map = w.memoryMapPage();
    EXPECT_EQ(tabs->currentWidget(), map);
    EXPECT_EQ(map->view()->instant(), d.moment.time);

    const MemoryMapIndex& index = *map->model().trace()->memoryMap;
    std::vector<std::pair<Address, Bytes>> outlined;
    for (std::size_t b : map->view()->highlightedBlocks())
        outlined.emplace_back(index.blocks[b].address, index.blocks[b].size);
    const std::vector<std::pair<Address, Bytes>> keep = { { 0x7f0000800000, 6 * MiB }, { 0x7f0002000000, 6 * MiB },
        { 0x7f0003800000, 6 * MiB }, { 0x7f0005000000, 6 * MiB }, { 0x7f0006800000, 6 * MiB } };
    EXPECT_EQ(outlined, keep);
    // The first named block is selected, its details (site `keep`, train.py:9) shown.
    ASSERT_TRUE(map->view()->selectedBlock());
    EXPECT_EQ(index.blocks[*map->view()->selectedBlock()].address, Address(0x7f0000800000));
    EXPECT_TRUE(map->detailsText().contains("train.py:9")) << map->detailsText().toStdString();
    // Drawn: the outline's colour is on the map once the frame at the moment is in.
    auto highlightPixels = [&] {
        for (int i = 0; i < 200 && !(map->view()->frame() && map->view()->frame()->instant == d.moment.time); ++i)
            QTest::qWait(25);
        const QImage image = map->view()->grab().toImage();
        int n = 0;
        for (int y = 0; y < image.height(); ++y)
            for (int x = 0; x < image.width(); ++x)
                n += image.pixel(x, y) == MemoryMapView::kHighlightColour;
        return n;
    };
    EXPECT_GT(highlightPixels(), 0);
    // The segment table (address ranges: no segment events) marks the five ranges holding them, not
    // the 30 MiB block's.
    const auto& table = map->segmentTable();
    ASSERT_EQ(table.rowCount(), 6);
    for (int r = 0; r < 6; ++r)
        EXPECT_EQ(table.marked(r), table.rows()[std::size_t(r)].size == 6 * MiB) << r;
    EXPECT_TRUE(table.data(table.index(0, 0), Qt::BackgroundRole).isValid());

    // Picking another block (a click on the map) clears the outline; so does another instant.
    emit map->view()->blockClicked(0);
    EXPECT_TRUE(map->view()->highlightedBlocks().empty());
    EXPECT_EQ(highlightPixels(), 0);
    EXPECT_FALSE(table.marked(0));
    page->showFinding(0);
    EXPECT_EQ(map->view()->highlightedBlocks().size(), 5u);
    map->setInstant(d.moment.time - 1000); // the Timeline's pick
    EXPECT_TRUE(map->view()->highlightedBlocks().empty());
}
