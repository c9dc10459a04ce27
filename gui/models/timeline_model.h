#pragma once
// Turns a loaded trace's Timeline, kernels and annotations into TimelineFrames for a visible range
// and width, on a worker thread (design.md §7). No widgets. Lives on the UI thread; frameReady() is
// emitted there. A request that is overtaken by a newer one is dropped.
#include "gui/models/timeline_frame.h"
#include "gui/models/trace_session.h"

#include <QObject>

#include <atomic>
#include <memory>
#include <vector>

namespace gpumem::gui {

// A simulated reserved curve (a what-if replay) drawn over the memory lane: its DeviceTimeline holds
// time, reserved and allocated columns on the trace's own clock (WhatIfEngine builds it from
// ReplayResult::timeline). Shared, immutable.
struct SimulatedCurve {
    QString name; // the policy spec, e.g. "pytorch:expandable_segments:True"
    QColor color;
    std::shared_ptr<const analyze::DeviceTimeline> timeline;
    std::shared_ptr<const SeriesLod> reservedLod; // into timeline->reserved; optional (faster frames)
    std::vector<TimeNs> ooms {}; // the replay's failed requests (ReplayResult::failures), marked on the lane
};

// What a frame shows besides the trace's own series.
struct FrameContent {
    std::vector<SimulatedCurve> simulated; // drawn in the memory lane as "reserved (NAME)", per-pixel min/max
    bool memoryLaneOnly = false;           // the what-if page: no fragmentation lane, no kernel/annotation rows
    Bytes capacity = 0;                    // the what-if device capacity, drawn as a line (0 = unlimited: none)
};

// The pure computation (unit-tested): lanes "memory" (allocated, active, reserved, then the simulated
// reserved curves of `content`; the capacity line and a mark at each OOM, recorded or simulated) and
// "fragmentation" (half the memory lane's height; 1 − allocated/reserved at each pixel's end,
// PyTorch's waste; allocators.md §5.4), rows per kernel stream and for annotations (steps first: the
// analysis' steps, as `gpumem analyze` prints them).
TimelineFrame computeFrame(const LoadedTrace& trace, TimeRange range, int width, const FrameContent& content = {});

// The full time range to show for a trace (its memory events, kernels and annotations).
TimeRange fullRangeOf(const LoadedTrace& trace);

class TimelineModel : public QObject {
    Q_OBJECT
public:
    explicit TimelineModel(QObject* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    const std::shared_ptr<const LoadedTrace>& trace() const { return m_trace; }
    // Simulated curves and lane choice for the frames requested from now on; emits contentChanged()
    // so views ask again (TimelineView::refresh).
    void setContent(FrameContent content);
    const FrameContent& content() const { return m_content; }

public slots:
    void request(gpumem::gui::TimeRange range, int width);

signals:
    void frameReady(gpumem::gui::TimelineFrame frame);
    void contentChanged();

private:
    std::shared_ptr<const LoadedTrace> m_trace;
    FrameContent m_content;
    std::shared_ptr<std::atomic<std::uint64_t>> m_generation = std::make_shared<std::atomic<std::uint64_t>>(0);
};

} // namespace gpumem::gui
