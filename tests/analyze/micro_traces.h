#pragma once
// Hand-made training loops for the analyze tests, built with TraceBuilder. One device, one stream.
// Setup: two parameters (4 MiB in "Net.fc1", 2 MiB in "Net.fc2"). Each step (a ProfilerStep#N
// annotation unless `annotateSteps` is false): forward allocates an activation per layer (8 MiB in
// fc1, 6 MiB in fc2) and a short temporary (1 MiB, freed at once); backward frees the activations in
// reverse order and allocates one gradient per parameter; the optimizer phase (scope
// "Optimizer.step#SGD.step") allocates a 512 KiB temporary, then the gradients are freed. With
// `leakPerStep` > 0, every step also allocates that many bytes from the site
// "cache_append (train.py:42)" that is never freed. `fc2Extra` adds bytes to fc2's activation.
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <string>

namespace gpumem::test {

struct MicroLoop {
    int steps = 5;
    Bytes leakPerStep = 0;
    Bytes fc2Extra = 0;
    bool annotateSteps = true;
    std::string stepName = "ProfilerStep#"; // + N (from 10) when it ends with '#'; else the same name each step
    bool markers = false;                   // a marker event at the start of every step and at the end
    int annotatedSteps = -1;                // with annotateSteps: only the first N steps get their annotation (-1: all)
    std::string optimizerScope = "Optimizer.step#SGD.step"; // the scope of the last phase (any name: no optimizer)
    bool recordCategories = true;           // false: every event's category is Unknown (a trace that records none)
};

inline Trace buildMicroLoop(const MicroLoop& p)
{
    constexpr Bytes MiB = 1 << 20;
    TraceBuilder b;
    b.metadata()["source_format"] = "test";
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    const ScopeId net = b.scope(0, "Net", ScopeKind::Module);
    const ScopeId fc1 = b.scope(net, "Net.fc1", ScopeKind::Module);
    const ScopeId fc2 = b.scope(net, "Net.fc2", ScopeKind::Module);
    const ScopeId opt = b.scope(0, p.optimizerScope, ScopeKind::Range);
    const FrameId fwd = b.frame("forward", "model.py", 10);
    const FrameId leakFrame = b.frame("cache_append", "train.py", 42);
    const FrameId loop = b.frame("train_loop", "train.py", 80);
    const FrameId fwdStack[] = { fwd, loop };
    const FrameId leakStack[] = { leakFrame, loop };
    const SiteId fwdSite = b.site(fwdStack);
    const SiteId leakSite = b.site(leakStack);

    TimeNs t = 1'000'000;
    Address next = 0x7f0000000000;
    auto ev = [&](EventKind kind, Address addr, Bytes size, ScopeId scope, SiteId site, Category cat) {
        MemoryEvent e;
        e.time = t;
        e.kind = kind;
        e.device = dev;
        e.stream = stream;
        e.address = addr;
        e.size = size;
        e.requestedSize = kind == EventKind::Alloc ? size : 0;
        e.scope = scope;
        e.site = site;
        e.category = p.recordCategories ? cat : Category::Unknown;
        b.add(e);
        t += 1000;
    };
    auto alloc = [&](Bytes size, ScopeId scope, Category cat, SiteId site = 0) {
        const Address a = next;
        next += size + MiB; // distinct addresses; no segments
        ev(EventKind::Alloc, a, size, scope, site, cat);
        return a;
    };
    auto free = [&](Address a, Bytes size, ScopeId scope, Category cat) { ev(EventKind::Free, a, size, scope, 0, cat); };

    alloc(4 * MiB, fc1, Category::Parameter);
    alloc(2 * MiB, fc2, Category::Parameter);
    for (int s = 0; s < p.steps; ++s) {
        if (p.markers)
            ev(EventKind::Marker, 0, 0, 0, 0, Category::Unknown);
        const TimeNs start = t;
        const Address a1 = alloc(8 * MiB, fc1, Category::Activation, fwdSite);
        const Address tmp = alloc(1 * MiB, fc1, Category::Temporary, fwdSite);
        free(tmp, 1 * MiB, fc1, Category::Temporary);
        const Address a2 = alloc(6 * MiB + p.fc2Extra, fc2, Category::Activation, fwdSite);
        if (p.leakPerStep)
            alloc(p.leakPerStep, net, Category::Activation, leakSite);
        free(a2, 6 * MiB + p.fc2Extra, fc2, Category::Activation);
        const Address g2 = alloc(2 * MiB, fc2, Category::Gradient);
        free(a1, 8 * MiB, fc1, Category::Activation);
        const Address g1 = alloc(4 * MiB, fc1, Category::Gradient);
        const Address ot = alloc(MiB / 2, opt, Category::Temporary);
        free(ot, MiB / 2, opt, Category::Temporary);
        free(g1, 4 * MiB, opt, Category::Gradient);
        free(g2, 2 * MiB, opt, Category::Gradient);
        if (p.annotateSteps && (p.annotatedSteps < 0 || s < p.annotatedSteps)) {
            Annotation an;
            an.start = start;
            an.end = t;
            an.name = b.intern(p.stepName.ends_with('#') ? p.stepName + std::to_string(s + 10) : p.stepName);
            an.kind = AnnotationKind::Range;
            b.add(an);
        }
        t += 5000;
    }
    if (p.markers)
        ev(EventKind::Marker, 0, 0, 0, 0, Category::Unknown);
    return b.build();
}

} // namespace gpumem::test
