#pragma once
// The processes a gpumem command spreads its independent items over (per-rank trace summaries,
// what-if replays): the MPI processes of an `mpirun`/`srun` job, or this one process and its threads.
// One call, mapGather(), runs work(i) for every item once, somewhere, and hands the small byte strings
// it returns to rank 0 (or to every process) in item order; the caller decodes them the same way in
// both cases, so a command's output does not depend on how many processes or threads ran it
// (docs/mpi.md; tests/mpi/).
//
// Ownership and threads: processGroup() is one object per process, set up by MpiSession in main()
// before any command runs. mapGather() is collective: every process of the group must call it, in the
// same order, with the same count and options (gpumem's commands do: they parse the same arguments).
// It must be called from the thread that created the MpiSession; work(i) runs on worker threads and
// must not call MPI. Without MPI (GPUMEM_BUILD_MPI=OFF, or not launched by an MPI launcher) the group
// is this process alone and mapGather() only uses threads.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gpumem::mpi {

// Which process runs item i of `count` on a group of `size` processes (both deterministic, so a rerun
// splits the items the same way).
enum class Distribution {
    RoundRobin, // item i on process i mod size (mixes small and big items across processes)
    Block, // items [count·r/size, count·(r+1)/size) on process r (neighbours together)
};

// Where mapGather() leaves the results.
enum class GatherTo {
    Root, // rank 0 gets every result; the other processes get an empty vector
    All, // every process gets every result (when the next step depends on them, e.g. fit's rounds)
};

struct MapOptions {
    Distribution distribution = Distribution::RoundRobin;
    GatherTo to = GatherTo::Root;
    unsigned jobs = 0; // threads per process for its items; 0 = ProcessGroup::defaultJobs()
};

// What the environment says about the launcher, read without calling MPI. An MPI launcher sets
// OMPI_COMM_WORLD_SIZE/RANK (Open MPI's mpirun), PMIX_RANK (PMIx: Open MPI ≥ 4, `srun --mpi=pmix`) or
// PMI_SIZE/PMI_RANK (`srun --mpi=pmi2`, MPICH's hydra).
struct LaunchEnvironment {
    bool launched = false; // one of the variables above is set
    std::string variable; // the first of them that is set, for messages
    int size = 0; // the job's process count where the environment says it (0 = not said)
    int localSize = 0; // processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE), 0 = not said
    // The tasks of a Slurm job step (SLURM_STEP_NUM_TASKS; 0 = not under srun): srun without an MPI
    // plugin (--mpi=none) starts that many copies without any of the variables above.
    int slurmTasks = 0;
};
LaunchEnvironment readLaunchEnvironment();

// Whether this gpumem was built with MPI (GPUMEM_BUILD_MPI=ON).
bool builtWithMpi();

class ProcessGroup {
public:
    // This process alone, with threads.
    ProcessGroup() = default;

    int rank() const { return m_rank; }
    int size() const { return m_size; }
    bool isRoot() const { return m_rank == 0; }
    bool usesMpi() const { return m_usesMpi; }
    // Threads per process when MapOptions::jobs is 0: the hardware threads divided by the processes
    // that share this node (the launcher's local size), at least 1.
    unsigned defaultJobs() const;
    // The process that runs item i of count (0 ≤ i < count).
    int ownerOf(std::size_t item, std::size_t count, Distribution distribution) const;

    // Runs work(i) for every i in [0, count) exactly once, on the process ownerOf(i) and there on up to
    // options.jobs threads, and returns the results in item order (on rank 0, or on every process with
    // GatherTo::All; elsewhere an empty vector). Results are opaque bytes; keep them small (a summary,
    // not a trace): rank 0 holds all of them, and one process's share must stay below 2 GiB (MPI's int
    // counts), else gpumem::Error.
    // Errors: when work(i) throws for some items, every process throws, after the gather, the error of
    // the lowest such i (the same on every process and for every process count): a UsageError as
    // UsageError, another gpumem::Error as Error (message kept; IoError and FormatError become Error),
    // std::bad_alloc as itself, anything else as std::runtime_error. No process hangs: the failure
    // travels with the results. lastFailureWasShared() then says so to main().
    std::vector<std::string> mapGather(
        std::size_t count, const std::function<std::string(std::size_t)>& work, const MapOptions& options = {});

    // Whether the last exception mapGather() threw was raised on every process alike (so main() can
    // let rank 0 report it and every process exit with its code, instead of aborting the job).
    bool lastFailureWasShared() const { return m_sharedFailure; }

private:
    friend class MpiSession;
    int m_rank = 0;
    int m_size = 1;
    bool m_usesMpi = false;
    int m_localSize = 1;
    bool m_sharedFailure = false;
};

// The process's group (threads only until an MpiSession joins the MPI job).
ProcessGroup& processGroup();

// Joins the MPI job for the lifetime of the object when the process was started by an MPI launcher
// (readLaunchEnvironment().launched): MPI_Init_thread (funneled: only this thread calls MPI) and
// MPI_Finalize at destruction; otherwise does nothing and the group stays threads-only. One per
// process, made in main() before any command runs.
// Throws gpumem::Error when launched as one of several processes by a launcher but built without MPI,
// or as one of several srun tasks without an MPI plugin (each process would otherwise run the whole
// command and print it again).
class MpiSession {
public:
    MpiSession(int& argc, char**& argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    bool active() const { return m_active; }
    // Rank 0's exit code, on every process (collective; without MPI the code itself). mpirun and srun
    // then report the same code as a run without them.
    int agreeExitCode(int code);
    // Ends every process of the job with `code` (MPI_Abort): for a failure on one process that the
    // others cannot know about, which would otherwise leave them waiting in mapGather(). Without MPI,
    // std::exit(code).
    [[noreturn]] void abort(int code);

private:
    bool m_active = false;
};

} // namespace gpumem::mpi
