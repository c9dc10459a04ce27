#pragma once
// What-if for a whole job (`gpumem replay|sweep|fit TRACE TRACE…` or a DIR: one trace per rank of a
// distributed run): a setting (policy spec, capacity) fits the job only if every rank runs without a
// failed request, and the tables name the worst rank per setting. The per-rank results here are small
// serialisable summaries (a few dozen bytes each, CBOR), what mpi::ProcessGroup::mapGather() carries
// from the process that replayed a rank to rank 0; the job tables are built from them alone, so they
// are the same however the replays were spread (docs/mpi.md). Pure functions; thread-safe.
#include "core/types.h"
#include "replay/capacity_fit.h"
#include "replay/replayer.h"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::analyze {

// One rank's replay with one setting: the figures the job tables show.
struct RankReplay {
    std::string policy; // the policy's name with its effective options (ReplayResult::policy)
    Bytes peakReserved = 0;
    Bytes peakAllocated = 0;
    std::uint64_t deviceCalls = 0;
    std::uint64_t ooms = 0; // failed requests
    std::optional<TimeNs> firstOom; // ns after the rank's trace start
    Bytes firstOomSize = 0; // the request that failed first
    bool reservedIsLowerBound = false; // ReplayResult::reservedIsLowerBound ("≥")
};
// `start` is the trace start the first OOM is counted from.
RankReplay rankReplayOf(const replay::ReplayResult& result, TimeNs start);

// One rank's `fit` for one policy.
struct RankFit {
    std::string policy;
    bool fits = false; // some capacity up to --max-capacity fits this rank
    Bytes capacity = 0; // its smallest fitting capacity (0 when !fits or when it needs no memory)
    Bytes lowerBound = 0; // its live peak
    bool lowerBoundMark = false; // FitResult::lowerBoundMark
    bool nonMonotone = false; // FitResult::nonMonotone was found for this rank
};
RankFit rankFitOf(const replay::FitResult& fit);

// Serialisation for the gather (CBOR via nlohmann::json; lossless): one rank's results with the rank
// number its trace names (namedRankOf, job_view.h; nullopt for none). fromBytes throws gpumem::Error on
// bytes that are not such a list.
template <class Row> struct RankRows {
    std::optional<std::int64_t> namedRank;
    std::vector<Row> rows;
};
std::string toBytes(const RankRows<RankReplay>& replays);
RankRows<RankReplay> rankReplaysFromBytes(std::string_view bytes);
std::string toBytes(const RankRows<RankFit>& fits);
RankRows<RankFit> rankFitsFromBytes(std::string_view bytes);

// The ranks' labels, "rank N": the rank numbers the traces name when every trace names one, else (as
// `gpumem ranks` does) each trace's position in the list given.
std::vector<std::string> jobRankNames(const std::vector<std::optional<std::int64_t>>& namedRanks);

// One setting over every rank of the job.
struct JobSetting {
    std::string spec; // as written (or expanded from a sweep grid)
    std::vector<RankReplay> ranks; // in the job's rank order
};

// The job's verdict on one setting [choice]: it fits when no rank has a failed request. The worst rank
// is the one with the most failed requests, then the highest peak reserved, then the lowest position.
struct JobVerdict {
    bool fits = true;
    std::size_t ranksWithOom = 0;
    std::size_t worst = 0; // position in JobSetting::ranks
    Bytes worstPeakReserved = 0;
    Bytes medianPeakReserved = 0; // the lower median of the ranks' peak reserved
    std::uint64_t ooms = 0; // over every rank
    std::uint64_t deviceCalls = 0; // over every rank
    bool lowerBound = false; // some rank's peak reserved is a lower bound
};
JobVerdict judgeSetting(const JobSetting& setting);

// Sweep order over the job, best first [choice]: settings that fit every rank first, then fewer ranks
// with a failed request, fewer failed requests, lower worst peak reserved, fewer device calls over the
// job, ties in input order.
std::vector<std::size_t> jobSweepOrder(const std::vector<JobSetting>& settings);

// One policy's fit over every rank: the smallest capacity that fits all of them is the largest of the
// ranks' own (each rank fits there when OOM is monotone in capacity; the verb replays every rank at
// it to confirm: `failsAtJobCapacity`).
struct JobFit {
    std::string spec;
    std::vector<RankFit> ranks; // in the job's rank order
    std::vector<std::size_t> failsAtJobCapacity; // positions of ranks that had a failed request there
};
struct JobFitVerdict {
    bool fits = false; // every rank fits somewhere up to --max-capacity
    Bytes capacity = 0; // the largest of the ranks' capacities (when fits)
    std::size_t worst = 0; // the rank that needs the most (the lowest position among equals); when !fits,
                           // the first rank that fits nowhere
    Bytes lowerBound = 0; // the largest of the ranks' live peaks
    bool lowerBoundMark = false;
};
JobFitVerdict judgeFit(const JobFit& fit);

// Writers, text (within `width` columns, 0 = unlimited), json or csv; throw UsageError for another
// format. `rankNames` are the ranks' labels in the job's order (rank ids or file names).
// replay: one row per setting (fits, ranks with OOM, worst rank, its peak reserved, the median);
// JSON and CSV also give every rank's figures.
void writeJobReplayTable(const std::vector<std::string>& rankNames, const std::vector<JobSetting>& settings,
    std::string_view format, std::ostream& out, std::size_t width = 100);
// sweep: the same rows in jobSweepOrder, the best marked '*'.
void writeJobSweepTable(const std::vector<std::string>& rankNames, const std::vector<JobSetting>& settings,
    std::string_view format, std::ostream& out, std::size_t width = 100);
// fit: one row per policy: the smallest capacity that fits every rank, the rank that needs it, the
// median of the ranks' own capacities.
void writeJobFitTable(const std::vector<std::string>& rankNames, const std::vector<JobFit>& fits,
    std::string_view format, std::ostream& out, std::size_t width = 100);

} // namespace gpumem::analyze
