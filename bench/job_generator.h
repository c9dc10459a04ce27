#pragma once
// Makes the traces of a synthetic distributed job from one real trace (issue 20 item 4; docs/ranks.md,
// "A generated job"): N rank traces, each the base trace with its own deterministic perturbation, and two
// ranks with a known fault injected, so tests and benchmarks of `gpumem ranks` know the right answer:
//   - sizes: every address and size is mapped through x -> floor(x·(10000 + k)/10000), k drawn per rank in
//     ±sizeJitter·10000. One monotone map of both ends of every range keeps every block inside its segment
//     and blocks disjoint, and an alloc and its free get the same size. Recorded byte counters scale alike;
//   - timing: t -> t + offset + (t − start)·j/10^6, an offset in [0, clockSkew] ns and j in ±timeJitter·10^6
//     (each rank's own clock and speed); order is kept (the map never decreases);
//   - the leak rank: at the start of every step (the base trace's steps, analyze/steps.h; 4 equal windows
//     where it has none) one block that is never freed, leakShare × the base's peak allocated over the steps
//     in all, from its own module (kLeakModule) and call site (kLeakFunction in kLeakFile);
//   - the extra-buffer rank: one block of extraBufferShare × the peak, live from the first memory event to
//     after the last, from kExtraModule / kExtraFunction.
// Injected blocks sit above every address of the base trace, on its busiest device, with segment events where
// the base has them, and are added to its recorded "…Allocated"/"…Reserved" counters. Each rank trace names
// its rank as the tracer does (metadata environment.RANK, LOCAL_RANK = rank mod 8, WORLD_SIZE) and says how it
// was made (metadata job_generator). Deterministic: the same base, options and rank give the same trace.
// Thread-safe: rank() may be called from many threads at once.
#include "core/trace.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::bench {

inline constexpr std::size_t kNoRank = std::numeric_limits<std::size_t>::max();

inline constexpr std::string_view kLeakModule = "nn.Module: LeakyCache";
inline constexpr std::string_view kLeakFunction = "remember_batch";
inline constexpr std::string_view kLeakFile = "job_generator/leaky_cache.py";
inline constexpr std::string_view kExtraModule = "nn.Module: ExtraBuffer";
inline constexpr std::string_view kExtraFunction = "allocate_extra_buffer";
inline constexpr std::string_view kExtraFile = "job_generator/extra_buffer.py";

struct RankJobOptions {
    std::size_t ranks = 8;
    std::uint64_t seed = 1;
    // Default (nullopt): the last rank leaks and rank ranks/2 has the extra buffer, where ranks ≥ 3 (so the
    // median rank is a plain one); kNoRank: none.
    std::optional<std::size_t> leakRank {}, extraBufferRank {};
    double sizeJitter = 0.01;        // sizes change by at most this share
    std::int64_t clockSkew = 5'000'000; // ns, the largest clock offset
    double timeJitter = 0.005;       // durations change by at most this share
    double leakShare = 0.2;          // leaked bytes at the end, as a share of the base's peak allocated
    double extraBufferShare = 0.15;  // the extra buffer, as a share of the base's peak allocated
};

class RankJobGenerator {
public:
    // Throws UsageError for 0 ranks, a leak or extra-buffer rank ≥ ranks or both the same, shares outside [0, 4]
    // or jitters outside [0, 0.5), and a base trace without alloc events.
    RankJobGenerator(Trace base, RankJobOptions options);

    std::size_t ranks() const { return m_options.ranks; }
    std::size_t leakRank() const { return m_leakRank; }         // kNoRank: none
    std::size_t extraBufferRank() const { return m_extraRank; } // kNoRank: none
    Bytes leakBytesPerStep() const { return m_leakPerStep; }    // before the rank's size map
    Bytes extraBufferBytes() const { return m_extraBytes; }     // before the rank's size map

    // Rank r's trace (r < ranks()).
    Trace rank(std::size_t r) const;
    // "gpumem.job.<10000 + r>.rank<r>.<extension>", the tracer's naming (tracer/trace_writer_thread.cpp).
    static std::string fileName(std::size_t r, std::string_view extension);
    // Writes every rank to `dir` (created if missing) as .gmt ("gmt") or .jsonl ("jsonl"); the paths in rank
    // order. Throws UsageError for another extension, IoError when a file cannot be written.
    std::vector<std::string> write(const std::string& dir, std::string_view extension = "gmt") const;

private:
    struct Injection {
        TimeNs alloc = 0;
        std::optional<TimeNs> free;
        Address address = 0;
        Bytes size = 0;
        bool leak = false;
    };
    Trace m_base;
    RankJobOptions m_options;
    std::size_t m_leakRank = kNoRank, m_extraRank = kNoRank;
    DeviceId m_device = 0;
    TimeNs m_start = 0;
    Bytes m_leakPerStep = 0, m_extraBytes = 0;
    bool m_segments = false;
    std::vector<Injection> m_leaks; // one per step
    Injection m_extra;
};

} // namespace gpumem::bench
