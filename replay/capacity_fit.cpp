#include "replay/capacity_fit.h"

#include "core/error.h"
#include "replay/detail/address_map.h"
#include "replay/detail/foresight.h"
#include "replay/detail/round_to_multiple.h"
#include "replay/parallel_runs.h"

#include <algorithm>
#include <vector>

namespace gpumem::replay {

namespace {
    FitProbe probe(const MemoryEventSource& source, const PolicySpec& spec, Bytes capacity, const ReplayOptions& start)
    {
        ReplayOptions options = start;
        options.capacity = capacity;
        options.totalMemory = capacity;
        options.onOom = OnOom::Stop;
        ReplayResult r = Replayer(options).run(source, spec);
        FitProbe p { capacity, r.ooms == 0, r.peakReserved.bytes, std::nullopt };
        if (!r.failures.empty())
            p.failure = r.failures.front();
        return p;
    }
} // namespace

Bytes livePeak(const Trace& trace, std::optional<DeviceId> device, Bytes opening, bool withRebuilt)
{
    return livePeak(*traceView(trace), device, opening, withRebuilt);
}

Bytes livePeak(const MemoryEventSource& source, std::optional<DeviceId> device, Bytes opening, bool withRebuilt)
{
    // A sweep over the device's events in trace order (what `ideal:alignment:1` holds on an unlimited
    // device, without the replay engine's 4 EiB limit): + requested at the alloc, − at the
    // free_completed (at the free where none follows: the foresight says which). 128-bit sums; a peak
    // above 2^64 − 1 saturates. Holds the requested bytes of each block live, not a figure per event.
    if (!device)
        device = defaultReplayDevice(source);
    if (!device)
        return 0;
    const Trace& tables = source.skeleton();
    ReplayOptions ask;
    ask.openingAllocated = opening; // the frees without an alloc, when the opening bytes are held
    const std::span<const std::uint32_t> allocationOf = detail::EventPairing::allocationOfEvents(source);
    const detail::Foresight ahead
        = detail::foresee(source, allocationOf, *device, initialStateEventCount(tables, *device), ask, false);
    __extension__ typedef __int128 Wide; // GCC and Clang have it; -Wpedantic stays quiet
    // The index of the first window event: the blocks allocated before it are the rebuilt state.
    const std::uint64_t firstWindow = withRebuilt ? 0 : ahead.firstWindowEvent;
    // The rule of ReplayOptions::openingAllocated: the blocks freed without an alloc leave at their free
    // (when their bytes add up to at most the opening ones).
    Wide freed = 0;
    for (const auto& f : ahead.unmatchedFrees)
        freed += f.request;
    const bool freesLeave = opening > 0 && freed <= Wide(opening);
    Wide live = opening;
    Wide peak = live;
    detail::EventPairing pairing(allocationOf, ahead.completions);
    detail::AddressMap<Bytes> held; // allocation + 1 → its requested bytes, while counted
    source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) {
        for (std::size_t j = 0; j < m.count(); ++j) {
            const auto out = pairing.step(m, j, first + j);
            if (m.device[j] != *device)
                continue;
            const Bytes request = m.requestedSize[j] ? m.requestedSize[j] : m.size[j];
            const Address key = Address(out.allocation) + 1;
            switch (out.pairing) {
            case ChunkPairing::Pairing::Opened:
                if (first + j >= firstWindow) {
                    live += request;
                    held.insert(key, request);
                }
                break;
            case ChunkPairing::Pairing::Closed:
                if (ahead.laterCompletionOf(out.allocation))
                    break; // it leaves at its free_completed
                [[fallthrough]];
            case ChunkPairing::Pairing::Completed:
                if (const auto bytes = held.take(key))
                    live -= *bytes;
                break;
            case ChunkPairing::Pairing::Unmatched:
                if (freesLeave)
                    live -= request;
                break;
            default:
                break;
            }
            peak = std::max(peak, live);
        }
    });
    return peak > Wide(~Bytes(0)) ? ~Bytes(0) : static_cast<Bytes>(peak);
}

FitResult fitCapacity(const Trace& trace, const PolicySpec& spec, const FitOptions& options)
{
    return fitCapacity(*traceView(trace), spec, options);
}

FitResult fitCapacity(const MemoryEventSource& source, const PolicySpec& spec, const FitOptions& options)
{
    const Bytes step = options.step;
    if (step == 0)
        throw UsageError("fit: the capacity step must be at least 1 byte (default 2 MiB)");
    if (options.maxCapacity < step)
        throw UsageError("fit: the largest capacity to try must be at least one step (" + std::to_string(step) + " B)");
    FitResult result;
    result.spec = spec.text;
    // A streamed source serves one pass at a time: its probes run one after another, or in parallel on sources
    // of their own (options.reopen; forEachOnSource).
    std::uint64_t unlimitedOoms = 0;
    ReplayOptions start; // what every replay of the search starts from
    start.device = options.device;
    start.source = options.source; // an initial state a probe cannot adopt names the file
    start.outsideBytes = options.outsideBytes;
    applyStartState(start, source, options.start);
    result.openingAllocated = start.openingAllocated;
    const ReplayOptions& unlimited = start;

    // The bounds: the policy on an unlimited device, and the live bytes (two replays, in parallel).
    forEachOnSource(2, options.jobs, source, options.reopen, [&](const MemoryEventSource& on, std::size_t i) {
        if (i == 1) {
            result.lowerBound = livePeak(on, options.device, start.openingAllocated, options.start == StartState::Recorded);
            return;
        }
        ReplayResult free = Replayer(unlimited).run(on, spec);
        result.policy = free.policy;
        result.lowerBoundMark = free.reservedIsLowerBound;
        result.unlimitedPeakReserved = free.peakReserved.bytes;
        unlimitedOoms = free.ooms;
        if (!free.failures.empty())
            result.unlimitedFailure = free.failures.front();
    });
    // Nothing is ever reserved, without an OOM, on an unlimited device: the trace needs no memory (0 B),
    // not the smallest step (review finding: "fits in 2.00 MiB" for a trace without allocations).
    if (result.unlimitedPeakReserved == 0 && result.lowerBound == 0 && unlimitedOoms == 0) {
        result.fits = true;
        result.capacity = 0;
        result.maxCapacity = options.maxCapacity;
        return result;
    }

    std::vector<FitProbe>& probes = result.probes;
    auto run = [&](const std::vector<Bytes>& capacities) {
        std::vector<FitProbe> got(capacities.size());
        forEachOnSource(capacities.size(), options.jobs, source, options.reopen,
            [&](const MemoryEventSource& on, std::size_t i) { got[i] = probe(on, spec, capacities[i], start); });
        probes.insert(probes.end(), got.begin(), got.end());
        return got;
    };

    // Every capacity <= lo fails; hi fits (once found).
    // The memory outside the allocator comes on top of what the allocator needs (core/outside_memory.h).
    const Bytes outside = outsideBytesFor(source,
        options.device ? *options.device : defaultReplayDevice(source).value_or(0), options.outsideBytes);
    Bytes lo = result.lowerBound == 0 ? 0 : detail::roundUpToMultiple(result.lowerBound + outside, step) - step;
    Bytes hi = std::max(
        detail::roundUpToMultiple(std::max(result.unlimitedPeakReserved, result.lowerBound) + outside, step), lo + step);
    result.maxCapacity = options.maxCapacity;
    const Bytes top = detail::roundDownToMultiple(options.maxCapacity, step); // the largest capacity allowed
    auto noFit = [&] {
        std::sort(probes.begin(), probes.end(), [](auto& x, auto& y) { return x.capacity < y.capacity; });
        return result;
    };
    hi = std::min(hi, top);
    if (hi <= lo)
        return noFit(); // even the largest capacity allowed is below the live bytes
    while (!run({ hi }).front().fits) {
        if (hi >= top)
            return noFit();
        lo = hi;
        hi = hi > top / 2 ? top : std::min(top, detail::roundUpToMultiple(hi * 2, step));
    }
    while (hi - lo > step) {
        const Bytes slots = (hi - lo) / step - 1; // candidates strictly between lo and hi
        const Bytes k = std::min<Bytes>(kFitProbesPerRound, slots);
        std::vector<Bytes> capacities;
        for (Bytes j = 1; j <= k; ++j)
            capacities.push_back(lo + (slots + 1) * j / (k + 1) * step);
        capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
        auto got = run(capacities);
        Bytes newHi = hi;
        for (const auto& p : got)
            if (p.fits && p.capacity < newHi)
                newHi = p.capacity;
        Bytes newLo = lo;
        for (const auto& p : got)
            if (!p.fits && p.capacity < newHi)
                newLo = std::max(newLo, p.capacity);
        lo = newLo;
        hi = newHi;
    }
    std::sort(probes.begin(), probes.end(), [](auto& a, auto& b) { return a.capacity < b.capacity; });
    result.fits = true;
    result.capacity = hi;
    for (const auto& p : probes) {
        if (p.capacity == hi)
            result.peakReservedAtFit = p.peakReserved;
        if (p.capacity == hi - step)
            result.belowProbed = true;
    }
    // Non-monotone: some probe fits while a larger one fails.
    for (std::size_t i = 0; i < probes.size() && !result.nonMonotone; ++i)
        for (std::size_t j = i + 1; j < probes.size(); ++j)
            if (probes[i].fits && !probes[j].fits) {
                result.nonMonotone = std::make_pair(probes[i].capacity, probes[j].capacity);
                break;
            }
    return result;
}

} // namespace gpumem::replay
