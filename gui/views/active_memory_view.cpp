#include "gui/views/active_memory_view.h"

#include "gui/models/byte_text.h"
#include "gui/models/palette.h"
#include "gui/views/time_ticks.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace gpumem::gui {

namespace {
    const QColor kSummarized(190, 190, 190);
}

ActiveMemoryView::ActiveMemoryView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumSize(400, 200);
    setAttribute(Qt::WA_OpaquePaintEvent);
}

QRect ActiveMemoryView::plotRect() const
{
    return QRect(kLeftMargin, kTopMargin, std::max(1, width() - kLeftMargin - 8), std::max(1, height() - kTopMargin - kBottomMargin));
}

void ActiveMemoryView::setFullRange(TimeRange full, bool eventIndex)
{
    m_axis.setFull(full);
    m_axis.setEventIndex(eventIndex);
    m_axis.setWidth(plotRect().width());
    m_frame.reset();
    rangeChanged();
}

void ActiveMemoryView::setVisibleRange(TimeRange range)
{
    if (range == m_axis.visible())
        return;
    m_axis.setVisible(range);
    emit frameRequested(m_axis.visible(), m_axis.width());
    update();
}

void ActiveMemoryView::rangeChanged()
{
    emit visibleRangeChanged(m_axis.visible());
    emit frameRequested(m_axis.visible(), m_axis.width());
    update();
}

void ActiveMemoryView::setFrame(std::shared_ptr<const ActiveMemoryFrame> frame)
{
    if (!frame || frame->range != m_axis.visible() || frame->width != m_axis.width())
        return; // computed for a view we have already left
    m_frame = std::move(frame);
    if (m_hoverPos)
        hover(*m_hoverPos);
    update();
}

double ActiveMemoryView::bytesPerPixel() const
{
    return m_frame && m_frame->maxValue > 0 ? m_frame->maxValue / double(plotRect().height()) : 1.0;
}

ActiveHit ActiveMemoryView::hitAt(QPoint p) const
{
    const QRect box = plotRect();
    if (!m_frame || !box.contains(p))
        return {};
    const double bytes = (double(box.bottom() - p.y()) + 0.5) * bytesPerPixel();
    return bandAt(*m_frame, p.x() - box.left(), bytes);
}

std::optional<QPoint> ActiveMemoryView::bandPoint(std::size_t position, int column) const
{
    if (!m_frame)
        return std::nullopt;
    std::optional<QPoint> at;
    const QRect box = plotRect();
    const double scale = 1.0 / bytesPerPixel();
    forEachStacked(*m_frame, [&](std::size_t i, int c, double bottom, double top) {
        if (i == position && c == column)
            at = QPoint(box.left() + c, box.bottom() - int(std::lround((bottom + top) / 2 * scale)));
    });
    return at;
}

void ActiveMemoryView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const QColor grid = palette().mid().color();
    const QColor text = palette().text().color();
    const QRect box = plotRect();
    drawTimeTicks(p, m_axis, box.left(), kTopMargin, box.bottom(), width(), grid, text);
    p.setPen(grid);
    p.drawRect(box.adjusted(-1, -1, 0, 0));
    if (!m_frame) {
        p.setPen(text);
        p.drawText(box, Qt::AlignCenter, "computing…");
        return;
    }
    const double scale = m_frame->maxValue > 0 ? double(box.height()) / m_frame->maxValue : 0;
    // Per pixel into one image, drawn once (as the Timeline's bands: a fillRect per column would cost
    // more than the whole frame).
    QImage image(box.size(), QImage::Format_RGB32);
    image.fill(palette().base().color());
    const int h = image.height();
    auto rowOf = [&](double bytes) { return std::clamp(h - int(std::lround(bytes * scale)), 0, h); };
    auto column = [&](int c, int yTop, int yBottom, QRgb rgb, bool edge) { // rows [yTop, yBottom)
        if (c < 0 || c >= image.width() || yBottom <= yTop)
            return;
        const QRgb dark = qRgb(qRed(rgb) * 3 / 4, qGreen(rgb) * 3 / 4, qBlue(rgb) * 3 / 4);
        for (int y = yTop; y < yBottom; ++y)
            reinterpret_cast<QRgb*>(image.scanLine(y))[c] = edge && y == yTop && yBottom - yTop >= 3 ? dark : rgb;
    };
    const QRgb rest = kSummarized.rgb();
    for (std::size_t c = 0; c < m_frame->rest.size(); ++c)
        if (m_frame->rest[c].valid)
            column(int(c), rowOf(m_frame->rest[c].max), h, rest, false);
    std::vector<QRgb> colours(kPaletteSize);
    for (std::size_t k = 0; k < kPaletteSize; ++k)
        colours[k] = paletteColour(k).rgb();
    forEachStacked(*m_frame, [&](std::size_t i, int c, double bottom, double top) {
        column(c, rowOf(top), rowOf(bottom), colours[m_frame->bands[i].rank % kPaletteSize], true);
    });
    p.drawImage(box.topLeft(), image);
    // The scale: top value and 0, a quarter line between.
    p.setPen(text);
    p.drawText(QRect(4, box.top() - 8, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignTop, bytesText(Bytes(m_frame->maxValue)));
    p.drawText(QRect(4, box.bottom() - 18, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignBottom, "0 B");
    for (int q = 1; q <= 3; ++q) {
        const int yq = box.bottom() - int(std::lround(box.height() * q / 4.0));
        p.setPen(QPen(grid, 1, Qt::DotLine));
        p.drawLine(box.left(), yq, box.right(), yq);
        p.setPen(text);
        p.drawText(QRect(4, yq - 10, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignVCenter,
            bytesText(Bytes(m_frame->maxValue * q / 4.0)));
    }
    // Legend under the plot.
    const int ly = box.bottom() + 6;
    p.fillRect(box.left(), ly + 3, 10, 10, kSummarized);
    p.setPen(text);
    p.drawText(box.left() + 14, ly + 13,
        QString("%1 other blocks summarized; the %2 largest drawn one by one, stacked in allocation order (%3 in view)")
            .arg(m_frame->restBlocks)
            .arg(m_frame->topCount)
            .arg(m_frame->bands.size()));
    if (m_hoverPos && box.contains(*m_hoverPos)) {
        p.setPen(QPen(text, 1, Qt::DotLine));
        p.drawLine(m_hoverPos->x(), box.top(), m_hoverPos->x(), box.bottom());
    }
}

void ActiveMemoryView::resizeEvent(QResizeEvent*)
{
    if (m_axis.width() != plotRect().width()) {
        m_axis.setWidth(plotRect().width());
        rangeChanged();
    }
}

void ActiveMemoryView::wheelEvent(QWheelEvent* e)
{
    const double steps = e->angleDelta().y() / 120.0;
    if (steps == 0)
        return;
    m_axis.zoom(std::pow(1.25, steps), e->position().x() - kLeftMargin);
    rangeChanged();
    e->accept();
}

void ActiveMemoryView::mousePressEvent(QMouseEvent* e)
{
    m_pressPos = e->pos();
    m_pressRange = m_axis.visible();
    m_dragged = false;
}

void ActiveMemoryView::mouseMoveEvent(QMouseEvent* e)
{
    if (m_pressPos && (e->pos() - *m_pressPos).manhattanLength() > 3)
        m_dragged = true;
    if (m_pressPos && m_dragged) {
        m_axis.setVisible(m_pressRange);
        m_axis.pan(double(m_pressPos->x() - e->pos().x()));
        rangeChanged();
        return;
    }
    hover(e->pos());
}

void ActiveMemoryView::hover(QPoint p)
{
    m_hoverPos = p;
    const ActiveHit hit = hitAt(p);
    QString text;
    std::optional<std::size_t> block;
    if (hit.band) {
        block = m_frame->bands[*hit.band].block;
        text = m_describe ? m_describe(*block) : QString("block %1").arg(*block);
    } else if (hit.summarized) {
        text = summarizedText(*m_frame, p.x() - plotRect().left());
    }
    if (text != m_hoverText) {
        m_hoverText = text;
        emit bandHovered(block, text);
        // The first lines (size, requested, alloc/free times); the page shows the whole stack.
        const QStringList lines = text.split('\n');
        if (isVisible() && !text.isEmpty())
            QToolTip::showText(mapToGlobal(p + QPoint(12, 12)), lines.mid(0, 6).join('\n'), this);
        else
            QToolTip::hideText();
    }
    update();
}

void ActiveMemoryView::mouseReleaseEvent(QMouseEvent* e)
{
    if (m_pressPos && !m_dragged && e->button() == Qt::LeftButton) {
        const ActiveHit hit = hitAt(e->pos());
        // The column's moment: the map then shows the state this column draws.
        const int col = e->pos().x() - plotRect().left();
        if (hit.band && col >= 0 && col < int(m_frame->moment.size()))
            emit blockClicked(m_frame->bands[*hit.band].block, m_frame->moment[std::size_t(col)]);
    }
    m_pressPos.reset();
    m_dragged = false;
}

void ActiveMemoryView::mouseDoubleClickEvent(QMouseEvent*)
{
    m_axis.setVisible(m_axis.full());
    rangeChanged();
}

void ActiveMemoryView::leaveEvent(QEvent*)
{
    m_hoverPos.reset();
    update();
}

} // namespace gpumem::gui
