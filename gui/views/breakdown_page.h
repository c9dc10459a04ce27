#pragma once
// The Peak breakdown page (issue #7 item 4): what was live at the peak allocated, or at the instant
// picked on the Timeline, by module (a tree with self and total bytes beside a squarified treemap;
// clicking a rectangle selects its tree row and the reverse), by category, size class, call site
// and stream (tables). The peak breakdown comes precomputed with the trace (analyze::Analysis); the
// picked instant's is computed on a worker thread (analyze::breakdownAt). Owns its widgets and
// models; UI thread only.
#include "gui/models/breakdown_models.h"
#include "gui/models/trace_session.h"

#include <QWidget>

#include <array>
#include <atomic>
#include <optional>

class QLabel;
class QRadioButton;
class QTreeView;

namespace gpumem::gui {

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
    QString headline() const;

public slots:
    void setPickedInstant(gpumem::TimeNs time);

signals:
    // A new breakdown is on screen (tests wait on it).
    void breakdownShown();

private:
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
};

} // namespace gpumem::gui
