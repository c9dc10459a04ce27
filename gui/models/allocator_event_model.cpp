#include "gui/models/allocator_event_model.h"

#include "gui/models/byte_text.h"
#include "gui/models/time_axis.h"

#include <QColor>

#include <algorithm>

namespace gpumem::gui {

void AllocatorEventModel::setTrace(std::shared_ptr<const LoadedTrace> trace, DeviceId device)
{
    beginResetModel();
    m_trace = std::move(trace);
    m_events.clear();
    m_ooms.clear();
    if (m_trace) {
        const auto& mem = m_trace->trace.memory();
        for (std::size_t i = 0; i < mem.count(); ++i)
            if (mem.device[i] == device) {
                if (mem.kind[i] == EventKind::Oom)
                    m_ooms.push_back(int(m_events.size()));
                m_events.push_back(i);
            }
        m_eventIndex = eventIndexAxis(m_trace->trace);
    }
    endResetModel();
}

TimeNs AllocatorEventModel::timeOf(int row) const { return m_trace->trace.memory().time[eventOf(row)]; }

bool AllocatorEventModel::isOom(int row) const
{
    return row >= 0 && row < int(m_events.size()) && m_trace->trace.memory().kind[m_events[std::size_t(row)]] == EventKind::Oom;
}

int AllocatorEventModel::rowAt(TimeNs time) const
{
    if (!m_trace)
        return 0;
    const auto& t = m_trace->trace.memory().time;
    auto it = std::upper_bound(m_events.begin(), m_events.end(), time, [&](TimeNs v, std::size_t e) { return v < t[e]; });
    return it == m_events.begin() ? 0 : int(it - m_events.begin()) - 1;
}

int AllocatorEventModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_events.size()); }
int AllocatorEventModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant AllocatorEventModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= int(m_events.size()) || index.column() >= kColumns || !m_trace)
        return {};
    const std::size_t e = m_events[std::size_t(index.row())];
    const auto& mem = m_trace->trace.memory();
    if (role == Qt::UserRole)
        return QVariant::fromValue<qulonglong>(e);
    if (role == Qt::BackgroundRole)
        return mem.kind[e] == EventKind::Oom ? QVariant(QColor(250, 180, 170)) : QVariant();
    if (role == Qt::ToolTipRole && mem.kind[e] == EventKind::Oom)
        return QString("Out of memory: a request of %1 failed here").arg(bytesText(mem.size[e]));
    if (role == Qt::TextAlignmentRole)
        return QVariant::fromValue(Qt::Alignment((index.column() == 2 || index.column() == 3 ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignVCenter));
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case 0: return QString::number(index.row());
    case 1:
        return m_eventIndex ? QString("event %1").arg(mem.time[e] - 1)
                            : "+" + QString::fromStdString(formatSeconds(mem.time[e] - m_trace->analysis.origin));
    case 2: {
        const std::string_view k = toString(mem.kind[e]);
        return mem.kind[e] == EventKind::Oom ? QString("OOM") : QString::fromUtf8(k.data(), qsizetype(k.size()));
    }
    case 3: return QString("0x%1").arg(mem.address[e], 0, 16);
    case 4: return bytesText(mem.size[e]);
    case 5: return mem.requestedSize[e] ? bytesText(mem.requestedSize[e]) : QString();
    }
    return {};
}

QVariant AllocatorEventModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= kColumns)
        return {};
    const char* names[] = { "#", "Time", "Event", "Address", "Size", "Requested" };
    return QString(names[section]);
}

} // namespace gpumem::gui
