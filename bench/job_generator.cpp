#include "bench/job_generator.h"

#include "analyze/steps.h"
#include "analyze/timeline.h"
#include "analyze/trace_summary.h"
#include "core/error.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace gpumem::bench {

namespace {
    // SplitMix64 (Steele, Lea, Flood 2014): portable, unlike std:: distributions, so every platform makes the same job.
    std::uint64_t splitMix(std::uint64_t x)
    {
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    }
    // A whole number in [-limit, limit] from the stream of (seed, rank, salt).
    std::int64_t draw(std::uint64_t seed, std::size_t rank, std::uint64_t salt, std::int64_t limit)
    {
        if (limit <= 0)
            return 0;
        const std::uint64_t h = splitMix(splitMix(seed ^ (salt * 0x2545F4914F6CDD1Dull)) + rank);
        return static_cast<std::int64_t>(h % std::uint64_t(2 * limit + 1)) - limit;
    }

    constexpr Bytes kTwoMiB = 2ull << 20;
    Bytes roundUp2MiB(double bytes) { return std::max<Bytes>(kTwoMiB, (static_cast<Bytes>(std::ceil(bytes)) + kTwoMiB - 1) / kTwoMiB * kTwoMiB); }

    // x -> floor(x·m/10000) without overflow for any 64-bit x with m ≤ 20000 (q·m + r·m/10000).
    struct SizeMap {
        std::uint64_t m = 10000;
        std::uint64_t operator()(std::uint64_t x) const
        {
            const std::uint64_t q = x / 10000, r = x % 10000;
            return q * m + r * m / 10000;
        }
        std::int64_t scaleSigned(std::int64_t v) const
        {
            return v >= 0 ? static_cast<std::int64_t>((*this)(std::uint64_t(v))) : -static_cast<std::int64_t>((*this)(std::uint64_t(-(v + 1)) + 1));
        }
    };
    // t -> t + offset + (t − start)·j/10^6 (truncated), non-decreasing for |j| < 10^6.
    struct TimeMap {
        TimeNs start = 0, offset = 0;
        std::int64_t j = 0;
        TimeNs operator()(TimeNs t) const
        {
            const std::int64_t x = t - start;
            return t + offset + (x / 1'000'000) * j + (x % 1'000'000) * j / 1'000'000;
        }
    };
} // namespace

RankJobGenerator::RankJobGenerator(Trace base, RankJobOptions options)
    : m_base(std::move(base))
    , m_options(options)
{
    const auto& o = m_options;
    if (o.ranks == 0)
        throw UsageError("a job needs at least 1 rank");
    if (!(o.sizeJitter >= 0 && o.sizeJitter < 0.5) || !(o.timeJitter >= 0 && o.timeJitter < 0.5))
        throw UsageError("the size and time jitters are shares from 0 to below 0.5");
    if (!(o.leakShare >= 0 && o.leakShare <= 4) || !(o.extraBufferShare >= 0 && o.extraBufferShare <= 4))
        throw UsageError("the leak and extra-buffer shares are from 0 to 4 (of the base trace's peak allocated)");
    if (o.clockSkew < 0)
        throw UsageError("the clock skew is a duration of 0 ns or more");
    m_leakRank = o.leakRank.value_or(o.ranks >= 3 ? o.ranks - 1 : kNoRank);
    m_extraRank = o.extraBufferRank.value_or(o.ranks >= 3 ? o.ranks / 2 : kNoRank);
    for (auto [r, what] : { std::pair { m_leakRank, "leak" }, std::pair { m_extraRank, "extra-buffer" } })
        if (r != kNoRank && r >= o.ranks)
            throw UsageError(std::string("the ") + what + " rank " + std::to_string(r) + " is not below the " + std::to_string(o.ranks) + " ranks");
    if (m_leakRank != kNoRank && m_leakRank == m_extraRank)
        throw UsageError("the leak and the extra buffer go to different ranks (both are " + std::to_string(m_leakRank) + ")");

    const auto timeline = analyze::Timeline::build(m_base);
    const analyze::DeviceTimeline* dev = timeline.busiest();
    if (!dev)
        throw UsageError("the base trace has no alloc events to make a job from");
    m_device = dev->device;
    m_start = analyze::traceSpan(m_base).start;
    Bytes peak = dev->allocated.empty() ? 0 : *std::max_element(dev->allocated.begin(), dev->allocated.end());
    if (!dev->recordedAllocated.empty())
        peak = std::max(peak, *std::max_element(dev->recordedAllocated.begin(), dev->recordedAllocated.end()));

    const auto& m = m_base.memory();
    Address top = 0;
    TimeNs first = 0, last = 0;
    bool seen = false;
    for (std::size_t i = 0; i < m.count(); ++i) {
        top = std::max(top, m.address[i] + m.size[i]);
        if (m.device[i] != m_device)
            continue;
        m_segments = m_segments || isSegmentLevel(m.kind[i]);
        if (!seen)
            first = m.time[i];
        last = m.time[i];
        seen = true;
    }
    // Above every base address, 1 GiB aligned, so no injected block meets a recorded one.
    Address next = (top / (1ull << 30) + 2) * (1ull << 30);

    std::vector<std::pair<TimeNs, TimeNs>> windows;
    const auto steps = analyze::detectSteps(m_base, *dev);
    for (const auto& s : steps.steps)
        windows.emplace_back(s.start, s.end);
    if (windows.size() < 3) {
        windows.clear();
        const TimeNs span = std::max<TimeNs>(last - first, 4);
        for (int k = 0; k < 4; ++k)
            windows.emplace_back(first + span * k / 4, first + span * (k + 1) / 4);
    }
    m_leakPerStep = roundUp2MiB(o.leakShare * double(peak) / double(windows.size()));
    m_extraBytes = roundUp2MiB(o.extraBufferShare * double(peak));
    for (const auto& [begin, end] : windows) {
        m_leaks.push_back(Injection { begin + std::max<TimeNs>(1, (end - begin) / 100), std::nullopt, next, m_leakPerStep, true });
        next += (m_leakPerStep / kTwoMiB + 1) * kTwoMiB;
    }
    m_extra = Injection { first, last + 1, next, m_extraBytes, false };
}

std::string RankJobGenerator::fileName(std::size_t r, std::string_view extension)
{
    return "gpumem.job." + std::to_string(10000 + r) + ".rank" + std::to_string(r) + "." + std::string(extension);
}

Trace RankJobGenerator::rank(std::size_t r) const
{
    if (r >= m_options.ranks)
        throw UsageError("rank " + std::to_string(r) + " is not below the " + std::to_string(m_options.ranks) + " ranks");
    const auto& o = m_options;
    const SizeMap size { std::uint64_t(10000 + draw(o.seed, r, 1, std::llround(o.sizeJitter * 10000))) };
    const TimeMap time { m_start, draw(o.seed, r, 2, o.clockSkew / 2) + o.clockSkew / 2, draw(o.seed, r, 3, std::llround(o.timeJitter * 1e6)) };

    TraceBuilder b;
    nlohmann::json meta = m_base.metadata();
    if (!meta.is_object())
        meta = nlohmann::json::object();
    meta["environment"]["RANK"] = std::to_string(r);
    meta["environment"]["LOCAL_RANK"] = std::to_string(r % 8);
    meta["environment"]["WORLD_SIZE"] = std::to_string(o.ranks);
    if (meta.contains("kineto") && meta["kineto"].is_object() && meta["kineto"].contains("distributed"))
        meta["kineto"]["distributed"]["rank"] = r;
    meta["job_generator"] = { { "rank", r }, { "ranks", o.ranks }, { "seed", o.seed }, { "size_per_10000", size.m },
        { "clock_offset_ns", time.offset }, { "time_per_million", 1'000'000 + time.j }, { "leak", r == m_leakRank },
        { "extra_buffer", r == m_extraRank } };
    b.metadata() = std::move(meta);

    // Tables as they are (ids kept: strings are unique, so interning them in order gives the same ids).
    const StringTable& strings = m_base.strings();
    for (StringId s = 1; s < strings.size(); ++s)
        b.intern(strings.at(s));
    for (const auto& d : m_base.devices())
        b.addDevice(d);
    for (const auto& s : m_base.streams())
        b.addStream(s);
    for (std::size_t f = 1; f < m_base.frames().size(); ++f)
        b.appendFrame(m_base.frames()[f]);
    for (SiteId s = 1; s < m_base.siteCount(); ++s)
        b.appendSite(m_base.siteFrames(s));
    for (std::size_t s = 1; s < m_base.scopes().size(); ++s)
        b.appendScope(m_base.scopes()[s]);
    for (const auto& c : m_base.counterSeries())
        b.addCounterSeries(c);
    for (const auto& a : m_base.importStats().anomalies())
        b.stats().add(a.code, a.severity, a.detail, a.count);

    const auto& m = m_base.memory();
    std::uint64_t sequence = 0;
    for (std::size_t i = 0; i < m.count(); ++i) {
        MemoryEvent e = m.row(i);
        e.time = time(e.time);
        const Address end = size(e.address + e.size);
        e.address = size(e.address);
        const Bytes mapped = e.size ? std::max<Bytes>(end - e.address, 1) : 0;
        e.requestedSize = std::min(mapped, size(e.requestedSize));
        e.size = mapped;
        sequence = std::max(sequence, e.sequence);
        b.add(e);
    }

    std::vector<Injection> injected;
    if (r == m_leakRank)
        injected = m_leaks;
    if (r == m_extraRank)
        injected.push_back(m_extra);
    StreamId stream = 0;
    bool haveStream = false;
    for (std::size_t s = 0; s < m_base.streams().size(); ++s)
        if (m_base.streams()[s].device == m_device && !haveStream) {
            stream = static_cast<StreamId>(s);
            haveStream = true;
        }
    if (!haveStream && !injected.empty())
        stream = b.stream(m_device, 0);
    for (const auto& inj : injected) {
        const ScopeId scope = b.scope(0, inj.leak ? kLeakModule : kExtraModule, ScopeKind::Module);
        const FrameId frame = b.frame(inj.leak ? kLeakFunction : kExtraFunction, inj.leak ? kLeakFile : kExtraFile, inj.leak ? 17 : 9);
        const SiteId site = b.site(std::span<const FrameId>(&frame, 1));
        MemoryEvent e;
        e.device = m_device;
        e.stream = stream;
        e.address = size(inj.address);
        e.size = size(inj.address + inj.size) - e.address;
        e.requestedSize = e.size;
        e.scope = scope;
        e.site = site;
        e.time = time(inj.alloc);
        if (m_segments) {
            e.kind = EventKind::SegmentAlloc;
            e.sequence = ++sequence;
            b.add(e);
        }
        e.kind = EventKind::Alloc;
        e.sequence = ++sequence;
        b.add(e);
        if (inj.free) {
            e.time = time(*inj.free);
            e.kind = EventKind::Free;
            e.sequence = ++sequence;
            b.add(e);
            if (m_segments) {
                e.kind = EventKind::SegmentFree;
                e.sequence = ++sequence;
                b.add(e);
            }
        }
    }

    for (Kernel k : m_base.kernels()) {
        k.start = time(k.start);
        k.end = time(k.end);
        b.add(k);
    }
    for (Annotation a : m_base.annotations()) {
        a.start = time(a.start);
        a.end = time(a.end);
        b.add(a);
    }
    // Byte counters of the device scale like sizes and hold the injected blocks while they are live.
    std::vector<bool> bytesSeries;
    for (const auto& c : m_base.counterSeries()) {
        const std::string_view name = m_base.str(c.name);
        bytesSeries.push_back((c.device == m_device || c.device == kNoDevice)
            && (name.find("Allocated") != std::string_view::npos || name.find("Reserved") != std::string_view::npos));
    }
    for (CounterSample s : m_base.counterSamples()) {
        if (s.series < bytesSeries.size() && bytesSeries[s.series]) {
            std::int64_t extra = 0;
            for (const auto& inj : injected)
                if (inj.alloc <= s.time && (!inj.free || s.time < *inj.free))
                    extra += static_cast<std::int64_t>(inj.size);
            s.value = size.scaleSigned(s.value + extra);
        }
        s.time = time(s.time);
        b.add(s);
    }
    return b.build();
}

std::vector<std::string> RankJobGenerator::write(const std::string& dir, std::string_view extension) const
{
    if (extension != "gmt" && extension != "jsonl")
        throw UsageError("a rank trace is written as gmt or jsonl, not '" + std::string(extension) + "'");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        throw IoError(dir + ": cannot create the folder: " + ec.message());
    std::vector<std::string> paths;
    for (std::size_t r = 0; r < m_options.ranks; ++r) {
        const std::string path = (std::filesystem::path(dir) / fileName(r, extension)).string();
        const Trace t = rank(r);
        if (extension == "gmt")
            writeGmt(t, path);
        else
            writeJsonl(t, path);
        paths.push_back(path);
    }
    return paths;
}

} // namespace gpumem::bench
