#pragma once
// The Memory map page (issue #7 item 3): the MemoryMapView with a colour selector (state, module,
// category), the allocator's event list (issue #18: arrow keys step event by event, OOMs marked), the segments at the picked instant (SegmentTableModel; choosing one zooms the map's
// address axis to it) and the details of the clicked block (size, requested size, lifetime, module, category, stack). The instant follows the
// Timeline's picked instant (MainWindow connects TimelineView::instantPicked to setInstant); on a
// new trace it starts at the peak allocated. Owns its widgets and models; UI thread only.
#include "gui/models/allocator_event_model.h"
#include "gui/models/memory_map_model.h"

#include <QWidget>

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTableView;

namespace gpumem::gui {

class MemoryMapView;

class MemoryMapPage : public QWidget {
    Q_OBJECT
public:
    explicit MemoryMapPage(QWidget* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    MemoryMapView* view() const { return m_view; }
    MemoryMapModel& model() { return m_model; }
    SegmentTableModel& segmentTable() { return m_segments; }
    // The allocator's events beside the map: the current row is the event the map shows (arrow keys
    // step through them; the instant moves to each event's time).
    AllocatorEventModel& events() { return m_events; }
    QTableView* eventTable() const { return m_eventTable; }
    // Makes `row` of events() the current one (as an arrow key would): the map redraws at its time.
    void stepToEvent(int row);
    // The details text of the selected block (empty when none).
    QString detailsText() const;
    QString instantText() const;
    void setColouring(MapColouring colouring);

    // Opens the map at `time` with the blocks of these trace allocations (trace.allocations() indexes,
    // as analyze::EvidenceBlock::allocation carries them) outlined and the first of them on the map
    // selected, its details shown; the segment table marks the rows holding them. Allocations not on
    // the map (another device) are skipped. The outline stays until the user picks another instant or
    // block.
    void highlightAllocations(gpumem::TimeNs time, const std::vector<std::uint32_t>& allocations);

public slots:
    // Moves the instant (the Timeline's pick) and clears a Diagnosis highlight.
    void setInstant(gpumem::TimeNs time);
    void setTimeRange(gpumem::gui::TimeRange range);
    void selectBlock(std::size_t block);

signals:
    // A click on the map moved the instant (MainWindow passes it on to the other pages).
    void instantPicked(gpumem::TimeNs time);

private:
    // "+0.025380 s" from the trace start, or "event 12" on a snapshot without timestamps.
    QString momentText(gpumem::TimeNs time) const;
    void showInstant(gpumem::TimeNs time);
    void clearHighlight();
    void frameArrived(const std::shared_ptr<const MemoryMapFrame>& frame);

    MemoryMapModel m_model;
    SegmentTableModel m_segments;
    AllocatorEventModel m_events;
    QTableView* m_eventTable = nullptr;
    bool m_followingInstant = false; // the event row follows an instant set elsewhere: no step back
    std::shared_ptr<const LoadedTrace> m_trace;
    MemoryMapView* m_view = nullptr;
    QComboBox* m_colouring = nullptr;
    QLabel* m_instantLabel = nullptr;
    QTableView* m_table = nullptr;
    QPlainTextEdit* m_details = nullptr;
    bool m_selectOnFrame = false; // a new trace: select the largest block at the first instant drawn
};

} // namespace gpumem::gui
