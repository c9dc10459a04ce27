#pragma once
// Training iterations (steps), their phases, per-step peak and growth, and leak detection
// (docs/analysis.md §Steps). Results are plain immutable values; computing them reads the Trace and
// a DeviceTimeline only, so it may run on any thread.
//
// Step detection, in this order (the first that yields ≥ 2 steps wins):
//   1. annotations of kind Step, or named "ProfilerStep#N" (PyTorch profiler);
//   2. user ranges whose name contains "step", "iter" or "batch" (case-insensitive), not an optimizer
//      range ("Optimizer.step…"), repeated ≥ 2 times without overlap — the most frequent such name;
//   3. marker memory events (snapshot markers): a step between successive markers;
//   4. periodicity: the sequence of alloc sizes on the device repeats. A rolling hash finds a
//      period of at least 2 allocs (a period of 1, one size throughout, wins over its multiples and
//      means no steps); the boundary is then moved to the first alloc after the lowest allocated point of one
//      period (where a training loop has dropped its activations) and the steps are the recurrences of
//      the kSignatureLength allocs that follow it. A period is taken for steps only when its repeats hold
//      ≥ 50 % of the device's allocs and, between the first and the last, the longest lasts at most twice the
//      shortest: repeated layers inside one step repeat too (bcrafton's snapshot). With ≥ 3 repeats, it is
//      not taken either when, below the module that runs in every repeat, each repeat runs in its own
//      instance of one module class (Qwen2DecoderLayer_0, _1, …: layers of one forward pass).
// Phases (for category inference): backward starts at the first annotation in the step whose name
// contains "backward" (else, only where the trace shows autograd ran at all — autogradEvidence() —, right
// after the step's transient peak, op-local blocks left out: the forward pass ends where the most
// activations are live; without such evidence, e.g. an inference run, the step has no backward phase);
// the optimizer phase starts at the first annotation whose name starts with "Optimizer." or contains
// "optimizer" (else, in a step whose backward start was guessed, right after the last free of a block
// made in its forward phase, when that is before the step's end; else it is absent).
#include "analyze/timeline.h"
#include "core/byte_total.h"

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpumem::analyze {

enum class StepSource : std::uint8_t { None, ProfilerStep, UserRange, Marker, Periodicity };
std::string_view toString(StepSource source);

struct Step {
    std::int64_t number = 0; // N of ProfilerStep#N, else the 0-based index
    TimeNs start = 0, end = 0; // [start, end)
    TimeNs backwardStart = 0;  // the forward phase is [start, backwardStart)
    std::optional<TimeNs> optimizerStart;
    bool phasesAnnotated = false; // backwardStart came from an annotation, not the allocated peak
    // Per-step statistics on the analyzed device (allocated series).
    Bytes allocatedAtStart = 0; // state just before start
    Bytes allocatedAtEnd = 0;   // state just before end
    Bytes peakAllocated = 0;
    TimeNs peakTime = 0;
    // Clamped to int64 (core/byte_total.h clampedDelta): the former cast difference wrapped for totals ≥ 2^63.
    std::int64_t growth() const { return clampedDelta(allocatedAtStart, allocatedAtEnd); }
};

// How many steps each source offered (0 = the source is absent), so a report can say what was there when a
// source had too few: "1 ProfilerStep# range; steps need at least 2".
struct StepSearch {
    std::size_t profilerSteps = 0; // ProfilerStep#N / Step annotations
    std::size_t userRanges = 0;    // the best repeated step-like user range (0 when none repeats)
    std::size_t markerSteps = 0;   // intervals between successive marker events
    bool searched = false;         // detectSteps ran (false for a device with no events)
    std::string periodRejected;    // why a repeating alloc-size period was not taken for steps (see detectSteps)
};

struct StepSet {
    StepSource source = StepSource::None;
    std::string detail; // the annotation name used, or the period found
    std::vector<Step> steps;
    StepSearch search;
    // What shows that autograd ran (autogradEvidence()); "" when nothing does: then no step has a
    // backward phase unless an annotation marks one.
    std::string autogradEvidence;
};

// The first sign in the trace that a backward pass or optimizer ran, as a short phrase naming it
// ("scope \"autograd::engine::evaluate_function: MmBackward0\"", "frame MmBackward0::apply"); "" when none.
// Evidence: an annotation or scope whose name contains "backward" or "autograd::engine" or names an
// optimizer ("Optimizer.step#…"); a stack frame whose name contains "backward" (an autograd node
// "…Backward0::apply", torch's "backward"/"_engine_run_backward") or "autograd::Engine", or whose file
// is in torch/optim/; an alloc recorded as gradient, autograd_detail or optimizer_state (PyTorch's own
// categories). torch/autograd/grad_mode.py (no_grad in inference) is not evidence.
std::string autogradEvidence(const Trace& trace);
// The same without the memory events' recorded categories (the tables alone: annotations, scopes, frames).
std::string autogradEvidenceInTables(const Trace& trace);
// Gradient, autograd_detail or optimizer_state: a recorded category that shows autograd ran.
bool isAutogradCategory(Category category);

// One sentence on why no steps were found, or which earlier sources were passed over for having fewer
// than 2 steps: "no training steps found: 1 ProfilerStep# range (steps need at least 2); no step ranges,
// markers or period". "" when steps were found with no source passed over.
std::string stepSearchNote(const StepSet& steps);

// Where the steps' backward phases come from, for the "backward from" column: "annotation",
// "transient peak" (guessed: placeBackwardStarts), or "no autograd" (no evidence, no backward phase).
std::string_view backwardSource(const StepSet& steps, const Step& step);
// One sentence for the category line of the reports: whether the backward phase was annotated, guessed
// (naming the evidence that autograd ran) or absent; "" without steps.
std::string phaseNote(const StepSet& steps);

inline constexpr std::size_t kSignatureLength = 16;

// For each memory event (trace order), how many allocs on its device came before it. A block is
// op-local — made and dropped inside one op, what PyTorch's profiler calls temporary — when
// result[free] == result[alloc] + 1: no other block was allocated on the device meanwhile.
std::vector<std::uint32_t> allocsBeforeEachEvent(const Trace& trace);

// Steps of `device` (its timeline gives the per-step figures and the periodicity input).
StepSet detectSteps(const Trace& trace, const DeviceTimeline& device);

// The period, in allocs, that detection source 4 finds in a device's alloc sizes (in event order); 0 or 1
// when there is none (fewer than 3 × kSignatureLength allocs, or nothing repeats on ≥ 50 % of positions).
// Only whether two sizes are equal matters, so the sizes may be given as codes (AllocSizeCodes): the same
// period as the sizes they code.
std::size_t allocSizePeriod(std::span<const Bytes> sizes);
std::size_t allocSizePeriod(std::span<const std::uint32_t> sizeCodes);

// 32-bit codes of alloc sizes, one per distinct size: a size below 2^31 bytes is its own code, a larger one
// 2^31 plus its rank among the distinct larger sizes coded so far (first seen, first ranked). The alloc
// sizes a pass keeps for allocSizePeriod take half the memory so (issue 22: 8 bytes an alloc were two
// thirds of `gpumem analyze --format json`'s resident memory on a malloc/free stream, and their page
// faults 5 % of its time). Throws FormatError past 2^31 distinct sizes of 2 GiB or more (no code left).
class AllocSizeCodes {
public:
    static constexpr Bytes kOwnCode = Bytes(1) << 31; // sizes below this are their own code
    std::uint32_t code(Bytes size) { return size < kOwnCode ? static_cast<std::uint32_t>(size) : largeCode(size); }

private:
    std::uint32_t largeCode(Bytes size);
    std::unordered_map<Bytes, std::uint32_t> m_large;
};
// Phase marks of the annotations: (start, true) for an optimizer range, (start, false) for a backward one.
std::vector<std::pair<TimeNs, bool>> annotationPhaseMarks(const Trace& trace);
// Per scope: 1 when it or an ancestor names an optimizer, 2 when it names backward, else 0.
std::vector<std::uint8_t> scopePhaseFlags(const Trace& trace);

// Step detection from what one pass over a device's events gathers (analyze/bounded_analysis.h): the
// sources of detectSteps in its order, from the trace's tables, the device's marker times and its alloc
// sizes (as AllocSizeCodes). The steps carry number, start and end (backwardStart = end) only: their
// figures and phases are the caller's. `unresolved` says what the timeline is needed for when detection
// cannot finish without it (a step-like user range's share of the device's events, or the boundaries of
// an alloc-size period); "" when it finished.
struct StepRanges {
    StepSet set;
    std::string unresolved;
};
StepRanges findStepRanges(const Trace& trace, std::span<const TimeNs> markerTimes, std::span<const std::uint32_t> allocSizeCodes);

// One call site (or scope, where no stack was recorded) whose blocks survive from several steps.
struct LeakSite {
    SiteId site = 0;
    ScopeId scope = 0;
    std::string label;          // innermost frame "func (file:line)", else the scope path, else "(unknown)"
    Bytes bytes = 0;            // bytes of its surviving blocks at the end of the last step
    std::uint64_t blocks = 0;
    std::uint32_t stepsWithSurvivors = 0; // distinct earlier steps that left a block of it alive
};

struct LeakReport {
    bool leaking = false;
    std::string reason;                   // why (or why not), one sentence
    std::vector<Bytes> liveAtStepStart;   // allocated at the start of each step, then at the end of the last
    double growthPerStep = 0;             // bytes, mean over the steps compared
    std::vector<LeakSite> sites;          // sorted by bytes, descending; empty when not leaking
};

// Leak rule: with ≥ 3 steps, the allocated bytes at the start of each step after the first (warm-up)
// step, and at the end of the last, strictly increase at every step. The sites named are those whose
// blocks allocated in ≥ 2 distinct steps before the last are still live at the end of the last step
// (a steady loop keeps at most the previous step's blocks, e.g. gradients).
LeakReport detectLeaks(const Trace& trace, const DeviceTimeline& device, const StepSet& steps);

// The first half of detectLeaks: fills report.liveAtStepStart and growthPerStep; false (with the reason)
// when the trace does not leak, true when the live bytes grew at every step and the sites are to be named.
bool leakTrend(const StepSet& steps, LeakReport& report);
// A block of the device allocated in [first step start, last step end) and live at the last step's end.
struct LeakSurvivor {
    SiteId site = 0;
    ScopeId scope = 0;
    Bytes size = 0;
    TimeNs allocTime = 0;
};
// The second half of detectLeaks, for a report whose live bytes grew at every step (leaking): names the
// sites of `survivors` (any order) with blocks from ≥ 2 distinct steps before the last, and sets the reason.
void nameLeakSites(const Trace& trace, const StepSet& steps, std::span<const LeakSurvivor> survivors, LeakReport& report);

// "func (file:line)" of the innermost frame of the program's own code in a site (library frames —
// torch/, site-packages/, dist-packages/, with / or \\ — skipped while another frame remains), "" for
// site 0. A stack without Python frames (an autograd thread's) is "<helper> in <op> in <node>" from its
// innermost ATen operator (at::_ops::X::call), autograd node (torch::autograd::generated::N::apply) and the
// first frame below the operator that is not allocator/dispatcher internals: "mul_Tensor in DivBackward0"
// (docs/analysis.md, site row). `callers` > 0 appends that many further frames outward, " ← caller (file:line)", to tell
// apart stacks that share the first frame (the breakdowns do, analyze/peak_breakdown.cpp).
std::string siteLabel(const Trace& trace, SiteId site, std::size_t callers = 0);
// Frames of a site joined by " < " (innermost first), the key diff matches stacks on.
std::string siteKey(const Trace& trace, SiteId site);
// "outer/inner" names from the root to this scope; "" for scope 0.
std::string scopePath(const Trace& trace, ScopeId scope);

} // namespace gpumem::analyze
