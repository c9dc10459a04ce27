// Benchmark: the viewer's Memory map on a synthetic training trace (bench/synthetic_training_trace.h;
// default 2 million events, about 10^6 blocks in 64 MiB segments). Baselines from the same run:
//   index build  vs analyzeTrace (both run once per load on TraceSession's worker thread);
//   raster       vs the Timeline page's frame (computeFrame) for the same range and width: what a
//                pan or zoom costs on each page.
//   bench_memory_map [EVENTS]
// Run it on one core: taskset -c 0 build/rel/bench/bench_memory_map
#include "bench/synthetic_training_trace.h"
#include "gui/models/memory_map_model.h"
#include "gui/models/timeline_model.h"

#include <cstdio>
#include <cstdlib>

using namespace gpumem;

int main(int argc, char** argv)
{
    const std::size_t target = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
    gui::LoadedTrace loaded;
    loaded.trace = bench::buildTrainingTrace(target);
    loaded.trace.allocations();
    bench::Clock c0;
    loaded.analysis = analyze::analyzeTrace(loaded.trace);
    const auto analyzeS = bench::seconds(c0);
    bench::Clock c1;
    auto index = gui::buildMemoryMapIndex(loaded.trace, loaded.analysis.device, loaded.analysis.categories);
    const auto indexS = bench::seconds(c1);

    const QSize size(1200, 700);
    const gui::TimeRange full = index.time;
    const gui::TimeRange tenth { full.start + full.length() / 2, full.start + full.length() / 2 + full.length() / 10 };
    const TimeNs instant = loaded.analysis.breakdowns.front().instant.time;
    constexpr int kRepeats = 5;
    auto timeRaster = [&](gui::TimeRange range) {
        bench::Clock c;
        std::size_t check = 0;
        for (int i = 0; i < kRepeats; ++i)
            check += gui::rasterizeMemoryMap(index, range, size, gui::MapColouring::Category, instant).state.blocks;
        const auto s = bench::seconds(c);
        return std::make_pair(s.second / kRepeats, check);
    };
    auto timeTimeline = [&](gui::TimeRange range) {
        bench::Clock c;
        std::size_t check = 0;
        for (int i = 0; i < kRepeats; ++i)
            check += gui::computeFrame(loaded, range, size.width()).lanes.size();
        return std::make_pair(bench::seconds(c).second / kRepeats, check);
    };
    const auto rasterFull = timeRaster(full), rasterTenth = timeRaster(tenth);
    const auto timelineFull = timeTimeline(full), timelineTenth = timeTimeline(tenth);

    std::printf("events %zu, blocks %zu, segments %zu, packed axis %.1f GiB\n", loaded.trace.memory().count(), index.blocks.size(),
        index.segments.size(), double(index.axisBytes) / double(1ull << 30));
    std::printf("                               cpu s\n");
    std::printf("analyzeTrace (baseline)      %7.3f\n", analyzeS.second);
    std::printf("memory map index             %7.3f   index/analyze = %.2f\n", indexS.second, indexS.second / analyzeS.second);
    std::printf("raster 1200x700, whole trace %7.4f   timeline frame %7.4f   raster/timeline = %.2f\n", rasterFull.first,
        timelineFull.first, rasterFull.first / timelineFull.first);
    std::printf("raster 1200x700, 1/10 zoom   %7.4f   timeline frame %7.4f   raster/timeline = %.2f\n", rasterTenth.first,
        timelineTenth.first, rasterTenth.first / timelineTenth.first);
    std::printf("(checks %zu %zu)\n", rasterFull.second + rasterTenth.second, timelineFull.second + timelineTenth.second);
    return 0;
}
