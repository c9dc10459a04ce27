#include "gui/views/treemap_view.h"
#include "gui/models/byte_text.h"

#include "core/units.h"
#include "gui/models/palette.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace gpumem::gui {

TreemapView::TreemapView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(200, 150);
}

void TreemapView::setBreakdown(std::shared_ptr<const analyze::Breakdown> breakdown)
{
    m_breakdown = std::move(breakdown);
    m_selected = -1;
    relayout();
}

void TreemapView::setSelectedRow(int row)
{
    m_selected = row;
    update();
}

void TreemapView::relayout()
{
    m_rects.clear();
    if (m_breakdown)
        m_rects = layoutTreemap(m_breakdown->by(analyze::GroupBy::Module), QRectF(rect()).adjusted(1, 1, -1, -1), kMaxDepth, kHeader);
    update();
}

void TreemapView::resizeEvent(QResizeEvent*) { relayout(); }

int TreemapView::rowAt(QPointF pos) const
{
    for (auto it = m_rects.rbegin(); it != m_rects.rend(); ++it)
        if (it->rect.contains(pos))
            return it->row;
    return -1;
}

void TreemapView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!m_breakdown || m_rects.empty()) {
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, m_breakdown ? "Nothing is live at this instant." : "No breakdown.");
        return;
    }
    const auto& rows = m_breakdown->by(analyze::GroupBy::Module);
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.85);
    p.setFont(small);
    const QFontMetrics fm(small);
    // Rectangles with nested children are drawn as grey frames (darker when shallower); the others
    // take the palette in order (largest first), so neighbours differ.
    const QRectF* selected = nullptr;
    std::size_t leaf = 0;
    for (const auto& r : m_rects) {
        const auto& row = rows[std::size_t(r.row)];
        const QColor c = r.nested ? QColor::fromHsl(215, 20, std::min(120 + 22 * r.depth, 225)) : paletteColour(leaf++);
        p.fillRect(r.rect, c);
        p.setPen(QPen(QColor(255, 255, 255), 1));
        p.drawRect(r.rect);
        if (r.row == m_selected)
            selected = &r.rect;
        if (r.rect.width() < 40 || r.rect.height() < 14)
            continue;
        const QString text = QString::fromStdString(row.label) + "  " + bytesText(row.totalBytes);
        p.setPen(c.lightness() > 150 ? QColor(20, 20, 20) : QColor(255, 255, 255));
        p.drawText(r.rect.adjusted(4, 1, -3, 0).toRect(), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
            r.nested || r.rect.height() < 34 ? fm.elidedText(text, Qt::ElideRight, int(r.rect.width()) - 7) : text);
    }
    if (selected) {
        p.setPen(QPen(Qt::black, 3));
        p.setBrush(Qt::NoBrush);
        p.drawRect(selected->adjusted(1.5, 1.5, -1.5, -1.5));
    }
}

void TreemapView::mousePressEvent(QMouseEvent* event)
{
    const int row = rowAt(event->position());
    if (row < 0)
        return;
    setSelectedRow(row);
    emit rowClicked(row);
}

void TreemapView::mouseMoveEvent(QMouseEvent* event)
{
    const int row = rowAt(event->position());
    if (row < 0 || !m_breakdown) {
        QToolTip::hideText();
        return;
    }
    const auto& r = m_breakdown->by(analyze::GroupBy::Module)[std::size_t(row)];
    QToolTip::showText(event->globalPosition().toPoint(),
        QString("%1\ntotal %2, self %3, %4")
            .arg(QString::fromStdString(r.key), bytesText(r.totalBytes), bytesText(r.selfBytes),
                QString::fromStdString(counted(r.totalBlocks, "block", "blocks"))),
        this);
}

} // namespace gpumem::gui
