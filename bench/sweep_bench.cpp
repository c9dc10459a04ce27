// `gpumem sweep` speed-up: a 16-configuration grid replayed over a ~1-million-event trace (a real trace's
// iterations repeated, bench/repeated_trace.h) one after another (--jobs 1) and on the thread pool
// (--jobs N, default the hardware threads), in the same program; prints both times and their ratio,
// and the machine's load average before the runs (other work on the machine lowers the ratio).
//
//   sweep_bench [TRACE] [--events N] [--jobs N] [--repeat R] [--grid GRID]
//
// Best of R runs (default 3) for each mode; the runs alternate sequential/parallel so drifting load
// affects both alike. The results of both modes are compared (they must be identical).
#include "bench/repeated_trace.h"
#include "importers/importer_registry.h"
#include "replay/parallel_runs.h"
#include "replay/policy_grid.h"
#include "replay/policy_registry.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/resource.h>

using namespace gpumem;
using namespace gpumem::bench;

int main(int argc, char** argv)
{
    std::string path;
    std::uint64_t target = 1'000'000;
    unsigned jobs = defaultJobs();
    int repeats = 3;
    std::string grid = "pytorch:max_split_size_mb:{64,128,256,512},roundup_power2_divisions:{1,4},"
                       "expandable_segments:{True,False}";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--events" && i + 1 < argc)
            target = std::stoull(argv[++i]);
        else if (a == "--jobs" && i + 1 < argc)
            jobs = unsigned(std::stoul(argv[++i]));
        else if (a == "--repeat" && i + 1 < argc)
            repeats = std::stoi(argv[++i]);
        else if (a == "--grid" && i + 1 < argc)
            grid = argv[++i];
        else
            path = a;
    }
    std::vector<PolicySpec> specs;
    for (const auto& t : expandBraceGrid(grid)) {
        specs.push_back(parsePolicySpec(t));
        validatePolicySpec(specs.back());
    }

    TimeNs span = 0;
    std::vector<Request> firstOnly, iter;
    std::string source = "synthetic transformer-like step";
    if (!path.empty()) {
        iter = iterationFromTrace(loadTrace(path), span, firstOnly);
        source = path;
    } else {
        iter = syntheticIteration(span, firstOnly);
    }
    Trace trace = repeat(iter, firstOnly, span, target);
    trace.allocations(); // pairing is part of loading, not of a replay

    std::string load = "?";
    if (std::ifstream la("/proc/loadavg"); la)
        std::getline(la, load);
    std::printf("source: %s\ntrace: %zu events; grid: %zu configurations; jobs: %u; hardware threads: %u\n"
                "load average before: %s\n",
        source.c_str(), trace.memory().count(), specs.size(), jobs, defaultJobs(), load.c_str());

    ReplayOptions options;
    options.initialState = InitialStateMode::Ignore;
    // Wall seconds of one sweep; `cpu` gets the CPU seconds the process used meanwhile (all threads), which
    // shows how much of the machine the run got: on a loaded machine the wall-time ratio understates.
    auto cpuSeconds = [] {
        rusage u {};
        getrusage(RUSAGE_SELF, &u);
        return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    auto sweep = [&](unsigned threads, std::vector<ReplayResult>& out, double& cpu) {
        out.assign(specs.size(), {});
        const double c0 = cpuSeconds();
        auto s = std::chrono::steady_clock::now();
        parallelFor(specs.size(), threads, [&](std::size_t i) { out[i] = Replayer(options).run(trace, specs[i]); });
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
        cpu = cpuSeconds() - c0;
        return wall;
    };
    double sequential = 1e300, parallel = 1e300, sequentialCpu = 0, parallelCpu = 0;
    std::vector<ReplayResult> one, many;
    for (int r = 0; r < repeats; ++r) {
        double cpu = 0;
        if (double w = sweep(1, one, cpu); w < sequential) {
            sequential = w;
            sequentialCpu = cpu;
        }
        if (double w = sweep(jobs, many, cpu); w < parallel) {
            parallel = w;
            parallelCpu = cpu;
        }
    }
    for (std::size_t i = 0; i < specs.size(); ++i)
        if (one[i].peakReserved.bytes != many[i].peakReserved.bytes || one[i].deviceCalls() != many[i].deviceCalls()) {
            std::fprintf(stderr, "results differ for %s\n", specs[i].text.c_str());
            return 1;
        }
    std::uint64_t events = 0;
    for (const auto& r : one)
        events += r.requestEvents;
    std::printf("%-28s %10s %10s %14s\n", "mode", "best s", "CPU s", "Mevents/s");
    std::printf("%-28s %10.3f %10.3f %14.2f\n", "one after another (jobs 1)", sequential, sequentialCpu,
        double(events) / sequential / 1e6);
    std::printf("%-28s %10.3f %10.3f %14.2f\n", ("parallel (jobs " + std::to_string(jobs) + ")").c_str(), parallel,
        parallelCpu, double(events) / parallel / 1e6);
    std::printf("CPU cores the runs got on average: %.2f (jobs 1), %.2f (jobs %u)\n", sequentialCpu / sequential,
        parallelCpu / parallel, jobs);
    std::printf("speed-up: %.2fx\n", sequential / parallel);
    if (std::ifstream la("/proc/loadavg"); la) {
        std::getline(la, load);
        std::printf("load average after: %s\n", load.c_str());
    }
    return 0;
}
