#pragma once
// The allocator's events of one device as a list beside the memory map (issue #18 item 6, memory_viz's
// event list): one row per memory event of the device in trace order (request level: alloc, free,
// free_completed; segment level: segment_alloc/free/map/unmap; oom; marker). Columns: #, Time
// (relative to the trace start, or "event N" on an event-index axis), Event, Address, Size,
// Requested. OOM rows are marked (Qt::BackgroundRole red, isOom()). Stepping through the rows with
// the arrow keys moves the memory map's instant to each event's time (MemoryMapPage), so the map
// redraws the segments, blocks and pending frees after that event; events that share one timestamp
// share that state. No widgets; UI thread. Qt::UserRole of a row holds its event's index in
// Trace::memory().
#include "gui/models/trace_session.h"

#include <QAbstractTableModel>

#include <vector>

namespace gpumem::gui {

class AllocatorEventModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    // The events of `device` of the trace (nullptr clears). O(events).
    void setTrace(std::shared_ptr<const LoadedTrace> trace, DeviceId device);
    std::size_t eventOf(int row) const { return m_events.at(std::size_t(row)); }
    TimeNs timeOf(int row) const;
    bool isOom(int row) const;
    // The last row whose event is at or before `time` (0 when none is).
    int rowAt(TimeNs time) const;
    // The rows of OOM events, ascending.
    const std::vector<int>& oomRows() const { return m_ooms; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

    static constexpr int kColumns = 6;

private:
    std::shared_ptr<const LoadedTrace> m_trace;
    std::vector<std::size_t> m_events; // indexes into trace.memory(), in order
    std::vector<int> m_ooms;
    bool m_eventIndex = false;
};

} // namespace gpumem::gui
