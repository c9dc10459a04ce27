#pragma once
// The What-if page (issue #7 item 5): pick policies (the registry's list with checkboxes, plus a field
// for specs or raw PYTORCH_CUDA_ALLOC_CONF strings) and a capacity, run the replays in the background
// (WhatIfEngine), watch their reserved curves over the recorded ones and compare them in a table that
// exports to CSV. Owns its widgets, engine, table model and a timeline model of its own (memory lane
// only); emits curvesChanged() so the main Timeline page overlays the same curves. UI thread only.
#include "gui/models/comparison_table_model.h"
#include "gui/models/timeline_model.h"
#include "gui/models/what_if_engine.h"

#include <QWidget>

class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QTableView;

namespace gpumem::gui {

class TimelineView;

class WhatIfPage : public QWidget {
    Q_OBJECT
public:
    explicit WhatIfPage(QWidget* parent = nullptr);

    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    // The specs the controls select now: the checked policies, then the field's entries
    // (policySpecsFromText).
    QStringList selectedSpecs() const;
    // Checks exactly the registered policies named in `specs` and puts the others in the text field.
    void setSelectedSpecs(const QStringList& specs);
    // "" = unlimited; else a size such as "40GiB" (parseBytes).
    void setCapacityText(const QString& text);
    // Starts the replays of the selected specs; a bad spec or capacity is shown in the status line
    // (and returned as false) instead of starting anything.
    bool run();
    // False without a trace or for a trace with memory counters only (nothing to replay; the status
    // line says why and Run is disabled).
    bool canReplay() const;
    void cancel();
    // The comparison the screenshot mode and first-time users get: the trace's own settings (pytorch,
    // which applies the recorded allocator settings when the trace has them), the ideal lower bound
    // and expandable segments; the recorded row comes from the trace itself.
    static QStringList defaultSpecs();
    // Asks for a file name and writes the table as CSV; returns true when written.
    bool exportCsvInteractively();
    // Writes the table as CSV (the `gpumem replay --format csv` layout); throws IoError.
    void exportCsv(const QString& path) const;

    WhatIfEngine& engine() { return m_engine; }
    ComparisonTableModel& table() { return m_table; }
    TimelineView* chart() const { return m_chart; }
    QString statusText() const;

signals:
    // The simulated curves so far (request order); empty after a new trace or run.
    void curvesChanged(std::vector<gpumem::gui::SimulatedCurve> curves);
    void finished(); // a run ended (all results in, failed or cancelled)

private:
    QString countersOnlyReason() const; // why canReplay() is false for a loaded trace
    void resultArrived(int index);
    void runEnded();

    std::shared_ptr<const LoadedTrace> m_trace;
    WhatIfEngine m_engine;
    ComparisonTableModel m_table;
    TimelineModel m_timelineModel;
    QListWidget* m_policies = nullptr;
    QLineEdit* m_specText = nullptr;
    QLineEdit* m_capacity = nullptr;
    QPushButton* m_run = nullptr;
    QPushButton* m_cancel = nullptr;
    QPushButton* m_exportCsv = nullptr;
    QLabel* m_status = nullptr;
    QTableView* m_view = nullptr;
    TimelineView* m_chart = nullptr;
    QStringList m_failures;
};

} // namespace gpumem::gui
