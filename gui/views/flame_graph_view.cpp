#include "gui/views/flame_graph_view.h"

#include "gui/models/palette.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <functional>

namespace gpumem::gui {

FlameGraphView::FlameGraphView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(300, 150);
}

void FlameGraphView::setTree(std::shared_ptr<const analyze::CodeTree> tree)
{
    m_tree = std::move(tree);
    m_zoom = 0;
    relayout();
}

void FlameGraphView::setZoom(analyze::CodeNodeId node)
{
    if (!m_tree || node >= m_tree->size())
        return;
    m_zoom = node;
    relayout();
}

void FlameGraphView::relayout()
{
    m_rects = m_tree ? layoutFlameGraph(*m_tree, m_zoom, QRectF(rect()).adjusted(2, 2, -2, -2), kRowHeight) : std::vector<FlameRect> {};
    update();
}

void FlameGraphView::resizeEvent(QResizeEvent*) { relayout(); }

std::optional<analyze::CodeNodeId> FlameGraphView::nodeAt(QPointF pos) const
{
    for (const auto& r : m_rects)
        if (r.rect.contains(pos))
            return r.node;
    return std::nullopt;
}

void FlameGraphView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!m_tree) {
        p.setPen(palette().text().color());
        p.drawText(rect(), Qt::AlignCenter, "No call stacks at this moment.");
        return;
    }
    const QFontMetrics fm = p.fontMetrics();
    for (const auto& r : m_rects) {
        const auto& n = m_tree->node(r.node);
        // Colour by the frame's file, so one file's frames share a hue; the zoomed node's ancestors grey.
        QColor c = r.depth < 0 ? QColor(210, 210, 210) : paletteColour(std::hash<std::string> {}(n.file.empty() ? n.label : n.file));
        c = c.lighter(100 + 8 * (r.depth % 3));
        p.fillRect(r.rect.adjusted(0, 0, -1, -1), c);
        if (r.rect.width() > 30) {
            p.setPen(Qt::black);
            p.drawText(r.rect.adjusted(3, 0, -3, 0), Qt::AlignVCenter | Qt::AlignLeft,
                fm.elidedText(QString::fromStdString(n.label), Qt::ElideRight, int(r.rect.width()) - 6));
        }
    }
}

void FlameGraphView::mouseMoveEvent(QMouseEvent* e)
{
    const auto node = nodeAt(e->position());
    const QString text = node && m_tree ? flameNodeText(*m_tree, *node) : QString();
    if (text != m_hoverText) {
        m_hoverText = text;
        if (text.isEmpty())
            QToolTip::hideText();
        else if (isVisible())
            QToolTip::showText(e->globalPosition().toPoint() + QPoint(12, 12), text, this);
    }
}

void FlameGraphView::mousePressEvent(QMouseEvent* e)
{
    if (e->button() != Qt::LeftButton)
        return;
    if (const auto node = nodeAt(e->position())) {
        setZoom(*node);
        emit nodeClicked(*node);
    }
}

void FlameGraphView::mouseDoubleClickEvent(QMouseEvent*) { setZoom(0); }

} // namespace gpumem::gui
