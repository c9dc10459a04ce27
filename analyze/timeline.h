#pragma once
// Memory over time for each device (design.md §6): step series of allocated, active, requested and
// reserved bytes and the fragmentation series derived from them, one point per memory event of the
// device (the state *after* that event), plus min/max/last buckets for drawing (the GUI's timeline
// and the HTML report draw one bucket per pixel column).
//
// Sources of each series (docs/analysis.md has the full table):
//   allocated  — request level: + size at alloc, − size at free (PyTorch's allocated_bytes, which
//                drops at free(), c10/cuda/CUDACachingAllocator.cpp). Only blocks whose alloc is in
//                the trace count; a free of a block allocated before the window subtracts nothing.
//   active     — like allocated, but a block leaves at free_completed when one is recorded
//                (PyTorch's active_bytes: blocks pending free after cross-stream use stay active).
//   requested  — like allocated, with the program's requested size (0 where unknown → rounded size).
//   reserved   — segment level: + segment_alloc/segment_map, − segment_free/segment_unmap; when the
//                trace has no segment events but a recorded "Total Reserved" counter (PyTorch
//                profiler), that counter is sampled instead (the state at the latest sample ≤ t);
//                otherwise absent. A replay fills it with the simulated reserved bytes
//                (Timeline::fromSeries).
//   inactiveSplit — free bytes inside segments that hold at least one allocated block (PyTorch's
//                inactive_split_bytes, allocators.md §5.4), only with segment events and addresses.
//   largestFree — the largest free address range inside any segment, with segment events only.
//   recordedAllocated — the allocator's own "Total Allocated" counter (PyTorch profiler), sampled like
//                reserved, only where reserved also comes from a counter. It includes blocks allocated
//                before the trace window (model weights loaded before profiling), which `allocated`
//                cannot see; ratios against a reserved counter use it so both sides count the same blocks.
// Fragmentation metrics derived per point (allocators.md §5.4):
//   waste(t)    = 1 − allocated(t)/reserved(t)          (PyTorch "reserved but unallocated";
//                 recordedAllocated replaces allocated where present)
//   external(t) = 1 − largestFree(t)/(reserved−allocated)(t)  (TF BFC GetFragmentation; RMM arena)
//   internal(t) = allocated(t) − requested(t)            (rounding + padding bytes)
//
// A Timeline is immutable after construction and safe to read from many threads; build it off the
// UI thread (it is one pass over the trace, O(events · log segments)).
#include "core/trace.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpumem::analyze {

enum class SeriesKind : std::uint8_t { Allocated, Active, Requested, Reserved, InactiveSplit, LargestFree, RecordedAllocated };
inline constexpr int kSeriesKindCount = 7;
std::string_view toString(SeriesKind kind);

// One bucket of a series over a time range: the minimum and maximum the step function takes inside
// the bucket (including the value carried in from before the bucket) and its value at the bucket end.
struct Bucket {
    TimeNs begin = 0, end = 0; // [begin, end)
    Bytes min = 0, max = 0, last = 0;
    bool valid = false; // false before the first point of the series
};

// The buckets of one series built point by point, for a pass that never holds the series (the bounded
// report, analyze/bounded_analysis.h): n equal buckets over [begin, end), each the min and max of the step
// function inside it (the value carried in included) and its value at the end. DeviceTimeline::buckets is
// this over its points, so the two cannot differ. Value type.
class BucketSeries {
public:
    // `carried`: the value holding at `begin` (the last point before it), if any. n == 0 or end <= begin:
    // no buckets.
    BucketSeries(TimeNs begin, TimeNs end, std::size_t n, std::optional<Bytes> carried = std::nullopt);
    // The next point (times non-decreasing, at or after begin); points at or after `end` are ignored.
    void add(TimeNs t, Bytes value)
    {
        if (m_b >= m_out.size())
            return;
        while (t >= m_out[m_b].end) {
            close();
            if (m_b >= m_out.size())
                return;
        }
        Bucket& k = m_out[m_b];
        m_current = value;
        if (!k.valid) {
            k.valid = true;
            k.min = k.max = value;
        }
        k.min = std::min(k.min, value);
        k.max = std::max(k.max, value);
    }
    // The buckets; the series is done.
    std::vector<Bucket> finish();

private:
    void open();
    void close();
    TimeNs at(std::size_t b) const;
    std::vector<Bucket> m_out;
    TimeNs m_begin = 0, m_end = 0;
    std::uint64_t m_span = 0;
    double m_width = 0;
    std::size_t m_b = 0;
    bool m_have = false;
    Bytes m_current = 0;
};

// One device's series. Every column has one entry per point; `time` is non-decreasing.
struct DeviceTimeline {
    DeviceId device = 0;
    std::string label; // "cuda:0"
    std::vector<TimeNs> time;
    std::vector<std::uint64_t> eventIndex; // the memory event each point follows (kNoIndex for sampled points)
    std::vector<Bytes> allocated, active, requested;
    // Empty when the source has none (see the header comment).
    std::vector<Bytes> reserved, inactiveSplit, largestFree, recordedAllocated;
    std::string reservedSource; // "segment events", "counter: Total Reserved", "replay: …", or ""

    std::size_t size() const { return time.size(); }
    bool has(SeriesKind kind) const { return !column(kind).empty(); }
    std::span<const Bytes> column(SeriesKind kind) const;

    // Index of the point that holds at time t (the last point with time ≤ t), or nullopt before the first.
    std::optional<std::size_t> pointAt(TimeNs t) const;
    // Index of the first point where the column reaches its maximum; nullopt when empty.
    std::optional<std::size_t> peakPoint(SeriesKind kind) const;

    // Min/max/last of `kind` in n equal buckets over [begin, end). n ≥ 1, end > begin, else an empty
    // vector. O(n + points in range) using binary search for the range start.
    std::vector<Bucket> buckets(SeriesKind kind, TimeNs begin, TimeNs end, std::size_t n) const;

    // The allocated bytes ratios against reserved use: recordedAllocated where present, else allocated.
    Bytes allocatedForRatios(std::size_t i) const { return recordedAllocated.empty() ? allocated[i] : recordedAllocated[i]; }
    SeriesKind allocatedForRatiosKind() const { return recordedAllocated.empty() ? SeriesKind::Allocated : SeriesKind::RecordedAllocated; }
    // Fragmentation at point i (allocators.md §5.4). nullopt where the inputs are absent or the
    // denominator is 0.
    std::optional<double> waste(std::size_t i) const;    // 1 − allocated/reserved
    std::optional<double> external(std::size_t i) const; // 1 − largestFree/(reserved − allocated)
    Bytes internal(std::size_t i) const { return allocated[i] >= requested[i] ? allocated[i] - requested[i] : 0; }
};

// The recorded counters the reserved and recordedAllocated series are sampled from (see the header comment).
bool isReservedCounter(std::string_view name);
bool isAllocatedCounter(std::string_view name);

// A device's series as the time charts of `gpumem report` draw them (analyze/html_report.h): n buckets of
// each kind over one range (kinds the device does not have: empty), and the times of the first and the last
// memory event of the trace (Timeline::start, end). From a Timeline (html_report.cpp) or from the bounded
// analysis's first pass (analyze/bounded_analysis.h), which holds no series.
struct ChartBuckets {
    std::array<std::vector<Bucket>, kSeriesKindCount> series;
    TimeNs start = 0, end = 0;
    const std::vector<Bucket>& of(SeriesKind kind) const { return series[static_cast<std::size_t>(kind)]; }
    bool has(SeriesKind kind) const { return !of(kind).empty(); }
    // The allocated bytes ratios against reserved use (DeviceTimeline::allocatedForRatiosKind).
    SeriesKind allocatedForRatiosKind() const { return has(SeriesKind::RecordedAllocated) ? SeriesKind::RecordedAllocated : SeriesKind::Allocated; }
};

class Timeline {
public:
    Timeline() = default;
    // One pass over the trace's memory events. Throws nothing for a valid Trace.
    static Timeline build(const Trace& trace);
    // For a replay: series computed elsewhere (the caller fills DeviceTimeline columns).
    static Timeline fromSeries(std::vector<DeviceTimeline> devices);

    std::span<const DeviceTimeline> devices() const { return m_devices; }
    const DeviceTimeline* device(DeviceId id) const;
    // The device with the largest peak allocated (the default one to analyze); nullptr if none has points.
    const DeviceTimeline* busiest() const;
    TimeNs start() const { return m_start; }
    TimeNs end() const { return m_end; }

private:
    std::vector<DeviceTimeline> m_devices;
    TimeNs m_start = 0, m_end = 0;
};

} // namespace gpumem::analyze
