#pragma once
// The replay engine (design.md §5): feeds the request-level events of one device of a Trace, in time
// order, to a policy stack (policy → StatisticsAdaptor → TimelineAdaptor) on a SimulatedDevice and
// returns a ReplayResult. Deterministic and single-threaded per run; run(...) is const and shares
// nothing, so many runs may go in parallel on one Trace.
//
// Rules:
// - The request size is the event's requestedSize where the trace has it, else its size.
// - Trace addresses are mapped to simulated ones through the trace's alloc → free pairing (the rules of
//   Trace::allocations(), applied chunk by chunk by a ChunkPairing), never by address equality.
// - A free whose allocation also has a later free_completed is a free_requested: the block leaves the
//   program (requestFree) and becomes reusable at the free_completed (deallocate); otherwise the free
//   is both (allocators.md §1.7). One pending-free rule for every policy, fed or adopted (PyTorch
//   CUDACachingAllocator.cpp free()): requested and allocated bytes drop at the free_requested; the
//   block's memory stays occupied (reserved, not reused) until the free_completed. A policy that does not
//   apply it itself (countsPendingFrees()) gets a PendingFreeAdaptor above it.
// - The initial state of a ring-buffer window (the events a snapshot importer rebuilt before the first
//   entry, metadata "reconstruction"[].events_before_trace) is adopted at the recorded addresses by a
//   policy that can (pytorch with the recorded settings), or allocated like any request otherwise. An
//   adopted state above the capacity first releases its wholly free cached segments (PyTorch's OOM
//   recovery); if it still does not fit, that is one failure marked beforeWindow, not a request, and the
//   replay stops there whatever onOom says (there is no request to skip: the run cannot start).
// - A failed request is data: with OnOom::Stop the replay ends there; with OnOom::Skip it is counted,
//   the allocation and its frees are dropped and the replay goes on.
// - Segment-level events of the trace are not replayed; a fidelity replay (followRecorded) hands the
//   recorded segment_alloc addresses to the device as hints and treats each burst of recorded
//   segment_free/unmap events that no empty_cache event announces as an empty_cache() directive (an
//   OOM recovery without max_split_size releases the same segments, §1.10; allocators.md §1.17).
// - A recorded empty_cache event is replayed (ReplayOptions::emptyCache Keep, the default): pool 0 →
//   releaseCached() (PyTorch release_cached_blocks), a private pool → releasePool(). Drop leaves them
//   out. ReplayOptions::addEmptyCache adds releaseCached() calls before chosen request events.
// - Every alloc is served from its event's pool (selectPool) unless mergePools: then every pool is the
//   default one, and an empty_cache of a private pool is dropped (that pool no longer exists).
// - A policy that plans offline (needsPlan(): `optimal`) is first handed the whole request sequence:
//   the Replayer runs the same replay once with a recorder that accepts every request and records
//   each allocate() with its position, stream, trace event and the position of its deallocate()
//   (RequestPlan), then replays for real.
// - A compacting policy (compactionSchedule(): `compaction:INNER`) is compacted before the first request
//   event at or after the start and the end of every annotation whose name matches its glob, and/or
//   before every N-th request event of the window; the moves it returns remap the trace's live blocks.
//   The inner policy is also replayed alone (same options) for peakReservedWithoutCompaction.
#include "core/event_source.h"
#include "core/trace.h"
#include "replay/adaptors/statistics_adaptor.h"
#include "replay/adaptors/timeline_adaptor.h"
#include "replay/policy_spec.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay {

enum class OnOom : std::uint8_t { Stop = 0, Skip = 1 };
// Auto: adopt where the policy can (pytorch with the recorded settings), else allocate; Adopt; Allocate
// (the rebuilt events are fed as requests); Ignore (not told apart from the window: fed as requests,
// without the adopted state's peak reset); Empty (the rebuilt events are not fed: the window starts on
// an empty device, replay/start_state.h).
enum class InitialStateMode : std::uint8_t { Auto = 0, Adopt = 1, Allocate = 2, Ignore = 3, Empty = 4 };

enum class EmptyCacheMode : std::uint8_t { Keep = 0, Drop = 1 };

// Where a what-if replay adds empty_cache() calls (`--empty-cache-at`): before the first request event
// at or after the end of every step annotation (stepEnd), of every annotation whose name matches
// annotationGlob (`*`, `?`), and before every everyRequests-th request event of the window (0 = never).
struct EmptyCacheSchedule {
    bool stepEnd = false;
    std::string annotationGlob;
    std::uint64_t everyRequests = 0;
    bool any() const { return stepEnd || !annotationGlob.empty() || everyRequests != 0; }
    // "step-end", "annotation GLOB", "every N": the form `--empty-cache-at` takes; "" when none.
    std::string text() const;
};
// Parses `step-end`, `annotation GLOB` (or `annotation:GLOB`), `every N`; UsageError naming the forms.
EmptyCacheSchedule parseEmptyCacheSchedule(std::string_view text);

// The look-ahead pass of a replay (what it must know before it feeds the events: replay/detail/foresight.h),
// kept for the next replay given the same memo (ReplayOptions::foresight) that asks the same of it: the same
// device, window start, recorded hints, opening allocated bytes and outside-memory need. diagnose's baseline,
// moment and candidate replays share one (issue 22: each ran its own pass over the source, a pairing of every
// event, the third of a streamed verdict's time). Every replay given one memo must replay the same events —
// the same trace, whatever source serves it (a .gmt opened again is the same trace). Thread-safe.
class ForesightMemo;
std::shared_ptr<ForesightMemo> makeForesightMemo();

struct ReplayOptions;
// Runs the look-ahead pass of a replay of `source` under `options` now and keeps it in options.foresight (which
// must be set), with `chunk` shown every chunk of that pass before the look-ahead reads it: a caller's facts in
// the same pass instead of a pass of their own (diagnose's event facts: one decoding of a streamed .gmt less,
// issue 22). The chunks come in trace order, all of them; where the pass starts over (a source's first
// free_completed: replay/detail/foresight.cpp), `restarted` is called before the first chunk comes again. False,
// and nothing is shown, where the memo holds that look-ahead already: the caller then reads the source itself.
// Errors: those of the source's read (the replays would meet them too).
bool foreseeWith(const MemoryEventSource& source, const ReplayOptions& options,
    const std::function<void(const MemoryEventColumns&, std::uint64_t first)>& chunk, const std::function<void()>& restarted);

struct ReplayOptions {
    Bytes capacity = 0; // bytes the simulated device may hand out; 0 = unlimited
    Bytes totalMemory = 0; // the device's reported total memory; 0 = the trace's, else the capacity
    OnOom onOom = OnOom::Skip;
    std::optional<DeviceId> device; // default: the first non-CPU device with alloc events
    bool recordTimeline = false; // fill ReplayResult::timeline
    bool recordAllocAddresses = false;
    bool recordSegmentEvents = false; // fill ReplayResult::segmentEvents (every simulated device call)
    bool keepFinalState = false; // fill ReplayResult::finalState
    bool followRecorded = false; // fidelity replay: address hints and empty_cache directives
    // Stop after feeding trace event `stopAfterEvent` (an index into Trace::memory(); or at the first event
    // of the device past it): the state at that moment, e.g. a reserved peak or an --at time, with
    // keepFinalState. kNoIndex = replay to the end. Not a failure: `stopped` stays false.
    std::uint64_t stopAfterEvent = kNoIndex;
    // Stop before the next event of the device once the measured peak reserved (what ReplayResult::peakReserved
    // reports) has reached this many bytes; 0 = never. For a what-if that only asks whether the peak stays below
    // a bound (the verdict's remedy candidates): the peak only grows, so the rest of the run cannot change that
    // answer. Sets ReplayResult::stoppedAtPeak; every figure is then the run's up to the stop.
    Bytes stopAtPeakReserved = 0;
    InitialStateMode initialState = InitialStateMode::Auto;
    // Bytes allocated before the window that the trace does not list (a profiler trace's opening Total
    // Allocated), live from the start [choice]: each block the window frees without an alloc is one
    // block until that free (when their sizes add up to at most these bytes), the rest one opaque block
    // that stays live; 0 = none. replay/start_state.h sets it for a comparison.
    Bytes openingAllocated = 0;
    // Passes over the window before the measured one, to start from a warm cache as a steady-state
    // training step does [choice]; blocks a pass leaves live are freed before the next.
    int warmupPasses = 0;
    // Polled every 65,536 events when set: once it reads true, run() throws gpumem::Cancelled (the GUI
    // cancels background what-if replays with it). Not owned; must outlive run().
    const std::atomic<bool>* cancel = nullptr;
    // Memory on the device outside the traced allocator (core/outside_memory.h), taken from the capacity
    // before the replay: the device hands the policy at most capacity − outside. nullopt = the trace's
    // own figure for the device (metadata "outside_allocator"), if any; a value (--outside BYTES)
    // replaces it. No effect on an unlimited device (capacity 0).
    std::optional<Bytes> outsideBytes;
    // Recorded empty_cache events: replayed (Keep) or left out (Drop); added calls; pools merged.
    EmptyCacheMode emptyCache = EmptyCacheMode::Keep;
    EmptyCacheSchedule addEmptyCache;
    bool mergePools = false;
    // The trace's file name, leading the FormatError of an initial state that cannot be adopted (its
    // segments overlap); empty: the message names no file.
    std::string source;
    // Shared with other replays of the same trace (makeForesightMemo): the look-ahead pass runs once for all
    // of them. Null: the replay makes its own.
    std::shared_ptr<ForesightMemo> foresight;
};

struct FailedRequest {
    TimeNs time = 0;
    std::uint64_t event = 0; // index in Trace::memory()
    Bytes size = 0; // the request
    StreamKey stream = 0;
    Bytes reserved = 0; // reserved when it failed
    Bytes allocated = 0;
    Bytes deviceFree = 0; // capacity − reserved (the simulator's 4 EiB limit, kMaxDeviceBytes, when unlimited)
    // True when the state before the window does not fit: either the adopted state (no request failed;
    // its segments with live blocks hold `reserved` bytes, more than the capacity, `allocated` (= size) of
    // them in live blocks; time and event are the first window event's; refusedBy empty), or one of its
    // rebuilt blocks allocated as a request was refused (event: that block's; refusedBy says by what).
    // Either way the replay stops there, whatever onOom says.
    bool beforeWindow = false;
    // The limit that refused the request, in words: the device capacity, the simulator's 4 EiB device
    // limit, or the policy's own limit by name (a stream heap, or pools sized from the device's total
    // memory, with that size and whether it was assumed); "" for a failure before the window.
    std::string refusedBy;
};

// Bytes one stream holds in the policy's segments (PyTorch pools per stream, allocators.md §1.12).
struct StreamMemory {
    StreamKey stream = 0;
    Bytes reserved = 0; // bytes of its segments
    Bytes free = 0; // of them, in free (cached, reusable) blocks
    friend bool operator==(const StreamMemory&, const StreamMemory&) = default;
};
// Reserved and free bytes per stream of a policy state, by stream key ascending.
std::vector<StreamMemory> streamMemory(const PolicyState& state);

// The allocator's free memory when a request failed (for the first kDetailedFailures failures of a replay):
// what PyTorch's OOM message leaves the user to work out (allocators.md §5.4). Taken after the failed
// request, i.e. after the policy's own OOM recovery (PyTorch release_cached_blocks, §1.10).
inline constexpr std::size_t kDetailedFailures = 64;
inline constexpr std::size_t kFailureFreeBlocks = 16;
struct FailureDetail {
    Bytes freeCached = 0; // bytes in free blocks of the policy's segments (reserved but unallocated)
    Bytes largestFree = 0; // the largest free block
    std::vector<Bytes> freeBlocks; // the kFailureFreeBlocks largest free blocks, largest first
    std::vector<StreamMemory> streams; // reserved and free per stream
    std::uint64_t freeBlockCount = 0; // all free blocks (freeBlocks lists at most kFailureFreeBlocks)
    // The policy refused without a failed device call (its own limit: maximum_pool_size, memory_limit,
    // per_process_memory_fraction, pools sized from the device), not the device capacity.
    bool refusedByPolicy = false;
    // (free − largest_free)/free (TF BFC GetFragmentation); 0 when nothing is free.
    double external() const
    {
        return freeCached == 0 ? 0.0 : double(freeCached - largestFree) / double(freeCached);
    }
};

struct SegmentEventRecord {
    std::uint64_t event = 0; // the trace event being replayed when the device call happened
    TimeNs time = 0;
    DeviceCall call;
};

struct ReplayResult {
    std::string policy; // the policy's name() with its effective options
    // Why this replay approximates its allocator (approximationOf), empty when it follows the source.
    std::string approximation;
    // Bytes outside the allocator taken from the capacity (ReplayOptions::outsideBytes or the trace's);
    // 0 when none is known or the device is unlimited.
    Bytes outsideBytes = 0;
    DeviceId device = 0;
    std::uint64_t requestEvents = 0; // request-level events of the device fed to the policy
    std::uint64_t allocations = 0; // successful allocate() calls
    std::uint64_t unmatchedFrees = 0; // frees whose block the replay never saw (before the window)
    std::uint64_t zeroSizeRequests = 0; // allocs of 0 bytes (never reach an allocator)
    std::uint64_t initialSegments = 0, initialBlocks = 0; // adopted initial state
    std::uint64_t initialNotAdopted = 0; // initial-state items the policy could not adopt
    bool initialAdopted = false;
    // Memory from before the window (replay/start_state.h): the opening bytes held from the start, and
    // whether peakReserved (and what depends on it) is a lower bound of what the run needed: true when
    // opening bytes were held (the cache around them is unknown) or when memory the trace shows from
    // before its window was left out (InitialStateMode::Empty, or openingAllocated 0 on such a trace).
    Bytes openingAllocated = 0;
    bool reservedIsLowerBound = false;
    PeakAt peakReserved, peakAllocated, peakRequested;
    FragmentationSample atPeak; // at the peak reservation, when the most of it was allocated
    Bytes finalReserved = 0, finalAllocated = 0;
    DeviceCounters deviceCounters; // device calls and reserved as the device counted them
    std::uint64_t ooms = 0;
    std::vector<FailedRequest> failures; // in order; with OnOom::Stop at most one
    std::vector<FailureDetail> failureDetails; // for failures[k], k < kDetailedFailures (a before-window failure too)
    std::uint64_t allocRetries = 0; // PyTorch num_alloc_retries: cudaMalloc retried after freeing the cache
    std::vector<StreamMemory> finalStreams; // reserved and free per stream at the end
    bool stopped = false; // OnOom::Stop ended the replay early
    bool stoppedAtPeak = false; // ReplayOptions::stopAtPeakReserved ended the replay early
    std::vector<TimelinePoint> timeline;
    std::vector<SegmentEventRecord> segmentEvents; // every simulated device call, in order (if recorded)
    std::vector<std::pair<std::uint64_t, Address>> allocAddresses; // (alloc event, simulated address)
    std::uint64_t emptyCacheDirectives = 0; // fidelity: recorded release bursts replayed as empty_cache()
    std::uint64_t emptyCacheCalls = 0; // recorded empty_cache events replayed
    std::uint64_t emptyCacheDropped = 0; // recorded empty_cache events left out (Drop, or a merged pool's)
    std::uint64_t emptyCacheAdded = 0; // calls ReplayOptions::addEmptyCache added
    // Reserved per pool (now = at the end, and the peak of each), by pool: only for a policy that keeps
    // pools apart replaying a trace with private pools (and not mergePools).
    std::vector<PoolMemory> pools;
    bool poolsMerged = false; // mergePools on a trace that has private pools
    std::optional<PolicyState> finalState;
    // With keepFinalState: the trace allocations live at the end (index into Trace::allocations(), the
    // simulated address of its block in finalState), by allocation index.
    std::vector<std::pair<std::uint32_t, Address>> liveAllocations;
    // Compaction (a `compaction:INNER` policy; zero otherwise): passes run, blocks whose address changed
    // and their requested bytes, and the inner policy's peak reserved when replayed alone.
    std::uint64_t compactions = 0;
    std::uint64_t blocksMoved = 0;
    Bytes bytesMoved = 0;
    std::optional<Bytes> peakReservedWithoutCompaction;
    // peakReservedWithoutCompaction − peakReserved (negative when compacting cost memory); 0 without.
    std::int64_t compactionSaving() const
    {
        return peakReservedWithoutCompaction
            ? std::int64_t(*peakReservedWithoutCompaction) - std::int64_t(peakReserved.bytes)
            : 0;
    }
    std::uint64_t deviceCalls() const { return deviceCounters.deviceCalls(); }
};

// The device a replay uses by default: the first non-CPU device with alloc events, else the first
// device with any; nullopt for a trace without memory events.
std::optional<DeviceId> defaultReplayDevice(const Trace& trace);
// The same over the memory events of a source (one pass).
std::optional<DeviceId> defaultReplayDevice(const MemoryEventSource& source);

// True if `name` matches `pattern`, where `*` matches any run of characters and `?` any one (the
// compaction policy's annotation pattern).
bool globMatch(std::string_view pattern, std::string_view name);

// The outside-allocator bytes a replay of `device` takes from the capacity: `given` when set, else the
// trace's figure (core/outside_memory.h), else 0.
Bytes outsideBytesFor(const Trace& trace, DeviceId device, std::optional<Bytes> given);
// The same over a source (a pass where the figure needs the events, outsideMemoryNeedsEvents).
Bytes outsideBytesFor(const MemoryEventSource& source, DeviceId device, std::optional<Bytes> given);

// Number of leading events of `device` that an importer rebuilt as the state before the window
// (metadata "reconstruction"[i].events_before_trace for the device's ordinal); 0 if none.
std::uint64_t initialStateEventCount(const Trace& trace, DeviceId device);

class Replayer {
public:
    explicit Replayer(ReplayOptions options = {});
    const ReplayOptions& options() const { return m_options; }
    // Throws UsageError for a bad spec (see makePolicy) or a device index out of range, Cancelled when
    // options().cancel becomes true.
    ReplayResult run(const Trace& trace, const PolicySpec& spec) const;
    // The same replay over the memory events of a source, chunk by chunk (docs/streaming.md "Replay"): a
    // first pass for what the replay must know ahead (the default device, which frees have a later
    // free_completed, the recorded segment addresses of a fidelity replay, the frees without an alloc),
    // then a pass per warm-up and one measured; the pairing is a ChunkPairing. Memory: the live blocks
    // (the pairing's record and the simulated address of each), the policy's state, two bits per
    // allocation where the trace has free_completed events, and what the result holds (a timeline,
    // segment events or alloc addresses only where asked; `optimal`'s plan, one record per request).
    // Whole-trace run(trace, spec) is this over the trace's events as one chunk. Not thread-safe over one
    // source (one pass at a time).
    ReplayResult run(const MemoryEventSource& source, const PolicySpec& spec) const;

private:
    ReplayOptions m_options;
};

} // namespace gpumem::replay
