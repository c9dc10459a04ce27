// Replay throughput: a ~10-million-event trace made of real iterations repeated, replayed with every
// policy in the same run; events/s for each and the ratio to `direct` (the no-cache baseline, whose
// work per event is one hash-map update and one simulated cudaMalloc/cudaFree).
//
//   replay_throughput [TRACE] [--events N] [--repeat R] [--policy SPEC]...
//
// TRACE: any trace gpumem reads (a PyTorch snapshot, a profiler trace, .gmt/.jsonl); its replay
// device's request-level events form one "iteration": the first copy keeps everything except frees of
// blocks allocated before the window, later copies keep only the allocations freed inside the window,
// so that every copy is self-consistent. Without TRACE a synthetic transformer-like training step is
// used (weights, forward activations freed in reverse in backward, temporaries, gradients).
// Single-threaded; the best of R runs per policy is reported.
#include "core/importer.h"
#include "core/trace_builder.h"
#include "replay/replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace gpumem;
using namespace gpumem::replay;

namespace {

struct Request {
    EventKind kind;
    Address address;
    Bytes size;
    TimeNs time;
};

std::vector<Request> iterationFromTrace(const Trace& trace, TimeNs& span, std::vector<Request>& firstOnly)
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

std::vector<Request> syntheticIteration(TimeNs& span, std::vector<Request>& firstOnly)
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

Trace repeat(const std::vector<Request>& iter, const std::vector<Request>& firstOnly, TimeNs span, std::uint64_t target)
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

} // namespace

int main(int argc, char** argv)
{
    std::string path;
    std::uint64_t target = 10'000'000;
    int repeats = 3;
    std::vector<std::string> specs;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--events" && i + 1 < argc)
            target = std::stoull(argv[++i]);
        else if (a == "--repeat" && i + 1 < argc)
            repeats = std::stoi(argv[++i]);
        else if (a == "--policy" && i + 1 < argc)
            specs.push_back(argv[++i]);
        else
            path = a;
    }
    if (specs.empty())
        specs = { "direct", "pytorch", "pytorch:expandable_segments:True", "pytorch:max_split_size_mb:64",
            "pytorch@2.0", "ideal" };

    TimeNs span = 0;
    std::vector<Request> firstOnly;
    std::vector<Request> iter;
    std::string source = "synthetic transformer-like step";
    if (!path.empty()) {
        Trace t = loadTrace(path);
        iter = iterationFromTrace(t, span, firstOnly);
        source = path;
    } else {
        iter = syntheticIteration(span, firstOnly);
    }
    auto t0 = std::chrono::steady_clock::now();
    Trace trace = repeat(iter, firstOnly, span, target);
    trace.allocations(); // pairing is part of loading, not of a replay
    double buildSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("source: %s\niteration: %zu request events; trace: %zu events (built and paired in %.2f s)\n",
        source.c_str(), iter.size(), trace.memory().count(), buildSeconds);

    ReplayOptions options;
    options.initialState = InitialStateMode::Ignore;
    std::vector<std::pair<std::string, double>> rates;
    std::printf(
        "%-40s %12s %10s %12s %14s %10s\n", "policy", "events", "best s", "Mevents/s", "peak reserved", "vs direct");
    double directRate = 0;
    for (const auto& spec : specs) {
        double best = 1e300;
        ReplayResult res;
        for (int r = 0; r < repeats; ++r) {
            auto s = std::chrono::steady_clock::now();
            res = Replayer(options).run(trace, parsePolicySpec(spec));
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
        }
        double rate = double(res.requestEvents) / best;
        if (spec == "direct")
            directRate = rate;
        std::printf("%-40s %12llu %10.3f %12.2f %14llu %10s\n", spec.c_str(),
            static_cast<unsigned long long>(res.requestEvents), best, rate / 1e6,
            static_cast<unsigned long long>(res.peakReserved.bytes),
            directRate > 0 ? (std::to_string(rate / directRate).substr(0, 5) + "x").c_str() : "-");
    }
    return 0;
}
