#include "gui/models/series_lod.h"

#include "core/counter_units.h"

#include <algorithm>
#include <limits>

namespace gpumem::gui {

namespace {
    template <typename Range> void summarize(std::span<const Bytes> v, std::size_t k, std::vector<Range>& out)
    {
        out.resize(v.size() / k); // only whole blocks: a partial last block is walked point by point
        for (std::size_t b = 0; b < out.size(); ++b) {
            const auto [lo, hi]
                = std::minmax_element(v.begin() + std::ptrdiff_t(b * k), v.begin() + std::ptrdiff_t((b + 1) * k));
            out[b] = { *lo, *hi };
        }
    }
} // namespace

SeriesLod::SeriesLod(std::span<const TimeNs> time, std::span<const Bytes> values)
    : m_time(time)
    , m_values(values.first(std::min(values.size(), time.size())))
{
    summarize(m_values, kFine, m_fine);
    m_coarse.resize(m_fine.size() / (kCoarse / kFine));
    for (std::size_t b = 0; b < m_coarse.size(); ++b) {
        Range r = m_fine[b * (kCoarse / kFine)];
        for (std::size_t f = b * (kCoarse / kFine); f < (b + 1) * (kCoarse / kFine); ++f)
            r = { std::min(r.min, m_fine[f].min), std::max(r.max, m_fine[f].max) };
        m_coarse[b] = r;
    }
}

std::vector<analyze::Bucket> SeriesLod::buckets(TimeNs begin, TimeNs end, std::size_t n) const
{
    std::vector<analyze::Bucket> out;
    if (n == 0 || end <= begin || m_values.empty())
        return out;
    out.resize(n);
    const std::size_t count = m_values.size();
    const double width = static_cast<double>(end - begin) / static_cast<double>(n);
    std::size_t i = static_cast<std::size_t>(
        std::lower_bound(m_time.begin(), m_time.begin() + std::ptrdiff_t(count), begin) - m_time.begin());
    bool have = i > 0;
    Bytes current = have ? m_values[i - 1] : 0;
    for (std::size_t b = 0; b < n; ++b) {
        analyze::Bucket& k = out[b];
        k.begin = begin + static_cast<TimeNs>(width * static_cast<double>(b));
        k.end = b + 1 == n ? end : begin + static_cast<TimeNs>(width * static_cast<double>(b + 1));
        k.valid = have;
        k.min = k.max = current;
        auto take = [&](Bytes lo, Bytes hi, Bytes last) {
            if (!k.valid) {
                k.valid = true;
                k.min = lo, k.max = hi;
            }
            k.min = std::min(k.min, lo);
            k.max = std::max(k.max, hi);
            current = last;
        };
        while (i < count && m_time[i] < k.end) {
            // A whole block inside the bucket counts by its summary (times are non-decreasing, so its
            // last point's time bounds all of them).
            if (i % kCoarse == 0 && i / kCoarse < m_coarse.size() && m_time[i + kCoarse - 1] < k.end) {
                const auto& r = m_coarse[i / kCoarse];
                take(r.min, r.max, m_values[i + kCoarse - 1]);
                i += kCoarse;
            } else if (i % kFine == 0 && i / kFine < m_fine.size() && m_time[i + kFine - 1] < k.end) {
                const auto& r = m_fine[i / kFine];
                take(r.min, r.max, m_values[i + kFine - 1]);
                i += kFine;
            } else {
                take(m_values[i], m_values[i], m_values[i]);
                ++i;
            }
        }
        have = k.valid;
        k.last = current;
    }
    return out;
}

void IntervalLane::finish()
{
    std::vector<std::size_t> order(items.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return start[a] < start[b]; });
    IntervalLane sorted;
    sorted.stream = stream;
    for (std::size_t i : order)
        sorted.add(items[i], start[i], end[i]);
    sorted.maxEnd.resize(sorted.end.size());
    TimeNs running = std::numeric_limits<TimeNs>::min();
    for (std::size_t i = 0; i < sorted.end.size(); ++i)
        sorted.maxEnd[i] = running = std::max(running, sorted.end[i]);
    *this = std::move(sorted);
}

TimelineLod::TimelineLod(const Trace& trace, const analyze::DeviceTimeline* d, DeviceId device, const analyze::StepSet* stepSet)
{
    using analyze::SeriesKind;
    if (d)
        for (SeriesKind kind :
            { SeriesKind::Allocated, SeriesKind::Active, SeriesKind::Reserved, SeriesKind::RecordedAllocated })
            if (d->has(kind))
                m_series.emplace_back(kind, SeriesLod(d->time, d->column(kind)));
    if (trace.memory().count() == 0) {
        const auto series = trace.counterSeries();
        std::vector<int> slot(series.size(), -1);
        for (std::size_t s = 0; s < series.size(); ++s)
            if (series[s].device == device && isByteCounter(trace.str(series[s].name))) {
                slot[s] = int(counters.size());
                counters.emplace_back().name = std::string(trace.str(series[s].name));
            }
        for (const auto& c : trace.counterSamples()) // in time order (TraceBuilder sorts them)
            if (c.series < slot.size() && slot[c.series] >= 0) {
                auto& counter = counters[std::size_t(slot[c.series])];
                counter.time.push_back(c.time);
                counter.value.push_back(c.value > 0 ? Bytes(c.value) : 0);
                counter.peak = std::max(counter.peak, counter.value.back());
            }
        for (auto& counter : counters)
            counter.lod = SeriesLod(counter.time, counter.value);
    }
    const auto annotations = trace.annotations();
    const bool analysed = stepSet && !stepSet->steps.empty();
    if (analysed)
        for (std::size_t i = 0; i < stepSet->steps.size(); ++i) {
            const analyze::Step& st = stepSet->steps[i];
            steps.add(std::uint32_t(i), st.start, st.end);
            stepLabels.push_back((stepSet->source == analyze::StepSource::ProfilerStep ? "ProfilerStep#" : "step ")
                + std::to_string(st.number));
        }
    for (std::size_t i = 0; i < annotations.size(); ++i) {
        const bool step = annotations[i].kind == AnnotationKind::Step;
        if (step && analysed)
            continue; // the analysis' steps stand for them
        (step ? steps : ranges).add(std::uint32_t(i), annotations[i].start, annotations[i].end);
    }
    const auto& mem = trace.memory();
    for (std::size_t i = 0; i < mem.count(); ++i)
        if (mem.kind[i] == EventKind::Oom && mem.device[i] == device)
            ooms.push_back(mem.time[i]);
    steps.finish();
    ranges.finish();
    const auto kernels = trace.kernels();
    std::vector<int> laneOf(trace.streams().size(), -1);
    for (std::size_t i = 0; i < kernels.size(); ++i) {
        const Kernel& k = kernels[i];
        if (k.device != device || k.stream >= laneOf.size())
            continue;
        if (laneOf[k.stream] < 0) {
            laneOf[k.stream] = int(kernelStreams.size());
            kernelStreams.emplace_back().stream = k.stream;
        }
        kernelStreams[std::size_t(laneOf[k.stream])].add(std::uint32_t(i), k.start, k.end);
    }
    for (auto& lane : kernelStreams)
        lane.finish();
    std::sort(kernelStreams.begin(), kernelStreams.end(),
        [](const IntervalLane& a, const IntervalLane& b) { return a.stream < b.stream; });
}

const SeriesLod* TimelineLod::series(analyze::SeriesKind kind) const
{
    for (const auto& [k, s] : m_series)
        if (k == kind)
            return &s;
    return nullptr;
}

} // namespace gpumem::gui
