#pragma once
// QPainter view of the active-memory timeline (issue #18 item 6): the N largest blocks as stacked
// bands over time, the other blocks as one grey summarized band at the bottom (ActiveMemoryFrame,
// computed on a worker thread by ActiveMemoryModel). Wheel zooms about the cursor, left-drag pans,
// double-click resets; hovering a band emits bandHovered (the page shows its size, stack and
// alloc/free times) and shows a tooltip; a click on a band emits blockClicked with the block and the
// column's moment (MainWindow opens the memory map there). Owns no trace data; UI thread only.
#include "gui/models/active_memory_model.h"

#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

namespace gpumem::gui {

class ActiveMemoryView : public QWidget {
    Q_OBJECT
public:
    explicit ActiveMemoryView(QWidget* parent = nullptr);

    // A new trace (nullptr clears): the axis covers `full`; `eventIndex` labels it by event.
    void setFullRange(TimeRange full, bool eventIndex);
    // Follows another view's visible range (the Timeline page's); no signal back.
    void setVisibleRange(TimeRange range);
    TimeAxis& axis() { return m_axis; }
    const std::shared_ptr<const ActiveMemoryFrame>& frame() const { return m_frame; }
    // The plot rectangle in widget pixels (tests hover inside it).
    QRect plotRect() const;
    // What is under widget position `p` of the current frame.
    ActiveHit hitAt(QPoint p) const;
    // Widget position of the middle of band `position` (frame()->bands) at column `column`, or nullopt.
    std::optional<QPoint> bandPoint(std::size_t position, int column) const;
    void setLabeller(std::function<QString(std::size_t block)> describe) { m_describe = std::move(describe); }
    QString hoverText() const { return m_hoverText; }
    // Asks for a frame again (the model's index changed).
    void refresh() { emit frameRequested(m_axis.visible(), m_axis.width()); }

    static constexpr int kLeftMargin = 84;
    static constexpr int kTopMargin = 24;
    static constexpr int kBottomMargin = 26;
    QSize sizeHint() const override { return { 1000, 500 }; }

public slots:
    void setFrame(std::shared_ptr<const gpumem::gui::ActiveMemoryFrame> frame);

signals:
    void frameRequested(gpumem::gui::TimeRange range, int width);
    void visibleRangeChanged(gpumem::gui::TimeRange range);
    void bandHovered(std::optional<std::size_t> block, QString text); // block into MemoryMapIndex::blocks
    void blockClicked(std::size_t block, gpumem::TimeNs time);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    void leaveEvent(QEvent*) override;

private:
    void rangeChanged();
    void hover(QPoint p);
    double bytesPerPixel() const;

    TimeAxis m_axis;
    std::shared_ptr<const ActiveMemoryFrame> m_frame;
    std::function<QString(std::size_t)> m_describe;
    std::optional<QPoint> m_pressPos;
    TimeRange m_pressRange;
    bool m_dragged = false;
    QString m_hoverText;
    std::optional<QPoint> m_hoverPos;
};

} // namespace gpumem::gui
