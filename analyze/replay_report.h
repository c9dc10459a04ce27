#pragma once
// Writers for replay results: the comparison table `gpumem replay` prints (one row per policy: peak
// reserved, peak allocated, waste at the peak, device calls, OOMs, first OOM time) as text, JSON or
// CSV, and the fidelity report of `gpumem replay --fidelity`. Deterministic (golden tests compare
// them byte for byte). Times are shown relative to `start` (the trace's first event).
#include "analyze/comparison.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <nlohmann/json_fwd.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::analyze {

// The memory a profiler trace does not contain, `before` = replay::openingAllocated(trace, device):
// "3.82 GiB was already allocated when the trace began and is not in it", or nullopt for 0.
// The CLI verbs and the viewer each add what it means for their numbers.
std::optional<std::string> memoryBeforeTheTraceNote(Bytes before);

// The answer of a replay, fit or sweep whose device has no allocation requests, only segment events
// (the caching allocator's cudaMalloc/cuMemMap as `gpumem record` or Nsight see them): there is nothing to
// replay, said with what the run reserved (context.recorded, when known) and where the requests are
// (a PyTorch memory snapshot of the same run), without the final period. Review finding (2026-12-04): such a trace was answered
// "pytorch peaks at 0 B reserved" / "needs no memory" while the run had reserved 32 MiB.
std::string noRequestsAnswer(const ComparisonContext& context);

// The one sentence a replay table opens with: the best row (rankReplays' `order`) with its peak reserved and
// OOMs, the next row, the device (capacity or unlimited), and what the run itself reserved and failed.
// "" without results; noRequestsAnswer() where no result had a request to replay. Offsets are from
// `start` (ns).
std::string replayAnswer(const std::vector<replay::ReplayResult>& results, const std::vector<std::size_t>& order,
    TimeNs start, const ComparisonContext& context);
// Under a replay table of a trace that records OOMs: how many, the first's time and request, and, where no row
// fails, why (an unlimited device: the --capacity that replays at the device's size; a capacity given: the
// memory outside the allocator). nullopt when the trace records no OOM.
std::optional<std::string> recordedOomNote(
    const std::vector<replay::ReplayResult>& results, TimeNs start, const ComparisonContext& context);

// format: "text", "json" or "csv" (anything else throws UsageError listing them). Waste at peak is
// PyTorch-style 1 − allocated/reserved at the fullest instant of the peak reservation (allocators.md §5.4).
// With a context (comparison.h): text opens with the answer (replayAnswer), then the start state every row shares, ranks the rows
// (rankReplays) with a `rank` column, gives reserved / lower bound as the overhead ("vs bound"), marks a
// reserved figure that is a lower bound with "≥", adds a `recorded` row (the run's own peak reserved)
// (with the run's own OOMs when it recorded any, and recordedOomNote) and a sentence on why it differs, and keeps
// within context.width columns (a policy cut to its column keeps every option's value, shortenSpec, and is
// written out whole under the table; one unit per column). JSON and CSV carry the same as fields (start, lower_bound,
// reserved_vs_bound, is_lower_bound / reserved_is_lower_bound, rank; a "recorded" row).
// Text and JSON also give the first failed request of each policy (time, size, stream, reserved and
// device free then), and for a compaction:INNER policy the passes, blocks and bytes moved, and the peak
// reserved of INNER alone with the saving (JSON: compactions, blocks_moved, bytes_moved,
// peak_reserved_without_compaction, compaction_saving — present only for compaction policies).
void writeReplayTable(const std::vector<replay::ReplayResult>& results, std::string_view format, TimeNs start,
    std::ostream& out, const ComparisonContext& context = {});
nlohmann::json replayResultToJson(const replay::ReplayResult& result, TimeNs start);
// [{stream, reserved, free}] per stream (ReplayResult::finalStreams, FailureDetail::streams).
nlohmann::json streamsToJson(const std::vector<replay::StreamMemory>& streams);
// "1.20 GiB cached free in 5 blocks, largest 300 MiB (external fragmentation 75.0 %)" — the free memory
// left after a failed request, one phrase (replay's text and explain).
std::string failureFreeText(const replay::FailureDetail& detail);

// What adding empty_cache calls did, as a replay proved it: "empty_cache after each step: peak reserved
// −1.00 GiB, 12 more cudaMalloc calls" (`with` replayed with ReplayOptions::addEmptyCache = schedule,
// `without` the same replay without it). "+x" where the peak grew, "fewer" where calls dropped.
std::string emptyCacheEffectText(
    const replay::ReplayResult& without, const replay::ReplayResult& with, const replay::EmptyCacheSchedule& schedule);
// "after each step", "after each annotation GLOB", "every N request events".
std::string emptyCacheScheduleText(const replay::EmptyCacheSchedule& schedule);

// format: "text" or "json" (csv is refused: the report is not a table).
void writeFidelityReport(const replay::FidelityReport& report, std::string_view label, std::string_view format,
    TimeNs start, std::ostream& out);
nlohmann::json fidelityToJson(const replay::FidelityReport& report, std::string_view label, TimeNs start);

} // namespace gpumem::analyze
