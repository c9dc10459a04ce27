#include "gui/models/comparison_table_model.h"

#include "replay/fidelity.h"

#include "analyze/replay_report.h"
#include "core/units.h"
#include "gui/models/byte_text.h"

#include <QBrush>

#include <algorithm>
#include <ostream>

namespace gpumem::gui {

namespace {
    QString percentText(double f, bool sign)
    {
        return (sign && f > 0 ? "+" : "") + QString::number(f * 100.0, 'f', 1) + " %";
    }
    bool isIdeal(const QString& spec) { return spec.section(':', 0, 0).section('@', 0, 0).trimmed() == "ideal"; }
} // namespace

ComparisonTableModel::ComparisonTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void ComparisonTableModel::setTrace(const LoadedTrace& t)
{
    beginResetModel();
    m_results.clear();
    m_specs.clear();
    m_colors.clear();
    m_orders.clear();
    m_recorded.reset();
    const auto& frag = t.analysis.fragmentation;
    m_openingAllocated = t.analysis.empty ? 0 : replay::openingAllocated(t.trace, t.analysis.device);
    m_context = t.analysis.empty ? analyze::ComparisonContext {}
                                 : analyze::comparisonContext(t.trace, t.analysis.device, replay::StartState::Recorded);
    m_lowerBound = t.analysis.empty ? frag.lowerBound : m_context.lowerBound;
    m_start = t.analysis.origin; // offsets from the trace start, as the other pages and `gpumem replay`
    if (!t.analysis.empty && frag.peakReserved) {
        Recorded r;
        const auto* d = t.analysis.timeline.device(t.analysis.device);
        r.label = "recorded (" + QString::fromStdString(d ? d->reservedSource : std::string("trace")) + ")";
        r.peakReserved = *frag.peakReserved;
        r.peakAllocated = frag.peakRecordedAllocated.value_or(frag.peakAllocated);
        r.waste = frag.wasteAtPeakReserved;
        if (d) {
            // As the replays define it (replay::ReplayResult::atPeak): at the fullest instant of the peak
            // reservation, not the first.
            for (std::size_t i = 0; i < d->size(); ++i)
                if (d->reserved[i] == r.peakReserved && (!r.waste || d->waste(i) < *r.waste))
                    r.waste = d->waste(i);
        }
        if (t.analysis.stats.hasSegments)
            r.deviceCalls = t.analysis.stats.segments.allocated + t.analysis.stats.segments.freed;
        r.ooms = t.analysis.stats.ooms;
        m_recorded = r;
    }
    endResetModel();
}

void ComparisonTableModel::addResult(const WhatIfResult& w)
{
    // Rows stay in request order whatever order the replays finish in.
    const auto at = std::size_t(std::upper_bound(m_orders.begin(), m_orders.end(), w.order) - m_orders.begin());
    const int row = int(at) + (m_recorded ? 1 : 0);
    beginInsertRows({}, row, row);
    replay::ReplayResult r = w.result;
    r.timeline = {};
    m_results.insert(m_results.begin() + std::ptrdiff_t(at), std::move(r));
    m_specs.insert(m_specs.begin() + std::ptrdiff_t(at), w.spec);
    m_colors.insert(m_colors.begin() + std::ptrdiff_t(at), w.color);
    m_orders.insert(m_orders.begin() + std::ptrdiff_t(at), w.order);
    endInsertRows();
    // A new ideal row changes every row's "vs ideal".
    if (isIdeal(w.spec))
        emit dataChanged(index(0, VsIdeal), index(rowCount() - 1, VsIdeal));
}

void ComparisonTableModel::clearResults()
{
    if (m_results.empty())
        return;
    const int first = m_recorded ? 1 : 0;
    beginRemoveRows({}, first, first + int(m_results.size()) - 1);
    m_results.clear();
    m_specs.clear();
    m_colors.clear();
    m_orders.clear();
    endRemoveRows();
}

void ComparisonTableModel::writeCsv(std::ostream& out) const
{
    analyze::writeReplayTable(m_results, "csv", m_start, out, m_context);
}

int ComparisonTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_results.size()) + (m_recorded ? 1 : 0);
}

int ComparisonTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

std::optional<Bytes> ComparisonTableModel::idealPeak() const
{
    // The one overhead figure (analyze/comparison.h): over the lower bound, not over an `ideal` row.
    if (m_lowerBound > 0)
        return m_lowerBound;
    return std::nullopt;
}

QVariant ComparisonTableModel::raw(int row, int column) const
{
    const bool recordedRow = m_recorded && row == 0;
    const replay::ReplayResult* r = recordedRow ? nullptr : &m_results[std::size_t(row - (m_recorded ? 1 : 0))];
    const Bytes peakReserved = recordedRow ? m_recorded->peakReserved : r->peakReserved.bytes;
    // A run with OOMs stopped short of the trace's demand: its peak is what it held when requests failed, so
    // a ratio would read as a saving that is not there (review 5: 5 OOMs at 2 GiB showed "−56.8 %", "1.00×").
    if (r && r->ooms > 0 && (column == VsRecorded || column == VsIdeal))
        return {};
    switch (column) {
    case Policy:
        return recordedRow ? m_recorded->label : m_specs[std::size_t(row - (m_recorded ? 1 : 0))];
    case PeakReserved:
        return qulonglong(peakReserved);
    case VsRecorded:
        // A profiler trace that began with memory allocated: the replays lack it, the recording has it;
        // the ratio would read as a saving that is not there (review finding, OWLv2: −49.9 %).
        if (!m_recorded || m_recorded->peakReserved == 0 || m_openingAllocated > 0)
            return {};
        return double(peakReserved) / double(m_recorded->peakReserved) - 1.0;
    case VsIdeal: {
        auto ideal = idealPeak();
        if (!ideal || *ideal == 0)
            return {};
        return double(peakReserved) / double(*ideal);
    }
    case PeakAllocated:
        return qulonglong(recordedRow ? m_recorded->peakAllocated : r->peakAllocated.bytes);
    case WasteAtPeak:
        if (recordedRow)
            return m_recorded->waste ? QVariant(*m_recorded->waste) : QVariant();
        return r->atPeak.waste();
    case DeviceCalls:
        if (recordedRow)
            return m_recorded->deviceCalls ? QVariant(qulonglong(*m_recorded->deviceCalls)) : QVariant();
        return qulonglong(r->deviceCalls());
    case Ooms:
        return qulonglong(recordedRow ? m_recorded->ooms : r->ooms);
    case FirstOom:
        if (recordedRow || r->failures.empty())
            return {};
        return qlonglong(r->failures.front().time - m_start);
    default:
        return {};
    }
}

QVariant ComparisonTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const int row = index.row(), column = index.column();
    const bool recordedRow = m_recorded && row == 0;
    if (role == RawRole)
        return raw(row, column);
    if (role == Qt::TextAlignmentRole)
        return column == Policy ? QVariant(int(Qt::AlignLeft | Qt::AlignVCenter))
                                : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::DecorationRole && column == Policy)
        return recordedRow ? QColor(200, 60, 50) : m_colors[std::size_t(row - (m_recorded ? 1 : 0))];
    if (role == Qt::ToolTipRole && column == Policy && !recordedRow)
        return QString::fromStdString(m_results[std::size_t(row - (m_recorded ? 1 : 0))].policy);
    if (role == Qt::ToolTipRole && (column == VsRecorded || column == VsIdeal) && !recordedRow
        && m_results[std::size_t(row - (m_recorded ? 1 : 0))].ooms > 0)
        return QString("No ratio: this run failed %1 requests, so its peak reserved is what it held when they failed, "
                       "not a saving.")
            .arg(m_results[std::size_t(row - (m_recorded ? 1 : 0))].ooms);
    if (role == Qt::ToolTipRole && column == VsRecorded && m_openingAllocated > 0)
        return QString("Not comparable: %1 was already allocated when the trace began; the replays hold "
                       "it, but not the cache the allocator had reserved around it then, which the trace does not "
                       "show: their peak reserved is a lower bound (≥).")
            .arg(bytesText(m_openingAllocated));
    if (role == Qt::ToolTipRole && column == FirstOom && !recordedRow) {
        const auto& r = m_results[std::size_t(row - (m_recorded ? 1 : 0))];
        if (r.failures.empty())
            return {};
        const auto& f = r.failures.front();
        if (f.beforeWindow) // no request failed: the starting state itself does not fit
            return QString("the state before the trace holds %1 in live blocks, in segments of %2 that cannot be "
                           "released, more than the capacity")
                .arg(bytesText(f.allocated))
                .arg(bytesText(f.reserved));
        return QString("request %1 on stream %2 with %3 reserved")
            .arg(bytesText(f.size))
            .arg(f.stream)
            .arg(bytesText(f.reserved));
    }
    if (role != Qt::DisplayRole)
        return {};
    QVariant v = raw(row, column);
    if (!v.isValid() && (column == VsRecorded || column == VsIdeal) && !recordedRow) {
        const auto ooms = m_results[std::size_t(row - (m_recorded ? 1 : 0))].ooms;
        if (ooms > 0)
            return QString("— (%1 OOM%2)").arg(ooms).arg(ooms == 1 ? "" : "s");
    }
    if (!v.isValid())
        return QString("—");
    switch (column) {
    case Policy:
        return v;
    case PeakReserved:
        if (!recordedRow && m_results[std::size_t(row - (m_recorded ? 1 : 0))].reservedIsLowerBound)
            return QString::fromUtf8("≥ ") + bytesText(v.toULongLong());
        return bytesText(v.toULongLong());
    case PeakAllocated:
        return bytesText(v.toULongLong());
    case VsRecorded:
        return percentText(v.toDouble(), true);
    case VsIdeal:
        return QString::number(v.toDouble(), 'f', 2) + "×";
    case WasteAtPeak:
        return percentText(v.toDouble(), false);
    case DeviceCalls:
    case Ooms:
        return QString::number(v.toULongLong());
    case FirstOom:
        return "+" + QString::fromStdString(formatSeconds(v.toLongLong()));
    default:
        return {};
    }
}

QVariant ComparisonTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount)
        return {};
    static const char* const titles[] = { "policy", "peak reserved", "vs recorded", "vs bound", "peak allocated",
        "waste at peak", "device calls", "OOMs", "first OOM" };
    static const char* const tips[] = { "the policy spec as run (hover a row for its effective options)",
        "the most bytes the policy held from the device",
        "peak reserved relative to the peak reserved the trace recorded",
        "peak reserved over the lower bound: the most bytes live at once, with the memory from before the trace "
        "(the overhead figure `gpumem replay` and `gpumem report` give)",
        "the most bytes allocated to the program",
        "1 − allocated/reserved at the fullest instant of the peak reservation (PyTorch's reserved-but-unallocated)",
        "simulated cudaMalloc + cudaFree (+ map/unmap); recorded: segment events",
        "requests that failed for lack of capacity (skipped and counted)",
        "time of the first failed request after the trace start" };
    if (role == Qt::DisplayRole)
        return QString(titles[section]);
    if (role == Qt::ToolTipRole)
        return QString(tips[section]);
    return {};
}

} // namespace gpumem::gui
