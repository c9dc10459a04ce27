// The active-memory timeline and the allocator event list (issue #18 item 6): band stacking and hover
// on a hand-written snapshot without timestamps (tests/data/snapshot/viewer_no_timestamps.json: a
// 2 MiB segment, blocks A 1 MiB, B 512 KiB, C 1000 B → 1 KiB, B freed, an OOM of 4 MiB, A freed) and on
// a public snapshot; event stepping on the memory map.
#include "gui/models/active_memory_model.h"
#include "gui/models/allocator_event_model.h"
#include "gui/models/byte_text.h"
#include "gui/views/active_memory_page.h"
#include "gui/views/active_memory_view.h"
#include "gui/views/memory_map_page.h"
#include "gui/views/timeline_view.h"
#include "gui_test_support.h"

#include <QAbstractItemModelTester>
#include <QTableView>
#include <QTest>

using namespace gpumem;
using namespace gpumem::gui;
using namespace gpumem::gui::test;

namespace {
const std::string kSnapshot = GPUMEM_SOURCE_DIR "/tests/data/snapshot/viewer_no_timestamps.json";
constexpr Bytes kMiB = 1 << 20;
constexpr Address kBase = 0x7f0000000000;

std::size_t blockAtAddress(const MemoryMapIndex& index, Address a)
{
    for (std::size_t i = 0; i < index.blocks.size(); ++i)
        if (index.blocks[i].address == a)
            return i;
    return index.blocks.size();
}
} // namespace

TEST(ActiveMemory, LargestBlocksAreBandsAndTheRestOneSummarizedBand)
{
    auto t = load(kSnapshot);
    const MemoryMapIndex& index = *t->memoryMap;
    ASSERT_EQ(index.blocks.size(), 3u);
    auto active = buildActiveMemoryIndex(index, 2);
    ASSERT_EQ(active->bands.size(), 2u);
    EXPECT_EQ(index.blocks[active->bands[0]].size, kMiB); // A, allocated first, stacks lowest
    EXPECT_EQ(index.blocks[active->bands[1]].size, kMiB / 2); // B
    EXPECT_EQ(active->restBlocks, 1u);

    // Entry i is at i + 1 ns: one column per entry over [1, 10).
    ASSERT_EQ(index.time, (TimeRange { 1, 10 }));
    const ActiveMemoryFrame f = computeActiveMemoryFrame(index, *active, index.time, 9);
    EXPECT_DOUBLE_EQ(f.maxValue, 1573888.0); // A + B + C, the peak allocated gpumem info reports
    // Column 3 (after entry 3, C's alloc): C summarized at the bottom, A on it, B on A.
    EXPECT_EQ(f.moment[3], 4);
    EXPECT_DOUBLE_EQ(f.rest[3].max, 1024.0); // C, rounded from 1000 B
    EXPECT_TRUE(bandAt(f, 3, 100).summarized);
    const ActiveHit a = bandAt(f, 3, 1024 + kMiB / 2.0);
    ASSERT_TRUE(a.band);
    EXPECT_EQ(index.blocks[f.bands[*a.band].block].address, kBase);
    const ActiveHit b = bandAt(f, 3, 1024 + kMiB + kMiB / 4.0);
    ASSERT_TRUE(b.band);
    EXPECT_EQ(index.blocks[f.bands[*b.band].block].address, kBase + kMiB);
    EXPECT_FALSE(bandAt(f, 3, 1573888.0 + 1).band); // above the stack
    // Column 5 (B freed at entry 4; nothing changes in it): the state after entry 4, A on C, nothing above.
    EXPECT_EQ(f.moment[5], 5);
    EXPECT_TRUE(bandAt(f, 5, 1024 + 10).band);
    EXPECT_FALSE(bandAt(f, 5, 1024 + kMiB + 10).band);
    // Before the first block (column 0, entry 0: the segment) nothing is live.
    EXPECT_FALSE(bandAt(f, 0, 10).band);
    EXPECT_FALSE(bandAt(f, 0, 10).summarized);
    EXPECT_EQ(summarizedText(f, 3), "1 other blocks (summarized: all but the 2 largest): up to 1.00 KiB live here");
}

TEST(ActiveMemory, PageHoverShowsTheBlocksStackAndClickOpensItOnTheMemoryMap)
{
    MainWindow w;
    showPage(w, "active-memory", QSize(1400, 900));
    w.openTrace(QString::fromStdString(kSnapshot));
    ASSERT_TRUE(waitLoaded(w));
    ActiveMemoryPage* page = w.activeMemoryPage();
    ActiveMemoryView* view = page->view();
    QTRY_VERIFY_WITH_TIMEOUT(view->frame() && !view->frame()->bands.empty(), 10000);
    EXPECT_EQ(view->axis().ticks().front().label, "event 0"); // no timestamps: an event-index axis
    const auto& index = *w.session().current()->memoryMap;
    const std::size_t a = blockAtAddress(index, kBase);
    std::optional<std::size_t> position;
    for (std::size_t i = 0; i < view->frame()->bands.size(); ++i)
        if (view->frame()->bands[i].block == a)
            position = i;
    ASSERT_TRUE(position);
    const ActiveBand& band = view->frame()->bands[*position];
    const auto point = view->bandPoint(*position, (band.col0 + band.col1) / 2);
    ASSERT_TRUE(point);
    QTest::mouseMove(view, *point);
    QTRY_VERIFY_WITH_TIMEOUT(page->detailsText().contains("size: 1.00 MiB"), 5000);
    // Outermost first (analyze's folding): the caller, then the frame that allocated.
    EXPECT_TRUE(page->detailsText().contains("stack of its alloc (outermost first):\n  forward (model.py:10)\n  linear (layers.py:5)"))
        << page->detailsText().toStdString();
    EXPECT_TRUE(page->detailsText().contains("freed: ")) << page->detailsText().toStdString();
    QTest::mouseClick(view, Qt::LeftButton, {}, *point);
    EXPECT_EQ(w.currentPage(), w.memoryMapPage());
    EXPECT_TRUE(w.memoryMapPage()->detailsText().startsWith("Block at 0x7f0000000000")) << w.memoryMapPage()->detailsText().toStdString();
}

TEST(ActiveMemory, BandHoverOnAPublicSnapshot)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapIndex& index = *t->memoryMap;
    ASSERT_FALSE(index.empty());
    auto active = buildActiveMemoryIndex(index, kDefaultBandCount);
    ASSERT_EQ(active->bands.size(), std::min(kDefaultBandCount, index.blocks.size()));
    const ActiveMemoryFrame f = computeActiveMemoryFrame(index, *active, index.time, 1200);
    ASSERT_FALSE(f.bands.empty());
    // Every band is found again under the middle of each column it spans (stacking and hit test agree),
    // and the stack never exceeds the frame's scale.
    std::size_t checked = 0;
    forEachStacked(f, [&](std::size_t i, int c, double bottom, double top) {
        EXPECT_LE(top, f.maxValue);
        const ActiveHit hit = bandAt(f, c, (bottom + top) / 2);
        ASSERT_TRUE(hit.band);
        EXPECT_EQ(*hit.band, i);
        ++checked;
    });
    EXPECT_GT(checked, f.bands.size());
    // The tallest column is the peak of the blocks' live bytes (no column stacks blocks of two moments).
    Bytes peak = 0, live = 0;
    std::vector<std::pair<TimeNs, std::int64_t>> changes;
    for (const auto& b : index.blocks) {
        changes.emplace_back(b.allocTime, std::int64_t(b.size));
        if (b.freeTime != kNeverFreed)
            changes.emplace_back(b.freeTime, -std::int64_t(b.size));
    }
    std::sort(changes.begin(), changes.end());
    for (std::size_t k = 0; k < changes.size(); ++k) {
        live = Bytes(std::int64_t(live) + changes[k].second);
        if (k + 1 == changes.size() || changes[k + 1].first != changes[k].first)
            peak = std::max(peak, live);
    }
    EXPECT_DOUBLE_EQ(f.maxValue, double(peak));
    // The largest block's hover text names its size and its stack.
    const std::size_t largest = *std::max_element(active->bands.begin(), active->bands.end(),
        [&](std::uint32_t x, std::uint32_t y) { return index.blocks[x].size < index.blocks[y].size; });
    const QString text = describeBlock(*t, index, largest);
    EXPECT_TRUE(text.contains(QString("(%1 B)").arg(index.blocks[largest].size))) << text.toStdString();
    EXPECT_TRUE(text.contains("stack")) << text.toStdString();
}

TEST(AllocatorEvents, ModelListsTheDevicesEventsAndMarksTheOom)
{
    auto t = load(kSnapshot);
    AllocatorEventModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setTrace(t, t->memoryMap->device);
    ASSERT_EQ(model.rowCount(), 9);
    ASSERT_EQ(model.oomRows(), std::vector<int> { 6 });
    EXPECT_TRUE(model.isOom(6));
    EXPECT_EQ(model.data(model.index(6, 2), Qt::DisplayRole).toString(), "OOM");
    EXPECT_EQ(model.data(model.index(6, 4), Qt::DisplayRole).toString(), "4.00 MiB");
    EXPECT_TRUE(model.data(model.index(6, 0), Qt::BackgroundRole).isValid());
    EXPECT_EQ(model.data(model.index(3, 1), Qt::DisplayRole).toString(), "event 3");
    EXPECT_EQ(model.data(model.index(3, 2), Qt::DisplayRole).toString(), "alloc");
    EXPECT_EQ(model.data(model.index(3, 5), Qt::DisplayRole).toString(), "1000 B");
    EXPECT_EQ(model.rowAt(model.timeOf(4)), 4);
    model.setTrace(nullptr, 0);
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(AllocatorEvents, ArrowKeysStepTheMemoryMapEventByEvent)
{
    MainWindow w;
    showPage(w, "memory-map", QSize(1400, 900));
    w.openTrace(QString::fromStdString(kSnapshot));
    ASSERT_TRUE(waitLoaded(w));
    MemoryMapPage* page = w.memoryMapPage();
    page->stepToEvent(3);
    QTRY_VERIFY_WITH_TIMEOUT(page->instantText().contains("after event #3"), 5000);
    EXPECT_TRUE(page->instantText().startsWith("At event 3 (after event #3)")) << page->instantText().toStdString();
    EXPECT_TRUE(page->instantText().contains("1.50 MiB allocated in 3 blocks, 1 segment")) << page->instantText().toStdString();
    EXPECT_TRUE(page->instantText().contains("rounding waste 24 B")) << page->instantText().toStdString();
    page->eventTable()->setFocus();
    QTest::keyClick(page->eventTable(), Qt::Key_Down); // free_requested B: pending until free_completed
    QTRY_VERIFY_WITH_TIMEOUT(page->instantText().contains("after event #4"), 5000);
    EXPECT_TRUE(page->instantText().contains("1.00 MiB allocated in 2 blocks")) << page->instantText().toStdString();
    EXPECT_TRUE(page->instantText().contains("pending frees 512.00 KiB in 1 block")) << page->instantText().toStdString();
    QTest::keyClick(page->eventTable(), Qt::Key_Down);
    QTest::keyClick(page->eventTable(), Qt::Key_Down); // the OOM
    QTRY_VERIFY_WITH_TIMEOUT(page->instantText().contains("after event #6, an OOM"), 5000);
    EXPECT_FALSE(page->instantText().contains("pending")) << page->instantText().toStdString();
}

TEST(AllocatorEvents, ViewerOpensOnTheTimelineNotOnTheSummary)
{
    MainWindow w;
    w.setQuietErrors(true);
    w.show();
    w.openTrace(GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl");
    ASSERT_TRUE(waitLoaded(w));
    EXPECT_EQ(w.currentPage(), static_cast<QWidget*>(w.timelineView()));
}

TEST(AllocatorEvents, SteppingThroughAPublicSnapshotShowsTheStateAfterEachEvent)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    MainWindow w;
    showPage(w, "memory-map", QSize(1400, 900));
    w.openTrace(QString::fromStdString(path));
    ASSERT_TRUE(waitLoaded(w));
    MemoryMapPage* page = w.memoryMapPage();
    const auto& index = *w.session().current()->memoryMap;
    // The event of the peak allocated, then the next one: the line gives the state after each.
    const TimeNs peak = w.session().current()->analysis.breakdowns.front().instant.time;
    const int row = page->events().rowAt(peak);
    ASSERT_GT(page->events().rowCount(), row + 1);
    for (int r : { row, row + 1 }) {
        if (r == row)
            page->stepToEvent(r);
        else
            QTest::keyClick(page->eventTable(), Qt::Key_Down);
        const MemoryMapState s = memoryMapStateAt(index, page->events().timeOf(r));
        const QString want = QString("%1 allocated in %2 block").arg(bytesText(s.allocated)).arg(s.blocks);
        QTRY_VERIFY_WITH_TIMEOUT(page->instantText().contains(QString("after event #%1").arg(r)), 5000);
        EXPECT_TRUE(page->instantText().contains(want)) << page->instantText().toStdString() << " / " << want.toStdString();
    }
}
