#pragma once
// Clocks for the benchmarks in bench/, and the best-of-N time of a piece of work on them. CPU time
// (user + system, so page faults count) is what other processes on a shared machine disturb least;
// wall time is kept beside it. Header-only; no state, thread-safe.
#include <algorithm>
#include <chrono>
#include <ctime>

namespace gpumem::bench {

// CPU seconds of the calling thread: the figure for work that runs on one thread (the importers).
inline double threadCpuSeconds()
{
    timespec ts {};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
// CPU seconds of the whole process: the figure for work that may use more than one thread.
inline double processCpuSeconds()
{
    timespec ts {};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
inline double wallSeconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The smallest CPU and wall seconds over the runs given to time() (1e300 before the first).
struct BestTime {
    double cpu = 1e300, wall = 1e300;
    template <typename F> void time(F&& f, double (*cpuClock)() = threadCpuSeconds)
    {
        const double c0 = cpuClock(), w0 = wallSeconds();
        f();
        cpu = std::min(cpu, cpuClock() - c0);
        wall = std::min(wall, wallSeconds() - w0);
    }
};

} // namespace gpumem::bench
