#include "analyze/timeline.h"

#include "analyze/detail/segment_layout.h"
#include "analyze/trace_summary.h"
#include "core/byte_total.h"
#include "core/units.h"

#include <algorithm>
#include <map>

namespace gpumem::analyze {

std::string_view toString(SeriesKind kind)
{
    switch (kind) {
    case SeriesKind::Allocated: return "allocated";
    case SeriesKind::Active: return "active";
    case SeriesKind::Requested: return "requested";
    case SeriesKind::Reserved: return "reserved";
    case SeriesKind::InactiveSplit: return "inactive_split";
    case SeriesKind::LargestFree: return "largest_free";
    case SeriesKind::RecordedAllocated: return "recorded_allocated";
    }
    return "?";
}

std::span<const Bytes> DeviceTimeline::column(SeriesKind kind) const
{
    switch (kind) {
    case SeriesKind::Allocated: return allocated;
    case SeriesKind::Active: return active;
    case SeriesKind::Requested: return requested;
    case SeriesKind::Reserved: return reserved;
    case SeriesKind::InactiveSplit: return inactiveSplit;
    case SeriesKind::LargestFree: return largestFree;
    case SeriesKind::RecordedAllocated: return recordedAllocated;
    }
    return {};
}

std::optional<std::size_t> DeviceTimeline::pointAt(TimeNs t) const
{
    auto it = std::upper_bound(time.begin(), time.end(), t);
    if (it == time.begin())
        return std::nullopt;
    return static_cast<std::size_t>(it - time.begin()) - 1;
}

std::optional<std::size_t> DeviceTimeline::peakPoint(SeriesKind kind) const
{
    auto c = column(kind);
    if (c.empty())
        return std::nullopt;
    return static_cast<std::size_t>(std::max_element(c.begin(), c.end()) - c.begin());
}

BucketSeries::BucketSeries(TimeNs begin, TimeNs end, std::size_t n, std::optional<Bytes> carried)
    : m_begin(begin)
    , m_end(end)
    , m_have(carried.has_value())
    , m_current(carried.value_or(0))
{
    if (n == 0 || end <= begin)
        return;
    m_out.resize(n);
    // In unsigned 64-bit: end − begin can exceed INT64_MAX (a trace from before 1970 to far after).
    m_span = nsBetween(begin, end);
    m_width = static_cast<double>(m_span) / static_cast<double>(n);
    open();
}

TimeNs BucketSeries::at(std::size_t b) const
{
    const double offset = std::min(m_width * static_cast<double>(b), static_cast<double>(m_span));
    return static_cast<TimeNs>(std::uint64_t(m_begin) + std::min(m_span, static_cast<std::uint64_t>(offset)));
}

// Bucket m_b starts with the value carried in (valid once the series has a point).
void BucketSeries::open()
{
    Bucket& k = m_out[m_b];
    k.begin = at(m_b);
    k.end = m_b + 1 == m_out.size() ? m_end : at(m_b + 1);
    k.valid = m_have;
    k.min = k.max = m_current;
}

void BucketSeries::close()
{
    m_have = m_out[m_b].valid;
    m_out[m_b].last = m_current;
    if (++m_b < m_out.size())
        open();
}

std::vector<Bucket> BucketSeries::finish()
{
    while (m_b < m_out.size())
        close();
    return std::move(m_out);
}

std::vector<Bucket> DeviceTimeline::buckets(SeriesKind kind, TimeNs begin, TimeNs end, std::size_t n) const
{
    auto c = column(kind);
    if (n == 0 || end <= begin || c.empty())
        return {};
    // The point holding at `begin` carries its value into the first bucket.
    std::size_t i = static_cast<std::size_t>(std::lower_bound(time.begin(), time.end(), begin) - time.begin());
    BucketSeries series(begin, end, n, i > 0 ? std::optional<Bytes>(c[i - 1]) : std::nullopt);
    for (; i < time.size() && time[i] < end; ++i)
        series.add(time[i], c[i]);
    return series.finish();
}

std::optional<double> DeviceTimeline::waste(std::size_t i) const
{
    if (reserved.empty() || reserved[i] == 0)
        return std::nullopt;
    return 1.0 - static_cast<double>(std::min(allocatedForRatios(i), reserved[i])) / static_cast<double>(reserved[i]);
}

std::optional<double> DeviceTimeline::external(std::size_t i) const
{
    if (largestFree.empty() || reserved.empty() || reserved[i] <= allocated[i])
        return std::nullopt;
    const double freeBytes = static_cast<double>(reserved[i] - allocated[i]);
    return std::max(0.0, 1.0 - static_cast<double>(largestFree[i]) / freeBytes);
}

namespace {
    using detail::SegmentLayout;


} // namespace

bool isReservedCounter(std::string_view name)
{
    return name == "Total Reserved" || name == "reserved" || name == "bytes_reserved";
}
bool isAllocatedCounter(std::string_view name)
{
    return name == "Total Allocated" || name == "allocated" || name == "bytes_allocated";
}

Timeline Timeline::build(const Trace& trace)
{
    const auto& m = trace.memory();
    const std::size_t n = m.count();
    const std::size_t devCount = trace.devices().size();

    // Roles of each event from the pairing: which free closes a block (allocated −), at which event a
    // block stops being active (free_completed if recorded, else free), and the alloc event it closes.
    constexpr std::uint8_t kClosesAllocated = 1, kClosesActive = 2;
    std::vector<std::uint8_t> role(n, 0);
    std::vector<std::uint64_t> opener(n, kNoIndex);
    for (const auto& a : trace.allocations()) {
        if (a.allocEvent == kNoIndex)
            continue;
        if (a.freeEvent != kNoIndex) {
            role[a.freeEvent] |= kClosesAllocated;
            opener[a.freeEvent] = a.allocEvent;
        }
        const auto activeEnd = a.freeCompletedEvent != kNoIndex ? a.freeCompletedEvent : a.freeEvent;
        if (activeEnd != kNoIndex) {
            role[activeEnd] |= kClosesActive;
            opener[activeEnd] = a.allocEvent;
        }
    }

    std::vector<std::size_t> perDevice(devCount, 0);
    std::vector<bool> hasSegments(devCount, false);
    for (std::size_t i = 0; i < n; ++i) {
        ++perDevice[m.device[i]];
        if (isSegmentLevel(m.kind[i]))
            hasSegments[m.device[i]] = true;
    }

    // Recorded reserved counters for devices without segment events.
    std::vector<int> reservedSeries(devCount, -1), allocatedSeries(devCount, -1);
    for (std::size_t s = 0; s < trace.counterSeries().size(); ++s) {
        const auto& cs = trace.counterSeries()[s];
        if (cs.device >= devCount || hasSegments[cs.device])
            continue;
        if (isReservedCounter(trace.str(cs.name)))
            reservedSeries[cs.device] = static_cast<int>(s);
        else if (isAllocatedCounter(trace.str(cs.name)))
            allocatedSeries[cs.device] = static_cast<int>(s);
    }
    for (std::size_t d = 0; d < devCount; ++d)
        if (reservedSeries[d] < 0)
            allocatedSeries[d] = -1; // only paired with a reserved counter (see the header)
    // Counter series index → (device, which: 0 reserved, 1 allocated).
    std::vector<std::pair<int, int>> sampledSeries(trace.counterSeries().size(), { -1, 0 });
    for (std::size_t d = 0; d < devCount; ++d) {
        if (reservedSeries[d] >= 0)
            sampledSeries[static_cast<std::size_t>(reservedSeries[d])] = { static_cast<int>(d), 0 };
        if (allocatedSeries[d] >= 0)
            sampledSeries[static_cast<std::size_t>(allocatedSeries[d])] = { static_cast<int>(d), 1 };
    }

    Timeline t;
    t.m_devices.resize(devCount);
    std::vector<SegmentLayout> layouts(devCount);
    struct Running {
        // Exact, stored clamped at kSaturatedBytes (core/byte_total.h): a column never holds a wrapped sum.
        ByteTotal allocated, active, requested, reserved;
        std::int64_t counterReserved = -1, counterAllocated = -1;
    };
    std::vector<Running> run(devCount);
    for (std::size_t d = 0; d < devCount; ++d) {
        auto& dt = t.m_devices[d];
        dt.device = static_cast<DeviceId>(d);
        dt.label = deviceLabel(trace.devices()[d]);
        const auto k = perDevice[d];
        dt.time.reserve(k);
        dt.eventIndex.reserve(k);
        dt.allocated.reserve(k);
        dt.active.reserve(k);
        dt.requested.reserve(k);
        if (hasSegments[d]) {
            dt.reservedSource = "segment events";
            dt.reserved.reserve(k);
            dt.inactiveSplit.reserve(k);
            dt.largestFree.reserve(k);
        } else if (reservedSeries[d] >= 0) {
            dt.reservedSource = "counter: " + std::string(trace.str(trace.counterSeries()[reservedSeries[d]].name));
            dt.reserved.reserve(k);
            if (allocatedSeries[d] >= 0)
                dt.recordedAllocated.reserve(k);
        }
    }

    auto samples = trace.counterSamples();
    std::size_t nextSample = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const DeviceId d = m.device[i];
        auto& r = run[d];
        auto& layout = layouts[d];
        const bool segments = hasSegments[d];
        switch (m.kind[i]) {
        case EventKind::Alloc:
            r.allocated += m.size[i];
            r.active += m.size[i];
            r.requested += m.requestedSize[i] ? m.requestedSize[i] : m.size[i];
            if (segments)
                layout.allocate(m.address[i], m.size[i]);
            break;
        case EventKind::Free:
        case EventKind::FreeCompleted:
            if (opener[i] != kNoIndex) {
                const auto o = opener[i];
                const Bytes size = m.size[o];
                if (role[i] & kClosesAllocated) {
                    r.allocated -= size;
                    r.requested -= m.requestedSize[o] ? m.requestedSize[o] : size;
                }
                if (role[i] & kClosesActive) {
                    r.active -= size;
                    if (segments)
                        layout.release(m.address[o], size);
                }
            }
            break;
        case EventKind::SegmentAlloc:
        case EventKind::SegmentMap:
            r.reserved += m.size[i];
            layout.addSegment(m.address[i], m.size[i]);
            break;
        case EventKind::SegmentFree:
        case EventKind::SegmentUnmap:
            r.reserved -= m.size[i];
            layout.removeSegment(m.address[i]);
            break;
        default:
            break;
        }
        auto& dt = t.m_devices[d];
        dt.time.push_back(m.time[i]);
        dt.eventIndex.push_back(i);
        dt.allocated.push_back(r.allocated.value());
        dt.active.push_back(r.active.value());
        dt.requested.push_back(r.requested.value());
        if (segments) {
            dt.reserved.push_back(r.reserved.value());
            dt.inactiveSplit.push_back(layout.inactiveSplit());
            dt.largestFree.push_back(layout.largestFree());
        } else if (reservedSeries[d] >= 0) {
            for (; nextSample < samples.size() && samples[nextSample].time <= m.time[i]; ++nextSample) {
                const auto& s = samples[nextSample];
                if (s.series >= sampledSeries.size() || sampledSeries[s.series].first < 0)
                    continue;
                auto& target = run[static_cast<std::size_t>(sampledSeries[s.series].first)];
                (sampledSeries[s.series].second == 0 ? target.counterReserved : target.counterAllocated) = s.value;
            }
            dt.reserved.push_back(r.counterReserved < 0 ? 0 : static_cast<Bytes>(r.counterReserved));
            if (allocatedSeries[d] >= 0)
                dt.recordedAllocated.push_back(r.counterAllocated < 0 ? 0 : static_cast<Bytes>(r.counterAllocated));
        }
    }
    if (n) {
        t.m_start = m.time.front();
        t.m_end = m.time.back();
    }
    return t;
}

Timeline Timeline::fromSeries(std::vector<DeviceTimeline> devices)
{
    Timeline t;
    t.m_devices = std::move(devices);
    bool first = true;
    for (const auto& d : t.m_devices) {
        if (d.time.empty())
            continue;
        t.m_start = first ? d.time.front() : std::min(t.m_start, d.time.front());
        t.m_end = first ? d.time.back() : std::max(t.m_end, d.time.back());
        first = false;
    }
    return t;
}

const DeviceTimeline* Timeline::device(DeviceId id) const
{
    for (const auto& d : m_devices)
        if (d.device == id)
            return &d;
    return nullptr;
}

const DeviceTimeline* Timeline::busiest() const
{
    const DeviceTimeline* best = nullptr;
    Bytes bestPeak = 0;
    for (const auto& d : m_devices) {
        if (d.time.empty())
            continue;
        const Bytes p = *std::max_element(d.allocated.begin(), d.allocated.end());
        if (!best || p > bestPeak) {
            best = &d;
            bestPeak = p;
        }
    }
    return best;
}

} // namespace gpumem::analyze
