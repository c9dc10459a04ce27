#include "mpi/process_group.h"

#include "core/error.h"
#include "replay/parallel_runs.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#ifdef GPUMEM_HAVE_MPI
#include <mpi.h>
#endif

namespace gpumem::mpi {

namespace {
    // How an item ended; the failure kinds keep the exception class main() maps to an exit code.
    enum Status : std::uint8_t { kOk = 0, kError = 1, kUsageError = 2, kOutOfMemory = 3, kOther = 4 };

    struct Outcome {
        Status status = kOk;
        std::string bytes; // the result, or the failure's message
    };

    Outcome runItem(const std::function<std::string(std::size_t)>& work, std::size_t i)
    {
        try {
            return { kOk, work(i) };
        } catch (const UsageError& e) {
            return { kUsageError, e.what() };
        } catch (const Error& e) {
            return { kError, e.what() };
        } catch (const std::bad_alloc&) {
            return { kOutOfMemory, {} };
        } catch (const std::exception& e) {
            return { kOther, e.what() };
        } catch (...) {
            return { kOther, "an exception that is not a std::exception" };
        }
    }

    [[noreturn]] void rethrow(const Outcome& failure)
    {
        switch (failure.status) {
        case kUsageError:
            throw UsageError(failure.bytes);
        case kError:
            throw Error(failure.bytes);
        case kOutOfMemory:
            throw std::bad_alloc();
        default:
            throw std::runtime_error(failure.bytes);
        }
    }

    int envInt(const char* name)
    {
        const char* v = std::getenv(name);
        return v && *v ? std::atoi(v) : 0;
    }

#ifdef GPUMEM_HAVE_MPI
    void putU64(std::string& out, std::uint64_t v)
    {
        char b[8];
        std::memcpy(b, &v, 8);
        out.append(b, 8);
    }

    std::uint64_t getU64(const char*& p, const char* end)
    {
        if (end - p < 8)
            throw Error("mpi: a gathered result is cut short (internal error)");
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        p += 8;
        return v;
    }

    // One process's share: for each of its items, index, status, length, bytes.
    std::string pack(const std::vector<std::size_t>& items, const std::vector<Outcome>& outcomes)
    {
        std::string out;
        for (std::size_t k = 0; k < items.size(); ++k) {
            putU64(out, items[k]);
            out.push_back(char(outcomes[k].status));
            putU64(out, outcomes[k].bytes.size());
            out += outcomes[k].bytes;
        }
        return out;
    }

    void unpack(const char* p, const char* end, std::vector<Outcome>& all)
    {
        while (p < end) {
            const std::uint64_t i = getU64(p, end);
            if (p == end || i >= all.size())
                throw Error("mpi: a gathered result names no item (internal error)");
            const auto status = Status(std::uint8_t(*p++));
            const std::uint64_t n = getU64(p, end);
            if (std::uint64_t(end - p) < n)
                throw Error("mpi: a gathered result is cut short (internal error)");
            all[i] = { status, std::string(p, n) };
            p += n;
        }
    }

    void check(int rc, const char* call)
    {
        if (rc != MPI_SUCCESS)
            throw Error(std::string("mpi: ") + call + " failed (error " + std::to_string(rc) + ")");
    }
#endif
} // namespace

LaunchEnvironment readLaunchEnvironment()
{
    LaunchEnvironment env;
    for (const char* v : { "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK" })
        if (const char* value = std::getenv(v); value && *value) {
            env.launched = true;
            env.variable = v;
            break;
        }
    env.size = envInt("OMPI_COMM_WORLD_SIZE");
    if (env.size == 0)
        env.size = envInt("PMI_SIZE");
    env.slurmTasks = envInt("SLURM_STEP_NUM_TASKS");
    env.localSize = envInt("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (env.localSize == 0)
        env.localSize = envInt("SLURM_NTASKS_PER_NODE");
    return env;
}

bool builtWithMpi()
{
#ifdef GPUMEM_HAVE_MPI
    return true;
#else
    return false;
#endif
}

unsigned ProcessGroup::defaultJobs() const
{
    return std::max(1u, replay::defaultJobs() / unsigned(std::max(1, m_localSize)));
}

int ProcessGroup::ownerOf(std::size_t item, std::size_t count, Distribution distribution) const
{
    const auto size = std::size_t(m_size);
    if (distribution == Distribution::RoundRobin || count == 0)
        return int(item % size);
    // The largest r with ⌊count·r/size⌋ ≤ item: ⌊((item + 1)·size − 1)/count⌋; 128-bit so that the
    // product cannot overflow.
    __extension__ typedef unsigned __int128 Wide; // GCC and Clang have it; -Wpedantic stays quiet
    return int((Wide(item + 1) * size - 1) / count);
}

std::vector<std::string> ProcessGroup::mapGather(
    std::size_t count, const std::function<std::string(std::size_t)>& work, const MapOptions& options)
{
    m_sharedFailure = false;
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < count; ++i)
        if (ownerOf(i, count, options.distribution) == m_rank)
            mine.push_back(i);
    std::vector<Outcome> outcomes(mine.size());
    replay::parallelFor(mine.size(), options.jobs ? options.jobs : defaultJobs(),
        [&](std::size_t k) { outcomes[k] = runItem(work, mine[k]); });

    std::vector<Outcome> all;
    if (!m_usesMpi) {
        all = std::move(outcomes);
    } else {
#ifdef GPUMEM_HAVE_MPI
        const std::string share = pack(mine, outcomes);
        outcomes.clear();
        std::vector<std::uint64_t> sizes(std::size_t(m_size), 0);
        const std::uint64_t mySize = share.size();
        check(MPI_Allgather(&mySize, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
        std::uint64_t total = 0;
        for (auto s : sizes)
            total += s;
        if (total > std::uint64_t(INT_MAX)) {
            m_sharedFailure = true;
            throw Error("mpi: the results of " + std::to_string(count) + " items are " + std::to_string(total)
                + " bytes, more than MPI's 2 GiB per gather; split the job (fewer ranks or configurations per run)");
        }
        std::vector<int> counts(sizes.begin(), sizes.end()), displs(sizes.size(), 0);
        for (std::size_t r = 1; r < counts.size(); ++r)
            displs[r] = displs[r - 1] + counts[r - 1];
        const bool everyone = options.to == GatherTo::All;
        std::string gathered(everyone || m_rank == 0 ? total : 0, '\0');
        if (everyone)
            check(MPI_Allgatherv(share.data(), int(share.size()), MPI_BYTE, gathered.data(), counts.data(),
                      displs.data(), MPI_BYTE, MPI_COMM_WORLD),
                "MPI_Allgatherv");
        else
            check(MPI_Gatherv(share.data(), int(share.size()), MPI_BYTE, gathered.data(), counts.data(),
                      displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD),
                "MPI_Gatherv");
        if (everyone || m_rank == 0) {
            all.resize(count);
            unpack(gathered.data(), gathered.data() + gathered.size(), all);
        }
        if (!everyone) {
            // Rank 0 alone knows which item failed first: it tells the others (status, then message).
            Outcome verdict;
            if (m_rank == 0)
                for (const auto& o : all)
                    if (o.status != kOk) {
                        verdict = o;
                        break;
                    }
            std::uint64_t head[2] = { verdict.status, verdict.bytes.size() };
            check(MPI_Bcast(head, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
            if (head[0] != kOk) {
                verdict.status = Status(head[0]);
                verdict.bytes.resize(head[1]);
                check(MPI_Bcast(verdict.bytes.data(), int(head[1]), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
                m_sharedFailure = true;
                rethrow(verdict);
            }
            if (m_rank != 0)
                return {};
        }
#endif
    }
    std::vector<std::string> results;
    results.reserve(all.size());
    for (auto& o : all) {
        if (o.status != kOk) {
            m_sharedFailure = true;
            rethrow(o);
        }
        results.push_back(std::move(o.bytes));
    }
    return results;
}

ProcessGroup& processGroup()
{
    static ProcessGroup group;
    return group;
}

MpiSession::MpiSession([[maybe_unused]] int& argc, [[maybe_unused]] char**& argv)
{
    const LaunchEnvironment env = readLaunchEnvironment();
    if (!env.launched && env.slurmTasks > 1)
        throw Error("started by srun as one of " + std::to_string(env.slurmTasks)
            + " tasks without an MPI launch (no PMIx or PMI variables): every task would run the whole command; "
              "give srun --mpi=pmix (srun --mpi=list shows the plugins), or run it as one task");
    if (!env.launched)
        return;
#ifdef GPUMEM_HAVE_MPI
    int provided = 0;
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    m_active = true;
    ProcessGroup& g = processGroup();
    MPI_Comm_rank(MPI_COMM_WORLD, &g.m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.m_size);
    g.m_usesMpi = true;
    // The processes on this node share its hardware threads.
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &g.m_localSize);
        MPI_Comm_free(&node);
    }
#else
    if (env.size > 1)
        throw Error("started by an MPI launcher (" + env.variable + " is set) as one of " + std::to_string(env.size)
            + " processes, but this gpumem was built without MPI (GPUMEM_BUILD_MPI=OFF): every process would run the "
              "whole command; run it without mpirun/srun, or rebuild with apt-get install openmpi-bin libopenmpi-dev");
#endif
}

MpiSession::~MpiSession()
{
#ifdef GPUMEM_HAVE_MPI
    if (m_active)
        MPI_Finalize();
#endif
}

int MpiSession::agreeExitCode(int code)
{
#ifdef GPUMEM_HAVE_MPI
    if (m_active)
        MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
    return code;
}

void MpiSession::abort(int code)
{
#ifdef GPUMEM_HAVE_MPI
    if (m_active)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    std::exit(code);
}

} // namespace gpumem::mpi
