// The viewer's code tree, flame graph and per-line view (issue #18 items 2–4) over analyze's code tree:
// on the hand-written tests/data/stacks/line_trace.jsonl (stacks through tests/data/stacks/model.py,
// kept beside the trace, so the per-line view shows the file's text) and on every public snapshot (the
// tree sums exactly to the live bytes at the peak).
#include "gui/models/code_tree_model.h"
#include "gui/views/breakdown_page.h"
#include "gui/views/flame_graph_view.h"
#include "gui_test_support.h"
#include "tests/public_snapshots.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTest>
#include <QTreeView>

#include <functional>

using namespace gpumem;
using namespace gpumem::gui;
using namespace gpumem::gui::test;

namespace {
const char* kLineTrace = GPUMEM_SOURCE_DIR "/tests/data/stacks/line_trace.jsonl";

Bytes topLevelSum(const CodeTreeModel& m)
{
    Bytes sum = 0;
    for (int r = 0; r < m.rowCount(); ++r)
        sum += m.index(r, 2).data(Qt::UserRole).toULongLong();
    return sum;
}
} // namespace

TEST(CodeTreeModel, PresentsAnalyzesTreeAndSumsToTheLiveBytes)
{
    auto t = load(kLineTrace);
    ASSERT_FALSE(t->analysis.breakdowns.empty());
    const auto& peak = t->analysis.breakdowns.front();
    auto tree = std::make_shared<const analyze::CodeTree>(analyze::buildCodeTree(t->trace, peak.liveAllocations));
    CodeTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setTree(tree);
    EXPECT_EQ(topLevelSum(model), peak.liveBytes);
    // Every row's Total is its Self plus its children's Totals.
    std::function<void(const QModelIndex&)> check = [&](const QModelIndex& parent) {
        for (int r = 0; r < model.rowCount(parent); ++r) {
            const QModelIndex i = model.index(r, 0, parent);
            Bytes children = 0;
            for (int c = 0; c < model.rowCount(i); ++c)
                children += model.index(c, 2, i).data(Qt::UserRole).toULongLong();
            EXPECT_EQ(model.index(r, 2, parent).data(Qt::UserRole).toULongLong(),
                model.index(r, 1, parent).data(Qt::UserRole).toULongLong() + children);
            check(i);
        }
    };
    check({});
    for (analyze::CodeNodeId n = 1; n < tree->size(); ++n)
        EXPECT_EQ(model.nodeOf(model.indexOfNode(n)), n);
}

TEST(FlameGraph, WidthsFollowBytesAndAClickZooms)
{
    auto t = load(kLineTrace);
    const auto& peak = t->analysis.breakdowns.front();
    auto tree = std::make_shared<const analyze::CodeTree>(analyze::buildCodeTree(t->trace, peak.liveAllocations));
    const auto rects = layoutFlameGraph(*tree, 0, QRectF(0, 0, 1000, 400), 20);
    ASSERT_FALSE(rects.empty());
    EXPECT_EQ(rects[0].node, 0u);
    EXPECT_DOUBLE_EQ(rects[0].rect.width(), 1000.0);
    for (const auto& r : rects) {
        if (r.depth > 0) {
            EXPECT_NEAR(r.rect.width(), 1000.0 * double(tree->node(r.node).totalBytes) / double(tree->liveBytes()), 1e-6);
        }
    }

    FlameGraphView view;
    view.resize(1000, 400);
    view.setTree(tree);
    view.show();
    const analyze::CodeNodeId child = tree->root().children.front();
    const auto it = std::find_if(view.rects().begin(), view.rects().end(), [&](const FlameRect& r) { return r.node == child; });
    ASSERT_NE(it, view.rects().end());
    const QPoint at = it->rect.center().toPoint();
    QTest::mouseMove(&view, at);
    EXPECT_EQ(view.hoverText(), flameNodeText(*tree, child));
    EXPECT_TRUE(view.hoverText().contains(QString::number(tree->node(child).totalBlocks) + " blocks")) << view.hoverText().toStdString();
    QTest::mouseClick(&view, Qt::LeftButton, {}, at);
    EXPECT_EQ(view.zoom(), child);
    // The zoomed frame spans the width under its ancestor (the root), which a click zooms back to.
    ASSERT_GE(view.rects().size(), 2u);
    EXPECT_EQ(view.rects()[0].node, 0u);
    EXPECT_EQ(view.rects()[1].node, child);
    EXPECT_NEAR(view.rects()[1].rect.width(), view.rects()[0].rect.width(), 1e-6);
    QTest::mouseClick(&view, Qt::LeftButton, {}, view.rects()[0].rect.center().toPoint());
    EXPECT_EQ(view.zoom(), 0u);
}

TEST(BreakdownPage, SnapshotOpensOnTheCodeTreeAndShowsAFilesLines)
{
    MainWindow w;
    showPage(w, "breakdown", QSize(1400, 900));
    QSignalSpy treeShown(w.breakdownPage(), &BreakdownPage::codeTreeShown);
    QAbstractItemModelTester treeTester(&w.breakdownPage()->codeTreeModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    QAbstractItemModelTester linesTester(&w.breakdownPage()->sourceLines(), QAbstractItemModelTester::FailureReportingMode::Fatal);
    w.openTrace(kLineTrace);
    ASSERT_TRUE(waitLoaded(w));
    BreakdownPage* page = w.breakdownPage();
    ASSERT_TRUE(treeShown.wait(20000));
    EXPECT_TRUE(page->callStackTree()); // no module scopes: the code tree, not one "(no scope)" row
    ASSERT_TRUE(page->codeTreeModel().tree());
    EXPECT_EQ(topLevelSum(page->codeTreeModel()), page->shown()->liveBytes);
    QSignalSpy linesShown(page, &BreakdownPage::sourceLinesShown);
    page->showLinesOf("/home/u/proj/model.py");
    ASSERT_TRUE(linesShown.wait(20000));
    const auto& lines = *page->sourceLines().lines();
    const auto expected = analyze::attributeSourceLines(w.session().current()->trace, page->shown()->liveAllocations, "/home/u/proj/model.py");
    EXPECT_EQ(lines.attributedBytes, expected.attributedBytes);
    EXPECT_GT(lines.attributedBytes, 0u);
    // model.py is beside the trace: its text shows, one row per line.
    EXPECT_EQ(page->sourceLines().rowCount(), 12 + (lines.lines.count(0) ? 1 : 0));
    for (const auto& [line, l] : lines.lines) {
        if (line == 0)
            continue;
        const int row = page->sourceLines().rowOfLine(line);
        ASSERT_GE(row, 0);
        EXPECT_EQ(page->sourceLines().index(row, 1).data(Qt::UserRole).toULongLong(), l.bytes);
        EXPECT_FALSE(page->sourceLines().index(row, 3).data().toString().isEmpty());
    }
}

TEST(CodeTreeModel, SumsToTheLiveBytesAtThePeakOnEveryPublicSnapshot)
{
    const auto snapshots = gpumem::test::presentPublicSnapshots();
    if (snapshots.empty())
        GTEST_SKIP() << "no public snapshots under " << GPUMEM_PUBLIC_TRACES;
    for (const auto& snapshot : snapshots) {
        const std::string& path = snapshot.path;
        auto t = load(path);
        ASSERT_FALSE(t->analysis.breakdowns.empty()) << path;
        const auto& peak = t->analysis.breakdowns.front();
        CodeTreeModel model;
        model.setTree(std::make_shared<const analyze::CodeTree>(analyze::buildCodeTree(t->trace, peak.liveAllocations)));
        EXPECT_EQ(topLevelSum(model), peak.liveBytes) << path;
    }
}
