#pragma once
// The job view of many ranks (`gpumem ranks`, docs/ranks.md): one distributed training job writes one
// trace per rank; the job view answers which rank peaks, which one runs out first and why one holds more
// than the others.
//
// It is split in two so the per-rank work can run anywhere (threads here, MPI processes in gpumem::mpi):
//   1. summarizeRank() turns one rank's Trace into a RankSummary: a small, self-contained, serialisable
//      value (toJson/fromJson round-trip it losslessly) holding every figure the table needs, including the
//      top rows of the module / site / category breakdowns at the rank's allocated peak;
//   2. buildJobView() builds the whole view from the summaries alone: ranks sorted by number, steps aligned,
//      imbalance and outliers, and the difference of the worst rank (and of every other outlier) against the
//      median rank, by the diff machinery (analyze/trace_diff.h) on the kept breakdown rows.
// Why the breakdown rows travel in the summary instead of the worst and median traces being loaded again
// at the end: the view then needs no file access after the summaries are made (an MPI rank 0 may not see
// every file), the difference of *every* outlier costs nothing more, and memory stays bounded by the
// summaries. The price is the top-K cut (RankSummaryOptions::topRows): a row beyond one rank's top K
// counts as 0 there; the view says when a difference compared cut tables (RankDifference::complete).
//
// All functions are deterministic: the same traces give the same bytes of output whichever threads or
// processes computed the summaries. Values are immutable once returned; thread-safe.
#include "analyze/analysis.h"
#include "analyze/trace_diff.h"
#include "core/importer.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::analyze {

struct RankSummaryOptions {
    // Rows kept per grouping (module self bytes, site, category) of the breakdown at the allocated peak.
    std::size_t topRows = 32;
    std::optional<DeviceId> device; // default: the busiest device of each trace (analyzeTrace's rule)
};

// One grouping's top rows at the rank's allocated peak, by bytes descending (then key). Module rows hold
// self bytes (the diff machinery compares self bytes, analyze/trace_diff.h), the others total bytes.
struct RankGroupTable {
    std::vector<GroupRow> rows;
    Bytes otherBytes = 0;        // bytes of the rows beyond the top K
    std::uint64_t otherRows = 0; // how many rows were cut
    friend bool operator==(const RankGroupTable& a, const RankGroupTable& b);
};
inline constexpr std::array<GroupBy, 3> kRankGroups { GroupBy::Module, GroupBy::Site, GroupBy::Category };

struct RankStep {
    std::int64_t number = 0;    // ProfilerStep#N's N, else the 0-based index (analyze/steps.h)
    TimeNs start = 0, end = 0;  // relative to the rank's origin (ns)
    Bytes peakAllocated = 0;
    friend bool operator==(const RankStep&, const RankStep&) = default;
};

struct RankOom {
    TimeNs time = 0;                 // relative to the rank's origin (ns)
    std::optional<std::int64_t> step; // the number of the step holding it
    Bytes request = 0;               // the failed request (the oom event's size)
    friend bool operator==(const RankOom&, const RankOom&) = default;
};

struct RankLeakSite {
    std::string label;
    Bytes bytes = 0;
    friend bool operator==(const RankLeakSite&, const RankLeakSite&) = default;
};

struct RankSummary {
    std::string path;        // as given
    std::size_t index = 0;   // position in the list of traces given
    // The rank number the trace names (metadata RANK / LOCAL_RANK as the tracer records them, Kineto's
    // distributedInfo.rank, a "rank<N>" in the file name); nullopt when it names none.
    std::optional<std::int64_t> namedRank;
    std::string rankSource;  // "RANK", "LOCAL_RANK", "distributedInfo", "file name", "" (none)
    std::string format;      // metadata source_format
    std::string device;      // "cuda:1"
    TimeNs origin = 0;       // the trace start (traceSpan), absolute ns; every time here is relative to it
    TimeNs duration = 0;
    bool empty = true;       // no memory events on the device
    // Peak allocated: the allocator's own recorded counter where the trace has one (it counts blocks
    // allocated before a profiler window), else the paired blocks' peak. `peakIsBound`: the trace window
    // misses blocks allocated before it (unmatched frees, no counter): the true peak is at least this.
    Bytes peakAllocated = 0;
    bool peakIsBound = false;
    TimeNs peakTime = 0;
    std::optional<std::int64_t> peakStep;
    std::optional<Bytes> peakReserved;
    std::string reservedSource;
    Bytes lowerBound = 0;    // FragmentationSummary::lowerBound: no allocator can do with less
    std::uint64_t ooms = 0;  // recorded oom events on the device
    std::optional<RankOom> firstOom;
    // The fragmentation headline (FragmentationSummary::Headline): reserved beyond live at its moment.
    std::string headlineMoment; // "" when there is no reserved series
    TimeNs headlineTime = 0;
    Bytes headlineReserved = 0, headlineLive = 0;
    std::string stepSource;  // toString(StepSource)
    std::string stepDetail;
    std::vector<RankStep> steps;
    bool leaking = false;    // detectLeaks (analyze/steps.h)
    double leakGrowthPerStep = 0; // bytes
    std::vector<RankLeakSite> leakSites; // the top 3
    std::array<RankGroupTable, kRankGroups.size()> groups; // at the allocated peak, in kRankGroups order
    Bytes groupsLive = 0; // the live bytes the groups split (the paired blocks at the allocated peak)
    friend bool operator==(const RankSummary&, const RankSummary&) = default;
};

// Summarises one rank: analyzeTrace plus the figures above. `path` and `index` are recorded as given
// (the rank number falls back on `index` in buildJobView when a trace names none). Throws what
// analyzeTrace throws (UsageError for a device the trace lacks).
RankSummary summarizeRank(const Trace& trace, const std::string& path, std::size_t index, const RankSummaryOptions& options = {});

// Lossless: fromJson(toJson(s)) == s. fromJson throws FormatError naming the field for a malformed value.
nlohmann::json toJson(const RankSummary& s);
RankSummary rankSummaryFromJson(const nlohmann::json& j);

// The rank number a trace names and where from (metadata environment.RANK, then environment.LOCAL_RANK,
// then a top-level "rank", then kineto.distributed.rank, then "rank<N>"/"rank-N"/"rank_N" in the file
// name); nullopt when none.
std::optional<std::pair<std::int64_t, std::string>> namedRankOf(const Trace& trace, std::string_view path);

// Loads and summarises every trace on `jobs` threads (0 = the hardware's), at most `jobs` traces in memory
// at once. Results in the order of `paths`. A trace that fails to load throws the error of the first such
// trace in `paths` order, naming its file (deterministic whichever thread met it first).
std::vector<RankSummary> summarizeRanks(
    const std::vector<std::string>& paths, const LoadOptions& load, const RankSummaryOptions& options, std::size_t jobs);

// The traces a `ranks` argument list names: a file stands for itself, a folder for every regular file in it
// whose format loadTrace recognises (in natural order of names: rank2 before rank10). Throws IoError for a
// path that does not exist, Error for a folder without a trace (the input's fault: exit 1) and UsageError for an empty list.
std::vector<std::string> rankTracePaths(const std::vector<std::string>& arguments);

// Outliers: a rank whose peak allocated differs from the median by more than
// max(kOutlierShare × median, 3 × 1.4826 × MAD) (the robust z-score rule of Iglewicz and Hoaglin, with a
// floor so that a job of near-identical ranks does not flag sub-percent noise).
inline constexpr double kOutlierShare = 0.05;

struct RankImbalance {
    std::size_t maxRank = 0, medianRank = 0, minRank = 0; // positions in JobView::ranks
    Bytes max = 0, median = 0, min = 0;
    double ratio = 0; // max / median (1 when the median is 0 and so is the max)
    Bytes threshold = 0; // the outlier distance from the median
    std::vector<std::size_t> outliers; // positions in JobView::ranks, by rank number
};

// One step number across the ranks (aligned by ProfilerStep# number when every rank has them, else by
// step index).
struct JobStep {
    std::int64_t number = 0;
    std::vector<std::optional<Bytes>> peakAllocated; // per rank (JobView::ranks order); nullopt: no such step
    std::size_t ranksWithStep = 0;
    Bytes min = 0, median = 0, max = 0;
    std::size_t maxRank = 0; // position in JobView::ranks
};

// A rank against the median rank: the rows of the kept breakdowns whose bytes differ, by the diff machinery
// (diffGroupRows), per grouping then by |delta| descending.
struct RankDifference {
    std::size_t rank = 0, against = 0; // positions in JobView::ranks
    Bytes bytes = 0, againstBytes = 0; // their live bytes at the allocated peak (RankSummary::groupsLive)
    std::vector<DiffRow> rows;
    bool complete = true; // false when a table compared was cut at topRows (rows beyond count as 0)
};

struct JobView {
    std::vector<RankSummary> ranks; // by rank number
    std::vector<std::int64_t> rankNumbers; // per rank
    bool ranksFromOrder = false; // some trace names no rank: every rank is its position in the list given
    std::optional<RankImbalance> allocated; // over peak allocated (absent without ranks)
    std::optional<RankImbalance> reserved;  // over peak reserved, when every rank has it
    std::string stepAlignment; // "ProfilerStep# number", "step index", "" (no rank has steps)
    std::vector<JobStep> steps;
    std::vector<RankDifference> differences; // the worst rank first, then the other outliers above the median
    std::optional<std::size_t> firstOom;     // position of the rank whose first OOM comes earliest after its start
};

// Throws UsageError for no summaries and Error naming both files when two traces name the same rank.
JobView buildJobView(std::vector<RankSummary> summaries);

// The text report (within 100 columns): a first sentence with the answer, the table, the imbalance, the steps
// aligned, the differences and the leaks. `top` rows per grouping in the differences of the worst rank.
void writeJobViewText(const JobView& view, std::size_t top, std::ostream& out);
nlohmann::json jobViewToJson(const JobView& view);
// One row per rank. Header: rank,path,device,peak_allocated_bytes,peak_is_bound,peak_step,peak_reserved_bytes,
// lower_bound_bytes,ooms,first_oom_time_ns,first_oom_step,first_oom_request_bytes,headline_moment,
// headline_reserved_bytes,headline_live_bytes,steps,step_source,leaking,leak_growth_per_step_bytes,outlier
void writeJobViewCsv(const JobView& view, std::ostream& out);
// The pieces the text and the HTML report share: the rank table (cells as the text prints them, the legend
// under it), the step table (legend: how the steps are aligned; "" rows when no rank has steps; `keep` > 0 keeps
// the first and last keep/2 steps), the imbalance lines, and where the rank numbers come from.
struct JobViewTable {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    std::string legend;
};
JobViewTable rankTable(const JobView& view);
JobViewTable stepTable(const JobView& view, std::size_t keep);
std::vector<std::string> imbalanceLines(const JobView& view);
std::string rankNumbersNote(const JobView& view);
// One sentence per leaking rank: its growth per step and the site of its surviving blocks (raw labels).
std::vector<std::string> leakLines(const JobView& view);
// The ranks section of `gpumem report` (an <h2> and what follows; analyze/html_report.h calls it).
void writeJobViewHtml(const JobView& view, std::size_t top, std::ostream& out);

// The answer in one sentence (the text report's first line, the HTML section's lead).
std::string jobViewHeadline(const JobView& view);

} // namespace gpumem::analyze
