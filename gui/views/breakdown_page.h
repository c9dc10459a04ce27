#pragma once
// The Peak breakdown page (issue #7 item 4): what was live at the peak allocated, or at the instant
// picked on the Timeline, by module (a tree with self and total bytes beside a squarified treemap;
// clicking a rectangle selects its tree row and the reverse), by category, size class, call site
// and stream (tables). The peak breakdown comes precomputed with the trace (analyze::Analysis); the
// picked instant's is computed on a worker thread (analyze::breakdownAt). Owns its widgets and
// models; UI thread only.
//
// Issue #18: "Tree: call stack" shows the same moment's code tree instead (analyze::buildCodeTree,
// what `gpumem analyze --by stack` prints: folded stacks, outermost frame at the root) beside its
// flame graph (click to zoom, hover for bytes and blocks), and, for the file of the selected frame,
// the live bytes per source line (analyze::attributeSourceLines, as `analyze --by line`). A trace
// without module scopes (snapshots, XLA) opens on it instead of a single "(no scope)" row.
#include "gui/models/breakdown_models.h"
#include "gui/models/code_tree_model.h"
#include "gui/models/trace_session.h"

#include <QWidget>

#include <array>
#include <atomic>
#include <optional>

class QComboBox;
class QLabel;
class QRadioButton;
class QStackedWidget;
class QTableView;
class QTreeView;

namespace gpumem::gui {

class FlameGraphView;
class TreemapView;

class BreakdownPage : public QWidget {
    Q_OBJECT
public:
    explicit BreakdownPage(QWidget* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    // false: at the peak allocated; true: at the picked instant (the peak until one is picked).
    void setAtPickedInstant(bool picked);
    ModuleTreeModel& moduleModel() { return m_modules; }
    TreemapView* treemap() const { return m_treemap; }
    QTreeView* tree() const { return m_tree; }
    const std::shared_ptr<const analyze::Breakdown>& shown() const { return m_shown; }
    // The code tree of the shown moment (built on a worker thread; codeTreeShown() follows).
    CodeTreeModel& codeTreeModel() { return m_codeModel; }
    QTreeView* codeTree() const { return m_codeTree; }
    FlameGraphView* flameGraph() const { return m_flame; }
    SourceLinesModel& sourceLines() { return m_lineModel; }
    // true: the code tree and flame graph; false: the module tree and treemap. A choice made here (or
    // in the page's Tree box) stays for later traces; otherwise a trace without module scopes shows
    // the code tree.
    void setCallStackTree(bool callStack);
    bool callStackTree() const;
    // The live bytes per line of `file` (a frame's file as recorded) at the shown moment; its text
    // when the file can be read. sourceLinesShown() follows.
    void showLinesOf(const QString& file);
    QString headline() const;

public slots:
    void setPickedInstant(gpumem::TimeNs time);

signals:
    // A new breakdown is on screen (tests wait on it).
    void breakdownShown();
    void codeTreeShown();
    void sourceLinesShown();

private:
    void showTreeKind(bool callStack);
    void showBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown);
    void refresh();

    std::shared_ptr<const LoadedTrace> m_trace;
    std::shared_ptr<const analyze::Breakdown> m_peak, m_shown;
    std::optional<TimeNs> m_picked;
    ModuleTreeModel m_modules;
    std::array<std::unique_ptr<GroupTableModel>, analyze::kGroupByCount> m_groups;
    std::shared_ptr<std::atomic<std::uint64_t>> m_generation = std::make_shared<std::atomic<std::uint64_t>>(0);
    QRadioButton* m_atPeak = nullptr;
    QRadioButton* m_atPicked = nullptr;
    QLabel* m_headline = nullptr;
    QTreeView* m_tree = nullptr;
    TreemapView* m_treemap = nullptr;
    CodeTreeModel m_codeModel;
    SourceLinesModel m_lineModel;
    std::shared_ptr<std::atomic<std::uint64_t>> m_codeGeneration = std::make_shared<std::atomic<std::uint64_t>>(0);
    std::shared_ptr<std::atomic<std::uint64_t>> m_linesGeneration = std::make_shared<std::atomic<std::uint64_t>>(0);
    QComboBox* m_treeKind = nullptr;
    bool m_treeKindChosen = false; // the user picked one: a new trace does not switch it
    QStackedWidget* m_left = nullptr;
    QStackedWidget* m_right = nullptr;
    QTreeView* m_codeTree = nullptr;
    FlameGraphView* m_flame = nullptr;
    QLabel* m_linesLabel = nullptr;
    QTableView* m_lines = nullptr;
};

} // namespace gpumem::gui
