// Benchmark: `gpumem analyze` work (Timeline, steps, leaks, category inference, breakdowns at the
// allocated and reserved peaks with all five groupings, and the text report) on a synthetic
// 10-million-event training trace, against the baseline of importing the same trace from .gmt.
// The figure to read is analyze/import (how many imports one analysis costs).
//   bench_analyze [EVENTS] [DIR]    (default 10000000 events, DIR = /tmp)
// Run it on one core: taskset -c 0 build/rel/bench/bench_analyze
#include "analyze/analysis_report.h"
#include "core/gmt_format.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

using namespace gpumem;

namespace {
// CPU seconds of this (single-threaded) process: other jobs on a shared machine do not inflate them.
struct Clock {
    std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
    std::clock_t cpu = std::clock();
};
std::pair<double, double> seconds(const Clock& since)
{
    return { std::chrono::duration<double>(std::chrono::steady_clock::now() - since.wall).count(),
        static_cast<double>(std::clock() - since.cpu) / CLOCKS_PER_SEC };
}

// A transformer-like loop: L layers with attention/mlp module scopes and 8 call sites; parameters in
// setup; per step and layer an activation and an op-local temporary in forward, a gradient and an
// autograd temporary in backward (the activation freed there), gradients freed at the next step's
// start; all blocks placed in 64 MiB segments (segment events recorded) by a bump pointer per step.
Trace buildTrace(std::size_t targetEvents)
{
    constexpr int kLayers = 200;
    constexpr Bytes MiB = 1 << 20;
    TraceBuilder b;
    b.metadata()["source_format"] = "synthetic";
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    const ScopeId model = b.scope(0, "Model", ScopeKind::Module);
    std::vector<ScopeId> attn, mlp;
    for (int l = 0; l < kLayers; ++l) {
        const ScopeId layer = b.scope(model, "Model.layers." + std::to_string(l), ScopeKind::Module);
        attn.push_back(b.scope(layer, "Model.layers." + std::to_string(l) + ".attn", ScopeKind::Module));
        mlp.push_back(b.scope(layer, "Model.layers." + std::to_string(l) + ".mlp", ScopeKind::Module));
    }
    std::vector<SiteId> sites;
    const FrameId loop = b.frame("train_loop", "train.py", 100);
    for (int s = 0; s < 8; ++s) {
        const FrameId f[] = { b.frame("op" + std::to_string(s), "model.py", 10 + s), loop };
        sites.push_back(b.site(f));
    }
    TimeNs t = 1'700'000'000'000'000'000;
    std::size_t events = 0;
    auto ev = [&](EventKind k, Address a, Bytes size, ScopeId scope, SiteId site) {
        MemoryEvent e;
        e.time = t;
        e.kind = k;
        e.device = dev;
        e.stream = stream;
        e.address = a;
        e.size = size;
        e.requestedSize = k == EventKind::Alloc ? size - 256 : 0;
        e.scope = scope;
        e.site = site;
        b.add(e);
        t += 500;
        ++events;
    };
    // Parameters: one 64 MiB segment per 16 layers (4 MiB each).
    Address next = 0x7f0000000000;
    for (int l = 0; l < kLayers; ++l) {
        if (l % 16 == 0) {
            ev(EventKind::SegmentAlloc, next, 64 * MiB, 0, 0);
        }
        ev(EventKind::Alloc, next + static_cast<Address>(l % 16) * 4 * MiB, 4 * MiB, attn[l], sites[0]);
        if (l % 16 == 15 || l + 1 == kLayers)
            next += 64 * MiB;
    }
    // Step pool: segments for activations (2 MiB each) and temporaries, reused by every step.
    const Address pool = next;
    const int poolSegments = (kLayers * 2 * 2 * MiB) / (64 * MiB) + 2;
    for (int s = 0; s < poolSegments; ++s)
        ev(EventKind::SegmentAlloc, pool + static_cast<Address>(s) * 64 * MiB, 64 * MiB, 0, 0);
    const Address gradBase = pool + static_cast<Address>(poolSegments) * 64 * MiB;
    for (int s = 0; s < kLayers * 4 / 64 + 1; ++s)
        ev(EventKind::SegmentAlloc, gradBase + static_cast<Address>(s) * 64 * MiB, 64 * MiB, 0, 0);
    std::vector<Address> act(kLayers);
    bool gradsLive = false;
    for (int step = 0; events < targetEvents; ++step) {
        const TimeNs start = t;
        if (gradsLive)
            for (int l = 0; l < kLayers; ++l)
                ev(EventKind::Free, gradBase + static_cast<Address>(l) * 4 * MiB, 4 * MiB, 0, 0);
        Address bump = pool;
        for (int l = 0; l < kLayers; ++l) {
            act[l] = bump;
            bump += 2 * MiB;
            ev(EventKind::Alloc, act[l], 2 * MiB, mlp[l], sites[1 + l % 4]);
            ev(EventKind::Alloc, bump, 2 * MiB, attn[l], sites[5]);
            ev(EventKind::Free, bump, 2 * MiB, attn[l], 0);
        }
        for (int l = kLayers - 1; l >= 0; --l) {
            ev(EventKind::Alloc, gradBase + static_cast<Address>(l) * 4 * MiB, 4 * MiB, attn[l], sites[6]);
            ev(EventKind::Alloc, bump, 1 * MiB, mlp[l], sites[7]);
            ev(EventKind::Free, bump, 1 * MiB, mlp[l], 0);
            ev(EventKind::Free, act[l], 2 * MiB, mlp[l], 0);
        }
        gradsLive = true;
        Annotation an;
        an.start = start;
        an.end = t;
        an.name = b.intern("ProfilerStep#" + std::to_string(step));
        b.add(an);
    }
    return b.build();
}
} // namespace

int main(int argc, char** argv)
{
    const std::size_t target = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
    const std::filesystem::path dir = argc > 2 ? argv[2] : "/tmp";
    const auto gmt = (dir / "bench_analyze.gmt").string();
    {
        Trace built = buildTrace(target);
        writeGmt(built, gmt);
    }
    Clock c0;
    Trace trace = readGmt(gmt);
    trace.allocations(); // pairing is part of importing
    const auto importS = seconds(c0);

    Clock c1;
    auto analysis = analyze::analyzeTrace(trace);
    const auto analyzeS = seconds(c1);
    Clock c2;
    std::ostringstream text;
    analyze::writeAnalysisText(trace, analysis, gmt, {}, text);
    const auto writeS = seconds(c2);

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
