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
#include <iostream>
#include <string>
#include <vector>

namespace {
template <typename F> std::vector<double> timeMs(int iterations, F&& f)
{
    std::vector<double> ms;
    for (int i = 0; i < iterations; ++i) {
        auto start = std::chrono::steady_clock::now();
        f();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms;
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
            { "import_best_ms", import.front() },
            { "import_median_ms", import[import.size() / 2] },
            { "parse_best_ms", parse.front() },
            { "parse_median_ms", parse[parse.size() / 2] },
        };
        std::cout << out.dump() << "\n";
    } catch (const std::exception& e) {
        std::cerr << e.what() << "\n";
        return 1;
    }
    return 0;
}
