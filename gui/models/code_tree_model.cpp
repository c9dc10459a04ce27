#include "gui/models/code_tree_model.h"

#include "gui/models/breakdown_models.h"
#include "gui/models/byte_text.h"

#include <QColor>

#include <algorithm>

namespace gpumem::gui {

using analyze::CodeNodeId;
using analyze::CodeTree;

void CodeTreeModel::setTree(std::shared_ptr<const CodeTree> tree)
{
    beginResetModel();
    m_tree = std::move(tree);
    m_position.assign(m_tree ? m_tree->size() : 0, 0);
    if (m_tree)
        for (const auto& n : m_tree->nodes())
            for (std::size_t k = 0; k < n.children.size(); ++k)
                m_position[n.children[k]] = int(k);
    endResetModel();
}

QModelIndex CodeTreeModel::indexOfNode(CodeNodeId node) const
{
    if (!m_tree || node == 0 || node >= m_tree->size())
        return {};
    return createIndex(m_position[node], 0, quintptr(node));
}

CodeNodeId CodeTreeModel::nodeOf(const QModelIndex& index) const { return index.isValid() ? CodeNodeId(index.internalId()) : 0; }

QModelIndex CodeTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (!m_tree || row < 0 || column < 0 || column >= 5)
        return {};
    const auto& children = m_tree->node(nodeOf(parent)).children;
    if (row >= int(children.size()))
        return {};
    return createIndex(row, column, quintptr(children[std::size_t(row)]));
}

QModelIndex CodeTreeModel::parent(const QModelIndex& child) const
{
    if (!m_tree || !child.isValid())
        return {};
    const CodeNodeId parent = m_tree->node(nodeOf(child)).parent;
    return parent == analyze::kNoCodeNode || parent == 0 ? QModelIndex() : createIndex(m_position[parent], 0, quintptr(parent));
}

int CodeTreeModel::rowCount(const QModelIndex& parent) const
{
    if (!m_tree || (parent.isValid() && parent.column() != 0))
        return 0;
    return int(m_tree->node(nodeOf(parent)).children.size());
}

int CodeTreeModel::columnCount(const QModelIndex&) const { return 5; }

QVariant CodeTreeModel::data(const QModelIndex& index, int role) const
{
    if (!m_tree || !index.isValid())
        return {};
    const auto& n = m_tree->node(nodeOf(index));
    const Bytes live = m_tree->liveBytes();
    if (role == Qt::UserRole) {
        switch (index.column()) {
        case 1: return QVariant::fromValue<qulonglong>(n.selfBytes);
        case 2: return QVariant::fromValue<qulonglong>(n.totalBytes);
        case 3: return live ? double(n.totalBytes) / double(live) : 0.0;
        case 4: return QVariant::fromValue<qulonglong>(n.totalBlocks);
        default: return QString::fromStdString(n.label);
        }
    }
    if (role == Qt::ToolTipRole) {
        const auto where = m_tree->location(nodeOf(index));
        return where ? QString::fromStdString(*where) : QString::fromStdString(n.label);
    }
    if (role == Qt::TextAlignmentRole && index.column() > 0)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case 0: return QString::fromStdString(n.label);
    case 1: return bytesText(n.selfBytes);
    case 2: return bytesText(n.totalBytes);
    case 3: return shareText(n.totalBytes, live);
    case 4: return QString::number(n.totalBlocks);
    }
    return {};
}

QVariant CodeTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= 5)
        return {};
    const char* names[] = { "Call stack (outermost first)", "Self", "Total", "Share", "Blocks" };
    return QString(names[section]);
}

std::vector<FlameRect> layoutFlameGraph(const CodeTree& tree, CodeNodeId zoom, QRectF area, double rowHeight, double minWidth)
{
    std::vector<FlameRect> out;
    if (tree.size() == 0 || zoom >= tree.size())
        return out;
    // The zoomed node's ancestors, full width, above it.
    std::vector<CodeNodeId> ancestors;
    for (CodeNodeId a = tree.node(zoom).parent; a != analyze::kNoCodeNode; a = tree.node(a).parent)
        ancestors.push_back(a);
    std::reverse(ancestors.begin(), ancestors.end());
    double y = area.top();
    for (std::size_t k = 0; k < ancestors.size(); ++k) {
        out.push_back({ QRectF(area.left(), y, area.width(), rowHeight), ancestors[k], int(k) - int(ancestors.size()) });
        y += rowHeight;
    }
    struct Item {
        CodeNodeId node;
        double x, w;
        int depth;
    };
    std::vector<Item> stack { { zoom, area.left(), area.width(), 0 } };
    while (!stack.empty()) {
        const Item it = stack.back();
        stack.pop_back();
        const double top = y + it.depth * rowHeight;
        if (top + rowHeight > area.bottom() + 0.5)
            continue;
        out.push_back({ QRectF(it.x, top, it.w, rowHeight), it.node, it.depth });
        const auto& n = tree.node(it.node);
        if (n.totalBytes == 0)
            continue;
        double x = it.x;
        std::vector<Item> children;
        for (CodeNodeId c : n.children) {
            const double w = it.w * double(tree.node(c).totalBytes) / double(n.totalBytes);
            if (w >= minWidth)
                children.push_back({ c, x, w, it.depth + 1 });
            x += w;
        }
        stack.insert(stack.end(), children.rbegin(), children.rend()); // left to right in pre-order
    }
    return out;
}

QString flameNodeText(const CodeTree& tree, CodeNodeId node)
{
    const auto& n = tree.node(node);
    return QString("%1: %2 (%3 of %4 live), %5 blocks; self %6 in %7 blocks")
        .arg(QString::fromStdString(n.label), bytesText(n.totalBytes), shareText(n.totalBytes, tree.liveBytes()),
            bytesText(tree.liveBytes()))
        .arg(n.totalBlocks)
        .arg(bytesText(n.selfBytes))
        .arg(n.selfBlocks);
}

void SourceLinesModel::setLines(std::shared_ptr<const analyze::SourceLines> lines, QStringList text)
{
    beginResetModel();
    m_lines = std::move(lines);
    m_text = std::move(text);
    m_rows.clear();
    if (m_lines) {
        std::int32_t last = std::int32_t(m_text.size());
        if (!m_lines->lines.empty())
            last = std::max(last, m_lines->lines.rbegin()->first);
        for (std::int32_t l = 1; l <= last; ++l)
            if (!m_text.isEmpty() || m_lines->lines.count(l))
                m_rows.push_back(l);
        if (m_lines->lines.count(0))
            m_rows.push_back(0);
    }
    endResetModel();
}

int SourceLinesModel::rowOfLine(std::int32_t line) const
{
    auto it = std::find(m_rows.begin(), m_rows.end(), line);
    return it == m_rows.end() ? -1 : int(it - m_rows.begin());
}

int SourceLinesModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int SourceLinesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 4; }

QVariant SourceLinesModel::data(const QModelIndex& index, int role) const
{
    if (!m_lines || !index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= 4)
        return {};
    const std::int32_t line = m_rows[std::size_t(index.row())];
    auto it = m_lines->lines.find(line);
    const Bytes bytes = it == m_lines->lines.end() ? 0 : it->second.bytes;
    const std::uint64_t blocks = it == m_lines->lines.end() ? 0 : it->second.blocks;
    if (role == Qt::UserRole)
        return index.column() == 1 ? QVariant::fromValue<qulonglong>(bytes) : index.column() == 2 ? QVariant::fromValue<qulonglong>(blocks) : QVariant(line);
    if (role == Qt::BackgroundRole && bytes > 0 && m_lines->attributedBytes > 0) {
        // Warmer for more bytes: the lines that hold the memory stand out, as in Mosaic's view.
        const double share = double(bytes) / double(m_lines->attributedBytes);
        return QColor(255, 255 - int(150 * std::min(1.0, share * 2)), 255 - int(200 * std::min(1.0, share * 2)));
    }
    if (role == Qt::TextAlignmentRole && index.column() < 3)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case 0: return line ? QString::number(line) : QString("(no line)");
    case 1: return bytes ? bytesText(bytes) : QString();
    case 2: return blocks ? QString::number(blocks) : QString();
    case 3: return line > 0 && line <= m_text.size() ? m_text[line - 1] : QString();
    }
    return {};
}

QVariant SourceLinesModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (role != Qt::DisplayRole || orientation != Qt::Horizontal || section < 0 || section >= 4)
        return {};
    const char* names[] = { "Line", "Live bytes", "Blocks", "Source" };
    return QString(names[section]);
}

} // namespace gpumem::gui
