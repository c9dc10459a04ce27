#pragma once
// Turns a loaded trace's Timeline, kernels and annotations into TimelineFrames for a visible range
// and width, on a worker thread (design.md §7). No widgets. Lives on the UI thread; frameReady() is
// emitted there. A request that is overtaken by a newer one is dropped.
#include "gui/models/timeline_frame.h"
#include "gui/models/trace_session.h"

#include <QObject>

#include <atomic>
#include <memory>

namespace gpumem::gui {

// The pure computation (unit-tested): lanes "memory" (allocated, active, reserved) and
// "fragmentation" (1 − allocated/reserved at each pixel's end, PyTorch's waste; allocators.md §5.4),
// rows per kernel stream and for annotations (steps first).
TimelineFrame computeFrame(const LoadedTrace& trace, TimeRange range, int width);

// The full time range to show for a trace (its memory events, kernels and annotations).
TimeRange fullRangeOf(const LoadedTrace& trace);

class TimelineModel : public QObject {
    Q_OBJECT
public:
    explicit TimelineModel(QObject* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    const std::shared_ptr<const LoadedTrace>& trace() const { return m_trace; }

public slots:
    void request(gpumem::gui::TimeRange range, int width);

signals:
    void frameReady(gpumem::gui::TimelineFrame frame);

private:
    std::shared_ptr<const LoadedTrace> m_trace;
    std::shared_ptr<std::atomic<std::uint64_t>> m_generation = std::make_shared<std::atomic<std::uint64_t>>(0);
};

} // namespace gpumem::gui
