#pragma once
// What every what-if comparison shares (replay, fit, sweep, report, the viewer's what-if page;
// docs/whatif.md "One comparison"): the state every row starts from (replay/start_state.h), the lower
// bound every row's overhead is measured against, the `recorded` row (the peak reserved the run itself
// recorded), the one ranking of policies, and the text helpers that keep the tables within 100 columns
// (a policy or site shortened in the middle, keeping its end, where the file:line is; one unit per column).
// Pure functions over an immutable Trace; thread-safe.
#include "core/trace.h"
#include "replay/replayer.h"
#include "replay/start_state.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::analyze {

// The peak reserved the trace itself recorded on a device: from its segment events (a snapshot, a
// .gmt of the tracer; source "segment events") or else from a recorded counter whose name holds
// "reserved" (PyTorch profiler's "Total Reserved"; source: the counter's name). nullopt without either.
struct RecordedReserved {
    Bytes bytes = 0;
    TimeNs time = 0; // trace time it was first reached
    std::string source;
    std::optional<Bytes> allocatedPeak; // the recorded "allocated" counter's peak, when there is one
};
std::optional<RecordedReserved> recordedReserved(const Trace& trace, DeviceId device);
// The same from the summary of a source (analyze::summarize over its chunks).
std::optional<RecordedReserved> recordedReserved(const MemoryEventSource& source, DeviceId device);
// recordedReserved(…)->bytes alone without the summary's pass (it pairs every event): from `segmentPeak`, the
// device's peak of the running sum of segment_alloc/segment_map minus segment_free/segment_unmap bytes (ByteTotal's
// saturating sum, raised at each add; 0 without segment events), else the trace's counters named "…reserved…" on
// the device (`tables`: a trace or a source's skeleton). diagnose() feeds it from its facts pass
// (tests/analyze/streaming_diagnosis_test.cpp compares it with recordedReserved on every trace and device).
std::optional<Bytes> recordedReservedBytes(const Trace& tables, DeviceId device, Bytes segmentPeak);

struct ComparisonContext {
    replay::StartState start = replay::StartState::Recorded;
    replay::MemoryBeforeWindow before;
    // replay::livePeak with the same start (opening bytes in, or the rebuilt blocks left out): the
    // bytes no policy holds in less; 0 = not known (no overhead column).
    Bytes lowerBound = 0;
    std::optional<RecordedReserved> recorded;
    // The run's own OOMs on the device (its oom events): how many, and the first's request (bytes) and time
    // (ns, absolute); 0 = none recorded. `deviceTotal`: the device's recorded total memory, 0 = not recorded.
    // The replay table names them in its recorded row and says why its rows may not fail (an unlimited device).
    std::uint64_t recordedOoms = 0;
    Bytes recordedOomRequest = 0;
    TimeNs recordedFirstOom = 0;
    Bytes deviceTotal = 0;
    Bytes capacity = 0; // the replays' device capacity (ReplayOptions::capacity), 0 = unlimited
    std::size_t width = 100; // columns a text table may use; 0 = unlimited (--wide)
    // The trace's pools by index, as reports name them: "default", "graph (1,0)", "mem_pool (0,1)".
    std::vector<std::string> poolNames;
};
// "default" for pool 0, else "KIND (a,b)" with PyTorch's MempoolId_t pair.
std::string poolName(const Trace& trace, PoolId pool);
// The context of a comparison of `trace` on `device` from `start`.
ComparisonContext comparisonContext(const Trace& trace, DeviceId device, replay::StartState start);
// The same over a source, in passes over its chunks (a streamed replay of a .gmt).
ComparisonContext comparisonContext(const MemoryEventSource& source, DeviceId device, replay::StartState start);

// The one ranking of policies [choice], used by every front end: fewer failed requests first (a replay
// that dropped requests under --on-oom skip did less work, so its reserved figure is not comparable),
// then lower peak reserved, then fewer device calls, ties in input order. Returns indexes, best first.
std::vector<std::size_t> rankReplays(const std::vector<const replay::ReplayResult*>& results);

// peak reserved / lower bound ("1.018 x"), the one overhead figure; "-" when the bound is 0.
std::string overBoundText(Bytes reserved, Bytes lowerBound);
double overBound(Bytes reserved, Bytes lowerBound);

// "≥ 2.58 GiB" when lowerBound, else formatBytes.
std::string markedBytes(Bytes bytes, bool lowerBound);

// Bytes in a given unit (that of formatBytes(unitOf)), so that a column holds one unit: "0.50 GiB".
std::string bytesInUnitOf(Bytes bytes, Bytes unitOf);

// `text` within `width` display columns: unchanged if it fits, else its start and its end with "…"
// between (the end holds a site's "(file.py:410)" or a policy's last option). width < 5: cut at the end.
std::string shortenMiddle(const std::string& text, std::size_t width);
// A policy spec ("pytorch:max_split_size_mb:64,roundup_power2_divisions:1") within `width` display columns with
// every option's value kept: the option keys are cut short first, the longest first, each to no fewer than 4
// columns and a "…" ("pytorch:max_s…:64,roun…:1"); only if that is not enough, shortenMiddle. The rows of a
// sweep differ in their values, which shortenMiddle cut away (two rows read alike; review finding).
std::string shortenSpec(const std::string& spec, std::size_t width);

// Lines of at most `width` columns (greedy at spaces; a word longer than the width stands alone, or, with
// `longWordsStay`, stays on the line it starts on rather than leaving that line a stub: a long path in an
// error); every line after the first starts with `indent`. Each line ends in '\n'.
std::string wrapText(const std::string& text, std::size_t width, const std::string& indent = "  ", bool longWordsStay = false);

// The sentence under a comparison that has a recorded row: what the recorded figure is and why the
// simulated rows differ from it (the memory from before the window, the cache layout not known).
std::string recordedRowNote(const ComparisonContext& context, Bytes bestSimulatedReserved);

} // namespace gpumem::analyze
