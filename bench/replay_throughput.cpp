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
// Single-threaded; the best of R runs per policy is reported.
#include "bench/repeated_trace.h"
#include "importers/importer_registry.h"
#include "replay/replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
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
        "%-40s %12s %10s %12s %14s %10s\n", "policy", "events", "best s", "Mevents/s", "peak reserved", "vs direct");
    double directRate = 0;
    for (const auto& spec : specs) {
        double best = 1e300;
        ReplayResult res;
        for (int r = 0; r < repeats; ++r) {
            auto s = std::chrono::steady_clock::now();
            res = Replayer(options).run(trace, parsePolicySpec(spec));
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
        }
        double rate = double(res.requestEvents) / best;
        if (spec == "direct")
            directRate = rate;
        std::printf("%-40s %12llu %10.3f %12.2f %14llu %10s\n", spec.c_str(),
            static_cast<unsigned long long>(res.requestEvents), best, rate / 1e6,
            static_cast<unsigned long long>(res.peakReserved.bytes),
            directRate > 0 ? (std::to_string(rate / directRate).substr(0, 5) + "x").c_str() : "-");
    }
    return 0;
}
