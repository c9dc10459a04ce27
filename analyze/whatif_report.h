#pragma once
// Writers for the what-if verbs beside `gpumem replay`'s table (replay_report.h): the sweep table
// (`gpumem sweep`: one row per configuration, best first, the best row marked), the fit
// table (`gpumem fit`: the smallest capacity without OOM per policy) and the colocated report
// (`gpumem replay --colocate`). Text, JSON or CSV; deterministic (golden tests compare them).
// Times are shown relative to `start` where the results carry trace times.
#include "analyze/comparison.h"
#include "replay/capacity_fit.h"
#include "replay/colocated_replay.h"
#include "replay/replayer.h"

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::analyze {

struct SweepRow {
    std::string spec; // the configuration as expanded from the grid
    replay::ReplayResult result;
};

// The order rows are shown in, best first: fewer failed requests (none first), then lower peak reserved,
// then fewer device calls, ties in input order; bestSweepRow() is the first.
std::vector<std::size_t> sweepOrder(const std::vector<SweepRow>& rows);
// The best row [choice]: the lowest peak reserved among rows without a failed request (ties: fewer
// device calls, then input order); when every row failed, the fewest failures, then the lowest peak.
// Returns rows.size() for no rows.
std::size_t bestSweepRow(const std::vector<SweepRow>& rows);

// format: "text", "json" or "csv"; throws UsageError otherwise.
// With a context (comparison.h): the start sentence, "≥" on lower-bound figures, reserved / lower bound
// ("vs bound"), a `recorded` row, within context.width columns; JSON/CSV: the same as fields.
void writeSweepTable(const std::vector<SweepRow>& rows, std::string_view format, TimeNs start, std::ostream& out,
    const ComparisonContext& context = {});
// fit: the capacity a probe holds the opening bytes in is marked "≥" (and lower_bound in JSON/CSV) when
// FitResult::lowerBoundMark; with a context, a `recorded` row (the run's own peak reserved: a GPU of
// less did hold the run only if the recorded cache was not needed).
void writeFitTable(const std::vector<replay::FitResult>& fits, std::string_view format, std::ostream& out,
    const ComparisonContext& context = {});
void writeColocatedReport(const replay::ColocatedResult& result, std::string_view format, std::ostream& out);

// The text tables of these writers (and of the job tables, job_whatif.h): a header row and data rows,
// cells made fit for a terminal, columns two blanks apart, the first `leftColumns` left-aligned, the
// rest right-aligned; within `width` display columns (0 = unlimited) column `shrink` gives up what the
// others leave, its cells shortened in the middle (shortenMiddle), or, with `specs` (a column of policy specs, as
// in a sweep), with every option's value kept (shortenSpec).
void writeTextTable(std::vector<std::vector<std::string>> rows, std::size_t leftColumns, std::ostream& out,
    std::size_t width = 0, std::size_t shrink = std::string::npos, bool specs = false);

} // namespace gpumem::analyze
