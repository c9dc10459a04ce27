// Throughput and size of the native .gmt format against the .jsonl interchange form (the baseline),
// on a synthetic PyTorch-like trace: request-level alloc/free pairs with 512-byte-rounded block
// sizes (PyTorch c10/cuda/CUDACachingAllocator.cpp, round_size), blocks carved from 2 MiB and
// 20 MiB segments, monotonically increasing times with microsecond jitter, a few scopes and sites.
//
// Usage: gmt_bench [--events N] [--repeats R] [--jsonl-events M] [--dir D] [--save FILE.gmt] [--read FILE.gmt]
// (--save writes the generated trace and exits: input for profiling. --jsonl-events 1000000 makes
// the baseline quicker: .jsonl at 10M events takes minutes; its per-event rates barely change.
// --read times the read and the pairing of an existing .gmt file instead of a generated trace, e.g.
// bench/malloc_free_stream.c's heaptrack stream converted by `gpumem convert`.)
// Prints, for each format, the best of R runs: write and read events per CPU second (the process's
// user + system time, so other load on the machine does not count; wall time beside), bytes per event; then
// the gmt/jsonl ratios; then three rows for .gmt: the read alone, the pairing alone (Trace::allocations,
// lazy: what every verb that needs lifetimes pays on top of the read) and read + pair, each best of R in
// the same run, with the ratios (read + pair)/read and pair/read.
#include "bench/bench_clock.h"
#include "analyze/bounded_analysis.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpumem;

namespace {

constexpr Bytes kMiB = 1024 * 1024;

Trace makeTrace(std::size_t events)
{
    TraceBuilder b;
    b.metadata() = { { "tool", "gmt_bench" }, { "description", "synthetic PyTorch-like trace" } };
    DeviceId dev = b.addDevice(Device { DeviceType::Cuda, 0, b.intern("NVIDIA H100 80GB HBM3"), 80 * 1024 * kMiB });
    StreamId streams[2] = { b.addStream(Stream { dev, 0, b.intern("default") }), b.addStream(Stream { dev, 0x5555aa00, b.intern("comm") }) };
    std::vector<ScopeId> scopes;
    ScopeId model = b.scope(0, "nn.Module: GPT", ScopeKind::Module);
    for (int layer = 0; layer < 12; ++layer) {
        ScopeId l = b.scope(model, "nn.Module: Block_" + std::to_string(layer), ScopeKind::Module);
        for (const char* op : { "aten::mm", "aten::add", "aten::softmax", "aten::layer_norm" })
            scopes.push_back(b.scope(l, op, ScopeKind::Op));
    }
    std::vector<SiteId> sites;
    for (int s = 0; s < 40; ++s) {
        FrameId f[3] = { b.frame("at::native::op_" + std::to_string(s), "aten/src/ATen/native/Op.cpp", 100 + s),
            b.frame("forward", "model.py", 40 + s % 7), b.frame("train_step", "train.py", 88) };
        sites.push_back(b.site(f));
    }

    std::mt19937_64 rng(42);
    // Segments: a few 2 MiB small-pool segments and many 20 MiB large-pool ones, plus big ones.
    std::vector<std::pair<Address, Bytes>> segments;
    Address base = 0x7f3a00000000;
    for (int i = 0; i < 64; ++i) {
        Bytes size = i < 16 ? 2 * kMiB : (i < 56 ? 20 * kMiB : 256 * kMiB);
        segments.push_back({ base, size });
        base += size + 2 * kMiB;
    }
    struct Live {
        Address address;
        Bytes size;
        ScopeId scope;
        SiteId site;
        StreamId stream;
    };
    std::vector<Live> live;
    live.reserve(1 << 16);
    TimeNs t = 1'732'000'000'000'000'000; // Unix epoch ns (Nov 2024)
    auto& m = b.memoryColumns();
    m.reserve(events);
    for (std::size_t i = 0; i < events; ++i) {
        t += 200 + static_cast<TimeNs>(rng() % 3000); // µs-scale jitter
        bool doAlloc = live.empty() || (live.size() < 20000 && rng() % 100 < 52);
        MemoryEvent e;
        e.time = t;
        e.thread = 4242;
        if (doAlloc) {
            std::uint64_t r = rng();
            Bytes requested;
            if (r % 10 < 7)
                requested = 1 + (r >> 8) % (64 * 1024); // small activations
            else if (r % 10 < 9)
                requested = 64 * 1024 + (r >> 8) % kMiB;
            else
                requested = kMiB + (r >> 8) % (64 * kMiB);
            Bytes size = std::max<Bytes>(512, (requested + 511) / 512 * 512);
            const auto& seg = size <= kMiB ? segments[(r >> 40) % 16] : segments[16 + (r >> 40) % 48];
            Bytes room = seg.second > size ? seg.second - size : 0;
            Address addr = seg.first + (room ? ((r >> 20) % room) / 512 * 512 : 0);
            Live l { addr, size, scopes[(r >> 33) % scopes.size()], sites[(r >> 27) % sites.size()], streams[(r >> 50) % 8 == 0] };
            live.push_back(l);
            e.kind = EventKind::Alloc;
            e.address = l.address, e.size = l.size, e.requestedSize = requested;
            e.scope = l.scope, e.site = l.site, e.stream = l.stream;
            e.category = static_cast<Category>((r >> 56) % 4);
        } else {
            std::size_t k = rng() % live.size();
            Live l = live[k];
            live[k] = live.back();
            live.pop_back();
            e.kind = EventKind::Free;
            e.address = l.address, e.size = l.size, e.scope = l.scope, e.site = l.site, e.stream = l.stream;
        }
        e.sequence = i;
        m.push(e);
    }
    return b.build();
}

// CPU seconds of this process (user + system), so that other processes sharing the machine do not
// count: the figures are "events per second on one core". Wall time is printed beside them.
using Time = gpumem::bench::BestTime;
void timeBest(Time& best, const std::function<void()>& f) { best.time(f, gpumem::bench::processCpuSeconds); }

struct Figures {
    Time write, read;
    double readAndPair = 1e300, pair = 1e300; // CPU seconds, best of the runs (.gmt only)
    std::uintmax_t bytes = 0;
    std::size_t events = 0;
};

Figures measure(const Trace& trace, const std::string& path, int repeats, bool gmt)
{
    Figures f;
    f.events = trace.memory().count();
    for (int r = 0; r < repeats; ++r) {
        timeBest(f.write, [&] { gmt ? writeGmt(trace, path) : writeJsonl(trace, path); });
        std::size_t read = 0;
        timeBest(f.read, [&] { read = (gmt ? readGmt(path) : readJsonl(path)).memory().count(); });
        if (read != f.events) {
            std::fprintf(stderr, "read back %zu events, wrote %zu\n", read, f.events);
            std::exit(1);
        }
        if (gmt) {
            const double c0 = gpumem::bench::processCpuSeconds();
            Trace t = readGmt(path);
            const double c1 = gpumem::bench::processCpuSeconds();
            if (t.allocations().empty() && f.events > 0)
                std::exit(1);
            const double c2 = gpumem::bench::processCpuSeconds();
            f.readAndPair = std::min(f.readAndPair, c2 - c0);
            f.pair = std::min(f.pair, c2 - c1);
        }
    }
    f.bytes = std::filesystem::file_size(path);
    std::filesystem::remove(path);
    return f;
}

void print(const char* name, const Figures& f)
{
    std::printf("%-6s %9zu events  write %7.2f M events/s (cpu %6.3f s, wall %6.3f s)  read %7.2f M events/s (cpu %6.3f s, wall %6.3f s)  "
                "%6.2f bytes/event\n",
        name, f.events, f.events / f.write.cpu / 1e6, f.write.cpu, f.write.wall, f.events / f.read.cpu / 1e6, f.read.cpu, f.read.wall,
        double(f.bytes) / double(f.events));
}

// Pairing is lazy (first Trace::allocations call), so it is outside the read figure: the three rows
// say what a verb that needs lifetimes pays, and how it splits.
void printPairing(const Figures& f)
{
    const double n = double(f.events);
    std::printf("gmt read          %7.2f M events/s (cpu %6.3f s)\n", n / f.read.cpu / 1e6, f.read.cpu);
    std::printf("gmt pair          %7.2f M events/s (cpu %6.3f s)  (Trace::allocations: alloc/free/free_completed)\n",
        n / f.pair / 1e6, f.pair);
    std::printf("gmt read + pair   %7.2f M events/s (cpu %6.3f s)\n", n / f.readAndPair / 1e6, f.readAndPair);
    std::printf("ratio (read + pair)/read %.2fx, pair/read %.2fx\n", f.readAndPair / f.read.cpu, f.pair / f.read.cpu);
}

// --read FILE.gmt: the read, pairing and read + pair rows for an existing file, best of `repeats`.
int measureFile(const std::string& path, int repeats)
{
    Figures f;
    for (int r = 0; r < repeats; ++r) {
        timeBest(f.read, [&] { f.events = readGmt(path).memory().count(); });
        const double c0 = gpumem::bench::processCpuSeconds();
        Trace t = readGmt(path);
        const double c1 = gpumem::bench::processCpuSeconds();
        const std::size_t lifetimes = t.allocations().size();
        const double c2 = gpumem::bench::processCpuSeconds();
        if (lifetimes == 0 && f.events > 0)
            return 1;
        f.readAndPair = std::min(f.readAndPair, c2 - c0);
        f.pair = std::min(f.pair, c2 - c1);
    }
    // What `gpumem analyze --format json` spends, split: one streamed pass that only decodes (and checks) the
    // chunks, and analyzeSource, its passes with their decoding.
    Time stream, analysis;
    for (int r = 0; r < repeats; ++r) {
        std::size_t seen = 0;
        timeBest(stream, [&] {
            auto source = openGmtSource(path, {}, GmtChecks::InFirstPass);
            source->forEachChunk([&](const MemoryEventColumns& m, std::uint64_t) { seen += m.count(); });
        });
        int passes = 0;
        timeBest(analysis, [&] {
            auto source = openGmtSource(path, {}, GmtChecks::InFirstPass);
            passes = gpumem::analyze::analyzeSource(*source).passes;
        });
        if (seen != f.events || passes == 0)
            return 1;
    }
    std::printf("%s: %zu memory events, %ju bytes (%.2f bytes/event)\n", path.c_str(), f.events,
        std::filesystem::file_size(path), double(std::filesystem::file_size(path)) / double(f.events));
    printPairing(f);
    const double n = double(f.events);
    std::printf("gmt stream        %7.2f M events/s (cpu %6.3f s)  (openGmtSource, one pass decoding and checking the chunks)\n",
        n / stream.cpu / 1e6, stream.cpu);
    std::printf("gmt analyze       %7.2f M events/s (cpu %6.3f s)  (analyzeSource: analyze --format json's passes)\n",
        n / analysis.cpu / 1e6, analysis.cpu);
    std::printf("ratio analyze/stream %.2fx\n", analysis.cpu / stream.cpu);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    std::size_t events = 10'000'000, jsonlEvents = 0;
    int repeats = 3;
    std::string dir = std::filesystem::temp_directory_path().string(), save, readPath;
    for (int i = 1; i < argc; i += 2) {
        std::string a = argv[i];
        if (i + 1 == argc)
            a = "--help"; // an option without its value
        if (a == "--events")
            events = std::stoull(argv[i + 1]);
        else if (a == "--repeats")
            repeats = std::max(1, std::stoi(argv[i + 1]));
        else if (a == "--jsonl-events")
            jsonlEvents = std::stoull(argv[i + 1]);
        else if (a == "--dir")
            dir = argv[i + 1];
        else if (a == "--save")
            save = argv[i + 1];
        else if (a == "--read")
            readPath = argv[i + 1];
        else {
            std::fprintf(stderr, "usage: gmt_bench [--events N] [--repeats R] [--jsonl-events M] [--dir D] [--save FILE.gmt] [--read FILE.gmt]\n");
            return 2;
        }
    }
    if (!readPath.empty())
        return measureFile(readPath, repeats);
    if (jsonlEvents == 0)
        jsonlEvents = events;
    std::printf("generating %zu events…\n", events);
    std::fflush(stdout);
    Trace trace = makeTrace(events);
    if (!save.empty()) {
        writeGmt(trace, save);
        return 0;
    }
    std::string stem = dir + "/gmt_bench_" + std::to_string(::getpid());

    Figures gmt = measure(trace, stem + ".gmt", repeats, true);
    print("gmt", gmt);
    std::fflush(stdout);
    Trace jsonlTrace = jsonlEvents == events ? trace : makeTrace(jsonlEvents);
    Figures jsonl = measure(jsonlTrace, stem + ".jsonl", repeats, false);
    print("jsonl", jsonl);
    std::printf("ratio gmt/jsonl: write %.1fx faster, read %.1fx faster, %.1fx smaller\n",
        (gmt.events / gmt.write.cpu) / (jsonl.events / jsonl.write.cpu), (gmt.events / gmt.read.cpu) / (jsonl.events / jsonl.read.cpu),
        (double(jsonl.bytes) / jsonl.events) / (double(gmt.bytes) / gmt.events));

    printPairing(gmt);
    return 0;
}
