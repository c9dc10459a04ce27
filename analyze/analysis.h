#pragma once
// Everything `gpumem analyze` and `gpumem report` show about one trace, computed in one call:
// the Timeline, steps and leaks, categories (recorded or inferred), the fragmentation figures and
// the breakdowns at the requested instants. An Analysis is an immutable value once returned (the
// GUI computes it on a worker thread and hands it to its models); analyzeTrace() is thread-safe for
// distinct or shared Traces.
#include "analyze/category_inference.h"
#include "analyze/peak_breakdown.h"
#include "analyze/steps.h"
#include "analyze/timeline.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::analyze {

class CategoryRules;                         // analyze/category_rules.h
enum class CategorySource : std::uint8_t;    // analyze/category_rules.h

struct AnalysisOptions {
    std::optional<DeviceId> device; // default: the device with the largest peak allocated
    // Instants to break down; default {peak allocated, peak reserved (when recorded)}.
    std::vector<InstantSpec> instants;
    // Called between stages with the fraction done (0–1), on the calling thread; return false to
    // cancel (analyzeTrace then throws gpumem::Cancelled). For the GUI's worker thread.
    std::function<bool(double)> progress;
    // First-match category rules (`--categories RULES`), applied before the recorded and inferred
    // categories; null for none.
    std::shared_ptr<const CategoryRules> categoryRules;
};

// The figures of allocators.md §5.4 for the analyzed device. Optional ones need a reserved series
// (segment events, a recorded counter, or a replay) or segment events with addresses.
struct FragmentationSummary {
    Bytes peakAllocated = 0, peakActive = 0, peakRequested = 0;
    std::optional<Bytes> peakReserved;
    // The allocator's own allocated counter, where reserved is a recorded counter too (it includes
    // blocks allocated before the trace window); the ratios below then use it instead of peakAllocated.
    std::optional<Bytes> peakRecordedAllocated;
    std::optional<double> utilizationActive;    // GMLake: peak_active / peak_reserved
    std::optional<double> utilizationAllocated; // STAlloc: max_allocated / max_reserved
    std::optional<double> wasteAtPeakReserved;  // 1 − allocated/reserved at the reserved peak (PyTorch)
    std::optional<double> timeWeightedWaste;    // mean of 1 − allocated/reserved over time
    std::optional<double> externalAtPeakReserved; // 1 − largest_free/free at the reserved peak (TF BFC)
    std::optional<Bytes> maxInactiveSplit;      // PyTorch inactive_split_bytes, maximum over time
    Bytes internalAtPeakAllocated = 0;          // allocated − requested at the allocated peak
    // replay::livePeak: requested bytes held alloc..free_completed (`ideal:alignment:1`; allocators.md
    // §6.1), with the bytes allocated before a profiler trace (openingAllocated) live from the start, the
    // bound `gpumem replay`, fit and report measure against (analyze/comparison.h).
    Bytes lowerBound = 0;
    Bytes openingAllocated = 0; // replay::openingAllocated, included in lowerBound
    std::optional<double> overheadVsLowerBound; // peakReserved / lowerBound, the two printed figures

    // The headline fragmentation figure, defined once (docs/analysis.md "The headline"): the reserved
    // memory beyond the live (allocated) bytes at the moment that matters — the first recorded OOM, else
    // the reserved peak after the opening state (a snapshot's rebuilt pre-window state is its t = 0,
    // not a moment of the run). Absent without a reserved series.
    struct Headline {
        std::string moment; // "first OOM", "reserved peak", "peak after opening state" (after a snapshot's rebuilt state)
        std::size_t point = 0; // index into the device's timeline
        TimeNs time = 0;
        Bytes reserved = 0, live = 0;
        Bytes beyond() const { return reserved > live ? reserved - live : 0; }
        double share() const { return reserved ? double(beyond()) / double(reserved) : 0.0; }
    };
    std::optional<Headline> headline;
};

// torch.cuda.memory_stats()-like counters for the analyzed device (current = at the trace end).
struct MemoryStats {
    struct Stat {
        std::uint64_t current = 0, peak = 0, allocated = 0, freed = 0;
        friend bool operator==(const Stat&, const Stat&) = default;
    };
    Stat allocatedBytes, activeBytes, requestedBytes, reservedBytes, inactiveSplitBytes;
    Stat allocations, activeAllocations, segments;
    std::uint64_t ooms = 0;
    bool hasSegments = false;
};

struct Analysis {
    // Per memory event; empty from analyzeSource() (analyze/bounded_analysis.h), which fills the fields below
    // from its passes instead. The report writers read those fields, not the timeline.
    Timeline timeline;
    TimeNs firstEventTime = 0, lastEventTime = 0; // the trace's first and last memory event (Timeline::start/end)
    TimeNs deviceFirstTime = 0;   // the analyzed device's first memory event
    bool hasReserved = false;     // the analyzed device has a reserved series (DeviceTimeline::has(Reserved))
    std::string reservedSource;   // DeviceTimeline::reservedSource of the analyzed device
    // The trace's start (traceSpan(trace).start: its earliest record of any kind), from which every
    // "+x s" offset of the reports is measured, as `gpumem info` does; not the first memory event.
    TimeNs origin = 0;
    DeviceId device = 0;
    std::string deviceLabel;
    bool empty = true; // the device has no memory events
    // The trace has no memory events but recorded memory counters (a PyTorch <= 1.9 profiler trace: [memory]
    // events with sizes and no addresses, imported as counters, docs/kineto-import.md). `device` is then the
    // device with the most counter samples (or the one asked for); only its counters can be shown: no
    // block-level analysis or replay.
    bool countersOnly = false;
    MemoryStats stats;
    FragmentationSummary fragmentation;
    StepSet steps;
    LeakReport leaks;
    bool categoriesRecorded = false;
    // Per trace.allocations(): a rule's where AnalysisOptions::categoryRules match, else recorded if the
    // trace has any, else inferred.
    std::vector<Category> categories;
    // With category rules: where each entry of `categories` came from, and the breakdowns' category rows
    // are split by it ("activation (rule)"); empty without rules.
    std::vector<CategorySource> categorySources;
    std::vector<Category> inferred;   // per trace.allocations(), always
    // Where recorded categories exist: how often inference (with the category rules over it, where given)
    // agrees with them (bytes), at the allocated peak and over every allocation of the device.
    std::optional<CategoryAgreement> agreementAtPeak, agreementAll;
    std::vector<Breakdown> breakdowns; // one per resolvable instant, in the order asked
    // With the default instants: why the breakdown at the reserved peak (the headline's moment) is left
    // out — the same moment as the allocated peak, or a live set too small to break down; "" when shown
    // or not asked.
    std::string reservedBreakdownOmitted;
};

// Throws UsageError for a device index the trace does not have, Cancelled when progress says so.
Analysis analyzeTrace(const Trace& trace, const AnalysisOptions& options = {});

} // namespace gpumem::analyze
