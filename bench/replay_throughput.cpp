// Replay throughput: a ~10-million-event trace made of real iterations repeated, replayed with every
// policy in the same run; events/s for each and the ratio to `direct` (the no-cache baseline, whose
// work per event is one hash-map update and one simulated cudaMalloc/cudaFree).
//
//   replay_throughput [TRACE] [--events N] [--repeat R] [--policy SPEC]...
//
// TRACE: any trace gpumem reads (a PyTorch snapshot, a profiler trace, .gmt/.jsonl); its replay
// device's request-level events form one "iteration": the first copy keeps everything except frees of
// blocks allocated before the window, later copies keep only the allocations freed inside the window,
// so that every copy is self-consistent. Without TRACE a synthetic transformer-like training step is
// used (weights, forward activations freed in reverse in backward, temporaries, gradients).
// Single-threaded; reported: the best thread CPU time of R rounds that alternate the policies.
#include "bench/repeated_trace.h"
#include "importers/importer_registry.h"
#include "replay/replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace gpumem;
using namespace gpumem::replay;

using namespace gpumem::bench;

int main(int argc, char** argv)
{
    std::string path;
    std::uint64_t target = 10'000'000;
    int repeats = 3;
    std::vector<std::string> specs;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--events" && i + 1 < argc)
            target = std::stoull(argv[++i]);
        else if (a == "--repeat" && i + 1 < argc)
            repeats = std::stoi(argv[++i]);
        else if (a == "--policy" && i + 1 < argc)
            specs.push_back(argv[++i]);
        else
            path = a;
    }
    if (specs.empty())
        specs = { "direct", "pytorch", "pytorch:expandable_segments:True", "pytorch:max_split_size_mb:64",
            "pytorch@2.0", "ideal" };

    TimeNs span = 0;
    std::vector<Request> firstOnly;
    std::vector<Request> iter;
    std::string source = "synthetic transformer-like step";
    if (!path.empty()) {
        Trace t = loadTrace(path);
        iter = iterationFromTrace(t, span, firstOnly);
        source = path;
    } else {
        iter = syntheticIteration(span, firstOnly);
    }
    auto t0 = std::chrono::steady_clock::now();
    Trace trace = repeat(iter, firstOnly, span, target);
    trace.allocations(); // pairing is part of loading, not of a replay
    double buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("source: %s\niteration: %zu request events; trace: %zu events (built and paired in %.2f s)\n",
        source.c_str(), iter.size(), trace.memory().count(), buildSeconds);

    ReplayOptions options;
    options.initialState = InitialStateMode::Ignore;
    std::vector<std::pair<std::string, double>> rates;
    std::printf(
        "%-40s %12s %10s %12s %14s %10s\n", "policy", "events", "best cpu s", "Mevents/s", "peak reserved", "vs direct");
    // Thread CPU time (the replay is single-threaded), and the rounds alternate the policies, so that
    // load coming and going on a shared machine falls on every policy alike (issue 22: wall time, one
    // policy after another, moved the figures by 2x and the ratios by 0.2 between quiet and busy runs).
    auto cpuSeconds = [] {
        timespec ts {};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    };
    std::vector<double> best(specs.size(), 1e300);
    std::vector<ReplayResult> results(specs.size());
    for (int r = 0; r < repeats; ++r)
        for (std::size_t k = 0; k < specs.size(); ++k) {
            const double c0 = cpuSeconds();
            results[k] = Replayer(options).run(trace, parsePolicySpec(specs[k]));
            best[k] = std::min(best[k], cpuSeconds() - c0);
        }
    double directRate = 0;
    for (std::size_t k = 0; k < specs.size(); ++k) {
        const ReplayResult& res = results[k];
        const std::string& spec = specs[k];
        double rate = double(res.requestEvents) / best[k];
        if (spec == "direct")
            directRate = rate;
        std::printf("%-40s %12llu %10.3f %12.2f %14llu %10s\n", spec.c_str(),
            static_cast<unsigned long long>(res.requestEvents), best[k], rate / 1e6,
            static_cast<unsigned long long>(res.peakReserved.bytes),
            directRate > 0 ? (std::to_string(rate / directRate).substr(0, 5) + "x").c_str() : "-");
    }
    return 0;
}
