// make_big_gmt --events N -o FILE.gmt [--layers L] — writes a training-like trace of about N memory events
// (whole steps, so up to one step more) as .gmt, chunk by chunk in bounded memory: the tables once, then
// 65,536 events at a time through GmtWriter, and each step's annotation. What bench/scale.sh reads at
// 100 M and 1 G events (issue 22). The loop is bench/synthetic_training_trace.h's: L layers (default 200)
// with parameters in setup, per step and layer an activation and an op-local temporary in forward, a
// gradient and an autograd temporary in backward (the activation freed there), gradients freed at the
// next step's start; blocks in 64 MiB segments (segment events recorded). Sizes vary per layer (1–4 MiB
// activations) so the peaks are not round numbers. Memory: one chunk of columns, the string table of the
// step names (~30 bytes a step) and the annotations of one chunk's steps. Deterministic in (N, L).
#include "core/error.h"
#include "core/gmt_format.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace gpumem;

namespace {

constexpr Bytes MiB = 1 << 20;
constexpr std::size_t kChunkEvents = 65536;

struct Args {
    std::uint64_t events = 0;
    int layers = 200;
    std::string out;
};

[[noreturn]] void usage(const char* why)
{
    std::fprintf(stderr, "make_big_gmt: %s\nusage: make_big_gmt --events N -o FILE.gmt [--layers L]\n", why);
    std::exit(2);
}

Args parse(int argc, char** argv)
{
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc)
            usage(("missing value after " + arg).c_str());
        const char* v = argv[++i];
        if (arg == "--events" || arg == "--layers") {
            // Digits only: strtoull would read "-5" as 2^64 - 5 and write until the disk is full.
            std::uint64_t n = 0;
            const std::string_view text(v);
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (text.empty() || ec != std::errc() || end != text.data() + text.size())
                usage((arg + " takes a positive whole number, not \"" + std::string(text) + "\"").c_str());
            if (arg == "--events")
                a.events = n;
            else
                a.layers = n > 100000 ? 0 : int(n);
        }
        else if (arg == "-o" || arg == "--output")
            a.out = v;
        else
            usage(("unknown option " + arg).c_str());
    }
    if (a.events == 0 || a.out.empty() || a.layers < 1 || a.layers > 100000)
        usage("give --events N (N > 0) and -o FILE");
    return a;
}

class ChunkedTraceWriter {
public:
    ChunkedTraceWriter(const std::string& path, int layers)
        : m_writer(path, metadata())
        , m_layers(layers)
    {
        // The tables, built once (a skeleton without events) and written before any event.
        TraceBuilder b;
        const DeviceId dev = b.addDevice(Device { DeviceType::Cuda, 0, b.intern("NVIDIA H100 80GB HBM3"), 80 * 1024 * MiB });
        m_stream = b.stream(dev, 0);
        const ScopeId model = b.scope(0, "Model", ScopeKind::Module);
        for (int l = 0; l < layers; ++l) {
            const std::string layer = "Model.layers." + std::to_string(l);
            const ScopeId scope = b.scope(model, layer, ScopeKind::Module);
            m_attn.push_back(b.scope(scope, layer + ".attn", ScopeKind::Module));
            m_mlp.push_back(b.scope(scope, layer + ".mlp", ScopeKind::Module));
        }
        const FrameId loop = b.frame("train_loop", "train.py", 100);
        for (int s = 0; s < 8; ++s) {
            const FrameId f[] = { b.frame("op" + std::to_string(s), "model.py", 10 + s), loop };
            m_sites.push_back(b.site(f));
        }
        const Trace tables = b.build();
        for (std::size_t i = 1; i < tables.strings().size(); ++i)
            m_strings.intern(tables.str(static_cast<StringId>(i)));
        m_stringsWritten = m_strings.size();
        m_writer.appendStrings(m_strings, 1, m_strings.size() - 1);
        m_writer.appendDevices(tables.devices());
        m_writer.appendStreams(tables.streams());
        m_writer.appendFrames(tables.frames().subspan(1));
        m_writer.appendSites(tables, 1, tables.siteCount() - 1);
        m_writer.appendScopes(tables.scopes().subspan(1));
        m_chunk.reserve(kChunkEvents);
    }

    std::uint64_t run(std::uint64_t target)
    {
        const int L = m_layers;
        // Parameters: one 64 MiB segment per 16 layers (4 MiB each).
        Address next = 0x7f0000000000;
        for (int l = 0; l < L; ++l) {
            if (l % 16 == 0)
                ev(EventKind::SegmentAlloc, next, 64 * MiB, 0, 0);
            ev(EventKind::Alloc, next + static_cast<Address>(l % 16) * 4 * MiB, 4 * MiB, m_attn[l], m_sites[0]);
            if (l % 16 == 15 || l + 1 == L)
                next += 64 * MiB;
        }
        // Step pool: segments for activations (up to 4 MiB each) and temporaries, reused by every step.
        const Address pool = next;
        const int poolSegments = int((Bytes(L) * 5 * MiB) / (64 * MiB)) + 2;
        for (int s = 0; s < poolSegments; ++s)
            ev(EventKind::SegmentAlloc, pool + static_cast<Address>(s) * 64 * MiB, 64 * MiB, 0, 0);
        const Address gradBase = pool + static_cast<Address>(poolSegments) * 64 * MiB;
        for (int s = 0; s < L * 4 / 64 + 1; ++s)
            ev(EventKind::SegmentAlloc, gradBase + static_cast<Address>(s) * 64 * MiB, 64 * MiB, 0, 0);
        std::vector<Address> act(static_cast<std::size_t>(L));
        std::vector<Bytes> actSize(static_cast<std::size_t>(L));
        bool gradsLive = false;
        for (std::uint64_t step = 0; m_events < target; ++step) {
            const TimeNs start = m_time;
            if (gradsLive)
                for (int l = 0; l < L; ++l)
                    ev(EventKind::Free, gradBase + static_cast<Address>(l) * 4 * MiB, 4 * MiB, 0, 0);
            Address bump = pool;
            for (int l = 0; l < L; ++l) {
                // Activation sizes vary with the layer and the step (sequence lengths change): 1–4 MiB.
                actSize[l] = MiB + Bytes((l * 7 + step * 13) % 24) * (MiB / 8);
                act[l] = bump;
                bump += actSize[l];
                ev(EventKind::Alloc, act[l], actSize[l], m_mlp[l], m_sites[1 + l % 4]);
                ev(EventKind::Alloc, bump, 2 * MiB, m_attn[l], m_sites[5]);
                ev(EventKind::Free, bump, 2 * MiB, m_attn[l], 0);
            }
            for (int l = L - 1; l >= 0; --l) {
                ev(EventKind::Alloc, gradBase + static_cast<Address>(l) * 4 * MiB, 4 * MiB, m_attn[l], m_sites[6]);
                ev(EventKind::Alloc, bump, 1 * MiB, m_mlp[l], m_sites[7]);
                ev(EventKind::Free, bump, 1 * MiB, m_mlp[l], 0);
                ev(EventKind::Free, act[l], actSize[l], m_mlp[l], 0);
            }
            gradsLive = true;
            // Written with the next chunk of events (its name's string first): steps are short.
            m_steps.push_back(Annotation { start, m_time, m_strings.intern("ProfilerStep#" + std::to_string(step)),
                AnnotationKind::Step, kNoDevice, 0 });
        }
        flushEvents();
        m_writer.finish();
        return m_events;
    }

    std::uint64_t bytes() const { return m_writer.bytesWritten(); }

private:
    static nlohmann::json metadata()
    {
        return { { "source_format", "synthetic" }, { "tool", "make_big_gmt" } };
    }

    void ev(EventKind k, Address a, Bytes size, ScopeId scope, SiteId site)
    {
        MemoryEvent e;
        e.time = m_time;
        e.kind = k;
        e.device = 0;
        e.stream = m_stream;
        e.address = a;
        e.size = size;
        e.requestedSize = k == EventKind::Alloc ? size - 256 : 0;
        e.scope = scope;
        e.site = site;
        e.sequence = m_events;
        m_chunk.push(e);
        m_time += 500;
        ++m_events;
        if (m_chunk.count() == kChunkEvents)
            flushEvents();
    }

    void flushEvents()
    {
        if (m_chunk.count() == 0)
            return;
        m_writer.appendMemoryEvents(m_chunk, 0, m_chunk.count());
        if (m_strings.size() > m_stringsWritten)
            m_writer.appendStrings(m_strings, static_cast<StringId>(m_stringsWritten), m_strings.size() - m_stringsWritten);
        m_stringsWritten = m_strings.size();
        m_writer.appendAnnotations(m_steps);
        m_steps.clear();
        m_chunk.time.clear(), m_chunk.kind.clear(), m_chunk.device.clear(), m_chunk.stream.clear(), m_chunk.address.clear();
        m_chunk.size.clear(), m_chunk.requestedSize.clear(), m_chunk.scope.clear(), m_chunk.site.clear(), m_chunk.thread.clear();
        m_chunk.sequence.clear(), m_chunk.category.clear(), m_chunk.pool.clear();
    }

    GmtWriter m_writer;
    int m_layers;
    StringTable m_strings;
    std::size_t m_stringsWritten = 1;
    StreamId m_stream = 0;
    std::vector<ScopeId> m_attn, m_mlp;
    std::vector<SiteId> m_sites;
    MemoryEventColumns m_chunk;
    std::vector<Annotation> m_steps; // the steps ended since the last chunk
    TimeNs m_time = 1'700'000'000'000'000'000;
    std::uint64_t m_events = 0;
};

} // namespace

int main(int argc, char** argv)
{
    const Args args = parse(argc, argv);
    try {
        ChunkedTraceWriter w(args.out, args.layers);
        const std::uint64_t events = w.run(args.events);
        std::printf("%s: %llu memory events, %llu bytes (%.2f bytes per event)\n", args.out.c_str(),
            static_cast<unsigned long long>(events), static_cast<unsigned long long>(w.bytes()),
            double(w.bytes()) / double(events));
    } catch (const Error& e) {
        std::fprintf(stderr, "make_big_gmt: %s\n", e.what());
        return 1;
    }
    return 0;
}
