// The memory map: its index from real traces (segment counts as the snapshot records them, profiler
// blocks without segments, traces without addresses), picking, the block details, the raster, the
// segment table (QAbstractItemModelTester) and the page in the main window.
#include "tests/gui/gui_test_support.h"

#include "analyze/trace_summary.h"
#include "core/importer.h"
#include "core/trace_builder.h"
#include "core/units.h"
#include "analyze/frame_folding.h"
#include "gui/models/memory_map_model.h"
#include "gui/views/main_window.h"
#include "gui/views/memory_map_page.h"
#include "gui/views/memory_map_view.h"
#include "gui/views/timeline_view.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QMenu>
#include <QApplication>
#include <QTableView>
#include <QWheelEvent>
#include <QSignalSpy>
#include <QTest>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

using namespace gpumem;
using namespace gpumem::gui;
using namespace gpumem::gui::test;


TEST(MemoryMapIndex, HandMadeSegmentsAndBlocksPackAndReportTheirState)
{
    // Segment S1 [0x1000, +4 KiB) from t=0, S2 [0x100000, +1 KiB) from 5 to 60; block A (1 KiB at
    // 0x1000, 10–50), B (2 KiB at 0x1400, from 20, never freed), C (512 B at 0x100000, 30–40, freed
    // at 40 and completed at 45).
    TraceBuilder b;
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    auto ev = [&](TimeNs t, EventKind k, Address a, Bytes size) {
        b.add(MemoryEvent { .time = t, .kind = k, .device = dev, .stream = stream, .address = a, .size = size });
    };
    ev(0, EventKind::SegmentAlloc, 0x1000, 4096);
    ev(5, EventKind::SegmentAlloc, 0x100000, 1024);
    ev(10, EventKind::Alloc, 0x1000, 1024);
    ev(20, EventKind::Alloc, 0x1400, 2048);
    ev(30, EventKind::Alloc, 0x100000, 512);
    ev(40, EventKind::Free, 0x100000, 512);
    ev(45, EventKind::FreeCompleted, 0x100000, 512);
    ev(50, EventKind::Free, 0x1000, 1024);
    ev(60, EventKind::SegmentFree, 0x100000, 1024);
    const Trace trace = b.build();
    const MemoryMapIndex index = buildMemoryMapIndex(trace, dev, {});
    ASSERT_FALSE(index.empty()) << index.emptyReason.toStdString();
    EXPECT_TRUE(index.hasSegments);
    ASSERT_EQ(index.ranges.size(), 2u);
    EXPECT_EQ(index.axisBytes, 5120u);
    EXPECT_EQ(index.offsetOf(0x1400), 1024u);
    EXPECT_EQ(index.offsetOf(0x100000), 4096u);
    EXPECT_FALSE(index.offsetOf(0x2000)); // the gap between the segments takes no room
    ASSERT_EQ(index.blocks.size(), 3u);
    EXPECT_EQ(index.blocks[2].freeTime, 40);
    EXPECT_EQ(index.blocks[2].freeCompletedTime, 45);
    EXPECT_TRUE(index.blocks[2].pendingAt(42));

    const MemoryMapState at35 = memoryMapStateAt(index, 35);
    ASSERT_EQ(at35.segments.size(), 2u);
    EXPECT_EQ(at35.allocated, 1024u + 2048u + 512u);
    EXPECT_EQ(at35.blocks, 3u);
    EXPECT_EQ(at35.segments[0].allocated, 3072u);
    EXPECT_EQ(at35.segments[0].largestFree, 1024u); // [0x1c00, 0x2000)
    EXPECT_EQ(at35.segments[1].largestFree, 512u);
    EXPECT_EQ(at35.largestBlock, 1u); // B
    const MemoryMapState at55 = memoryMapStateAt(index, 55);
    ASSERT_EQ(at55.segments.size(), 2u);
    EXPECT_EQ(at55.segments[0].blocks, 1u);
    EXPECT_EQ(at55.segments[0].largestFree, 1024u); // A's place, and the tail
    EXPECT_EQ(at55.segments[1].allocated, 0u);
    EXPECT_EQ(memoryMapStateAt(index, 65).segments.size(), 1u); // S2 was released at 60

    // Picking: the middle of B at t=30; the empty tail of S1 has no block.
    EXPECT_EQ(blockAt(index, 30, 1024 + 1000, 0, 0), 1u);
    EXPECT_FALSE(blockAt(index, 30, 3072 + 100, 0, 0));
    // A pixel grid of one byte per row and one ns per column: B's column at t=30 is drawn allocated.
    auto frame = rasterizeMemoryMap(index, { 0, 61 }, QSize(61, 5120), MapColouring::State, TimeNs(42));
    const QColor bColour = frame.overTime.pixelColor(30, 5120 - 1 - 2000);
    EXPECT_GT(bColour.blue(), 150);
    EXPECT_LT(bColour.red(), 120);
    const QColor pending = frame.atInstant.pixelColor(0, 5120 - 1 - 4200); // C is pending at 42
    EXPECT_GT(pending.red(), 200);
    EXPECT_LT(pending.blue(), 100);
}

TEST(MemoryMapIndex, SnapshotStateAtTheEndHasTheSegmentsTheSnapshotRecords)
{
    for (const char* file : { "cs336-bcrafton/memory_snapshot.pickle", "cs336-silmont2000/mem_snapshot.pickle" }) {
        const std::string path = publicTrace(file);
        REQUIRE_PUBLIC(path);
        SCOPED_TRACE(file);
        auto t = load(path);
        const MemoryMapIndex& index = *t->memoryMap;
        ASSERT_FALSE(index.empty()) << index.emptyReason.toStdString();
        EXPECT_TRUE(index.hasSegments);
        const auto& atDump = t->trace.metadata()["segments_at_dump"];
        const std::size_t recorded = atDump["address"].size();
        const MemoryMapState end = memoryMapStateAt(index, index.time.end - 1);
        ASSERT_EQ(end.segments.size(), recorded);
        std::set<std::pair<Address, Bytes>> want, got;
        Bytes recordedAllocated = 0;
        for (std::size_t i = 0; i < recorded; ++i) {
            want.emplace(atDump["address"][i].get<Address>(), atDump["total_size"][i].get<Bytes>());
            recordedAllocated += atDump["allocated_size"][i].get<Bytes>();
        }
        for (const auto& s : end.segments)
            got.emplace(s.address, s.size);
        EXPECT_EQ(got, want);
        // The blocks allocated at the end are what the snapshot's segments say is allocated.
        EXPECT_EQ(end.allocated, recordedAllocated);
        // Each segment's blocks fit inside it.
        for (const auto& s : end.segments)
            EXPECT_LE(s.allocated + s.largestFree, s.size);
    }
}

TEST(MemoryMapIndex, BcraftonHas96SegmentsAtTheDump)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapState end = memoryMapStateAt(*t->memoryMap, t->memoryMap->time.end - 1);
    EXPECT_EQ(end.segments.size(), 96u); // SOURCES.md: 96 segments, 447 active_allocated blocks
    EXPECT_EQ(end.blocks, 447u);
    // The packed axis is the union of the segments: every segment has an offset inside it.
    for (const auto& s : t->memoryMap->segments) {
        auto off = t->memoryMap->offsetOf(s.address);
        ASSERT_TRUE(off.has_value());
        EXPECT_EQ(*off, s.offset);
        EXPECT_LE(s.offset + s.size, t->memoryMap->axisBytes);
    }
}

TEST(MemoryMapIndex, ProfilerTraceHasBlocksWithoutSegments)
{
    const std::string path = publicTrace("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapIndex& index = *t->memoryMap;
    ASSERT_FALSE(index.empty()) << index.emptyReason.toStdString();
    EXPECT_FALSE(index.hasSegments);
    EXPECT_EQ(index.blocks.size(), 6135u); // SOURCES.md: CUDA 6,135 alloc / 6,135 free
    // At the peak, the map holds what the breakdown says is live.
    const auto& peak = t->analysis.breakdowns.front();
    const MemoryMapState s = memoryMapStateAt(index, peak.instant.time);
    EXPECT_EQ(s.allocated, peak.liveBytes);
    EXPECT_EQ(s.blocks, peak.liveBlocks);
    EXPECT_FALSE(s.segments.empty());
    // Module colouring ranks scopes: the legend names real scopes.
    // Module colouring ranks nn.Module scopes (not the ops inside them, which repeat in every layer).
    ASSERT_EQ(index.moduleLegend.size(), 11u); // 10 colours + "other modules"
    for (std::size_t i = 0; i + 1 < index.moduleLegend.size(); ++i) {
        EXPECT_TRUE(index.moduleLegend[i].label.contains("Owlv2")) << index.moduleLegend[i].label.toStdString();
        EXPECT_FALSE(index.moduleLegend[i].label.contains("aten::")) << index.moduleLegend[i].label.toStdString();
    }
    EXPECT_TRUE(index.moduleLegend.back().label.endsWith("other modules"));
}

TEST(MemoryMapIndex, TracesWithoutAddressesSayWhy)
{
    const std::string timeline = publicTrace("hta/memory_timeline.raw.gz");
    const std::string legacy = publicTrace("kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz");
    REQUIRE_PUBLIC(timeline);
    REQUIRE_PUBLIC(legacy);
    auto a = load(timeline);
    EXPECT_TRUE(a->memoryMap->empty());
    EXPECT_TRUE(a->memoryMap->emptyReason.contains("memory-timeline")) << a->memoryMap->emptyReason.toStdString();
    auto b = load(legacy);
    EXPECT_TRUE(b->memoryMap->empty());
    EXPECT_TRUE(b->memoryMap->emptyReason.startsWith("This trace has memory counters only: its memory events record "
                                                     "sizes without addresses"))
        << b->memoryMap->emptyReason.toStdString();
    // Rasterizing an empty index gives a blank image, not a crash.
    auto frame = rasterizeMemoryMap(*b->memoryMap, { 0, 100 }, QSize(50, 40), MapColouring::State, TimeNs(10));
    EXPECT_EQ(frame.overTime.size(), QSize(50, 40));
}

TEST(MemoryMapIndex, PicksABlockAndDescribesItsLifetimeModuleAndStack)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapIndex& index = *t->memoryMap;
    const auto& mem = t->trace.memory();
    // A block allocated and freed in the window, with frames.
    std::optional<std::size_t> chosen;
    for (std::size_t i = 0; i < index.blocks.size() && !chosen; ++i) {
        const auto& b = index.blocks[i];
        const auto& al = t->trace.allocations()[b.allocation];
        if (!b.allocatedBeforeWindow && b.allocTime > index.time.start && b.freeTime != kNeverFreed && b.size >= (1u << 20) && !t->trace.siteFrames(mem.site[al.allocEvent]).empty())
            chosen = i;
    }
    ASSERT_TRUE(chosen);
    const auto& b = index.blocks[*chosen];
    const TimeNs mid = b.allocTime + (b.freeTime - b.allocTime) / 2;
    auto hit = blockAt(index, mid, b.offset + b.size / 2, 0, 0);
    ASSERT_TRUE(hit);
    EXPECT_EQ(*hit, *chosen);
    const QString text = describeBlock(*t, index, *chosen);
    EXPECT_TRUE(text.contains(QString("size: %1 (%2 B)").arg(QString::fromStdString(formatBytes(b.size))).arg(b.size))) << text.toStdString();
    EXPECT_TRUE(text.contains(QString("requested: %1").arg(QString::fromStdString(formatBytes(b.requested))))) << text.toStdString();
    EXPECT_TRUE(text.contains("lifetime: " + QString::fromStdString(formatSeconds(b.freeTime - b.allocTime))));
    EXPECT_TRUE(text.contains("category: "));
    EXPECT_TRUE(text.contains("module: "));
    const auto& al = t->trace.allocations()[b.allocation];
    // The stack reads like Python (issue #18): outermost first, allocator and unwinder frames folded.
    const auto frames = t->trace.siteFrames(mem.site[al.allocEvent]);
    const auto folded = analyze::foldStack(t->trace, frames);
    ASSERT_FALSE(folded.empty());
    QString stack;
    for (FrameId f : folded)
        stack += "\n  " + QString::fromStdString(analyze::stackFrameLabel(t->trace, t->trace.frames()[f]));
    EXPECT_TRUE(text.endsWith(stack)) << text.toStdString();
    EXPECT_LT(folded.size(), frames.size());
    EXPECT_TRUE(text.contains(QString("%1 allocator/interpreter frames folded").arg(frames.size() - folded.size()))) << text.toStdString();
    // Blocks the importer rebuilt from the end state sit at the window start, and say so.
    ASSERT_EQ(index.blocks.front().allocTime, index.time.start);
    EXPECT_TRUE(describeBlock(*t, index, 0).contains("allocated before the recording began")) << describeBlock(*t, index, 0).toStdString();
    EXPECT_FALSE(text.contains("allocated before the recording began"));
    // Nothing lives outside the packed axis.
    EXPECT_FALSE(blockAt(index, mid, index.axisBytes + (1u << 30), 0, 0));
}

TEST(MemoryMapRaster, DrawsBlocksAndTheInstantColumn)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapIndex& index = *t->memoryMap;
    const TimeNs instant = t->analysis.breakdowns.front().instant.time;
    for (int c = 0; c < kMapColouringCount; ++c) {
        auto frame = rasterizeMemoryMap(index, index.time, QSize(400, 300), static_cast<MapColouring>(c), instant);
        ASSERT_EQ(frame.overTime.size(), QSize(400, 300));
        ASSERT_EQ(frame.atInstant.size(), QSize(1, 300));
        EXPECT_FALSE(singleColour(frame.overTime));
        EXPECT_FALSE(singleColour(frame.atInstant));
        EXPECT_EQ(frame.state.allocated, memoryMapStateAt(index, instant).allocated);
    }
    // In state colouring, the allocated share of the instant column follows the allocated bytes.
    auto frame = rasterizeMemoryMap(index, index.time, QSize(400, 1000), MapColouring::State, instant);
    int blue = 0;
    for (int y = 0; y < 1000; ++y)
        blue += QColor(frame.atInstant.pixel(0, y)).blue() > 150 && QColor(frame.atInstant.pixel(0, y)).red() < 120;
    const double share = double(frame.state.allocated) / double(index.axisBytes);
    EXPECT_NEAR(blue / 1000.0, share, 0.05);
}

TEST(MemoryMapRaster, AnAddressWindowShowsOnlyItsBlocksAcrossTheWholeHeight)
{
    const std::string path = publicTrace("cs336-silmont2000/mem_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    const MemoryMapIndex& index = *t->memoryMap;
    // The window of the largest block live at the end: the instant column is all that block.
    const TimeNs end = index.time.end - 1;
    const auto largest = memoryMapStateAt(index, end).largestBlock;
    ASSERT_TRUE(largest);
    const auto& b = index.blocks[*largest];
    const OffsetWindow window { b.offset, b.offset + b.size };
    auto frame = rasterizeMemoryMap(index, index.time, QSize(200, 100), MapColouring::State, end, window);
    EXPECT_EQ(frame.window, window);
    int allocatedRows = 0;
    for (int y = 0; y < 100; ++y)
        allocatedRows += QColor(frame.atInstant.pixel(0, y)).blue() > 150 && QColor(frame.atInstant.pixel(0, y)).red() < 120;
    EXPECT_GE(allocatedRows, 98); // its darker top edge is the one row left
    // An empty window draws nothing.
    auto outside = rasterizeMemoryMap(index, index.time, QSize(200, 100), MapColouring::State, end, { index.axisBytes + 10, index.axisBytes + 20 });
    EXPECT_TRUE(singleColour(outside.overTime));
}

TEST(SegmentTableModel, PassesTheModelTesterAndShowsTheSegments)
{
    const std::string path = publicTrace("cs336-silmont2000/mem_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    auto t = load(path);
    SegmentTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    const MemoryMapState end = memoryMapStateAt(*t->memoryMap, t->memoryMap->time.end - 1);
    model.setRows(end.segments, true);
    ASSERT_EQ(model.rowCount(), 9); // SOURCES.md: 9 segments
    EXPECT_EQ(model.columnCount(), 5);
    EXPECT_EQ(model.headerData(0, Qt::Horizontal, Qt::DisplayRole).toString(), "Segment");
    Bytes reserved = 0;
    for (int r = 0; r < model.rowCount(); ++r)
        reserved += model.data(model.index(r, 1), Qt::UserRole).toULongLong();
    Bytes recorded = 0;
    for (const auto& s : t->trace.metadata()["segments_at_dump"]["total_size"])
        recorded += s.get<Bytes>();
    EXPECT_EQ(reserved, recorded);
    EXPECT_EQ(model.data(model.index(0, 0), Qt::DisplayRole).toString(), QString("0x%1").arg(end.segments[0].address, 0, 16));
    model.setRows({}, false);
    EXPECT_EQ(model.rowCount(), 0);
    EXPECT_EQ(model.headerData(0, Qt::Horizontal, Qt::DisplayRole).toString(), "Address range");
}

TEST(MainWindow, MemoryMapPageDrawsASnapshotAndFollowsThePickedInstant)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    MainWindow w;
    showPage(w, "memory-map", { 1300, 850 });
    MemoryMapPage* page = w.memoryMapPage();
    QSignalSpy frames(&page->model(), &MemoryMapModel::frameReady);
    w.openTrace(QString::fromStdString(path));
    ASSERT_TRUE(waitLoaded(w));
    auto loaded = w.session().current();
    ASSERT_TRUE(frames.wait(20000));
    QTest::qWait(100);
    ASSERT_TRUE(page->view()->frame());
    const QImage image = page->grab().toImage();
    EXPECT_FALSE(singleColour(image));
    // It starts at the peak allocated, with the segments live then.
    const TimeNs peak = loaded->analysis.breakdowns.front().instant.time;
    EXPECT_EQ(page->view()->instant(), peak);
    const auto atPeak = memoryMapStateAt(*loaded->memoryMap, peak);
    EXPECT_EQ(page->segmentTable().rowCount(), int(atPeak.segments.size()));
    EXPECT_GT(page->segmentTable().rowCount(), 0);

    // The Timeline's picked instant moves the map (the end: the snapshot's 96 segments).
    const TimeNs end = loaded->memoryMap->time.end - 1;
    emit w.timelineView()->instantPicked(end);
    EXPECT_EQ(page->view()->instant(), end);
    ASSERT_TRUE(frames.wait(20000) || page->view()->frame()->instant == end);
    QTest::qWait(50);
    EXPECT_EQ(page->segmentTable().rowCount(), 96);
    EXPECT_TRUE(page->instantText().contains("96 segments")) << page->instantText().toStdString();

    // Clicking the largest block live at the end shows its details.
    const MemoryMapIndex& index = *loaded->memoryMap;
    std::size_t largest = 0;
    bool found = false;
    for (std::size_t i = 0; i < index.blocks.size(); ++i)
        if (index.blocks[i].allocatedAt(end) && (!found || index.blocks[i].size > index.blocks[largest].size))
            largest = i, found = true;
    ASSERT_TRUE(found);
    const QRect col = page->view()->instantRect();
    const auto& b = index.blocks[largest];
    const double yMid = col.bottom() + 1 - double(b.offset + b.size / 2) * col.height() / double(index.axisBytes);
    QTest::mouseClick(page->view(), Qt::LeftButton, {}, QPoint(col.center().x(), int(yMid)));
    EXPECT_TRUE(page->detailsText().contains(QString("size: %1").arg(QString::fromStdString(formatBytes(b.size))))) << page->detailsText().toStdString();

    // The wheel zooms the address axis about the cursor; a double-click shows all again.
    QWheelEvent wheel(QPointF(page->view()->plotRect().center()), page->view()->mapToGlobal(QPointF(page->view()->plotRect().center())), QPoint(),
        QPoint(0, 240), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(page->view(), &wheel);
    const OffsetWindow zoomed = page->view()->addressWindow();
    EXPECT_GT(zoomed.hi, zoomed.lo);
    EXPECT_NEAR(double(zoomed.length()), double(index.axisBytes) / (1.25 * 1.25), double(index.axisBytes) * 0.01);
    QTest::mouseDClick(page->view(), Qt::LeftButton, {}, page->view()->plotRect().center());
    EXPECT_EQ(page->view()->addressWindow(), OffsetWindow {});

    // Choosing a segment in the table zooms the address axis to exactly that segment.
    auto* table = page->findChild<QTableView*>();
    ASSERT_TRUE(table);
    table->setCurrentIndex(page->segmentTable().index(5, 0));
    const SegmentRow& row = page->segmentTable().rows()[5];
    const Bytes offset = *index.offsetOf(row.address);
    EXPECT_EQ(page->view()->addressWindow(), (OffsetWindow { offset, offset + row.size }));
}

TEST(MainWindow, MemoryMapPageExplainsWhyATraceWithoutAddressesIsEmpty)
{
    const std::string path = publicTrace("hta/memory_timeline.raw.gz");
    REQUIRE_PUBLIC(path);
    MainWindow w;
    showPage(w, "memory-map", { 1000, 700 });
    w.openTrace(QString::fromStdString(path));
    ASSERT_TRUE(waitLoaded(w));
    EXPECT_TRUE(w.memoryMapPage()->instantText().contains("no addresses")) << w.memoryMapPage()->instantText().toStdString();
    EXPECT_FALSE(singleColour(w.memoryMapPage()->view()->grab().toImage())); // the reason is drawn
}

// Review finding: on the 8-GPU xplane trace every page showed hip:7 only, with no way to see another.
TEST(MainWindow, TheDeviceMenuShowsAnotherDeviceOfAMultiGpuTrace)
{
    const std::string path = publicTrace("tracelens/jax-xplane/jax_conv_minimal_legacy.xplane.pb");
    REQUIRE_PUBLIC(path);
    MainWindow w;
    w.setQuietErrors(true);
    w.openTrace(QString::fromStdString(path));
    ASSERT_TRUE(waitLoaded(w));
    QMenu* menu = w.deviceMenu();
    ASSERT_TRUE(menu->isEnabled());
    const auto actions = menu->actions();
    ASSERT_EQ(actions.size(), 8);
    auto current = w.session().current();
    EXPECT_EQ(analyze::deviceLabel(current->trace.devices()[current->analysis.device]), "hip:7");
    QAction* first = nullptr;
    for (QAction* a : actions) {
        EXPECT_EQ(a->isChecked(), a->text() == "hip:7") << a->text().toStdString();
        if (a->text() == "hip:0")
            first = a;
    }
    ASSERT_NE(first, nullptr);
    first->trigger();
    ASSERT_TRUE(waitLoaded(w));
    current = w.session().current();
    EXPECT_EQ(analyze::deviceLabel(current->trace.devices()[current->analysis.device]), "hip:0");
    EXPECT_EQ(current->memoryMap->deviceLabel, "hip:0");
}
