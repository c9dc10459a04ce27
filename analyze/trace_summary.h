#pragma once
// What `gpumem info` prints and the GUI's summary pane shows: counts, span, live blocks at the end
// and peaks per device. Computed in one pass over the memory events; immutable afterwards.
#include "core/event_source.h"
#include "core/outside_memory.h"
#include "core/trace.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::analyze {

struct Peak {
    Bytes bytes = 0;
    TimeNs time = 0; // when it was first reached
};

struct DeviceSummary {
    DeviceId device = 0;
    std::string label;  // "cuda:0", "cpu"
    std::string name;   // product name if recorded
    Bytes totalMemory = 0;
    std::size_t streams = 0; // rows of the trace's stream table on this device, used or not
    // Streams that carry at least one kernel, and at least one memory event. Kept apart because a
    // format without memory streams (a Kineto [memory] event, an XPlane allocator event, the memory
    // timeline) puts its memory events on a stream of handle 0 of its own: counted with the kernel
    // streams it read as one stream too many (HTA df_index_resolver: 3 where the trace has 2).
    std::size_t kernelStreams = 0, memoryStreams = 0;
    std::array<std::uint64_t, kEventKindCount> eventsByKind {};
    std::uint64_t kernels = 0;
    std::uint64_t liveAtEnd = 0;  // allocations never freed within the trace
    Bytes liveBytesAtEnd = 0;
    // Peak of the running sum of live request-level blocks (paired allocations only; frees of blocks
    // allocated before the window are not subtracted). Absent when the device has no alloc events.
    std::optional<Peak> peakAllocated;
    // Peak reserved from segment events (segment_alloc/map minus segment_free/unmap), when recorded.
    std::optional<Peak> peakReserved;
    // Peaks of recorded counters ("Total Allocated", "Total Reserved" of PyTorch's profiler), by name.
    // A byte counter whose samples are all 0 is left out (never recorded; XPlane "Bytes Reserved").
    std::vector<std::pair<std::string, Peak>> recordedPeaks;
    // Bytes already allocated when a profiler trace began (its first "allocated" counter sample minus
    // that event's own change; replay::openingAllocated). The recorded peaks include them, peakAllocated
    // does not. 0 when the trace has no such counter, started empty, or has no alloc/free events on the
    // device to measure from (counters only).
    Bytes allocatedBeforeTrace = 0;
    // Memory outside the traced allocator (core/outside_memory.h), when the trace records it.
    std::optional<OutsideMemory> outside;
    // The first oom event on the device (a request the run's allocator refused; eventsByKind counts them
    // all): its request in bytes and its time (ns, absolute). nullopt when the trace records none.
    struct Oom {
        Bytes request = 0;
        TimeNs time = 0;
    };
    std::optional<Oom> firstOom;
};

struct TraceSummary {
    std::string tool;       // metadata "tool" (+ "tool_version")
    std::string sourceFormat;
    TimeNs start = 0, end = 0; // over all timed records; both 0 for an empty trace
    std::uint64_t memoryEvents = 0, kernels = 0, annotations = 0, counterSamples = 0, allocations = 0;
    // Annotations by AnnotationKind (range, step, instant). An annotation is one time range however the
    // format wrote it: a snapshot's START/END pair of external_annotations records is one range.
    std::array<std::uint64_t, 3> annotationsByKind {};
    std::vector<DeviceSummary> devices;
    std::vector<Anomaly> anomalies;
};

// Throws nothing for a valid Trace.
TraceSummary summarize(const Trace& trace);
// The same from a source in one pass over its memory events and one over its kernels, holding the
// live blocks (core/chunk_pairing.h) instead of the events: equal to summarize() of the whole trace.
// Throws what the source throws (FormatError, IoError). `stats`, when given, receives what
// Trace::stats() would hold: the import anomalies and those of pairing (for --strict).
TraceSummary summarize(const MemoryEventSource& source, ImportStats* stats = nullptr);

// "cuda:0", "hip:1", "cpu".
std::string deviceLabel(const Device& device);

// The earliest and latest timestamps of any record of the trace (memory events, kernels, annotations,
// counter samples), in ns; both 0 for an empty trace. `start` is the origin of every "+x s" offset
// gpumem prints: `info` (whose header names it), `analyze`, `report`, `diff` and the viewer.
struct TimeSpan {
    TimeNs start = 0, end = 0;
};
TimeSpan traceSpan(const Trace& trace);
// The same for a source: its skeleton's records, its kernels (a pass over them) and its first and last
// memory events (MemoryEventSource::firstAndLastTime).
TimeSpan traceSpan(const MemoryEventSource& source);

// For a trace that records memory only as counters (no memory events, some counter samples: a PyTorch
// <= 1.9 profiler trace, whose [memory] events have sizes but no addresses, docs/kineto-import.md), the
// sentence the viewer's pages start with: "this trace has memory counters only: …" (lower case, no
// final full stop); nullopt for any other trace.
std::optional<std::string> countersOnlyNote(const Trace& trace);

// The device whose recorded byte counters reach the highest value (core/counter_units.h), for a
// trace that has counters only; nullopt when no counter has a positive sample on a device.
std::optional<DeviceId> busiestCounterDevice(const TraceSummary& summary);

} // namespace gpumem::analyze
