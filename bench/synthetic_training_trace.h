#pragma once
// The synthetic training trace and the clock the benchmarks share (bench_analyze, bench_memory_map): a
// deterministic function of the event count; single-threaded.
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::bench {

// CPU seconds of this (single-threaded) process: other jobs on a shared machine do not inflate them.
struct Clock {
    std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
    std::clock_t cpu = std::clock();
};
inline std::pair<double, double> seconds(const Clock& since)
{
    return { std::chrono::duration<double>(std::chrono::steady_clock::now() - since.wall).count(),
        static_cast<double>(std::clock() - since.cpu) / CLOCKS_PER_SEC };
}

// A transformer-like loop: L layers with attention/mlp module scopes and 8 call sites; parameters in
// setup; per step and layer an activation and an op-local temporary in forward, a gradient and an
// autograd temporary in backward (the activation freed there), gradients freed at the next step's
// start; all blocks placed in 64 MiB segments (segment events recorded) by a bump pointer per step.
inline Trace buildTrainingTrace(std::size_t targetEvents)
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

} // namespace gpumem::bench
