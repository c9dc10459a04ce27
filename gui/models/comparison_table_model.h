#pragma once
// The what-if comparison table (issue #7 item 5): one row for what the trace recorded (when it has a
// reserved series) and one per replayed policy, with the columns of `gpumem replay` plus two ratios.
// A QAbstractTableModel without widgets; lives on the UI thread. Its CSV export is the CLI's
// (analyze::writeReplayTable, format "csv"), so `gpumem replay --format csv` and the viewer agree.
#include "analyze/comparison.h"
#include "gui/models/what_if_engine.h"

#include <QAbstractTableModel>

#include <iosfwd>
#include <optional>

namespace gpumem::gui {

class ComparisonTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Policy, // the spec; DecorationRole: its curve's colour
        PeakReserved, // bytes
        VsRecorded, // peak reserved / the recorded peak reserved − 1 (a signed fraction); empty, shown "— (N OOMs)", for a run with OOMs
        VsIdeal, // "vs bound": peak reserved / the lower bound (analyze::ComparisonContext::lowerBound, the one overhead figure of every front end); as VsRecorded for OOMs
        PeakAllocated, // bytes
        WasteAtPeak, // 1 − allocated/reserved at the fullest instant of the peak reservation (PyTorch; allocators.md §5.4)
        DeviceCalls, // cudaMalloc + cudaFree (+ map/unmap); recorded: segment events
        Ooms, // failed requests
        FirstOom, // time of the first, relative to the trace start
        ColumnCount
    };
    // Qt::UserRole gives each cell's raw value: qulonglong bytes/counts, double ratios and fractions,
    // qlonglong ns; an invalid QVariant where the cell is empty ("—").
    static constexpr int RawRole = Qt::UserRole;

    explicit ComparisonTableModel(QObject* parent = nullptr);

    // Bytes allocated before a profiler trace began (replay::openingAllocated of the trace's analysed
    // device): the replays hold them but not the cache around them, so "vs recorded" stays empty when it
    // is not 0 and the replays' peak reserved is shown as a lower bound ("≥").
    Bytes openingAllocated() const { return m_openingAllocated; }
    // A new trace: drops every row, adds the recorded row when the trace has a reserved series.
    void setTrace(const LoadedTrace& trace);
    // Inserts the row in request order (WhatIfResult::order), whatever order the replays finish in.
    void addResult(const WhatIfResult& result);
    void clearResults(); // keeps the recorded row
    bool hasRecordedRow() const { return m_recorded.has_value(); }
    // The replayed policies' results, in row (request) order, without their timelines.
    const std::vector<replay::ReplayResult>& results() const { return m_results; }
    // The replayed rows as `gpumem replay --format csv` writes them (the recorded row is not a replay).
    void writeCsv(std::ostream& out) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Recorded {
        QString label;
        Bytes peakReserved = 0, peakAllocated = 0;
        std::optional<double> waste;
        std::optional<std::uint64_t> deviceCalls;
        std::uint64_t ooms = 0;
    };
    QVariant raw(int row, int column) const;
    std::optional<Bytes> idealPeak() const;

    std::optional<Recorded> m_recorded;
    std::vector<replay::ReplayResult> m_results;
    std::vector<QString> m_specs;
    std::vector<QColor> m_colors;
    std::vector<int> m_orders; // WhatIfResult::order of each row, ascending
    Bytes m_lowerBound = 0;
    analyze::ComparisonContext m_context; // as `gpumem replay` builds it (start recorded)
    Bytes m_openingAllocated = 0;
    TimeNs m_start = 0;
};

} // namespace gpumem::gui
