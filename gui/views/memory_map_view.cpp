#include "gui/views/memory_map_view.h"
#include "gui/models/byte_text.h"

#include "core/units.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace gpumem::gui {

namespace {
    constexpr int kAxisHeight = 22;
    constexpr int kLegendRow = 18;
    constexpr int kLegendItemWidth = 300;

    // 1-2-5 × 1024^k byte steps so that ticks are at least `minPx` apart.
    Bytes niceByteStep(double bytesPerPx, double minPx)
    {
        const double want = bytesPerPx * minPx;
        double unit = 1;
        while (unit * 1024 <= want)
            unit *= 1024;
        for (double m : { 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0 })
            if (unit * m >= want)
                return Bytes(unit * m);
        return Bytes(unit * 1024);
    }
} // namespace

MemoryMapView::MemoryMapView(QWidget* parent)
    : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(400, 240);
    setAttribute(Qt::WA_OpaquePaintEvent);
    m_hoverTimer.setSingleShot(true);
    m_hoverTimer.setInterval(150);
    connect(&m_hoverTimer, &QTimer::timeout, this, &MemoryMapView::showHover);
}

QRect MemoryMapView::plotRect() const
{
    const int bottom = height() - kAxisHeight - legendHeight();
    return QRect(kLeftMargin, kTopMargin, std::max(1, width() - kLeftMargin - kInstantWidth - 16), std::max(1, bottom - kTopMargin));
}

QRect MemoryMapView::instantRect() const
{
    const QRect p = plotRect();
    return QRect(p.right() + 10, p.top(), kInstantWidth - 4, p.height());
}

int MemoryMapView::legendHeight() const
{
    if (!m_trace || !m_trace->memoryMap || m_trace->memoryMap->empty())
        return 0;
    const int n = int(m_trace->memoryMap->legend(m_colouring).size());
    const int perRow = std::max(1, (width() - kLeftMargin) / kLegendItemWidth);
    return ((n + perRow - 1) / perRow) * kLegendRow + 6;
}

void MemoryMapView::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    m_trace = std::move(trace);
    m_frame.reset();
    m_selected.reset();
    m_highlighted.clear();
    m_instant.reset();
    m_window = {};
    m_range = m_trace && m_trace->memoryMap ? m_trace->memoryMap->time : TimeRange {};
    requestFrame();
    update();
}

void MemoryMapView::setTimeRange(TimeRange range)
{
    if (range == m_range || range.length() <= 0)
        return;
    m_range = range;
    requestFrame();
}

void MemoryMapView::setInstant(std::optional<TimeNs> t)
{
    if (t == m_instant)
        return;
    m_instant = t;
    requestFrame();
}

void MemoryMapView::setColouring(MapColouring colouring)
{
    if (colouring == m_colouring)
        return;
    m_colouring = colouring;
    requestFrame();
}

void MemoryMapView::setSelectedBlock(std::optional<std::size_t> block)
{
    m_selected = block;
    update();
}

void MemoryMapView::setHighlightedBlocks(std::vector<std::size_t> blocks)
{
    m_highlighted = std::move(blocks);
    update();
}

void MemoryMapView::setAddressWindow(OffsetWindow window)
{
    if (window == m_window)
        return;
    m_window = window;
    requestFrame();
}

void MemoryMapView::requestFrame()
{
    if (!m_trace || !m_trace->memoryMap || m_trace->memoryMap->empty() || m_range.length() <= 0)
        return;
    emit frameRequested(m_range, plotRect().size(), m_colouring, m_instant, m_window);
}

void MemoryMapView::setFrame(std::shared_ptr<const MemoryMapFrame> frame)
{
    if (!frame || frame->range != m_range || frame->size != plotRect().size() || frame->colouring != m_colouring || frame->instant != m_instant
        || frame->window != m_window)
        return; // computed for a view we have already left
    m_frame = std::move(frame);
    update();
}

void MemoryMapView::resizeEvent(QResizeEvent*) { requestFrame(); }

void MemoryMapView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().window());
    p.setPen(palette().color(QPalette::WindowText));
    const MemoryMapIndex* index = m_trace ? m_trace->memoryMap.get() : nullptr;
    if (!index || index->empty()) {
        const QString text = !m_trace ? QString("Open a trace to see its memory map.")
                                      : index ? index->emptyReason : QString("No memory map for this trace.");
        p.drawText(rect().adjusted(40, 40, -40, -40), Qt::AlignCenter | Qt::TextWordWrap, text);
        return;
    }
    const QRect plot = plotRect();
    const QRect col = instantRect();
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.9);
    p.setFont(small);
    // Title line.
    const QString title = QString("%1 · %2%3 · packed address axis %4 (gaps removed)")
                              .arg(index->deviceLabel)
                              .arg(QString::fromStdString(counted(index->blocks.size(), "block", "blocks")))
                              .arg(index->hasSegments ? " in " + QString::fromStdString(counted(index->segments.size(), "segment", "segments")) : QString(" (no segment events)"))
                              .arg(bytesText(index->axisBytes));
    const QString inferred = m_colouring == MapColouring::Category && !m_trace->analysis.categoriesRecorded ? QString(" · categories inferred") : QString();
    const QString zoom = m_window.hi > m_window.lo ? QString(" · zoomed to %1 (double-click: all)").arg(bytesText(m_window.length()))
                                                    : QString(" · wheel: zoom addresses");
    p.drawText(QRect(kLeftMargin, 2, plot.width(), kTopMargin - 4), Qt::AlignLeft | Qt::AlignVCenter,
        p.fontMetrics().elidedText(title + inferred + zoom, Qt::ElideRight, plot.width()));
    p.drawText(QRect(col.left() - 6, 2, col.width() + 12, kTopMargin - 4), Qt::AlignCenter,
        m_instant ? "at instant" : "no instant");
    // Images.
    if (m_frame) {
        p.drawImage(plot.topLeft(), m_frame->overTime);
        if (!m_frame->atInstant.isNull())
            p.drawImage(col, m_frame->atInstant);
    } else {
        p.fillRect(plot, Qt::white);
        p.drawText(plot, Qt::AlignCenter, "Drawing…");
    }
    p.setPen(QColor(120, 120, 120));
    p.drawRect(plot.adjusted(0, 0, -1, -1));
    p.drawRect(col.adjusted(0, 0, -1, -1));
    if (m_instant && (!m_frame || m_frame->atInstant.isNull()))
        p.drawText(col, Qt::AlignCenter | Qt::TextWordWrap, "…");
    if (!m_instant)
        p.drawText(col.adjusted(4, 0, -4, 0), Qt::AlignCenter | Qt::TextWordWrap, "Pick an instant on the Timeline or click the map");
    // Address axis (offset 0 at the bottom).
    p.setPen(palette().color(QPalette::WindowText));
    const OffsetWindow shown = m_window.resolved(index->axisBytes);
    const double bytesPerPx = double(shown.length()) / plot.height();
    const Bytes step = std::max<Bytes>(1, niceByteStep(bytesPerPx, 40));
    for (Bytes o = (shown.lo + step - 1) / step * step; o <= shown.hi; o += step) {
        const int y = plot.bottom() - int((double(o) - double(shown.lo)) / bytesPerPx);
        p.drawLine(plot.left() - 4, y, plot.left() - 1, y);
        p.drawText(QRect(0, y - 8, kLeftMargin - 8, 16), Qt::AlignRight | Qt::AlignVCenter, bytesText(o));
    }
    // Time axis: its labels count from the trace start, as the Timeline page's and `gpumem info`'s do.
    const TimeNs origin = std::min(m_trace->analysis.origin, m_range.start);
    TimeAxis axis(m_trace->analysis.timeline.end() > origin
            ? TimeRange { origin, std::max(m_trace->analysis.timeline.end(), m_range.end) }
            : m_range,
        plot.width());
    axis.setVisible(m_range);
    axis.setEventIndex(eventIndexAxis(m_trace->trace)); // a snapshot without timestamps: "event N"
    for (const Tick& t : axis.ticks(90)) {
        const int x = plot.left() + int(t.x);
        p.drawLine(x, plot.bottom() + 1, x, plot.bottom() + 4);
        p.drawText(QRect(x - 45, plot.bottom() + 4, 90, kAxisHeight - 4), Qt::AlignHCenter | Qt::AlignTop, t.label);
    }
    // The instant and the selected block.
    auto xOf = [&](TimeNs t) { return plot.left() + (double(t) - double(m_range.start)) * plot.width() / double(m_range.length()); };
    auto yOf = [&](Bytes off) { return std::clamp(plot.bottom() + 1 - (double(off) - double(shown.lo)) / bytesPerPx, double(plot.top()), plot.bottom() + 1.0); };
    if (m_instant && *m_instant >= m_range.start && *m_instant < m_range.end) {
        p.setPen(QPen(QColor(210, 30, 30), 2));
        const double x = xOf(*m_instant);
        p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    }
    // A block's outline over its lifetime and in the at-instant column.
    auto outline = [&](std::size_t block, const QPen& pen) {
        const auto& b = index->blocks[block];
        const TimeNs end = b.freeCompletedTime == kNeverFreed ? m_range.end : b.freeCompletedTime;
        QRectF r(QPointF(std::max<double>(xOf(b.allocTime), plot.left()), yOf(b.offset + b.size)),
            QPointF(std::min<double>(xOf(end), plot.right()), yOf(b.offset)));
        r = r.normalized();
        if (r.height() < 3)
            r.adjust(0, -1.5, 0, 1.5);
        if (r.width() < 3)
            r.adjust(-1.5, 0, 1.5, 0);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        p.drawRect(r);
        p.drawRect(QRectF(col.left(), r.top(), col.width(), r.height()));
    };
    for (std::size_t block : m_highlighted) // a Diagnosis finding's blocks
        if (block < index->blocks.size())
            outline(block, QPen(QColor(kHighlightColour), 3));
    if (m_selected && *m_selected < index->blocks.size())
        outline(*m_selected, QPen(Qt::black, 2));
    // Legend.
    p.setPen(palette().color(QPalette::WindowText));
    const auto legend = index->legend(m_colouring);
    const int perRow = std::max(1, (width() - kLeftMargin) / kLegendItemWidth);
    const int legendTop = plot.bottom() + kAxisHeight + 4;
    for (int i = 0; i < int(legend.size()); ++i) {
        const int x = kLeftMargin + (i % perRow) * kLegendItemWidth, y = legendTop + (i / perRow) * kLegendRow;
        p.fillRect(QRect(x, y + 3, 12, 12), legend[std::size_t(i)].colour);
        p.setPen(QColor(90, 90, 90));
        p.drawRect(QRect(x, y + 3, 12, 12));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x + 18, y, kLegendItemWidth - 24, kLegendRow), Qt::AlignLeft | Qt::AlignVCenter,
            p.fontMetrics().elidedText(legend[std::size_t(i)].label, Qt::ElideMiddle, kLegendItemWidth - 24));
    }
}

std::optional<std::size_t> MemoryMapView::blockUnder(QPoint pos, TimeNs* time) const
{
    const MemoryMapIndex* index = m_trace ? m_trace->memoryMap.get() : nullptr;
    if (!index || index->empty() || m_range.length() <= 0)
        return std::nullopt;
    const QRect plot = plotRect(), col = instantRect();
    const OffsetWindow shown = m_window.resolved(index->axisBytes);
    const double bytesPerPx = double(shown.length()) / plot.height();
    const double nsPerPx = double(m_range.length()) / plot.width();
    TimeNs t = 0;
    TimeNs tolerance = 0;
    if (plot.contains(pos)) {
        t = m_range.start + TimeNs(double(pos.x() - plot.left()) * nsPerPx);
        tolerance = TimeNs(nsPerPx);
    } else if (col.contains(pos) && m_instant) {
        t = *m_instant;
    } else {
        return std::nullopt;
    }
    if (time)
        *time = t;
    const double fromBottom = double(shown.lo) + double(plot.bottom() + 1 - pos.y()) * bytesPerPx;
    return gpumem::gui::blockAt(*index, t, Bytes(std::max(0.0, fromBottom)), tolerance, Bytes(bytesPerPx * 1.5));
}

void MemoryMapView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return;
    TimeNs t = 0;
    const auto block = blockUnder(event->position().toPoint(), &t);
    if (plotRect().contains(event->position().toPoint())) {
        m_highlighted.clear(); // the user picks something else
        setInstant(t);
        emit instantPicked(t);
    }
    if (block) {
        m_selected = block;
        emit blockClicked(*block);
        update();
    }
}

void MemoryMapView::mouseMoveEvent(QMouseEvent* event)
{
    m_hoverPos = event->position().toPoint();
    QToolTip::hideText();
    m_hoverTimer.start();
}

void MemoryMapView::showHover()
{
    const MemoryMapIndex* index = m_trace ? m_trace->memoryMap.get() : nullptr;
    if (!index || !underMouse())
        return;
    const auto block = blockUnder(m_hoverPos, nullptr);
    if (!block)
        return;
    const auto& b = index->blocks[*block];
    QToolTip::showText(mapToGlobal(m_hoverPos),
        QString("0x%1 · %2").arg(b.address, 0, 16).arg(bytesText(b.size)), this);
}

void MemoryMapView::wheelEvent(QWheelEvent* event)
{
    const MemoryMapIndex* index = m_trace ? m_trace->memoryMap.get() : nullptr;
    const QRect plot = plotRect();
    if (!index || index->empty() || event->angleDelta().y() == 0)
        return;
    const OffsetWindow shown = m_window.resolved(index->axisBytes);
    const double span = double(shown.length());
    const double factor = std::pow(1.25, -event->angleDelta().y() / 120.0); // wheel up zooms in
    const double anchorFrac = std::clamp(double(plot.bottom() + 1 - event->position().y()) / plot.height(), 0.0, 1.0);
    const double anchor = double(shown.lo) + anchorFrac * span;
    const double newSpan = std::clamp(span * factor, std::min(4096.0, double(index->axisBytes)), double(index->axisBytes));
    double lo = std::clamp(anchor - anchorFrac * newSpan, 0.0, double(index->axisBytes) - newSpan);
    const OffsetWindow next { Bytes(lo), Bytes(lo + newSpan) };
    setAddressWindow(next.lo == 0 && next.hi >= index->axisBytes ? OffsetWindow {} : next);
    event->accept();
}

void MemoryMapView::mouseDoubleClickEvent(QMouseEvent*) { setAddressWindow({}); }

} // namespace gpumem::gui
