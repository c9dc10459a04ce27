#include "gui/models/timeline_model.h"

#include "gui/models/byte_text.h"
#include "gui/models/latest_request.h"

#include <QCoreApplication>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <cmath>
#include <optional>

namespace gpumem::gui {

namespace {
    // Through the levels of detail where there are some (the same buckets, faster: series_lod.h).
    PixelSeries toPixels(const std::vector<analyze::Bucket>& buckets, QString name, QColor color, bool filled)
    {
        PixelSeries s { std::move(name), color, filled, {} };
        s.buckets.reserve(buckets.size());
        for (const auto& b : buckets)
            s.buckets.push_back(PixelBucket { double(b.min), double(b.max), double(b.last), b.valid });
        return s;
    }

    PixelSeries toPixels(const analyze::DeviceTimeline& d, analyze::SeriesKind kind, TimeRange range, int width,
        QString name, QColor color, bool filled, const SeriesLod* lod)
    {
        return toPixels(lod ? lod->buckets(range.start, range.end, static_cast<std::size_t>(width))
                            : d.buckets(kind, range.start, range.end, static_cast<std::size_t>(width)),
            std::move(name), color, filled);
    }

    void fitScale(ValueLane& lane)
    {
        for (const auto& s : lane.series)
            for (const auto& b : s.buckets)
                if (b.valid)
                    lane.maxValue = std::max(lane.maxValue, b.max);
    }

    // A trace with memory counters only (PyTorch <= 1.9 profiler): the device's recorded counters, a
    // reserved-like one as a line and the others filled like "allocated", and why there is nothing else.
    ValueLane recordedCountersLane(const LoadedTrace& t, const TimelineLod& lod, TimeRange range, int width)
    {
        ValueLane lane;
        const std::string& label = t.analysis.deviceLabel;
        lane.title = QString::fromStdString("memory " + label + " (recorded counters)");
        for (const auto& c : lod.counters) {
            const bool reserved = c.name.find("eserved") != std::string::npos;
            lane.series.push_back(toPixels(c.lod.buckets(range.start, range.end, static_cast<std::size_t>(width)),
                QString::fromStdString(c.name + " (recorded)"), reserved ? QColor(200, 60, 50) : QColor(50, 110, 200),
                !reserved));
        }
        fitScale(lane);
        lane.note = countersOnlyText(t.trace,
            QString::fromStdString(". Drawn here: the memory counters the trace recorded for " + label
                + " (the Device menu shows the other devices' counters)."));
        return lane;
    }

    // Boxes narrower than a pixel that touch are merged so a million kernels draw as a few hundred boxes.
    // The label is converted only for a box that is kept (a million merged kernels cost no QStrings).
    void addBox(IntervalRow& row, double x0, double x1, std::string_view label, QColor color)
    {
        if (!row.boxes.empty()) {
            auto& last = row.boxes.back();
            if (x0 <= last.x1 + 1.0 && (x1 - x0 < 1.0 || last.x1 - last.x0 < 1.0)) {
                last.x1 = std::max(last.x1, x1);
                last.label.clear();
                return;
            }
        }
        row.boxes.push_back({ x0, x1, QString::fromUtf8(label.data(), qsizetype(label.size())), color });
    }

    // The boxes of one row: from the first interval that reaches the range (binary search on the
    // running maximum of ends) to the last that starts in it. After an interval that merged into the
    // previous box, the intervals starting in the same pixel column are skipped and the box grows to
    // their furthest end when that is the latest end so far (IntervalLane::maxEnd), so a row costs
    // O(boxes + pixels) · log n. Intervals that start in one pixel column thus draw as one box.
    template <typename Label, typename Color>
    void addBoxes(IntervalRow& row, const IntervalLane& lane, const TimeAxis& axis, TimeRange range, int width, Label label, Color color)
    {
        const std::size_t n = lane.items.size();
        std::size_t j = std::size_t(std::lower_bound(lane.maxEnd.begin(), lane.maxEnd.end(), range.start) - lane.maxEnd.begin());
        while (j < n && lane.start[j] < range.end) {
            if (lane.end[j] < range.start) {
                ++j;
                continue;
            }
            const std::size_t before = row.boxes.size();
            addBox(row, std::max(0.0, axis.toX(lane.start[j])),
                std::min(double(width), axis.toX(std::max(lane.end[j], lane.start[j] + 1))), label(lane.items[j]), color(row));
            ++j;
            if (row.boxes.size() != before)
                continue;
            auto& last = row.boxes.back();
            const TimeNs boundary = axis.toTime(std::floor(last.x1) + 1.0);
            const std::size_t next = std::size_t(std::lower_bound(lane.start.begin() + std::ptrdiff_t(j), lane.start.end(),
                                                     std::min(boundary, range.end))
                - lane.start.begin());
            if (next > j) {
                // The running maximum grew inside the skipped run only if one of them ends latest;
                // otherwise they end before an earlier interval did, and the box keeps its end.
                if (lane.maxEnd[next - 1] > lane.maxEnd[j - 1])
                    last.x1 = std::max(last.x1, std::min(double(width), axis.toX(lane.maxEnd[next - 1])));
                j = next;
            }
        }
    }
} // namespace

TimeRange fullRangeOf(const LoadedTrace& t)
{
    const auto& s = t.summary;
    if (s.end > s.start)
        return { s.start, s.end + 1 };
    return { s.start, s.start + TimeAxis::kMinSpanNs };
}

TimelineFrame computeFrame(const LoadedTrace& t, TimeRange range, int width, const FrameContent& content)
{
    TimelineFrame f;
    f.range = range;
    f.width = width;
    if (width <= 0 || range.end <= range.start)
        return f;
    TimeAxis axis({ range.start, range.end }, width);
    axis.setVisible(range);
    const auto* d = t.analysis.timeline.device(t.analysis.device);
    // A LoadedTrace from TraceSession has its levels of detail; one made elsewhere gets them here.
    std::optional<TimelineLod> local;
    const TimelineLod* lod = t.lod.get();
    if (!lod)
        lod = &local.emplace(t.trace, d, t.analysis.device, &t.analysis.steps);
    auto seriesLod = [&](analyze::SeriesKind kind) { return lod->series(kind); };
    if (d && d->size() > 0) {
        ValueLane memory;
        memory.title = QString::fromStdString("memory " + d->label);
        memory.series.push_back(toPixels(*d, analyze::SeriesKind::Allocated, range, width, "allocated", QColor(50, 110, 200), true, seriesLod(analyze::SeriesKind::Allocated)));
        memory.series.push_back(toPixels(*d, analyze::SeriesKind::Active, range, width, "active", QColor(60, 160, 90), false, seriesLod(analyze::SeriesKind::Active)));
        // A profiler trace starts after the model was loaded: its in-window allocated bytes miss the
        // weights, so the ratios use the recorded allocated counter where there is one (the Timeline's
        // allocatedForRatiosKind(), the same rule as analyze's fragmentation figures, docs/analysis.md).
        const bool recordedAllocated = d->has(analyze::SeriesKind::Reserved) && d->has(analyze::SeriesKind::RecordedAllocated);
        if (recordedAllocated)
            memory.series.push_back(toPixels(*d, analyze::SeriesKind::RecordedAllocated, range, width, "allocated (recorded)",
                QColor(30, 60, 140), false, seriesLod(analyze::SeriesKind::RecordedAllocated)));
        if (d->has(analyze::SeriesKind::Reserved))
            memory.series.push_back(toPixels(*d, analyze::SeriesKind::Reserved, range, width,
                QString::fromStdString("reserved (" + d->reservedSource + ")"), QColor(200, 60, 50), false, seriesLod(analyze::SeriesKind::Reserved)));
        for (const auto& curve : content.simulated)
            if (curve.timeline && curve.timeline->has(analyze::SeriesKind::Reserved)) {
                memory.series.push_back(toPixels(*curve.timeline, analyze::SeriesKind::Reserved, range, width,
                    "reserved (" + curve.name + ")", curve.color, false, curve.reservedLod.get()));
                memory.series.back().dashed = true;
            }
        if (content.capacity > 0) {
            memory.capacity = double(content.capacity);
            memory.capacityLabel = "capacity " + bytesText(content.capacity);
            memory.maxValue = double(content.capacity); // the line stays in view
        }
        auto mark = [&](TimeNs time, QColor color, const QString& label) {
            if (time >= range.start && time < range.end) // on the buckets' scale: width pixels over range
                memory.marks.push_back({ double(time - range.start) * width / double(range.length()), color, label });
        };
        for (TimeNs time : lod->ooms)
            mark(time, QColor(200, 0, 0), "OOM (recorded)");
        for (const auto& curve : content.simulated)
            for (TimeNs time : curve.ooms)
                mark(time, curve.color, "OOM (" + curve.name + ")");
        fitScale(memory);
        const std::size_t recordedReserved = d->has(analyze::SeriesKind::Reserved) ? 2 + (recordedAllocated ? 1 : 0) : 0;
        f.lanes.push_back(std::move(memory));
        if (recordedReserved && !content.memoryLaneOnly) {
            const auto& alloc = f.lanes[0].series[recordedAllocated ? 2 : 0].buckets;
            const auto& res = f.lanes[0].series[recordedReserved].buckets;
            ValueLane frag;
            frag.title = "fragmentation";
            frag.fraction = true;
            frag.maxValue = 1.0;
            frag.relativeHeight = 0.5;
            PixelSeries waste { "waste: 1 − allocated/reserved", QColor(140, 70, 170), true, {} };
            for (std::size_t i = 0; i < alloc.size() && i < res.size(); ++i) {
                PixelBucket b;
                if (alloc[i].valid && res[i].valid && res[i].last > 0) {
                    double v = std::clamp(1.0 - alloc[i].last / res[i].last, 0.0, 1.0);
                    b = { v, v, v, true };
                }
                waste.buckets.push_back(b);
            }
            frag.series.push_back(std::move(waste));
            f.lanes.push_back(std::move(frag));
        }
    } else if (!lod->counters.empty()) {
        f.lanes.push_back(recordedCountersLane(t, *lod, range, width));
    }
    if (content.memoryLaneOnly)
        return f;
    // Annotations: steps on one row, other ranges on another; kernels one row per stream of the device.
    auto addRow = [&](const IntervalLane& lane, QString title, auto label, auto color) {
        IntervalRow row { std::move(title), {} };
        addBoxes(row, lane, axis, range, width, label, color);
        if (!row.boxes.empty())
            f.rows.push_back(std::move(row));
    };
    const auto annotations = t.trace.annotations();
    auto annotationName = [&](std::uint32_t i) { return t.trace.str(annotations[i].name); };
    auto stepColour = [](const IntervalRow& row) { return QColor(row.boxes.size() % 2 ? 230 : 200, 200, 120); };
    if (!lod->stepLabels.empty())
        addRow(lod->steps, "steps", [&](std::uint32_t i) { return std::string_view(lod->stepLabels[i]); }, stepColour);
    else
        addRow(lod->steps, "steps", annotationName, stepColour);
    addRow(lod->ranges, "annotations", annotationName, [](const IntervalRow&) { return QColor(150, 190, 230); });
    const auto kernels = t.trace.kernels();
    for (const auto& lane : lod->kernelStreams)
        addRow(lane, "stream " + QString::number(t.trace.streams()[lane.stream].handle),
            [&](std::uint32_t i) { return t.trace.str(kernels[i].name); }, [](const IntervalRow&) { return QColor(240, 160, 60); });
    return f;
}

TimelineModel::TimelineModel(QObject* parent)
    : QObject(parent)
{
}

void TimelineModel::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    ++*m_generation;
    m_trace = std::move(trace);
}

void TimelineModel::setContent(FrameContent content)
{
    ++*m_generation;
    m_content = std::move(content);
    emit contentChanged();
}

void TimelineModel::request(TimeRange range, int width)
{
    if (!m_trace)
        return;
    std::uint64_t generation = ++*m_generation;
    auto trace = m_trace;
    auto content = m_content;
    runLatest(
        this, m_generation, generation, [=] { return computeFrame(*trace, range, width, content); },
        [](TimelineModel* self, TimelineFrame frame) { emit self->frameReady(std::move(frame)); });
}

} // namespace gpumem::gui
