#pragma once
// Qt models over the code tree (analyze/code_tree.h, issue #18 items 2–4): the live bytes at one moment
// by call stack, outermost frame at the root, each stack folded to read like Python
// (analyze/frame_folding.h). The tree itself is analyze's — the same one `gpumem analyze --by stack`
// prints; these models only present it. Also the flame graph's layout and the per-line table of one
// source file (analyze::attributeSourceLines, as `analyze --by line`). No widgets; the models hold a
// shared_ptr to immutable results and live on the UI thread.
#include "analyze/code_tree.h"
#include "analyze/source_lines.h"

#include <QAbstractItemModel>
#include <QAbstractTableModel>
#include <QRectF>
#include <QStringList>

#include <memory>
#include <vector>

namespace gpumem::gui {

// The tree: columns Frame, Self, Total, Share (of the live bytes), Blocks (total). The top-level rows
// are the root's children (the root "all" is the headline); each item's internal id is its node id.
// Qt::UserRole gives raw bytes (self, total), the share as a double and blocks; Qt::ToolTipRole the
// frame's file:line.
class CodeTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    using QAbstractItemModel::QAbstractItemModel;
    void setTree(std::shared_ptr<const analyze::CodeTree> tree);
    const std::shared_ptr<const analyze::CodeTree>& tree() const { return m_tree; }
    QModelIndex indexOfNode(analyze::CodeNodeId node) const; // invalid for the root or no tree
    analyze::CodeNodeId nodeOf(const QModelIndex& index) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::shared_ptr<const analyze::CodeTree> m_tree;
    std::vector<int> m_position; // per node: its row under its parent
};

// One rectangle of the flame graph.
struct FlameRect {
    QRectF rect;
    analyze::CodeNodeId node = 0;
    int depth = 0; // rows below the zoomed node (0 = the zoomed node itself)
};

// The flame graph (icicle: the zoomed node across the whole width at the top, each node's children
// below it, left to right in the tree's order, widths proportional to total bytes) of `tree` from
// node `zoom`, in `area`, `rowHeight` pixels per level; nodes narrower than `minWidth` pixels are left
// out with their subtrees. The zoomed node's ancestors are drawn above it, full width, so a click on
// one zooms back out.
std::vector<FlameRect> layoutFlameGraph(const analyze::CodeTree& tree, analyze::CodeNodeId zoom, QRectF area,
    double rowHeight, double minWidth = 1.0);

// "forward (model.py:40): 1.20 GiB (61.3 % of 1.96 GiB live), 12 blocks; self 0 B in 0 blocks".
QString flameNodeText(const analyze::CodeTree& tree, analyze::CodeNodeId node);

// The per-line view of one file: columns Line, Bytes, Blocks, Source. One row per line of the file's
// text when it could be read, else one row per line with bytes; then a row "(no line)" for frames
// without a line number when they hold bytes. Qt::UserRole gives raw bytes and blocks.
class SourceLinesModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    // `text`: the file's lines (empty when it could not be read).
    void setLines(std::shared_ptr<const analyze::SourceLines> lines, QStringList text);
    const std::shared_ptr<const analyze::SourceLines>& lines() const { return m_lines; }
    int rowOfLine(std::int32_t line) const; // -1 when not shown
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::shared_ptr<const analyze::SourceLines> m_lines;
    QStringList m_text;
    std::vector<std::int32_t> m_rows; // the line number of each row (0: frames without a line)
};

} // namespace gpumem::gui
