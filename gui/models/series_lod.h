#pragma once
// Levels of detail for drawing a step series per pixel (design.md §7): min/max summaries over blocks
// of 64 and 4096 consecutive points, so the per-pixel buckets of any visible range cost
// O(pixels · 64 + points in range / 4096) instead of O(points in range). A pan over a quarter of a
// 10-million-event trace then reads ~0.2 M values instead of 2.5 M per series (bench/gui_paint_bench).
// buckets() gives exactly what analyze::DeviceTimeline::buckets gives for the same series (tested).
// Immutable after construction; safe to read from many threads. It points into the series' columns
// (no copy of 10 M times per series): the DeviceTimeline must outlive it (LoadedTrace and
// SimulatedCurve own both).
#include "analyze/steps.h"
#include "analyze/timeline.h"

#include <span>
#include <string>
#include <vector>

namespace gpumem::gui {

class SeriesLod {
public:
    SeriesLod() = default;
    // `time` non-decreasing, one value per time (a DeviceTimeline column). O(points).
    SeriesLod(std::span<const TimeNs> time, std::span<const Bytes> values);
    // Min/max/last of the series in n equal buckets over [begin, end), as DeviceTimeline::buckets:
    // the value holding before a bucket counts in it; buckets before the first point are invalid.
    std::vector<analyze::Bucket> buckets(TimeNs begin, TimeNs end, std::size_t n) const;
    std::size_t size() const { return m_time.size(); }

    static constexpr std::size_t kFine = 64, kCoarse = 4096;

private:
    struct Range {
        Bytes min = 0, max = 0;
    };
    std::span<const TimeNs> m_time;
    std::span<const Bytes> m_values;
    std::vector<Range> m_fine, m_coarse; // block b covers points [b·k, (b+1)·k)
};

// Intervals (kernels of one stream, steps, other annotations) sorted by start with the running
// maximum of their ends, so a frame finds the first interval that reaches a range by binary search
// and can jump over every interval that starts inside one pixel column (computeFrame merges those
// into one box anyway). O(boxes + pixels) · log n per row instead of O(intervals in range).
struct IntervalLane {
    std::vector<std::uint32_t> items; // indexes into Trace::kernels() or annotations(), by start
    std::vector<TimeNs> start, end; // of each item, in the same order
    std::vector<TimeNs> maxEnd; // max(end[0..i]), non-decreasing
    StreamId stream = 0; // kernel rows
    void add(std::uint32_t item, TimeNs s, TimeNs e) { items.push_back(item), start.push_back(s), end.push_back(e); }
    void finish(); // sorts by start and fills maxEnd
};

// One recorded counter of a device (Trace::counterSeries, e.g. "Total Reserved" or a PyTorch <= 1.9
// trace's "Allocated (sum of Bytes)") as a step series: the value holds from each sample to the next.
// Values below 0 (a running sum of Bytes that frees blocks allocated before the window) count as 0.
// Move-only: `lod` points into `time` and `value`, whose buffers a move keeps.
struct RecordedCounter {
    std::string name;
    std::vector<TimeNs> time;
    std::vector<Bytes> value;
    SeriesLod lod;
    Bytes peak = 0; // the largest value
    RecordedCounter() = default;
    RecordedCounter(RecordedCounter&&) = default;
    RecordedCounter& operator=(RecordedCounter&&) = default;
    RecordedCounter(const RecordedCounter&) = delete;
    RecordedCounter& operator=(const RecordedCounter&) = delete;
};

// The levels of detail of what the timeline draws for one device of a trace: its DeviceTimeline's
// series (allocated, active, reserved, recorded allocated, as it has them), its kernels per stream
// and the trace's annotations (steps, other ranges); for a trace without memory events, the device's
// recorded counters instead. O(points + intervals · log intervals).
struct TimelineLod {
    // `steps`: the analysis' steps (analyze::detectSteps, what `gpumem analyze` prints) fill the steps
    // lane, so both front ends show the same steps. Where the analysis found none (or without `steps`),
    // the trace's Step annotations are the lane, as recorded.
    TimelineLod(const Trace& trace, const analyze::DeviceTimeline* timeline, DeviceId device,
        const analyze::StepSet* steps = nullptr);
    // nullptr when the timeline has no such series.
    const SeriesLod* series(analyze::SeriesKind kind) const;

    IntervalLane steps, ranges;
    // With the analysis' steps: the label of each (items of `steps` index it), "step N" or
    // "ProfilerStep#N"; empty when `steps` holds annotation indexes.
    std::vector<std::string> stepLabels;
    // The device's recorded OOM events (EventKind::Oom), by time: the memory lane marks them.
    std::vector<TimeNs> ooms;
    std::vector<IntervalLane> kernelStreams; // by stream id
    // Only when the trace has no memory events (memory counters only): the device's counters in the
    // trace's series order, "(ppm)" ratios left out.
    std::vector<RecordedCounter> counters;

private:
    std::vector<std::pair<analyze::SeriesKind, SeriesLod>> m_series;
};

} // namespace gpumem::gui
