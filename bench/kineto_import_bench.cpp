// Times gpumem's Kineto importer on real files: the whole load (read, gunzip, parse, build, pairing)
// and its gunzip part alone, best of N runs on one thread. Prints one JSON object per file on stdout
// for bench/kineto_vs_python.py, which runs Python's json.load on the same files and prints ratios.
//
//   bench_kineto_import [--repeat N] file.json.gz...
#include "core/file_io.h"
#include "core/importer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

namespace {
double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

template <typename F> double best(int repeat, F&& f)
{
    double b = 1e30;
    for (int i = 0; i < repeat; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        b = std::min(b, seconds(std::chrono::steady_clock::now() - t0));
    }
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
            const double gunzip = best(repeat, [&] { jsonBytes = gpumem::readFileMaybeGzip(path).size(); });
            const double load = best(repeat, [&] { events = gpumem::loadTrace(path).memory().count(); });
            nlohmann::json out = { { "file", path }, { "compressed_bytes", std::filesystem::file_size(path) },
                { "json_bytes", jsonBytes }, { "memory_events", events }, { "read_gunzip_s", gunzip },
                { "load_s", load }, { "load_MBps", double(jsonBytes) / 1e6 / load },
                { "parse_build_MBps", double(jsonBytes) / 1e6 / (load - gunzip) } };
            std::cout << out.dump() << std::endl;
        }
    } catch (const std::exception& e) {
        std::cerr << "bench_kineto_import: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
