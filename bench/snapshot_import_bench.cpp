// Times the PyTorch snapshot importer on one file: the whole import (map the file, unpickle, rebuild
// the pre-window state, build the Trace) and the unpickling alone. Prints one JSON object on stdout.
// bench/snapshot_vs_pickle.py runs this next to Python's pickle.load on the same files and reports
// the ratio; run that script rather than this program.
//
// usage: snapshot_import_bench <snapshot.pickle|.json> [iterations (default 20)] [--phases]
//
// --phases adds "phases_best_cpu_us": the best CPU time of each phase of the import after parsing,
// taken from the importer's progress callbacks (so nothing is compiled into the library for it):
// "segments" (readSegments, up to progress 0.2), "entries" (settings and trace entries, to 0.4), per
// device "backward" (the backward walk), "pre_window" (the rebuilt state and its events) and
// "forward" (the replay through the SegmentBlockMap and the events), "metadata" (segments_at_dump and
// annotations, to 1.0), "build" (TraceBuilder::build), "free_trace" and "free_document".
#include "bench/bench_clock.h"
#include "importers/snapshot_importer.h"
#include "core/trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {
double threadCpuMs() { return gpumem::bench::threadCpuSeconds() * 1e3; }

// Sorted per-iteration times: CPU time of this thread (user + system, so page faults count), which
// other processes on a busy machine disturb far less than wall time; and wall time.
struct Times {
    std::vector<double> cpu, wall;
};
template <typename F> Times timeMs(int iterations, F&& f)
{
    Times t;
    for (int i = 0; i < iterations; ++i) {
        auto start = std::chrono::steady_clock::now();
        double cpu = threadCpuMs();
        f();
        t.cpu.push_back(threadCpuMs() - cpu);
        t.wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(t.cpu.begin(), t.cpu.end());
    std::sort(t.wall.begin(), t.wall.end());
    return t;
}
// Best CPU time (µs) per phase of the import after parsing, over `iterations` runs.
nlohmann::json phaseTimes(const std::string& path, int iterations)
{
    std::vector<std::string> names;
    std::map<std::string, double> best;
    for (int it = 0; it < iterations; ++it) {
        auto doc = std::make_unique<gpumem::PickleDocument>(gpumem::readSnapshotDocument(path));
        std::vector<std::pair<double, double>> marks; // (fraction, cpu ms)
        gpumem::LoadOptions options;
        options.progress = [&](double f) {
            marks.emplace_back(f, threadCpuMs());
            return true;
        };
        double start = threadCpuMs();
        auto trace = std::make_unique<gpumem::Trace>(gpumem::importPytorchSnapshot(*doc, options));
        double built = threadCpuMs();
        trace.reset();
        double freedTrace = threadCpuMs();
        doc.reset();
        double freedDoc = threadCpuMs();
        // Fractions: 0.2 segments, 0.4 entries, then per device three marks in (0.4, 0.8], 1.0 metadata.
        std::vector<std::pair<std::string, double>> phases;
        double last = start;
        int deviceMark = 0;
        for (auto [f, t] : marks) {
            std::string name;
            if (f <= 0.2)
                name = "segments";
            else if (f <= 0.4)
                name = "entries";
            else if (f < 1.0) {
                static const char* kDevicePhases[] = { "backward", "pre_window", "forward" };
                name = kDevicePhases[deviceMark++ % 3];
            } else
                name = "metadata";
            phases.emplace_back(name, t - last);
            last = t;
        }
        phases.emplace_back("build", built - last);
        phases.emplace_back("free_trace", freedTrace - built);
        phases.emplace_back("free_document", freedDoc - freedTrace);
        std::map<std::string, double> sum; // devices add up
        for (auto& [name, ms] : phases) {
            if (!sum.count(name) && std::find(names.begin(), names.end(), name) == names.end())
                names.push_back(name);
            sum[name] += ms;
        }
        for (auto& [name, ms] : sum)
            best[name] = best.count(name) ? std::min(best[name], ms) : ms;
    }
    nlohmann::json out = nlohmann::json::object();
    for (const auto& name : names)
        out[name] = best[name] * 1000.0;
    return out;
}
} // namespace

int main(int argc, char** argv)
{
    if (argc < 2) {
        std::cerr << "usage: snapshot_import_bench <snapshot> [iterations] [--phases]\n";
        return 2;
    }

    bool phases = false;
    std::vector<std::string> positional;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--phases")
            phases = true;
        else
            positional.push_back(argv[i]);
    }
    const int iterations = positional.size() > 1 ? std::max(1, std::stoi(positional[1])) : 20;
    const std::string path = positional.empty() ? std::string() : positional[0];
    try {
        std::size_t events = 0;
        auto import = timeMs(iterations, [&] { events = gpumem::importPytorchSnapshot(path).memory().count(); });
        auto parse = timeMs(iterations, [&] { (void)gpumem::readSnapshotDocument(path); });
        // The import and the alloc → free pairing every analysis starts with (Trace::allocations(), done on
        // first use, not by the import).
        auto importPair = timeMs(iterations, [&] { (void)gpumem::importPytorchSnapshot(path).allocations().size(); });
        nlohmann::json out = {
            { "file", path },
            { "iterations", iterations },
            { "events", events },
            { "import_best_cpu_ms", import.cpu.front() },
            { "import_median_cpu_ms", import.cpu[import.cpu.size() / 2] },
            { "import_best_wall_ms", import.wall.front() },
            { "parse_best_cpu_ms", parse.cpu.front() },
            { "parse_best_wall_ms", parse.wall.front() },
            { "import_pair_best_cpu_ms", importPair.cpu.front() },
            { "import_pair_best_wall_ms", importPair.wall.front() },
        };
        if (phases)
            out["phases_best_cpu_us"] = phaseTimes(path, iterations);
        std::cout << out.dump() << "\n";
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
