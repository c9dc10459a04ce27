#pragma once
// `gpumem fit`: the smallest device capacity, in steps of 2 MiB, at which a replay of a trace with a
// policy has no failed request. A probe at capacity C is a Replayer run with capacity C and total memory
// C (the GPU is that big, so capacity-dependent settings such as PyTorch's per_process_memory_fraction
// or a pool that sizes itself from the device take C) and OnOom::Stop.
//
// The search (the rule is ours [choice]):
// - lower bound: the peak of live requested bytes (`ideal:alignment:1` unlimited) — no policy holds the
//   live requests in less, so every capacity below it fails without a probe;
// - upper bound: the policy's own unlimited peak reserved rounded up to the step, doubled until a probe
//   fits or maxCapacity is passed (a memory fraction of 0.5 needs twice the peak);
// - then a k-ary search between them: each round probes kFitProbesPerRound evenly spaced capacities in
//   parallel and keeps (largest failing capacity below the smallest fitting one, smallest fitting one].
//   k is fixed, not the number of threads, so the probes — and the answer where OOM is not monotone —
//   do not depend on the machine.
// The reported capacity C always fits (it was probed) and C − step always fails (probed, or below the
// lower bound). Out-of-memory need not be monotone in capacity for every policy (a larger device changes
// a memory fraction, a pool's initial size, or the order in which cached blocks are reused); every probe
// is kept, and a probe that fits below a larger probe that fails is reported as non-monotone, since then
// "C fits" does not promise that every larger capacity does.
// Thread-safe: fitCapacity() shares nothing between calls.
#include "replay/parallel_runs.h"
#include "replay/start_state.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay {

// Capacities probed per round of the search (they run in parallel on up to FitOptions::jobs threads).
constexpr unsigned kFitProbesPerRound = 8;

struct FitOptions {
    Bytes step = Bytes(2) << 20; // capacities probed are multiples of it
    Bytes maxCapacity = Bytes(1) << 40; // give up above it (1 TiB)
    unsigned jobs = 0; // threads for the probes of a round; 0 = defaultJobs()
    std::optional<DeviceId> device; // as ReplayOptions::device
    std::string source; // as ReplayOptions::source: the trace's file name in errors
    // Every probe starts from it (replay/start_state.h); the lower bound counts the same memory.
    StartState start = StartState::Recorded;
    // As ReplayOptions::outsideBytes: held outside the allocator on every probed device, so the capacity
    // found includes it (nullopt = the trace's figure).
    std::optional<Bytes> outsideBytes;
    // For a streamed source: opens the same source again (a .gmt: openGmtSource of its path, with the checks the
    // first one was opened with), so that the probes of a round run on `jobs` threads, one source each (a
    // source serves one pass at a time). Empty: they run one after another. Unused for a whole trace.
    SourceOpener reopen;
};

struct FitProbe {
    Bytes capacity = 0;
    bool fits = false;
    Bytes peakReserved = 0;
    std::optional<FailedRequest> failure; // the first failed request when it does not fit
};

struct FitResult {
    std::string spec; // as written
    std::string policy; // the policy's name with its effective options
    bool fits = false; // false: no capacity up to maxCapacity fits
    // The smallest fitting capacity found (a multiple of step); 0 when !fits, and 0 with fits when the
    // trace needs no memory (nothing reserved on an unlimited device; no probes then).
    Bytes capacity = 0;
    Bytes peakReservedAtFit = 0; // peak reserved of the replay at `capacity`
    Bytes lowerBound = 0; // peak live requested bytes, with the memory from before the window of `start`
    Bytes openingAllocated = 0; // bytes allocated before a profiler trace, held by every probe
    bool lowerBoundMark = false; // the capacity is a lower bound (ReplayResult::reservedIsLowerBound)
    Bytes unlimitedPeakReserved = 0; // the policy's peak reserved on an unlimited device
    Bytes maxCapacity = 0; // the largest capacity the search was allowed to try
    bool belowProbed = false; // capacity − step was probed (else it is below the lower bound)
    std::vector<FitProbe> probes; // every probe, in capacity order
    // The first request that failed on a device of unlimited size (one above the replay engine's
    // limit, kMaxDeviceBytes, or one a policy's own pool sizing refuses there); nullopt when none did.
    std::optional<FailedRequest> unlimitedFailure;
    // A fitting probe below a failing one (non-monotone OOM): (fits at, fails at), the first such pair.
    std::optional<std::pair<Bytes, Bytes>> nonMonotone;
};

// The lower bound on memory, the one definition analyze and fit print (docs/analysis.md): the peak over
// time of the requested bytes of the blocks held from alloc to free_completed (a block pending its free
// still occupies its memory), i.e. the `ideal:alignment:1` peak on an unlimited device, but without the
// replay engine's 4 EiB limit: 2^64 − 1 when saturated. device: default defaultReplayDevice(trace).
// With opening > 0 (bytes allocated before a profiler trace, ReplayOptions::openingAllocated) they are
// live from the start, less each block the window frees without an alloc, at its free (the rule of
// ReplayOptions::openingAllocated). withRebuilt = false leaves out the blocks a snapshot importer
// rebuilt from before the window (StartState::Empty).
Bytes livePeak(const Trace& trace, std::optional<DeviceId> device = {}, Bytes opening = 0, bool withRebuilt = true);
// The same over the memory events of a source (three passes at most: the device, the foresight of
// replay/detail/foresight.h, the sweep), holding the blocks live rather than a figure per event.
Bytes livePeak(const MemoryEventSource& source, std::optional<DeviceId> device = {}, Bytes opening = 0,
    bool withRebuilt = true);

// Throws UsageError for a bad spec, a zero step or a maxCapacity below the step.
FitResult fitCapacity(const Trace& trace, const PolicySpec& spec, const FitOptions& options = {});
// The same over a source (docs/streaming.md): each probe a pass; a streamed source (one that is not a
// whole trace) serves one pass at a time, so its probes run one after another whatever options.jobs.
FitResult fitCapacity(const MemoryEventSource& source, const PolicySpec& spec, const FitOptions& options = {});

} // namespace gpumem::replay
