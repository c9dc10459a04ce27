#pragma once
// Options the what-if verbs (replay, sweep, fit) share: the CI gates --fail-if-oom and --max-reserved
// (exit 3 = kExitGate when violated), --jobs, and policy spec lists checked before any work.
// Parse-only helpers; no state.
#include "analyze/comparison.h"
#include "cli/command.h"
#include "core/event_source.h"
#include "core/trace.h"
#include "core/types.h"
#include "replay/parallel_runs.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"
#include "replay/start_state.h"

#include <cstdlib>
#include <string_view>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::cli {

struct Gates {
    bool failIfOom = false;
    std::optional<Bytes> maxReserved;
};

// One thing a gate looks at: a policy's run, a configuration, a colocated run.
struct GateSubject {
    std::string label;
    std::uint64_t ooms = 0;
    Bytes peakReserved = 0;
};

// Declares --fail-if-oom (when withFailIfOom) and --max-reserved BYTES, with `what` saying what they
// apply to in the help text.
void addGateOptions(po::options_description& options, bool withFailIfOom, const std::string& what);
// Throws UsageError for a --max-reserved that is not a size or is 0.
Gates readGates(const po::variables_map& vm);
// kExitGate after one line on `err` per violation ("gpumem VERB: gate: …"), kExitOk otherwise.
int applyGates(const Gates& gates, const std::vector<GateSubject>& subjects, std::string_view verb, std::ostream& err);

// --capacity BYTES: 0 (unlimited) when absent; UsageError for a non-size or 0 (it read as "unlimited").
Bytes readCapacity(const po::variables_map& vm);

// --outside BYTES: memory on the device outside the traced allocator (CUDA context, NCCL, other
// processes; core/outside_memory.h), taken from --capacity in every replay; it replaces the trace's own
// figure. nullopt when absent (the trace's figure, if any, applies).
void addOutsideOption(po::options_description& options);
std::optional<Bytes> readOutside(const po::variables_map& vm);

// --jobs N: declared with the default "hardware threads"; N >= 1 or UsageError.
void addJobsOption(po::options_description& options);
unsigned readJobs(const po::variables_map& vm);

// loadTrace(path), refusing (gpumem::Error) a trace without memory events: there is nothing to replay.
Trace loadReplayableTrace(const std::string& path);
// Whether the environment sets GPUMEM_REPLAY_IN_MEMORY=1: the replays of replay, sweep, fit and explain, and those
// of the verdict of text analyze and report, read a .gmt whole instead of streaming it (the baseline the tests
// and bench/scale.sh compare the streamed answers with).
inline bool replaysInMemory()
{
    const char* v = std::getenv("GPUMEM_REPLAY_IN_MEMORY");
    return v && std::string_view(v) == "1";
}
// Whether a replay of `path` streams it (docs/streaming.md "Replay"): a .gmt by its content, unless
// replaysInMemory() (the trace is then read whole: tests compare the two).
bool streamsReplay(const std::string& path);
// openGmtSource(path, {}, checks) with the refusals of loadReplayableTrace.
std::unique_ptr<MemoryEventSource> openReplayableSource(const std::string& path, GmtChecks checks = GmtChecks::AtOpen);

// The trace of a what-if verb (replay, sweep, fit) as the one replay engine takes it: a .gmt streamed
// (streamsReplay), any other format read whole (loadReplayableTrace) and served as one chunk.
class ReplayInput {
public:
    // `checks`: for a streamed .gmt, whether its memory chunks are checked at open or by the first pass
    // (core/event_source.h; withReplayInput below retries with the checks at open).
    explicit ReplayInput(const std::string& path, GmtChecks checks = GmtChecks::AtOpen);
    const MemoryEventSource& source() const { return m_streamed ? *m_streamed : *m_view; }
    const Trace& tables() const { return source().skeleton(); } // devices, streams, pools, annotations
    bool streamed() const { return m_streamed != nullptr; }
    // Opens the streamed .gmt again with the checks this one was opened with (for replays in parallel, one
    // source each: FitOptions::reopen); empty when the trace is held whole.
    replay::SourceOpener reopener() const;
    // f(source, i) for each i in [0, count) on `jobs` threads (0 = replay::defaultJobs()): replay::forEachOnSource
    // over source() with reopener().
    void forEachReplay(std::size_t count, unsigned jobs, const std::function<void(const MemoryEventSource&, std::size_t)>& f) const;
    // The comparison's context (analyze/comparison.h) and the time of the first memory event.
    analyze::ComparisonContext context(DeviceId device, replay::StartState start) const;
    TimeNs firstEventTime() const;
    // The origin of the "+x s" offsets: the trace start, as `gpumem info` and `analyze` use.
    TimeNs traceStart() const;

private:
    std::string m_path;
    GmtChecks m_checks = GmtChecks::AtOpen;
    std::unique_ptr<MemoryEventSource> m_streamed;
    Trace m_trace;
    std::unique_ptr<MemoryEventSource> m_view;
};

// What replay and sweep set before their replays: options.device (--device, else the busiest device, chosen
// once rather than by every replay: each is a pass over the trace) and the state every row starts from
// (--start, replay/start_state.h), which it returns.
replay::StartState prepareReplays(const po::variables_map& vm, const ReplayInput& input, const std::string& path,
    replay::ReplayOptions& options);

// f(input) with `path` as a ReplayInput whose .gmt chunks are checked by the first pass, and once more with the
// checks at open when one fails there (withGmtSource's rule, core/event_source.h: the answer on a damaged or
// unsorted file is the checked reading's). f must write nothing before its first full pass is done: replay
// and sweep write their tables after every replay.
template <typename F> decltype(auto) withReplayInput(const std::string& path, F&& f)
{
    if (!streamsReplay(path)) { // read whole: nothing is deferred, and a bad file is not read twice
        const ReplayInput input(path);
        return f(input);
    }
    // On the heap: a ReplayInput's view points into it, so it does not move.
    return withDeferredChecks([&](GmtChecks checks) { return std::make_unique<ReplayInput>(path, checks); }, f);
}

// A profiler trace starts after the model was loaded: its recorded "Total Allocated" is already above
// zero at the first sample, and those bytes are not in the trace. With --start recorded every replay
// holds them (replay/start_state.h) and the cache around them is unknown; with --start empty the
// replays undercount. Says which on `err` (one "note:" paragraph, wrapped to `width` columns, 0 = not
// wrapped) when the trace shows such bytes for `device`.
void warnAboutMemoryBeforeTheWindow(
    const Trace& trace, DeviceId device, std::ostream& err, replay::StartState start, std::size_t width);
// The same with the opening bytes known (replay::openingAllocated).
void warnAboutMemoryBeforeTheWindow(Bytes openingAllocated, std::ostream& err, replay::StartState start, std::size_t width);

// --start recorded|empty (the state every row starts from; default recorded) and --wide (text tables
// not held to 100 columns).
void addStartOptions(po::options_description& options);
// UsageError for a --start that is neither.
replay::StartState readStart(const po::variables_map& vm);
// The columns a text table may use: 0 (unlimited) with --wide, else the terminal's width when stdout
// is a terminal wider than 100 columns, else 100.
std::size_t readTableWidth(const po::variables_map& vm);

// --empty-cache keep|drop (the trace's recorded empty_cache calls), --empty-cache-at step-end|annotation
// GLOB|every N (calls added) and --merge-pools (every private pool replayed as the default one).
void addCacheOptions(po::options_description& options);
// Sets them in `options`; UsageError for a bad value (the forms named).
void readCacheOptions(const po::variables_map& vm, replay::ReplayOptions& options);

// Parses and validates each spec (UsageError, exit 2, before any work).
std::vector<replay::PolicySpec> checkedPolicySpecs(const std::vector<std::string>& texts);

} // namespace gpumem::cli
