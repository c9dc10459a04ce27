#pragma once
// The state a what-if comparison starts from (`--start recorded|empty`, docs/whatif.md "Where a
// replay starts"). Every row of one comparison (replay, fit, sweep, report, the viewer's what-if page)
// is given the same start, so that the rows differ only by their policy:
// - recorded (the default): the memory the trace says was live before its window is live from the
//   start for every policy. A snapshot's rebuilt live blocks (metadata "reconstruction") are allocated
//   by each policy as its own requests (InitialStateMode::Allocate: no row inherits the recorded
//   cache layout); a profiler trace's opening "Total Allocated" (replay::openingAllocated) is held
//   as opaque blocks: the blocks the window frees without an alloc, each until its free, and the rest
//   as one block that stays live. How the allocator had laid out its cache around those bytes is not
//   known, so a replay that holds them reports a reserved figure that is a lower bound
//   (ReplayResult::reservedIsLowerBound).
// - empty: nothing before the window (InitialStateMode::Empty, no opening bytes); a trace that had
//   memory before it then undercounts, and its reserved figures are lower bounds too.
// Pure functions; thread-safe.
#include "replay/replayer.h"

#include <string_view>

namespace gpumem::replay {

enum class StartState : std::uint8_t { Recorded = 0, Empty = 1 };

// "recorded" / "empty".
std::string_view toString(StartState start);
// Throws UsageError naming the choices for anything but "recorded" or "empty".
StartState parseStartState(std::string_view text);

// Sets options.initialState and options.openingAllocated for `start` on `trace` (the device is
// options.device, else defaultReplayDevice(trace)); the other options are left alone.
void applyStartState(ReplayOptions& options, const Trace& trace, StartState start);
// The same over a source (the device is options.device, else defaultReplayDevice(source)).
void applyStartState(ReplayOptions& options, const MemoryEventSource& source, StartState start);

// What the trace holds from before its window on `device`, for headers and notes: the opening bytes a
// profiler trace does not itemise (replay::openingAllocated) and the events a snapshot importer rebuilt
// (initialStateEventCount).
struct MemoryBeforeWindow {
    Bytes openingAllocated = 0;
    std::uint64_t rebuiltEvents = 0;
    bool any() const { return openingAllocated > 0 || rebuiltEvents > 0; }
};
MemoryBeforeWindow memoryBeforeWindow(const Trace& trace, DeviceId device);
MemoryBeforeWindow memoryBeforeWindow(const MemoryEventSource& source, DeviceId device);

// The index of the first event of `device` after the rebuilt ones (initialStateEventCount): the
// device's events before it are the rebuilt state. The trace's event count when none follows them.
std::size_t firstWindowEvent(const Trace& trace, DeviceId device);

// One sentence for the header of a comparison: "start: recorded — every row starts with the 874.94 MiB
// allocated before the trace (held as opaque blocks; the cache reserved around them is not known, so
// reserved is a lower bound, ≥)", "start: recorded — every row first allocates the 118 blocks live
// before the snapshot's window", "start: empty …", or "start: empty (the trace holds nothing from
// before its window)". No final full stop.
std::string startStateSentence(StartState start, const MemoryBeforeWindow& before);

} // namespace gpumem::replay
