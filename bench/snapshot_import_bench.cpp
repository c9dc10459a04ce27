// Times the PyTorch snapshot importer on one file: the whole import (map the file, unpickle, rebuild
// the pre-window state, build the Trace) and the unpickling alone. Prints one JSON object on stdout.
// bench/snapshot_vs_pickle.py runs this next to Python's pickle.load on the same files and reports
// the ratio; run that script rather than this program.
//
// usage: snapshot_import_bench <snapshot.pickle|.json> [iterations (default 20)]
#include "core/importers/snapshot_importer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

namespace {
double threadCpuMs()
{
    timespec ts {};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

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
} // namespace

int main(int argc, char** argv)
{
    if (argc < 2) {
        std::cerr << "usage: snapshot_import_bench <snapshot> [iterations]\n";
        return 2;
    }
    const std::string path = argv[1];
    const int iterations = argc > 2 ? std::max(1, std::stoi(argv[2])) : 20;
    try {
        std::size_t events = 0;
        auto import = timeMs(iterations, [&] { events = gpumem::importPytorchSnapshot(path).memory().count(); });
        auto parse = timeMs(iterations, [&] { (void)gpumem::readSnapshotDocument(path); });
        nlohmann::json out = {
            { "file", path },
            { "iterations", iterations },
            { "events", events },
            { "import_best_cpu_ms", import.cpu.front() },
            { "import_median_cpu_ms", import.cpu[import.cpu.size() / 2] },
            { "import_best_wall_ms", import.wall.front() },
            { "parse_best_cpu_ms", parse.cpu.front() },
            { "parse_best_wall_ms", parse.wall.front() },
        };
        std::cout << out.dump() << "\n";
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
