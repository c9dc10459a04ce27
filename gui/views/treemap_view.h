#pragma once
// QPainter squarified treemap of a Breakdown's module tree (layoutTreemap): each rectangle's area is
// a scope's total live bytes, children nested inside their parent under its label; parents are grey
// frames, the innermost rectangles take the palette in size order. A click selects the deepest rectangle under the cursor (rowClicked: the index
// into the module rows); setSelectedRow() outlines one. Owns no data beyond a shared_ptr to the
// immutable Breakdown; UI thread only.
#include "gui/models/breakdown_models.h"

#include <QWidget>

#include <memory>

namespace gpumem::gui {

class TreemapView : public QWidget {
    Q_OBJECT
public:
    explicit TreemapView(QWidget* parent = nullptr);
    void setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown);
    void setSelectedRow(int row);
    int selectedRow() const { return m_selected; }
    // The laid-out rectangles for the current size (tests use them to click).
    const std::vector<TreemapRect>& rects() const { return m_rects; }
    int rowAt(QPointF pos) const;
    static constexpr int kMaxDepth = 12;
    static constexpr double kHeader = 15;
    QSize sizeHint() const override { return { 600, 400 }; }

signals:
    void rowClicked(int row);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;

private:
    void relayout();
    std::shared_ptr<const analyze::Breakdown> m_breakdown;
    std::vector<TreemapRect> m_rects;
    int m_selected = -1;
};

} // namespace gpumem::gui
