#include "replay/detail/foresight.h"

#include "replay/request_feeder.h"

#include <algorithm>

namespace gpumem::replay::detail {

std::span<const std::uint32_t> EventPairing::allocationOfEvents(const MemoryEventSource& source)
{
    const Trace* trace = source.wholeTrace();
    return trace ? trace->allocationOfEvents() : std::span<const std::uint32_t> {};
}

EventPairing::EventPairing(std::span<const std::uint32_t> allocationOf, bool completions)
    : m_allocationOf(allocationOf)
{
    if (allocationOf.empty())
        m_pairing.emplace(m_discarded, completions);
}

EventPairing::Paired EventPairing::streamedStep(const MemoryEventColumns& m, std::size_t j, std::uint64_t index)
{
    const auto out = m_pairing->step(m, j, index);
    m_allocations = m_pairing->allocations();
    return { out.pairing, out.block.allocation };
}

namespace {
// Thrown by a pass that pairs without completions at the first free_completed event: it starts over with them.
struct CompletionsFound { };

// foresee()'s pass, pairing `completions` or not (without: CompletionsFound at the first free_completed event).
Foresight foreseeOnce(const MemoryEventSource& source, std::span<const std::uint32_t> allocationOf, DeviceId dev,
    std::uint64_t preWindow, const ReplayOptions& options, bool needSourcePeak, bool completions, const PassVisitor* alsoVisit)
{
    const Trace& tables = source.skeleton();
    Foresight f;
    // The pairing's outcomes are read only for completions and for the frees without an alloc; without either
    // (every trace without a free_completed event, as long as no opening allocation is replayed) the pass only
    // counts the allocs: pairing them there was a tenth of text analyze's time on a 10 M-event stream (issue 22).
    const bool pair = completions || options.openingAllocated > 0;
    EventPairing pairing(allocationOf, completions);
    std::uint64_t allocsCounted = 0; // the allocs so far, where the pass does not pair
    auto allocationsSoFar = [&] { return pair ? pairing.allocations() : allocsCounted; };
    std::optional<AllocationSourcePeak> sourcePeak;
    if (needSourcePeak)
        sourcePeak.emplace(tables, dev);
    std::vector<StreamKey> streamKey(tables.streams().size());
    for (std::size_t s = 0; s < streamKey.size(); ++s)
        streamKey[s] = tables.streams()[s].handle;
    std::uint64_t seen = 0;
    bool windowFound = false;
    // The allocation the device's previous event closed (a free), kNoAllocation otherwise.
    std::uint32_t previousFree = RequestFeeder::kNoAllocation;
    TimeNs lastTime = 0;
    // A whole trace has its completions paired already (Trace::allocations(), below): the scan stops once
    // the window and the first request are found, unless hints, frees without an alloc or the
    // allocation-source peak need every event.
    const Trace* whole = source.wholeTrace();
    const bool scanAll = !whole || options.followRecorded || options.openingAllocated > 0 || sourcePeak || alsoVisit;
    struct Seen { };
    try {
    source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) {
        if (alsoVisit)
            alsoVisit->chunk(m, first);
        for (std::size_t j = 0; j < m.count(); ++j) {
            const std::uint64_t i = first + j;
            if (!scanAll && windowFound && f.firstRequest)
                throw Seen {};
            if (!completions && m.kind[j] == EventKind::FreeCompleted)
                throw CompletionsFound {};
            const std::uint64_t allocationsBefore = allocationsSoFar();
            EventPairing::Paired out;
            if (pair)
                out = pairing.step(m, j, i);
            else
                allocsCounted += m.kind[j] == EventKind::Alloc;
            lastTime = m.time[j];
            if (m.kind[j] == EventKind::FreeCompleted)
                f.completions = true;
            if (sourcePeak)
                sourcePeak->add(m, j);
            if (m.device[j] != dev)
                continue;
            if (seen == 0) {
                f.firstDeviceEvent = i;
                f.firstDeviceTime = m.time[j];
            }
            if (!windowFound && seen == preWindow) {
                windowFound = true;
                f.firstWindowEvent = i;
                f.allocationsBeforeWindow = std::uint32_t(allocationsBefore);
            }
            if (!f.firstRequest && isRequestLevel(m.kind[j]))
                f.firstRequest = FirstRequest { m.kind[j], m.size[j] };
            if (options.followRecorded && seen >= preWindow && m.kind[j] == EventKind::SegmentAlloc)
                f.hints.emplace_back(m.address[j], m.size[j]);
            ++seen;
            if (out.pairing == ChunkPairing::Pairing::Unmatched && options.openingAllocated > 0)
                f.unmatchedFrees.push_back({ i, m.time[j], m.requestedSize[j] ? m.requestedSize[j] : m.size[j],
                    streamKey[m.stream[j]] });
            if (out.pairing == ChunkPairing::Pairing::Completed && !whole) {
                const std::uint32_t a = out.allocation;
                if (f.laterCompletion.size() <= a) { // grown by doubling: one resize per event cost a tenth of the pass
                    const std::size_t size = std::max<std::size_t>(pairing.allocations(), 2 * f.laterCompletion.size());
                    f.laterCompletion.resize(size, false);
                    f.completionFollows.resize(size, false);
                }
                f.laterCompletion[a] = true;
                if (previousFree == a)
                    f.completionFollows[a] = true;
                else
                    f.requestsFrees = true;
            }
            previousFree = out.pairing == ChunkPairing::Pairing::Closed ? out.allocation : RequestFeeder::kNoAllocation;
        }
    });
    } catch (const Seen&) {
    }
    if (whole) {
        // The same bits from the trace's pairing: a free of the device with a later free_completed, and
        // whether that completion is the device's next event.
        const auto& m = whole->memory();
        const auto allocs = whole->allocations();
        f.completions = false;
        for (std::size_t a = 0; a < allocs.size(); ++a) {
            const Allocation& al = allocs[a];
            f.completions |= al.freeCompletedEvent != kNoIndex;
            if (al.freeEvent == kNoIndex || al.freeCompletedEvent == kNoIndex || m.device[al.freeEvent] != dev)
                continue;
            if (f.laterCompletion.empty()) {
                f.laterCompletion.resize(allocs.size(), false);
                f.completionFollows.resize(allocs.size(), false);
            }
            f.laterCompletion[a] = true;
            std::size_t next = al.freeEvent + 1;
            while (next < m.count() && m.device[next] != dev)
                ++next;
            if (next == al.freeCompletedEvent)
                f.completionFollows[a] = true;
            else
                f.requestsFrees = true;
        }
    }
    f.events = source.eventCount();
    if (seen == 0) {
        f.firstDeviceEvent = f.events;
        f.firstDeviceTime = lastTime;
    }
    if (!windowFound)
        f.firstWindowEvent = f.events, f.allocationsBeforeWindow = std::uint32_t(allocationsSoFar());
    f.sourcePeak = std::move(sourcePeak);
    return f;
}
} // namespace

Foresight foresee(const MemoryEventSource& source, std::span<const std::uint32_t> allocationOf, DeviceId dev,
    std::uint64_t preWindow, const ReplayOptions& options, bool needSourcePeak, const PassVisitor* alsoVisit)
{
    // A source is paired without completions until its first free_completed event: tracked, every freed block
    // waits for a completion that a trace without any never brings, so the pairing kept an entry per address
    // ever freed (a 10 M-event malloc stream: 65 → 24 MiB and a third of the replay's time). The trace that has
    // one is paired again from its start with them (snapshots bring their first one within a few events).
    if (!source.wholeTrace())
        try {
            return foreseeOnce(source, allocationOf, dev, preWindow, options, needSourcePeak, false, alsoVisit);
        } catch (const CompletionsFound&) {
            if (alsoVisit && alsoVisit->restarted)
                alsoVisit->restarted();
        }
    return foreseeOnce(source, allocationOf, dev, preWindow, options, needSourcePeak, true, alsoVisit);
}


} // namespace gpumem::replay::detail
