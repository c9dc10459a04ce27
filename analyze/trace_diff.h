#pragma once
// Compares two analyses (gpumem diff A B): their peaks and the breakdowns at one instant, matching
// rows by module path, call stack (frame names, files and lines), category, size class and stream —
// never by address, which differ between runs. Module rows compare self bytes, so a change in one
// module is reported there and not again in its ancestors. Immutable result; thread-safe.
#include "analyze/analysis.h"
#include "core/byte_total.h"

#include <nlohmann/json_fwd.hpp>

#include <iosfwd>

namespace gpumem::analyze {

struct DiffRow {
    GroupBy group = GroupBy::Module;
    std::string key, label;
    Bytes before = 0, after = 0; // 0 where the row is absent on that side
    // after − before, clamped to int64 (core/byte_total.h clampedDelta); the text prints the exact change.
    std::int64_t delta() const { return clampedDelta(before, after); }
};

struct TraceDiff {
    std::string instant; // "peak allocated", …
    Bytes liveBefore = 0, liveAfter = 0;
    Bytes peakAllocatedBefore = 0, peakAllocatedAfter = 0;
    std::optional<Bytes> peakReservedBefore, peakReservedAfter;
    std::size_t stepsBefore = 0, stepsAfter = 0;
    // Rows whose bytes differ, per group in GroupBy order, then by |delta| descending.
    std::vector<DiffRow> rows;
    std::vector<DiffRow> changed(GroupBy g) const;
};

// The rows of one grouping whose bytes differ between two breakdowns' rows of it, matched by key (module
// rows by self bytes, the others by total bytes), by |delta| descending (stable: ties in key order). A row
// absent on one side counts 0 there. What diffAnalyses and the job view (analyze/job_view.h) compare.
std::vector<DiffRow> diffGroupRows(GroupBy g, std::span<const GroupRow> before, std::span<const GroupRow> after);

// Uses the first breakdown of each analysis (they should be taken at the same kind of instant).
// Throws UsageError when either has no breakdown (a trace without memory events).
TraceDiff diffAnalyses(const Analysis& before, const Analysis& after);

// The answer in one sentence, what the text opens with: "B peaks 8.00 MiB (33.3 %) lower than A: 16.00 MiB
// allocated against 24.00 MiB; the largest change at peak allocated is category temporary, -8.00 MiB." The
// peak is reserved where both traces record it (then allocated in brackets), else allocated; the largest
// change is the first changed module row (not "(no scope)"), else the first category row.
std::string diffAnswer(const TraceDiff& d);
void writeDiffText(const TraceDiff& d, std::string_view labelBefore, std::string_view labelAfter, std::size_t top, std::ostream& out);
nlohmann::json diffToJson(const TraceDiff& d, std::string_view labelBefore, std::string_view labelAfter);
// Header: group,key,label,before_bytes,after_bytes,delta_bytes
void writeDiffCsv(const TraceDiff& d, std::ostream& out);

} // namespace gpumem::analyze
