#pragma once
// QPainter view of the memory map: blocks over time (x: time, y: packed address, like memory_viz's
// allocator-state view) and, at the right, the state at the picked instant on the same address
// axis, with a legend below. It draws a MemoryMapFrame rasterized on a worker thread and owns no
// trace data: it asks for a new frame with frameRequested() whenever the range, size, colouring or
// instant change. A click selects the block under the cursor (blockClicked) and moves the instant to
// the clicked time (instantPicked), clearing the outline of the blocks a Diagnosis finding named
// (setHighlightedBlocks); the wheel zooms the address axis, a double-click resets it.
// Lives on the UI thread.
#include "gui/models/memory_map_model.h"

#include <QTimer>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

namespace gpumem::gui {

class MemoryMapView : public QWidget {
    Q_OBJECT
public:
    explicit MemoryMapView(QWidget* parent = nullptr);

    // A new trace (nullptr clears): its index, full time range and trace start for labels.
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    void setTimeRange(TimeRange range);
    void setInstant(std::optional<TimeNs> t);
    void setColouring(MapColouring colouring);
    void setSelectedBlock(std::optional<std::size_t> block);
    std::optional<std::size_t> selectedBlock() const { return m_selected; }
    // Blocks (indexes into the index's blocks) outlined in kHighlightColour over their lifetime and in
    // the at-instant column: those a Diagnosis finding names. A click on the map clears them.
    void setHighlightedBlocks(std::vector<std::size_t> blocks);
    const std::vector<std::size_t>& highlightedBlocks() const { return m_highlighted; }
    // The visible part of the packed address axis ({} = all). The wheel over the map zooms it about
    // the cursor; a double-click shows all again.
    void setAddressWindow(OffsetWindow window);
    OffsetWindow addressWindow() const { return m_window; }
    std::optional<TimeNs> instant() const { return m_instant; }
    MapColouring colouring() const { return m_colouring; }
    const std::shared_ptr<const MemoryMapFrame>& frame() const { return m_frame; }
    // The plot rectangle (over time) and the at-instant column, in widget pixels.
    QRect plotRect() const;
    QRect instantRect() const;

    static constexpr int kLeftMargin = 84;
    static constexpr int kTopMargin = 24;
    static constexpr int kInstantWidth = 90;
    // Magenta: in none of the palette's colours (palette.h) nor the instant's red.
    static constexpr QRgb kHighlightColour = qRgb(230, 0, 230);
    QSize sizeHint() const override { return { 900, 600 }; }

public slots:
    void setFrame(std::shared_ptr<const gpumem::gui::MemoryMapFrame> frame);

signals:
    void frameRequested(gpumem::gui::TimeRange range, QSize size, gpumem::gui::MapColouring colouring,
        std::optional<gpumem::TimeNs> instant, gpumem::gui::OffsetWindow window);
    void blockClicked(std::size_t block);
    void instantPicked(gpumem::TimeNs time);

protected:
    void paintEvent(QPaintEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;

private:
    void requestFrame();
    int legendHeight() const;
    std::optional<std::size_t> blockUnder(QPoint p, TimeNs* time) const;

    std::shared_ptr<const LoadedTrace> m_trace;
    std::shared_ptr<const MemoryMapFrame> m_frame;
    TimeRange m_range;
    std::optional<TimeNs> m_instant;
    MapColouring m_colouring = MapColouring::Category;
    std::optional<std::size_t> m_selected;
    std::vector<std::size_t> m_highlighted;
    OffsetWindow m_window; // the visible address window ({} = all)
    // Hover tooltips wait for the mouse to rest (finding a block is O(blocks)).
    QTimer m_hoverTimer;
    QPoint m_hoverPos;
    void showHover();
};

} // namespace gpumem::gui
