#include "gui/views/timeline_view.h"
#include "gui/views/time_ticks.h"
#include "gui/models/byte_text.h"

#include "core/units.h"

#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QImage>
#include <QPaintEngine>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpumem::gui {

namespace {
    QString valueText(double v, bool fraction)
    {
        if (fraction)
            return QString::number(v * 100.0, 'f', 1) + " %";
        return bytesText(static_cast<Bytes>(std::max(0.0, v)));
    }

    struct SeriesColumns {
        struct Column {
            int col, top, bottom; // plot column; pixel rows top..bottom inclusive
        };
        QColor color; // with its alpha
        std::vector<Column> columns;
        std::vector<QLineF> segments;
    };

    // Draws the bands of every series of a lane, in order, blended over each other. On a raster device
    // (the screen, a PNG) they are blended by hand into one image drawn once: QPainter's fillRect or
    // drawLine per column cost 10–20 ms per series and a polygon fill 30–60 ms on a zigzagging
    // 1-million-event series (bench/gui_paint_bench), the hand blend well under 1 ms. Other devices
    // (SVG export) get one polygon per run of columns, so the chart stays vector.
    void paintBands(QPainter& p, const QRect& box, const std::vector<SeriesColumns>& bands)
    {
        const int left = box.left() - TimelineView::kLeftMargin; // columns are relative to the plot
        if (p.paintEngine() && p.paintEngine()->type() == QPaintEngine::Raster) {
            QImage overlay(box.width(), box.height(), QImage::Format_ARGB32_Premultiplied);
            overlay.fill(Qt::transparent);
            for (const auto& band : bands) {
                const QRgb src = qPremultiply(band.color.rgba());
                const std::uint32_t inverse = 255 - qAlpha(src);
                for (const auto& c : band.columns) {
                    const int x = c.col - left;
                    if (x < 0 || x >= overlay.width())
                        continue;
                    for (int y = c.top - box.top(); y <= c.bottom - box.top() && y < overlay.height(); ++y) {
                        QRgb* px = reinterpret_cast<QRgb*>(overlay.scanLine(y)) + x;
                        const QRgb d = *px;
                        *px = qRgba(qRed(src) + (qRed(d) * inverse + 127) / 255, qGreen(src) + (qGreen(d) * inverse + 127) / 255,
                            qBlue(src) + (qBlue(d) * inverse + 127) / 255, qAlpha(src) + (qAlpha(d) * inverse + 127) / 255);
                    }
                }
            }
            p.drawImage(box.topLeft(), overlay);
            return;
        }
        p.setPen(Qt::NoPen);
        for (const auto& band : bands) {
            p.setBrush(band.color);
            QPolygon poly;
            auto flush = [&](std::size_t from, std::size_t to) { // columns [from, to), consecutive
                if (from == to)
                    return;
                poly.clear();
                for (std::size_t k = from; k < to; ++k) {
                    const int x = TimelineView::kLeftMargin + band.columns[k].col;
                    poly << QPoint(x, band.columns[k].top) << QPoint(x + 1, band.columns[k].top);
                }
                for (std::size_t k = to; k-- > from;) {
                    const int x = TimelineView::kLeftMargin + band.columns[k].col;
                    poly << QPoint(x + 1, band.columns[k].bottom + 1) << QPoint(x, band.columns[k].bottom + 1);
                }
                p.drawPolygon(poly);
            };
            std::size_t runStart = 0;
            for (std::size_t k = 1; k <= band.columns.size(); ++k)
                if (k == band.columns.size() || band.columns[k].col != band.columns[k - 1].col + 1) {
                    flush(runStart, k);
                    runStart = k;
                }
        }
        p.setBrush(Qt::NoBrush);
    }
} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumHeight(200);
    setAttribute(Qt::WA_OpaquePaintEvent);
    // Right-drag is the rubber band: a plain right click opens the actions (chart export) in
    // mouseReleaseEvent instead of Qt's menu on press.
    setContextMenuPolicy(Qt::PreventContextMenu);
}

namespace {
    double laneWeights(const TimelineFrame& frame)
    {
        double sum = 0;
        for (const auto& lane : frame.lanes)
            sum += lane.relativeHeight;
        return sum;
    }
} // namespace

QSize TimelineView::sizeHint() const
{
    const double lanes = std::max(1.5, laneWeights(m_frame));
    int rows = std::max<int>(2, int(m_frame.rows.size()));
    return { 1000, kAxisHeight + int(lanes * kLaneHeight) + rows * kRowHeight + 8 };
}

int TimelineView::laneHeight() const
{
    if (!m_fillHeight || m_frame.lanes.empty())
        return kLaneHeight;
    const int spare = height() - kAxisHeight - int(m_frame.rows.size()) * kRowHeight - 8;
    return std::max(kLaneHeight, int(spare / laneWeights(m_frame)));
}

int TimelineView::laneHeight(std::size_t lane) const
{
    const double weight = lane < m_frame.lanes.size() ? m_frame.lanes[lane].relativeHeight : 1.0;
    return std::max(kRowHeight * 3, int(std::lround(laneHeight() * weight)));
}

int TimelineView::plotWidth() const { return std::max(1, width() - kLeftMargin - 8); }

void TimelineView::setFullRange(TimeRange full)
{
    m_axis.setFull(full);
    m_axis.setWidth(plotWidth());
    m_history.clear();
    m_history.push(m_axis.visible());
    m_frame = {};
    m_selected.reset();
    rangeChanged(false);
}

void TimelineView::setFrame(TimelineFrame frame)
{
    if (frame.range != m_axis.visible() || frame.width != m_axis.width())
        return; // computed for a view we have already left
    m_frame = std::move(frame);
    updateGeometry();
    update();
}

void TimelineView::setSelectedInstant(std::optional<TimeNs> t)
{
    m_selected = t;
    update();
}

void TimelineView::rangeChanged(bool recordHistory)
{
    if (recordHistory)
        m_history.push(m_axis.visible());
    emit visibleRangeChanged(m_axis.visible());
    emit frameRequested(m_axis.visible(), m_axis.width());
    update();
}

void TimelineView::zoomBack()
{
    if (!m_history.canBack())
        return;
    m_axis.setVisible(m_history.back());
    rangeChanged(false);
}

void TimelineView::zoomForward()
{
    if (!m_history.canForward())
        return;
    m_axis.setVisible(m_history.forward());
    rangeChanged(false);
}

void TimelineView::resetZoom()
{
    m_axis.setVisible(m_axis.full());
    rangeChanged(true);
}

void TimelineView::resizeEvent(QResizeEvent*)
{
    if (m_axis.width() != plotWidth()) {
        m_axis.setWidth(plotWidth());
        rangeChanged(false);
    }
}

void TimelineView::wheelEvent(QWheelEvent* e)
{
    double steps = e->angleDelta().y() / 120.0;
    if (steps == 0)
        return;
    m_axis.zoom(std::pow(1.25, steps), plotX(e->position().x()));
    rangeChanged(true);
    e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e)
{
    m_pressPos = e->pos();
    m_pressRange = m_axis.visible();
    m_dragged = false;
    m_banding = e->button() == Qt::RightButton || (e->modifiers() & Qt::ShiftModifier);
}

void TimelineView::mouseMoveEvent(QMouseEvent* e)
{
    m_hoverX = plotX(e->position().x());
    if (m_pressPos && (e->pos() - *m_pressPos).manhattanLength() > 3)
        m_dragged = true;
    if (m_pressPos && m_dragged) {
        if (m_banding) {
            m_bandEnd = e->pos();
        } else {
            m_axis.setVisible(m_pressRange);
            m_axis.pan(double(m_pressPos->x() - e->pos().x()));
            rangeChanged(false);
        }
    }
    update();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e)
{
    if (!m_pressPos)
        return;
    if (m_dragged && m_banding && m_bandEnd) {
        m_axis.setVisible(m_axis.rangeBetween(plotX(m_pressPos->x()), plotX(m_bandEnd->x())));
        rangeChanged(true);
    } else if (m_dragged) {
        m_history.push(m_axis.visible());
    } else if (e->button() == Qt::RightButton && !actions().isEmpty()) {
        QMenu::exec(actions(), e->globalPosition().toPoint(), nullptr, this);
    } else if (e->button() == Qt::LeftButton && plotX(e->position().x()) >= 0) {
        m_selected = m_axis.toTime(plotX(e->position().x()));
        emit instantPicked(*m_selected);
    }
    m_pressPos.reset();
    m_bandEnd.reset();
    m_banding = m_dragged = false;
    update();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) { resetZoom(); }

void TimelineView::keyPressEvent(QKeyEvent* e)
{
    if (e->modifiers() & Qt::AltModifier) {
        if (e->key() == Qt::Key_Left)
            return zoomBack();
        if (e->key() == Qt::Key_Right)
            return zoomForward();
    }
    switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        m_axis.zoom(1.5, m_axis.width() / 2.0);
        return rangeChanged(true);
    case Qt::Key_Minus:
        m_axis.zoom(1 / 1.5, m_axis.width() / 2.0);
        return rangeChanged(true);
    case Qt::Key_Left:
        m_axis.pan(-m_axis.width() / 8.0);
        return rangeChanged(true);
    case Qt::Key_Right:
        m_axis.pan(m_axis.width() / 8.0);
        return rangeChanged(true);
    case Qt::Key_Home:
        return resetZoom();
    default:
        QWidget::keyPressEvent(e);
    }
}

void TimelineView::leaveEvent(QEvent*)
{
    m_hoverX.reset();
    update();
}

QString TimelineView::hoverText(double x) const
{
    QString text = m_axis.label(m_axis.toTime(x));
    int col = int(x);
    for (const auto& lane : m_frame.lanes)
        for (const auto& s : lane.series)
            if (col >= 0 && col < int(s.buckets.size()) && s.buckets[col].valid)
                text += "   " + s.name + " " + valueText(s.buckets[col].max, lane.fraction);
    return text;
}

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const QColor grid = palette().mid().color();
    const QColor text = palette().text().color();
    const int w = plotWidth();
    p.setRenderHint(QPainter::Antialiasing, false);

    drawTimeTicks(p, m_axis, kLeftMargin, kAxisHeight, height(), width(), grid, text);
    int y = kAxisHeight;
    for (std::size_t laneIndex = 0; laneIndex < m_frame.lanes.size(); ++laneIndex) {
        const auto& lane = m_frame.lanes[laneIndex];
        const int laneHeight = this->laneHeight(laneIndex);
        // The legend goes above the plot (wrapped onto more lines when simulated curves make it wider
        // than the lane) so it never hides the curves near the top of the scale.
        const int lineHeight = p.fontMetrics().height() + 2;
        std::vector<QPoint> legendAt;
        int lx = kLeftMargin + 8, ly = y + 8;
        for (const auto& s : lane.series) {
            const int itemWidth = 24 + p.fontMetrics().horizontalAdvance(s.name);
            if (lx > kLeftMargin + 8 && lx + itemWidth > kLeftMargin + w) {
                lx = kLeftMargin + 8;
                ly += lineHeight;
            }
            legendAt.emplace_back(lx, ly);
            lx += itemWidth;
        }
        int legendHeight = lane.series.empty() ? 0 : ly + lineHeight - (y + 4);
        QRect noteBox;
        if (!lane.note.isEmpty()) {
            noteBox = p.fontMetrics().boundingRect(
                QRect(kLeftMargin + 8, y + 4 + legendHeight + 2, w - 16, laneHeight), Qt::TextWordWrap, lane.note);
            legendHeight += noteBox.height() + 6;
        }
        QRect frameBox(kLeftMargin, y + 4, w, laneHeight - 8);
        QRect box = frameBox.adjusted(0, legendHeight, 0, 0);
        p.setPen(grid);
        p.drawRect(frameBox);
        p.setPen(text);
        p.drawText(QRect(4, box.top() + 24, kLeftMargin - 8, std::max(20, box.height() - 48)), Qt::AlignLeft | Qt::TextWordWrap,
            lane.title);
        // The scale: its top value beside the top of the plot, 0 beside the baseline.
        p.setPen(QPen(grid, 1, Qt::DotLine));
        p.drawLine(box.left(), box.top(), box.right(), box.top());
        p.setPen(text);
        p.drawText(QRect(4, box.top() - 8, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignTop, valueText(lane.maxValue, lane.fraction));
        p.drawText(QRect(4, box.bottom() - 18, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignBottom,
            lane.fraction ? QString("0 %") : QString("0 B"));
        // Quarter lines, labelled where the lane is tall enough to read them (the scale had only 0 and
        // its top, review finding).
        if (lane.maxValue > 0 && box.height() >= 100)
            for (int q = 1; q <= 3; ++q) {
                if (q != 2 && box.height() < 240)
                    continue;
                const int yq = box.bottom() - int(std::lround(box.height() * q / 4.0));
                p.setPen(QPen(grid, 1, Qt::DotLine));
                p.drawLine(box.left(), yq, box.right(), yq);
                p.setPen(text);
                p.drawText(QRect(4, yq - 10, kLeftMargin - 8, 20), Qt::AlignRight | Qt::AlignVCenter,
                    valueText(lane.maxValue * q / 4.0, lane.fraction));
            }
        const double scale = lane.maxValue > 0 ? double(box.height()) / lane.maxValue : 0;
        // Per series: the per-pixel buckets' min–max (or baseline–max when filled) as a band of
        // one-pixel columns, and the line through the buckets' last values.
        std::vector<SeriesColumns> bands;
        for (const auto& s : lane.series) {
            SeriesColumns band;
            band.color = s.color;
            band.color.setAlpha(s.filled ? 110 : 200);
            std::optional<QPointF> previous;
            for (int col = 0; col < int(s.buckets.size()) && col < w; ++col) {
                const auto& b = s.buckets[col];
                if (!b.valid) {
                    previous.reset();
                    continue;
                }
                const int yMax = box.bottom() - int(std::lround(b.max * scale));
                const int yLow = s.filled ? box.bottom() : box.bottom() - int(std::lround(b.min * scale));
                // A line series' flat columns are left to its line (dashed for a simulated curve).
                if (s.filled || yLow > yMax)
                    band.columns.push_back({ col, std::clamp(yMax, box.top(), box.bottom()), std::clamp(yLow, box.top(), box.bottom()) });
                QPointF pt(kLeftMargin + col, box.bottom() - b.last * scale);
                if (previous)
                    band.segments.emplace_back(*previous, pt);
                previous = pt;
            }
            bands.push_back(std::move(band));
        }
        paintBands(p, box, bands);
        for (std::size_t i = 0; i < bands.size(); ++i) {
            // Two one-pixel cosmetic passes make a 2-pixel line: the raster engine draws those with
            // Bresenham, where a wider or antialiased pen goes through the stroker.
            p.setPen(QPen(lane.series[i].color, 0, lane.series[i].dashed ? Qt::DashLine : Qt::SolidLine));
            p.drawLines(bands[i].segments.data(), int(bands[i].segments.size()));
            p.translate(0, -1);
            p.drawLines(bands[i].segments.data(), int(bands[i].segments.size()));
            p.translate(0, 1);
        }
        if (lane.capacity && scale > 0) {
            const int yc = box.bottom() - int(std::lround(*lane.capacity * scale));
            p.setPen(QPen(QColor(200, 0, 0), 0, Qt::DashDotLine));
            p.drawLine(box.left(), yc, box.right(), yc);
            p.setPen(QColor(200, 0, 0));
            p.drawText(QRect(box.right() - 300, yc + 2, 296, 16), Qt::AlignRight | Qt::AlignTop, lane.capacityLabel);
        }
        // OOM marks: a vertical line and a triangle on the top edge in the curve's colour; one label per
        // distinct label (the legend of the marks), at its first mark.
        QStringList markLabels;
        for (const auto& m : lane.marks) {
            const int x = kLeftMargin + int(std::lround(m.x));
            p.setPen(QPen(m.color, 0, Qt::DotLine));
            p.drawLine(x, box.top(), x, box.bottom());
            p.setPen(Qt::NoPen);
            p.setBrush(m.color);
            const QPoint tri[3] = { QPoint(x - 5, box.top()), QPoint(x + 5, box.top()), QPoint(x, box.top() + 8) };
            p.drawPolygon(tri, 3);
            p.setBrush(Qt::NoBrush);
            if (!markLabels.contains(m.label)) {
                markLabels << m.label;
                p.setPen(m.color);
                p.drawText(x + 6, box.top() + 10 + 14 * int(markLabels.size() - 1), m.label);
            }
        }
        if (!lane.note.isEmpty()) {
            p.setPen(text);
            p.drawText(noteBox, Qt::TextWordWrap, lane.note);
        }
        for (std::size_t i = 0; i < lane.series.size(); ++i) {
            p.fillRect(legendAt[i].x(), legendAt[i].y(), 10, 10, lane.series[i].color);
            p.setPen(text);
            p.drawText(legendAt[i].x() + 14, legendAt[i].y() + 10, lane.series[i].name);
        }
        y += laneHeight;
    }
    for (const auto& row : m_frame.rows) {
        p.setPen(text);
        p.drawText(QRect(4, y, kLeftMargin - 8, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft,
            p.fontMetrics().elidedText(row.title, Qt::ElideRight, kLeftMargin - 8));
        for (const auto& b : row.boxes) {
            QRectF r(kLeftMargin + b.x0, y + 3, std::max(1.0, b.x1 - b.x0), kRowHeight - 6);
            p.fillRect(r, b.color);
            if (r.width() > 40 && !b.label.isEmpty()) {
                p.setPen(Qt::black);
                p.drawText(r.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                    p.fontMetrics().elidedText(b.label, Qt::ElideRight, int(r.width()) - 4));
            }
        }
        y += kRowHeight;
    }
    if (m_selected) {
        double x = m_axis.toX(*m_selected);
        if (x >= 0 && x <= w) {
            p.setPen(QPen(QColor(220, 40, 40), 1.5));
            p.drawLine(QPointF(kLeftMargin + x, kAxisHeight), QPointF(kLeftMargin + x, height()));
        }
    }
    if (m_pressPos && m_bandEnd) {
        QColor band = palette().highlight().color();
        band.setAlpha(60);
        p.fillRect(QRect(QPoint(m_pressPos->x(), kAxisHeight), QPoint(m_bandEnd->x(), height())).normalized(), band);
    }
    if (m_hoverX && *m_hoverX >= 0 && *m_hoverX <= w) {
        p.setPen(QPen(text, 1, Qt::DotLine));
        p.drawLine(QPointF(kLeftMargin + *m_hoverX, kAxisHeight), QPointF(kLeftMargin + *m_hoverX, height()));
        QString tip = hoverText(*m_hoverX);
        QRect tipRect = p.fontMetrics().boundingRect(tip).adjusted(-4, -2, 4, 2);
        tipRect.moveTopLeft(QPoint(std::min(int(kLeftMargin + *m_hoverX) + 8, width() - tipRect.width() - 2), kAxisHeight + 2));
        p.fillRect(tipRect, palette().toolTipBase());
        p.setPen(palette().toolTipText().color());
        p.drawText(tipRect, Qt::AlignCenter, tip);
    }
}

} // namespace gpumem::gui
