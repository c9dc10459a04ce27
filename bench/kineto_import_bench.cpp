// Times gpumem's Kineto importer on real files: the whole load (read, gunzip, parse, build) and its
// gunzip part alone, best of N runs on one thread; "load_pair_…" adds the pairing of alloc → free that
// every analysis starts with (Trace::allocations(), done on first use, not by the load). Prints one JSON object per file on stdout
// for bench/kineto_vs_python.py, which runs Python's json.load on the same files and prints ratios.
// Each figure comes as wall time ("…_s") and as CPU time of this thread ("…_cpu_s": user + system,
// so page faults count), which other load on the machine disturbs far less. The import runs on
// one thread (gpumem starts none), so the thread's CPU time is all of its work.
//
//   bench_kineto_import [--repeat N] file.json.gz...
#include "bench/bench_clock.h"
#include "core/file_io.h"
#include "importers/importer_registry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

namespace {
gpumem::bench::BestTime best(int repeat, const auto& f)
{
    gpumem::bench::BestTime b;
    for (int i = 0; i < repeat; ++i)
        b.time(f);
    return b;
}
} // namespace

int main(int argc, char** argv)
{
    int repeat = 5;
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--repeat" && i + 1 < argc)
            repeat = std::max(1, std::atoi(argv[++i]));
        else
            files.push_back(a);
    }
    if (files.empty()) {
        std::cerr << "usage: bench_kineto_import [--repeat N] file.json.gz...\n";
        return 2;
    }
    try {
        for (const auto& path : files) {
            std::size_t jsonBytes = gpumem::readFileMaybeGzip(path).size();
            std::size_t events = 0;
            const auto gunzip = best(repeat, [&] { jsonBytes = gpumem::readFileMaybeGzip(path).size(); });
            const auto load = best(repeat, [&] { events = gpumem::loadTrace(path).memory().count(); });
            const auto loadPair = best(repeat, [&] { (void)gpumem::loadTrace(path).allocations().size(); });
            nlohmann::json out = { { "file", path }, { "compressed_bytes", std::filesystem::file_size(path) },
                { "json_bytes", jsonBytes }, { "memory_events", events }, { "read_gunzip_s", gunzip.wall },
                { "load_s", load.wall }, { "load_MBps", double(jsonBytes) / 1e6 / load.wall },
                { "parse_build_MBps", double(jsonBytes) / 1e6 / (load.wall - gunzip.wall) },
                { "read_gunzip_cpu_s", gunzip.cpu }, { "load_cpu_s", load.cpu },
                { "load_cpu_MBps", double(jsonBytes) / 1e6 / load.cpu }, { "load_pair_s", loadPair.wall },
                { "load_pair_cpu_s", loadPair.cpu } };
            std::cout << out.dump() << std::endl;
        }
    } catch (const std::exception& e) {
        std::cerr << "bench_kineto_import: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
