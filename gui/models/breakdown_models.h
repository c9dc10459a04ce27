#pragma once
// Qt item models over an analyze::Breakdown (what was live at one instant, design.md §6) for the
// Peak breakdown page (issue #7 item 4), and the squarified treemap layout of its module tree.
// No widgets. The models hold a shared_ptr to an immutable Breakdown; they live on the UI thread.
#include "analyze/peak_breakdown.h"

#include <QAbstractItemModel>
#include <QAbstractTableModel>
#include <QRectF>

#include <memory>
#include <vector>

namespace gpumem::gui {

// Share of `part` in `whole` as "12.3 %" ("–" for an empty whole).
QString shareText(Bytes part, Bytes whole);

// The module tree: columns Module, Self, Total, Share (of the live bytes), Blocks (total). Each
// item's internal id is its index in breakdown.by(GroupBy::Module). Qt::UserRole gives raw bytes
// (self, total) and the share as a double; Qt::ToolTipRole the scope path.
class ModuleTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    using QAbstractItemModel::QAbstractItemModel;
    void setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown);
    const std::shared_ptr<const analyze::Breakdown>& breakdown() const { return m_breakdown; }
    // The item of row `row` of the module rows (column 0); invalid for an out-of-range row.
    QModelIndex indexOfRow(int row) const;
    int rowOf(const QModelIndex& index) const { return index.isValid() ? int(index.internalId()) : -1; }

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    struct Node {
        int parent = -1;      // module row of the parent; -1 at the top
        int position = 0;     // among the parent's children
        std::vector<int> children;
    };
    std::shared_ptr<const analyze::Breakdown> m_breakdown;
    std::vector<Node> m_nodes;
    std::vector<int> m_top;
};

// One grouping of a breakdown (category, size class, site, stream) as a table: Group, Bytes,
// Share, Blocks. Qt::UserRole gives raw values.
class GroupTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    GroupTableModel(analyze::GroupBy by, QObject* parent = nullptr);
    void setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    analyze::GroupBy m_by;
    std::shared_ptr<const analyze::Breakdown> m_breakdown;
};

struct TreemapRect {
    QRectF rect;
    int row = -1;  // index into the module rows
    int depth = 0; // 0 = top level
    bool nested = false; // its children are laid out inside it (below its label strip)
};

// Squarified treemap (Bruls, Huizing, van Wijk, "Squarified Treemaps", 2000) of the module rows
// (pre-order with depth, as analyze::breakdownAt returns them) in `area`: each node's area is
// proportional to its total bytes; children are laid out inside their parent's rectangle below a
// `header`-pixel label strip (the parent's self bytes keep their share as unfilled space), down to
// `maxDepth` levels. Parents come before their children in the result. Rectangles under 1 px² are
// dropped.
std::vector<TreemapRect> layoutTreemap(const std::vector<analyze::GroupRow>& rows, QRectF area, int maxDepth, double header);

} // namespace gpumem::gui
