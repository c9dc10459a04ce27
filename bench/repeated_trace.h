#pragma once
// A long trace for benchmarks, made of real iterations repeated (bench/replay_throughput.cpp,
// bench/sweep_bench.cpp). iterationFromTrace() takes the replay device's request-level events of a
// trace as one "iteration": the first copy keeps everything except frees of blocks allocated before the
// window, later copies keep only the allocations freed inside the window, so that every copy is
// self-consistent. syntheticIteration() is a transformer-like training step for when no trace is given.
// repeat() builds a Trace of about `target` events from them. Single-threaded helpers.
#include "core/trace_builder.h"
#include "replay/replayer.h"

#include <algorithm>
#include <random>
#include <vector>

namespace gpumem::bench {

using namespace gpumem::replay;

struct Request {
    EventKind kind;
    Address address;
    Bytes size;
    TimeNs time;
};

inline std::vector<Request> iterationFromTrace(const Trace& trace, TimeNs& span, std::vector<Request>& firstOnly)
{
    auto dev = defaultReplayDevice(trace).value_or(0);
    const auto& m = trace.memory();
    const auto allocs = trace.allocations();
    std::vector<char> paired(m.count(), 0);
    for (const auto& a : allocs) {
        if (a.allocEvent == kNoIndex || a.freeEvent == kNoIndex)
            continue;
        paired[a.allocEvent] = paired[a.freeEvent] = 1;
        if (a.freeCompletedEvent != kNoIndex)
            paired[a.freeCompletedEvent] = 1;
    }
    std::vector<char> known(m.count(), 0); // events that belong to some allocation with an alloc
    for (const auto& a : allocs)
        for (auto e : { a.allocEvent, a.freeEvent, a.freeCompletedEvent })
            if (e != kNoIndex && a.allocEvent != kNoIndex)
                known[e] = 1;
    std::vector<Request> iter;
    TimeNs t0 = 0, t1 = 0;
    bool first = true;
    for (std::size_t i = 0; i < m.count(); ++i) {
        if (m.device[i] != dev || !isRequestLevel(m.kind[i]))
            continue;
        if (first)
            t0 = m.time[i];
        first = false;
        t1 = m.time[i];
        Request r { m.kind[i], m.address[i], m.requestedSize[i] ? m.requestedSize[i] : m.size[i], m.time[i] - t0 };
        if (paired[i])
            iter.push_back(r);
        else if (known[i])
            firstOnly.push_back(r);
    }
    span = t1 - t0 + 1;
    return iter;
}

inline std::vector<Request> syntheticIteration(TimeNs& span, std::vector<Request>& firstOnly)
{
    std::mt19937_64 rng(42);
    const Bytes MiB = Bytes(1) << 20;
    Address next = Address(1) << 40;
    TimeNs t = 0;
    auto addr = [&](Bytes) { return next += 1 << 26; };
    for (int w = 0; w < 200; ++w) // weights and optimizer state: live for the whole run
        firstOnly.push_back({ EventKind::Alloc, addr(0), (1 + rng() % 64) * MiB + rng() % 4096, t++ });
    std::vector<Request> iter;
    std::vector<std::pair<Address, Bytes>> acts;
    for (int layer = 0; layer < 48; ++layer) {
        for (int k = 0; k < 6; ++k) {
            Bytes n = rng() % 3 == 0 ? 1 + rng() % (512 * 1024) : (1 + rng() % 48) * MiB + rng() % 8192;
            Address a = addr(n);
            iter.push_back({ EventKind::Alloc, a, n, t++ });
            acts.emplace_back(a, n);
        }
        for (int k = 0; k < 4; ++k) { // temporaries
            Bytes n = 1 + rng() % (8 * MiB);
            Address a = addr(n);
            iter.push_back({ EventKind::Alloc, a, n, t++ });
            iter.push_back({ EventKind::Free, a, n, t++ });
            iter.push_back({ EventKind::FreeCompleted, a, n, t++ });
        }
    }
    std::vector<std::pair<Address, Bytes>> grads;
    while (!acts.empty()) {
        auto [a, n] = acts.back();
        acts.pop_back();
        if (rng() % 8 == 0) {
            Bytes g = (1 + rng() % 16) * MiB;
            Address ga = addr(g);
            iter.push_back({ EventKind::Alloc, ga, g, t++ });
            grads.emplace_back(ga, g);
        }
        iter.push_back({ EventKind::Free, a, n, t++ });
        iter.push_back({ EventKind::FreeCompleted, a, n, t++ });
    }
    for (auto [a, n] : grads) {
        iter.push_back({ EventKind::Free, a, n, t++ });
        iter.push_back({ EventKind::FreeCompleted, a, n, t++ });
    }
    span = t + 1;
    return iter;
}

inline Trace repeat(
    const std::vector<Request>& iter, const std::vector<Request>& firstOnly, TimeNs span, std::uint64_t target)
{
    TraceBuilder tb;
    DeviceId d = tb.device(DeviceType::Cuda, 0);
    StreamId s = tb.stream(d, 0);
    std::uint64_t copies = std::max<std::uint64_t>(
        1, (target - std::min<std::uint64_t>(target, firstOnly.size())) / std::max<std::size_t>(iter.size(), 1));
    auto& c = tb.memoryColumns();
    c.reserve(firstOnly.size() + copies * iter.size());
    std::uint64_t seq = 0;
    auto push = [&](const Request& r, TimeNs offset) {
        MemoryEvent e;
        e.time = r.time + offset;
        e.kind = r.kind;
        e.device = d;
        e.stream = s;
        e.address = r.address;
        e.size = r.size;
        e.requestedSize = r.size;
        e.sequence = seq++;
        c.push(e);
    };
    // Long-lived blocks first (their allocs), then the iterations.
    for (const auto& r : firstOnly)
        if (r.kind == EventKind::Alloc)
            push(r, -1);
    for (std::uint64_t k = 0; k < copies; ++k)
        for (const auto& r : iter)
            push(r, TimeNs(k) * span);
    return tb.build();
}

} // namespace gpumem::bench
