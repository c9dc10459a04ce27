#pragma once
// QPainter timeline: value lanes (memory, fragmentation) and interval rows (kernels, annotations)
// drawn from a precomputed TimelineFrame. Wheel zooms about the cursor, left-drag pans,
// shift-drag (or right-drag) zooms to a rubber band, double-click resets, Alt+←/→ walks the zoom
// history, hover shows time and values, a click picks an instant (instantPicked). The view owns
// no data: it asks for a new frame with frameRequested() whenever the range or width changes.
#include "gui/models/timeline_frame.h"

#include <QWidget>

#include <optional>

namespace gpumem::gui {

class TimelineView : public QWidget {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    TimeAxis& axis() { return m_axis; }
    const TimeAxis& axis() const { return m_axis; }
    // Resets the axis to `full` (a newly loaded trace) and clears the history and the frame.
    void setFullRange(TimeRange full);
    // Installs a frame computed for (range, width); ignored if it is stale.
    void setFrame(TimelineFrame frame);
    void setSelectedInstant(std::optional<TimeNs> t);
    std::optional<TimeNs> selectedInstant() const { return m_selected; }
    void zoomBack();
    void zoomForward();
    void resetZoom();
    // Asks for a new frame of the same range (the model's content changed: simulated curves arrived).
    void refresh() { rangeChanged(false); }
    // Pixel height each value lane and interval row gets (tests and the screenshot mode).
    static constexpr int kLaneHeight = 150;
    static constexpr int kRowHeight = 22;
    static constexpr int kAxisHeight = 24;
    static constexpr int kLeftMargin = 110;
    QSize sizeHint() const override;
    // Value lanes share the height left by the rows instead of kLaneHeight each (the what-if chart).
    void setFillHeight(bool fill) { m_fillHeight = fill; update(); }
    // The height of a lane of relativeHeight 1 (the memory lane); lane k gets laneHeight(k) =
    // laneHeight() × its relativeHeight (the fragmentation lane is half as tall).
    int laneHeight() const;
    int laneHeight(std::size_t lane) const;

signals:
    void frameRequested(gpumem::gui::TimeRange range, int width);
    void instantPicked(gpumem::TimeNs time);
    void visibleRangeChanged(gpumem::gui::TimeRange range);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    void keyPressEvent(QKeyEvent*) override;
    void leaveEvent(QEvent*) override;

private:
    void rangeChanged(bool recordHistory);
    int plotWidth() const;
    double plotX(double widgetX) const { return widgetX - kLeftMargin; }
    QString hoverText(double x) const;

    TimeAxis m_axis;
    ZoomHistory m_history;
    TimelineFrame m_frame;
    std::optional<TimeNs> m_selected;
    std::optional<double> m_hoverX;
    std::optional<QPoint> m_pressPos;
    std::optional<QPoint> m_bandEnd;
    bool m_banding = false;
    bool m_dragged = false;
    bool m_fillHeight = false;
    TimeRange m_pressRange;
};

} // namespace gpumem::gui
