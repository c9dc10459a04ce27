#include "gui/models/ranks_table_model.h"

namespace gpumem::gui {

RanksTableModel::RanksTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void RanksTableModel::setView(analyze::JobView view)
{
    beginResetModel();
    m_table = analyze::rankTable(view);
    m_table.header.push_back("trace");
    for (std::size_t r = 0; r < m_table.rows.size(); ++r)
        m_table.rows[r].push_back(view.ranks[r].path);
    m_view = std::move(view);
    endResetModel();
}

void RanksTableModel::clear()
{
    beginResetModel();
    m_view.reset();
    m_table = {};
    endResetModel();
}

QString RanksTableModel::headline() const { return m_view ? QString::fromStdString(analyze::jobViewHeadline(*m_view)) : QString(); }

QString RanksTableModel::pathAt(int row) const
{
    if (!m_view || row < 0 || std::size_t(row) >= m_view->ranks.size())
        return {};
    return QString::fromStdString(m_view->ranks[std::size_t(row)].path);
}

int RanksTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_table.rows.size()); }

int RanksTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_table.header.size()); }

QVariant RanksTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount())
        return {};
    const auto& cell = m_table.rows[std::size_t(index.row())][std::size_t(index.column())];
    const bool figure = index.column() > 0 && index.column() + 2 < columnCount(); // the first OOM and the trace read left to right
    switch (role) {
    case Qt::DisplayRole:
        return QString::fromStdString(cell);
    case Qt::TextAlignmentRole:
        return QVariant::fromValue(Qt::Alignment((figure ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter));
    case Qt::ToolTipRole:
        return pathAt(index.row());
    case PathRole:
        return pathAt(index.row());
    default:
        return {};
    }
}

QVariant RanksTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount())
        return {};
    if (role == Qt::DisplayRole)
        return QString::fromStdString(m_table.header[std::size_t(section)]);
    if (role == Qt::ToolTipRole)
        return QString::fromStdString(m_table.legend);
    return {};
}

} // namespace gpumem::gui
