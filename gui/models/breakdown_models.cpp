#include "gui/models/breakdown_models.h"

#include "core/units.h"
#include "gui/models/byte_text.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpumem::gui {

using analyze::GroupBy;
using analyze::GroupRow;

QString shareText(Bytes part, Bytes whole)
{
    if (whole == 0)
        return "–";
    return QString::number(100.0 * double(part) / double(whole), 'f', 1) + " %";
}

namespace {
    const QVariant kRight = QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
}

// ---- ModuleTreeModel ----

void ModuleTreeModel::setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown)
{
    beginResetModel();
    m_breakdown = std::move(breakdown);
    m_nodes.clear();
    m_top.clear();
    if (m_breakdown) {
        const auto& rows = m_breakdown->by(GroupBy::Module);
        m_nodes.resize(rows.size());
        std::vector<int> stack; // the open ancestors, by depth
        for (int r = 0; r < int(rows.size()); ++r) {
            const std::uint32_t depth = rows[std::size_t(r)].depth;
            stack.resize(std::min<std::size_t>(stack.size(), depth));
            Node& n = m_nodes[std::size_t(r)];
            if (stack.empty()) {
                n.parent = -1;
                n.position = int(m_top.size());
                m_top.push_back(r);
            } else {
                n.parent = stack.back();
                auto& siblings = m_nodes[std::size_t(n.parent)].children;
                n.position = int(siblings.size());
                siblings.push_back(r);
            }
            stack.push_back(r);
        }
    }
    endResetModel();
}

QModelIndex ModuleTreeModel::indexOfRow(int row) const
{
    if (row < 0 || row >= int(m_nodes.size()))
        return {};
    return createIndex(m_nodes[std::size_t(row)].position, 0, quintptr(row));
}

QModelIndex ModuleTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (row < 0 || column < 0 || column >= columnCount(parent))
        return {};
    const std::vector<int>& children = parent.isValid() ? m_nodes[parent.internalId()].children : m_top;
    if (row >= int(children.size()))
        return {};
    return createIndex(row, column, quintptr(children[std::size_t(row)]));
}

QModelIndex ModuleTreeModel::parent(const QModelIndex& child) const
{
    if (!child.isValid())
        return {};
    const int p = m_nodes[child.internalId()].parent;
    return p < 0 ? QModelIndex() : indexOfRow(p);
}

int ModuleTreeModel::rowCount(const QModelIndex& parent) const
{
    if (!parent.isValid())
        return int(m_top.size());
    if (parent.column() != 0)
        return 0;
    return int(m_nodes[parent.internalId()].children.size());
}

int ModuleTreeModel::columnCount(const QModelIndex&) const { return 5; }

QVariant ModuleTreeModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !m_breakdown)
        return {};
    const GroupRow& r = m_breakdown->by(GroupBy::Module)[index.internalId()];
    const Bytes live = m_breakdown->liveBytes;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case 0: return QString::fromStdString(r.label);
        case 1: return bytesText(r.selfBytes);
        case 2: return bytesText(r.totalBytes);
        case 3: return shareText(r.totalBytes, live);
        case 4: return QString::number(r.totalBlocks);
        }
        break;
    case Qt::UserRole:
        switch (index.column()) {
        case 0: return QString::fromStdString(r.key);
        case 1: return QVariant::fromValue<qulonglong>(r.selfBytes);
        case 2: return QVariant::fromValue<qulonglong>(r.totalBytes);
        case 3: return live ? double(r.totalBytes) / double(live) : 0.0;
        case 4: return QVariant::fromValue<qulonglong>(r.totalBlocks);
        }
        break;
    case Qt::ToolTipRole:
        return QString::fromStdString(r.key);
    case Qt::TextAlignmentRole:
        return index.column() == 0 ? QVariant() : kRight;
    default:
        break;
    }
    return {};
}

QVariant ModuleTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
        return {};
    static const char* names[] = { "Module", "Self", "Total", "Share", "Blocks" };
    return section >= 0 && section < 5 ? QVariant(QString(names[section])) : QVariant();
}

// ---- GroupTableModel ----

GroupTableModel::GroupTableModel(GroupBy by, QObject* parent)
    : QAbstractTableModel(parent)
    , m_by(by)
{
}

void GroupTableModel::setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown)
{
    beginResetModel();
    m_breakdown = std::move(breakdown);
    endResetModel();
}

int GroupTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_breakdown ? 0 : int(m_breakdown->by(m_by).size());
}

int GroupTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 4; }

QVariant GroupTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !m_breakdown || index.row() >= rowCount())
        return {};
    const GroupRow& r = m_breakdown->by(m_by)[std::size_t(index.row())];
    const Bytes live = m_breakdown->liveBytes;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case 0: return QString::fromStdString(r.label);
        case 1: return bytesText(r.totalBytes);
        case 2: return shareText(r.totalBytes, live);
        case 3: return QString::number(r.totalBlocks);
        }
        break;
    case Qt::UserRole:
        switch (index.column()) {
        case 0: return QString::fromStdString(r.key);
        case 1: return QVariant::fromValue<qulonglong>(r.totalBytes);
        case 2: return live ? double(r.totalBytes) / double(live) : 0.0;
        case 3: return QVariant::fromValue<qulonglong>(r.totalBlocks);
        }
        break;
    case Qt::ToolTipRole:
        return index.column() == 0 ? QVariant(QString::fromStdString(r.key)) : QVariant();
    case Qt::TextAlignmentRole:
        return index.column() == 0 ? QVariant() : kRight;
    default:
        break;
    }
    return {};
}

QVariant GroupTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
        return {};
    QString first;
    switch (m_by) {
    case GroupBy::Module: first = "Module"; break;
    case GroupBy::Category: first = m_breakdown && m_breakdown->categoriesInferred ? "Category (inferred)" : "Category"; break;
    case GroupBy::Site: first = "Call site"; break;
    case GroupBy::SizeClass: first = "Size class"; break;
    case GroupBy::Stream: first = "Stream"; break;
    }
    const QString names[] = { first, "Bytes", "Share", "Blocks" };
    return section >= 0 && section < 4 ? QVariant(names[section]) : QVariant();
}

// ---- Treemap layout ----

namespace {
    struct Item {
        double area;
        int row; // -1: the parent's self bytes (left empty)
    };

    double worst(double sum, double minArea, double maxArea, double side)
    {
        const double s2 = side * side, sum2 = sum * sum;
        return std::max(s2 * maxArea / sum2, sum2 / (s2 * minArea));
    }

    // Lays `items` (descending area, summing to rect's area) into `rect`.
    void squarify(const std::vector<Item>& items, QRectF rect, std::vector<std::pair<QRectF, int>>& out)
    {
        std::size_t i = 0;
        while (i < items.size() && rect.width() > 0 && rect.height() > 0) {
            const double side = std::min(rect.width(), rect.height());
            double sum = items[i].area, mn = items[i].area, mx = items[i].area;
            std::size_t j = i + 1;
            while (j < items.size()) {
                const double a = items[j].area;
                if (worst(sum + a, std::min(mn, a), std::max(mx, a), side) > worst(sum, mn, mx, side))
                    break;
                sum += a, mn = std::min(mn, a), mx = std::max(mx, a);
                ++j;
            }
            if (j == items.size())
                sum = rect.width() * rect.height(); // the last strip takes what rounding left
            if (rect.width() >= rect.height()) { // a column on the left
                const double w = sum / rect.height();
                double y = rect.top();
                for (std::size_t k = i; k < j; ++k) {
                    const double h = j == items.size() && k + 1 == j ? rect.bottom() - y : items[k].area / w;
                    out.push_back({ QRectF(rect.left(), y, w, h), items[k].row });
                    y += h;
                }
                rect.setLeft(rect.left() + w);
            } else { // a row at the top
                const double h = sum / rect.width();
                double x = rect.left();
                for (std::size_t k = i; k < j; ++k) {
                    const double w = j == items.size() && k + 1 == j ? rect.right() - x : items[k].area / h;
                    out.push_back({ QRectF(x, rect.top(), w, h), items[k].row });
                    x += w;
                }
                rect.setTop(rect.top() + h);
            }
            i = j;
        }
    }
} // namespace

std::vector<TreemapRect> layoutTreemap(const std::vector<GroupRow>& rows, QRectF area, int maxDepth, double header)
{
    std::vector<TreemapRect> out;
    // children[r + 1]: children of row r; children[0]: the top level.
    std::vector<std::vector<int>> children(rows.size() + 1);
    std::vector<int> stack;
    for (int r = 0; r < int(rows.size()); ++r) {
        stack.resize(std::min<std::size_t>(stack.size(), rows[std::size_t(r)].depth));
        children[stack.empty() ? 0 : std::size_t(stack.back() + 1)].push_back(r);
        stack.push_back(r);
    }
    struct Job {
        QRectF rect;
        int parent; // -1 = top
        int depth;
    };
    std::vector<Job> jobs { { area, -1, 0 } };
    for (std::size_t q = 0; q < jobs.size(); ++q) {
        const Job job = jobs[q];
        const auto& kids = children[std::size_t(job.parent + 1)];
        Bytes total = 0;
        std::vector<Item> items;
        for (int k : kids)
            if (rows[std::size_t(k)].totalBytes > 0)
                items.push_back({ double(rows[std::size_t(k)].totalBytes), k }), total += rows[std::size_t(k)].totalBytes;
        if (job.parent >= 0 && rows[std::size_t(job.parent)].selfBytes > 0)
            items.push_back({ double(rows[std::size_t(job.parent)].selfBytes), -1 }), total += rows[std::size_t(job.parent)].selfBytes;
        if (items.empty() || total == 0 || job.rect.width() < 1 || job.rect.height() < 1)
            continue;
        std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.area > b.area; });
        const double scale = job.rect.width() * job.rect.height() / double(total);
        for (auto& it : items)
            it.area *= scale;
        std::vector<std::pair<QRectF, int>> placed;
        squarify(items, job.rect, placed);
        for (const auto& [rect, row] : placed) {
            if (row < 0 || rect.width() * rect.height() < 1)
                continue;
            out.push_back({ rect, row, job.depth });
            if (job.depth + 1 < maxDepth && !children[std::size_t(row + 1)].empty()) {
                QRectF inner = rect.adjusted(2, header, -2, -2);
                if (inner.width() >= 4 && inner.height() >= 4) {
                    jobs.push_back({ inner, row, job.depth + 1 });
                    out.back().nested = true;
                }
            }
        }
    }
    // Breadth-first order already puts parents before children.
    return out;
}

} // namespace gpumem::gui
