#pragma once
// QPainter flame graph of a code tree (issue #18 item 3): the live bytes at one moment by call stack,
// the zoomed frame across the whole width at the top, its callees below, widths proportional to
// bytes (layoutFlameGraph). A click on a frame zooms into it (its ancestors stay above it, full width:
// a click on one zooms back out; a double-click shows the whole tree) and emits nodeClicked so the
// code tree selects it; hovering shows its bytes and blocks (flameNodeText) in a tooltip. Owns no data
// beyond a shared_ptr to the immutable tree; UI thread only.
#include "gui/models/code_tree_model.h"

#include <QWidget>

#include <memory>
#include <optional>

namespace gpumem::gui {

class FlameGraphView : public QWidget {
    Q_OBJECT
public:
    explicit FlameGraphView(QWidget* parent = nullptr);
    void setTree(std::shared_ptr<const analyze::CodeTree> tree);
    const std::shared_ptr<const analyze::CodeTree>& tree() const { return m_tree; }
    void setZoom(analyze::CodeNodeId node);
    analyze::CodeNodeId zoom() const { return m_zoom; }
    const std::vector<FlameRect>& rects() const { return m_rects; }
    // The node drawn under `pos`, or nullopt.
    std::optional<analyze::CodeNodeId> nodeAt(QPointF pos) const;
    QString hoverText() const { return m_hoverText; }
    static constexpr double kRowHeight = 18;
    QSize sizeHint() const override { return { 700, 400 }; }

signals:
    void nodeClicked(gpumem::analyze::CodeNodeId node);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;

private:
    void relayout();
    std::shared_ptr<const analyze::CodeTree> m_tree;
    analyze::CodeNodeId m_zoom = 0;
    std::vector<FlameRect> m_rects;
    QString m_hoverText;
};

} // namespace gpumem::gui
