#pragma once
// Fidelity of a replay (design.md §5): replays a trace that recorded its allocator's segment events
// with the policy that produced it and measures how closely the simulation reproduces them —
// segment events in order (kind and size), block addresses, peak reserved, the final state, and, for
// traces that record PyTorch profiler's "Total Reserved" counter (Kineto), the reserved curve over
// time. Pure functions over an immutable Trace; thread-safe.
#include "replay/replayer.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay {

struct SegmentEventSide {
    bool present = false; // false: this side has no event at that index
    EventKind kind = EventKind::SegmentAlloc;
    Address address = 0;
    Bytes size = 0;
    TimeNs time = 0;
    std::uint64_t traceEvent = 0; // the trace event (recorded) or the request being replayed (simulated)
};

struct SegmentEventMismatch {
    std::uint64_t index = 0; // position in the sequence of segment events after the initial state
    SegmentEventSide recorded, simulated;
};

// The simulated reserved curve against a recorded counter (allocators.md §5.4 naming).
struct CounterComparison {
    std::string series; // e.g. "Total Reserved"
    std::uint64_t samples = 0;
    Bytes recordedFirst = 0; // the first sample (memory reserved before the window shows here)
    Bytes recordedPeak = 0, simulatedPeak = 0;
    std::int64_t peakError = 0; // simulated − recorded, bytes
    double peakErrorRatio = 0; // |peakError| / recordedPeak
    double meanAbsError = 0; // bytes, over samples
    Bytes maxAbsError = 0;
    TimeNs maxAbsErrorTime = 0;
    double withinOnePercent = 0; // fraction of samples within 1 % of the recorded peak
};

struct FidelityReport {
    std::string policy;
    DeviceId device = 0;
    TimeNs traceStart = 0; // the trace's first memory event
    std::uint64_t recordedSegmentEvents = 0, simulatedSegmentEvents = 0;
    std::uint64_t matched = 0; // positions where kind and size agree
    std::optional<SegmentEventMismatch> firstMismatch;
    Bytes recordedPeakReserved = 0, simulatedPeakReserved = 0;
    std::int64_t peakReservedError = 0; // simulated − recorded, bytes
    std::uint64_t allocAddressesCompared = 0, allocAddressesMatched = 0;
    std::optional<std::uint64_t> firstAddressMismatchEvent;
    std::uint64_t emptyCacheDirectives = 0; // release bursts without an empty_cache event, replayed as one
    std::uint64_t emptyCacheCalls = 0; // recorded empty_cache events replayed
    std::uint64_t initialSegments = 0, initialBlocks = 0, initialNotAdopted = 0;
    std::uint64_t ooms = 0;
    // Whether the trace records segment events or an initial state: without either (a profiler trace)
    // the segment-event and address comparisons do not apply and only the counter is compared.
    bool segmentLevel = true;
    // False when the trace records neither segment events, an initial state nor a reserved counter:
    // there is nothing to compare the simulation with.
    bool comparable = true;
    std::optional<CounterComparison> reservedCounter;
    // The same comparison from a warm start: the opening Total Allocated held as one opaque block and
    // one unmeasured pass over the window first (ReplayOptions::openingAllocated, warmupPasses).
    std::optional<CounterComparison> reservedCounterWarm;
    Bytes openingAllocated = 0;
    PolicyState finalState; // the simulated state after the last event
    // Differences from the recorded end state (a snapshot's `segments`), when one was compared.
    std::optional<std::vector<std::string>> endStateDifferences;
    std::uint64_t endSegmentsRecorded = 0;
    bool exact() const
    {
        return comparable && segmentLevel && !firstMismatch && recordedSegmentEvents == matched
            && peakReservedError == 0 && allocAddressesMatched == allocAddressesCompared
            && (!endStateDifferences || endStateDifferences->empty());
    }
};

// Replays `trace` with `spec` (default: pytorch with the trace's recorded settings) in fidelity mode
// (ReplayOptions::followRecorded, initial state adopted, timeline and addresses recorded; the other
// options are taken from `options`) and compares. Throws UsageError like Replayer::run.
FidelityReport checkFidelity(const Trace& trace, const PolicySpec& spec, ReplayOptions options = {});

// Bytes a profiler trace's recorded "allocated" counter already held before the first request-level
// event of `device` (the first sample minus that event's own change; PyTorch's counters are taken after
// the event): memory the trace does not itemise. 0 without such a counter.
Bytes openingAllocated(const Trace& trace, DeviceId device);
// The same with that first request-level event given (its kind and size; nullopt when the device has
// none), for a reader that streams the events (analyze::summarize over a MemoryEventSource).
struct FirstRequest {
    EventKind kind = EventKind::Alloc;
    Bytes size = 0;
};
Bytes openingAllocated(const Trace& trace, DeviceId device, std::optional<FirstRequest> first);
// The same over a source: a pass up to that event, only when the device has an "allocated" counter.
Bytes openingAllocated(const MemoryEventSource& source, DeviceId device);

// Loads `path` (any format gpumem reads) and runs checkFidelity; for a PyTorch snapshot the final
// state is also compared with its recorded `segments` (endStateDifferences). Throws IoError /
// FormatError from loading and UsageError like Replayer::run, and UsageError for a snapshot converted
// to .gmt/.jsonl (its recorded blocks are gone; run it on the original snapshot).
FidelityReport checkFidelityFile(const std::string& path, const PolicySpec& spec, ReplayOptions options = {});

// Compares a simulated final state with a recorded one (a snapshot's `segments`), segment by segment
// (address, size) and block by block (address, size, state). One line per difference, at most
// `maxDifferences` (then "… N more"); empty when equal.
std::vector<std::string> compareStates(const std::vector<SegmentInfo>& recorded,
    const std::vector<SegmentInfo>& simulated, std::size_t maxDifferences = 20);

} // namespace gpumem::replay
