#include "gui/models/timeline_model.h"

#include <QCoreApplication>
#include <QPointer>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <map>

namespace gpumem::gui {

namespace {
    PixelSeries toPixels(const analyze::DeviceTimeline& d, analyze::SeriesKind kind, TimeRange range, int width,
        QString name, QColor color, bool filled)
    {
        PixelSeries s { std::move(name), color, filled, {} };
        auto buckets = d.buckets(kind, range.start, range.end, static_cast<std::size_t>(width));
        s.buckets.reserve(buckets.size());
        for (const auto& b : buckets)
            s.buckets.push_back(PixelBucket { double(b.min), double(b.max), double(b.last), b.valid });
        return s;
    }

    // Boxes narrower than a pixel that touch are merged so a million kernels draw as a few hundred boxes.
    void addBox(IntervalRow& row, double x0, double x1, const QString& label, QColor color)
    {
        if (!row.boxes.empty()) {
            auto& last = row.boxes.back();
            if (x0 <= last.x1 + 1.0 && (x1 - x0 < 1.0 || last.x1 - last.x0 < 1.0)) {
                last.x1 = std::max(last.x1, x1);
                last.label.clear();
                return;
            }
        }
        row.boxes.push_back({ x0, x1, label, color });
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
    if (d && d->size() > 0) {
        ValueLane memory;
        memory.title = QString::fromStdString("memory " + d->label);
        memory.series.push_back(toPixels(*d, analyze::SeriesKind::Allocated, range, width, "allocated", QColor(50, 110, 200), true));
        memory.series.push_back(toPixels(*d, analyze::SeriesKind::Active, range, width, "active", QColor(60, 160, 90), false));
        // A profiler trace starts after the model was loaded: its in-window allocated bytes miss the
        // weights, so the ratios use the recorded allocated counter where there is one (the Timeline's
        // allocatedForRatiosKind(), the same rule as analyze's fragmentation figures, docs/analysis.md).
        const bool recordedAllocated = d->has(analyze::SeriesKind::Reserved) && d->has(analyze::SeriesKind::RecordedAllocated);
        if (recordedAllocated)
            memory.series.push_back(toPixels(*d, analyze::SeriesKind::RecordedAllocated, range, width, "allocated (recorded)",
                QColor(30, 60, 140), false));
        if (d->has(analyze::SeriesKind::Reserved))
            memory.series.push_back(toPixels(*d, analyze::SeriesKind::Reserved, range, width,
                QString::fromStdString("reserved (" + d->reservedSource + ")"), QColor(200, 60, 50), false));
        for (const auto& curve : content.simulated)
            if (curve.timeline && curve.timeline->has(analyze::SeriesKind::Reserved))
                memory.series.push_back(toPixels(*curve.timeline, analyze::SeriesKind::Reserved, range, width,
                    "reserved (" + curve.name + ")", curve.color, false));
        for (const auto& s : memory.series)
            for (const auto& b : s.buckets)
                if (b.valid)
                    memory.maxValue = std::max(memory.maxValue, b.max);
        const std::size_t recordedReserved = d->has(analyze::SeriesKind::Reserved) ? 2 + (recordedAllocated ? 1 : 0) : 0;
        f.lanes.push_back(std::move(memory));
        if (recordedReserved && !content.memoryLaneOnly) {
            const auto& alloc = f.lanes[0].series[recordedAllocated ? 2 : 0].buckets;
            const auto& res = f.lanes[0].series[recordedReserved].buckets;
            ValueLane frag;
            frag.title = "fragmentation 1 − allocated/reserved";
            frag.fraction = true;
            frag.maxValue = 1.0;
            PixelSeries waste { "waste", QColor(140, 70, 170), true, {} };
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
    }
    if (content.memoryLaneOnly)
        return f;
    // Annotations: steps on one row, other ranges on another.
    IntervalRow steps { "steps", {} }, ranges { "annotations", {} };
    for (const auto& a : t.trace.annotations()) {
        if (a.end < range.start || a.start >= range.end)
            continue;
        auto& row = a.kind == AnnotationKind::Step ? steps : ranges;
        QColor c = a.kind == AnnotationKind::Step ? QColor(row.boxes.size() % 2 ? 230 : 200, 200, 120) : QColor(150, 190, 230);
        addBox(row, std::max(0.0, axis.toX(a.start)), std::min(double(width), axis.toX(std::max(a.end, a.start + 1))),
            QString::fromUtf8(t.trace.str(a.name).data(), qsizetype(t.trace.str(a.name).size())), c);
    }
    if (!steps.boxes.empty())
        f.rows.push_back(std::move(steps));
    if (!ranges.boxes.empty())
        f.rows.push_back(std::move(ranges));
    // Kernels: one row per stream of the analyzed device; kernels are sorted by start.
    std::map<StreamId, IntervalRow> streams;
    auto kernels = t.trace.kernels();
    auto first = std::lower_bound(kernels.begin(), kernels.end(), range.start - TimeNs(1'000'000'000),
        [](const Kernel& k, TimeNs v) { return k.start < v; });
    for (auto it = first; it != kernels.end() && it->start < range.end; ++it) {
        if (it->end < range.start || it->device != t.analysis.device)
            continue;
        auto& row = streams[it->stream];
        if (row.title.isEmpty())
            row.title = "stream " + QString::number(t.trace.streams()[it->stream].handle);
        auto name = t.trace.str(it->name);
        addBox(row, std::max(0.0, axis.toX(it->start)), std::min(double(width), axis.toX(std::max(it->end, it->start + 1))),
            QString::fromUtf8(name.data(), qsizetype(name.size())), QColor(240, 160, 60));
    }
    for (auto& [id, row] : streams)
        f.rows.push_back(std::move(row));
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
    auto current = m_generation;
    QPointer<TimelineModel> self(this);
    (void)QtConcurrent::run([=] {
        if (current->load() != generation)
            return; // overtaken before it started
        TimelineFrame frame = computeFrame(*trace, range, width, content);
        if (current->load() != generation)
            return;
        QMetaObject::invokeMethod(
            qApp, [self, frame = std::move(frame)]() mutable { if (self) emit self->frameReady(std::move(frame)); },
            Qt::QueuedConnection);
    });
}

} // namespace gpumem::gui
