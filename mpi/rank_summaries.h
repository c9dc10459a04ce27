#pragma once
// `gpumem ranks` over the processes of processGroup() (docs/mpi.md): each process imports and summarises
// its share of the rank traces (analyze::summarizeRank), and rank 0 gets every RankSummary, in the order
// of `paths`, through their lossless JSON (as CBOR). Without MPI it runs on threads; either way the
// summaries are the same values, so buildJobView() prints the same bytes. Collective: every process of
// the group calls it with the same arguments. Thread-safety: as ProcessGroup::mapGather().
#include "analyze/job_view.h"
#include "core/importer.h"

#include <string>
#include <vector>

namespace gpumem::mpi {

// Returns the summaries on rank 0 (elsewhere an empty vector). `jobs`: threads per process (0 = the
// group's default: the hardware threads over the processes of the node); each thread holds one trace
// at a time. Errors: the first failing trace's in `paths` order, on every process, naming its file
// (a UsageError stays one: a --device the trace lacks).
std::vector<analyze::RankSummary> summarizeRanks(const std::vector<std::string>& paths, const LoadOptions& load,
    const analyze::RankSummaryOptions& options, unsigned jobs);

} // namespace gpumem::mpi
