// Benchmark: `gpumem analyze` work (Timeline, steps, leaks, category inference, breakdowns at the
// allocated and reserved peaks with all five groupings, and the text report) on a synthetic
// 10-million-event training trace, against the baseline of importing the same trace from .gmt.
// The figure to read is analyze/import (how many imports one analysis costs).
//   bench_analyze [EVENTS] [DIR]    (default 10000000 events, DIR = /tmp)
// Run it on one core: taskset -c 0 build/rel/bench/bench_analyze
#include "analyze/analysis_report.h"
#include "core/gmt_format.h"
#include "bench/synthetic_training_trace.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

using namespace gpumem;


int main(int argc, char** argv)
{
    const std::size_t target = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
    const std::filesystem::path dir = argc > 2 ? argv[2] : "/tmp";
    const auto gmt = (dir / "bench_analyze.gmt").string();
    {
        Trace built = bench::buildTrainingTrace(target);
        writeGmt(built, gmt);
    }
    bench::Clock c0;
    Trace trace = readGmt(gmt);
    trace.allocations(); // pairing is part of importing
    const auto importS = bench::seconds(c0);

    bench::Clock c1;
    auto analysis = analyze::analyzeTrace(trace);
    const auto analyzeS = bench::seconds(c1);
    bench::Clock c2;
    std::ostringstream text;
    analyze::writeAnalysisText(trace, analysis, gmt, {}, text);
    const auto writeS = bench::seconds(c2);

    std::printf("events              %zu (%zu allocations, %zu steps)\n", trace.memory().count(), trace.allocations().size(),
        analysis.steps.steps.size());
    std::printf("                    cpu s    wall s\n");
    std::printf("import (.gmt+pair)  %7.3f  %7.3f\n", importS.second, importS.first);
    std::printf("analyze             %7.3f  %7.3f  (timeline, steps, leaks, inference, %zu breakdowns x 5 groupings)\n",
        analyzeS.second, analyzeS.first, analysis.breakdowns.size());
    std::printf("text report         %7.3f  %7.3f\n", writeS.second, writeS.first);
    std::printf("analyze+report / import (cpu) = %.2f\n", (analyzeS.second + writeS.second) / importS.second);
    if (!std::getenv("GPUMEM_BENCH_KEEP"))
        std::filesystem::remove(gmt);
    return 0;
}
