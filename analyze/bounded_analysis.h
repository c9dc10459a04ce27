#pragma once
// `gpumem analyze` in bounded memory (issue 22; docs/analysis.md §Memory and streaming): the Analysis of
// analyzeTrace() computed in passes over a MemoryEventSource (core/event_source.h) instead of a Trace held
// whole. Resident memory grows with what the answer needs — the blocks live at once, per-device running
// figures, the analyzed device's alloc sizes (8 bytes an alloc, for step detection by periodicity), the
// steps and the blocks live at each instant broken down — not with the event count.
//
// Passes: (0, only for a trace with free_completed events: which frees a completion follows, one bit an
// event; the first try of pass 1 stops at the first such event) (1) every device: pairing, the series' running figures (stats, peaks, fragmentation, the headline,
// the lower bound), the instants' event indices, the step-detection inputs; (2) only when steps were found:
// the analyzed device's per-step figures and phase marks; (3) the analyzed device again: the blocks live at
// each instant, their categories (recorded, or inferred once each block's free is seen), leaks and the
// inference agreement.
//
// What the passes do not compute: an Analysis::timeline (it is per event; the report writers read
// Analysis::hasReserved, reservedSource, firstEventTime… instead), the per-allocation category vectors, and
// the figures that need the timeline or the whole trace. For those, `needsTrace` says why and the Analysis
// is not to be used: memory counters (recorded reserved/allocated), category rules, a
// tracer's allocation sources, step-like user ranges, and an alloc-size period (its boundaries need the
// allocated series at random points). The caller then
// analyses the trace in memory (analyzeTrace), when it fits.
//
// Thread-safety: one call at a time per source (a source is not thread-safe); the result is a value.
#include "analyze/analysis.h"
#include "analyze/timeline.h"
#include "core/event_source.h"

#include <optional>

#include <string>

namespace gpumem::analyze {

// The time charts of `gpumem report` (analyze/html_report.h) computed in pass 1: n buckets over [begin, end)
// of each series of every device, as DeviceTimeline::buckets gives them over the in-memory timeline.
struct ChartRequest {
    TimeNs begin = 0, end = 0;
    std::size_t n = 0;
};

// BoundedAnalysis's moments, at namespace scope: nested in it, clang found them not default-constructible
// where its std::optional members are declared, before the struct is complete (the fuzz build).
struct BoundedMoment {
    TimeNs time = 0;
    Bytes allocated = 0;
    std::optional<Bytes> reserved;
};
struct BoundedRecordedOom : BoundedMoment {
    Bytes request = 0; // the oom event's size: what was asked for (bytes)
};

struct BoundedAnalysis {
    // Equal to analyzeTrace()'s on the same trace (except `timeline`, empty, and the per-allocation vectors
    // categories, inferred, categorySources, empty) when needsTrace is empty.
    Analysis analysis;
    // What needs the trace in memory ("memory counters", …); "" when the passes gave the whole answer.
    std::string needsTrace;
    int passes = 0; // over the source's memory events
    // Chunks pass 1 read through its kernel for allocs and frees on one device (the same results as its
    // general loop; for tests and benchmarks).
    std::uint64_t allocFreeChunks = 0;
    std::optional<ChartBuckets> charts; // with a ChartRequest, when the analysis found a device with events

    // The moments a verdict opens with (cli streamedVerdict, as explain's verdict does; analyze/diagnosis.cpp):
    // the analyzed device's state after the events at the moment's time (DeviceTimeline::pointAt). `allocated`
    // is the allocated series, or the recorded allocated counter where reserved is a recorded counter too
    // (FragmentationSummary::Headline::live); `reserved` only with a reserved series (Analysis::hasReserved).
    // Filled from pass 1 whenever the device has events, needsTrace or not.
    using Moment = BoundedMoment;
    using RecordedOom = BoundedRecordedOom;
    std::optional<RecordedOom> firstOom; // the first recorded oom event
    std::optional<Moment> peakAllocated; // the first point of the allocated peak
    // The reserved peak at its fullest instant: the most allocated while reserved is at its peak (as the headline
    // and replay::ReplayResult::atPeak take it).
    std::optional<Moment> peakReserved;
};

// Throws UsageError for a device index the trace does not have (as analyzeTrace), Cancelled when
// options.progress says so, and what the source throws (FormatError naming the file and offset).
// With `charts`, pass 1 also buckets every series of every device (7 × n buckets a device; Requested and
// InactiveSplit are bucketed too, for a caller that draws them).
BoundedAnalysis analyzeSource(const MemoryEventSource& source, const AnalysisOptions& options = {}, const ChartRequest* charts = nullptr);

// The trace start (traceSpan() of the whole trace: its earliest memory event, kernel, annotation or counter
// sample) from the skeleton, the kernels and the first chunk alone; 0 for a trace without records.
TimeNs sourceOrigin(const MemoryEventSource& source);

} // namespace gpumem::analyze
