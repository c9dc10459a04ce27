#pragma once
// `gpumem replay|sweep|fit` over the rank traces of a job (several TRACE arguments, or a DIR): each
// rank's trace is imported and replayed by one process of mpi::processGroup() (an MPI process under
// mpirun/srun, else this one, on threads), which returns the small per-rank summaries of
// analyze/job_whatif.h; rank 0 builds the job table from them (docs/mpi.md). One item per rank (replay
// and sweep: per rank and slice of the settings when there are fewer ranks than processes), so a trace is
// imported once per item and a process holds at most --jobs traces at once.
#include "cli/command.h"
#include "cli/whatif_options.h"
#include "replay/capacity_fit.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace gpumem::cli {

// Whether the arguments are a job (more than one trace, or a directory), not one trace. Their trace
// files: analyze::rankTracePaths (job_view.h), as `gpumem ranks` takes them.
bool isJobArguments(const std::vector<std::string>& arguments);

// What a what-if verb parsed, for the job path.
struct JobWhatIf {
    std::vector<std::string> paths; // one trace per rank, in the order given (analyze::rankTracePaths)
    std::vector<replay::PolicySpec> specs; // the settings (replay's policies, sweep's expanded grid, fit's)
    replay::ReplayOptions options; // replay and sweep: capacity, onOom (device and start per rank)
    replay::FitOptions fit; // fit: step, maxCapacity (device per rank)
    replay::StartState start = replay::StartState::Recorded;
    Gates gates;
    std::string format = "text";
    std::size_t width = 100; // readTableWidth
    unsigned jobs = 0; // threads per process (--jobs); 0 = mpi::processGroup().defaultJobs()
};

// The fields every verb fills alike: the expanded paths, --start, the table width and --jobs (0 when
// absent). The verb adds `options` (replay, sweep) or `fit`.
JobWhatIf readJobWhatIf(const po::variables_map& vm, const std::vector<std::string>& arguments,
    const std::vector<replay::PolicySpec>& specs, const Gates& gates, const std::string& format);

// The verbs' job paths; `vm` for --device, which each rank's trace resolves (default: each rank's
// busiest device). The table on `out` (rank 0 alone writes it: main() gives the other processes a
// discarding stream); the exit code as the single-trace verb's (kExitGate for a gate, kExitNoFit for a
// policy no capacity fits). Errors (a trace that does not load, a --device a trace lacks): the lowest
// failing rank's, on every process.
int runJobReplay(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err);
int runJobSweep(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err);
int runJobFit(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err);

} // namespace gpumem::cli
