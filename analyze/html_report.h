#pragma once
// `gpumem report`: one self-contained HTML file (inline CSS and SVG, no script, no network
// resources) for CI artifacts and bug reports: per trace, memory and fragmentation over time (drawn
// from Timeline::buckets), the summary figures, the peak breakdown, steps and leaks; then the policy
// comparison when policy rows are given. Stateless; thread-safe.
#include "analyze/analysis.h"

#include <iosfwd>
#include <span>

namespace gpumem::analyze {

struct JobView;

// One what-if result for the policy comparison section. The replay layer fills these (one per
// trace × policy); the report only prints them, so it does not depend on how they were computed.
struct PolicyRow {
    std::string trace;  // the trace label
    std::string policy; // the PolicySpec string, e.g. "pytorch:expandable_segments:True"
    Bytes peakReserved = 0;
    Bytes peakAllocated = 0;
    std::uint64_t deviceCalls = 0;    // cudaMalloc + cudaFree (+ map/unmap)
    std::uint64_t failedRequests = 0; // simulated OOMs
    std::optional<double> overheadVsLowerBound; // peak reserved / the lower bound (max live requested bytes)
    std::string note;
    bool reservedIsLowerBound = false; // shown "≥" (replay::ReplayResult::reservedIsLowerBound)
    bool recorded = false; // the run's own peak reserved (analyze::recordedReserved), not a policy
    std::size_t rank = 0; // analyze::rankReplays among the trace's policies, 1 = best; 0 = none (recorded)
};

struct HtmlReportInput {
    std::string label;
    const Trace* trace = nullptr;       // not owned; must outlive the call (a streamed trace: its skeleton)
    const Analysis* analysis = nullptr; // not owned
    // The time charts' buckets, for an analysis without a timeline (a .gmt analysed in passes,
    // analyze/bounded_analysis.h, with a ChartRequest of `buckets` over [first event, reportChartEnd]); null:
    // drawn from analysis->timeline. Not owned.
    const ChartBuckets* charts = nullptr;
};

// The end of the time axis the report's charts span from the trace's first memory event `start` to its last,
// `end` (past both, so the last event lies inside the last column).
TimeNs reportChartEnd(TimeNs start, TimeNs end);

struct HtmlOptions {
    std::string title = "gpumem report";
    std::size_t buckets = 600; // columns of the time charts
    std::size_t top = 10;      // rows per breakdown table
    // Shown in the policy section when `policies` is empty (e.g. why no replay ran).
    std::string policyNote = "No policies were given (gpumem report --policy SPEC …).";
    // One sentence per trace left out of the policy comparison, shown under it (e.g. a trace with memory
    // counters only, which has nothing to replay).
    std::vector<std::string> policySkipped;
    // gpumem explain's verdict per input (analyze::verdictFor), shown first in its section; "" or absent = none.
    std::vector<std::string> verdicts;
    // Sentences shown under the policy comparison (the start every row shares, why the recorded row
    // differs; comparison.h).
    std::vector<std::string> policyNotes;
    // The traces are the ranks of one job: their job view (analyze/job_view.h) opens the report. Not owned.
    const JobView* jobView = nullptr;
};

void writeHtmlReport(std::span<const HtmlReportInput> inputs, std::span<const PolicyRow> policies, const HtmlOptions& options, std::ostream& out);

// &, <, >, " and ' escaped for HTML text and attribute values, after the controls and bidi overrides
// textForTerminal escapes (core/message_quote.h): a browser reorders text at U+202E as a terminal does.
std::string htmlEscape(std::string_view text);

} // namespace gpumem::analyze
