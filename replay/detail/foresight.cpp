#include "replay/detail/foresight.h"

#include "core/chunk_pairing.h"
#include "replay/request_feeder.h"

namespace gpumem::replay::detail {

Foresight foresee(const MemoryEventSource& source, DeviceId dev, std::uint64_t preWindow, const ReplayOptions& options,
    bool needSourcePeak)
{
    const Trace& tables = source.skeleton();
    Foresight f;
    ImportStats discarded;
    ChunkPairing pairing(discarded, true);
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
    source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) {
        for (std::size_t j = 0; j < m.count(); ++j) {
            const std::uint64_t i = first + j;
            const std::uint64_t allocationsBefore = pairing.allocations();
            const auto out = pairing.step(m, j, i);
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
            if (out.pairing == ChunkPairing::Pairing::Completed) {
                const std::uint32_t a = out.block.allocation;
                if (f.laterCompletion.size() < pairing.allocations()) {
                    f.laterCompletion.resize(pairing.allocations(), false);
                    f.completionFollows.resize(pairing.allocations(), false);
                }
                f.laterCompletion[a] = true;
                if (previousFree == a)
                    f.completionFollows[a] = true;
                else
                    f.requestsFrees = true;
            }
            previousFree = out.pairing == ChunkPairing::Pairing::Closed ? out.block.allocation : RequestFeeder::kNoAllocation;
        }
    });
    f.events = source.eventCount();
    if (seen == 0) {
        f.firstDeviceEvent = f.events;
        f.firstDeviceTime = lastTime;
    }
    if (!windowFound)
        f.firstWindowEvent = f.events, f.allocationsBeforeWindow = std::uint32_t(pairing.allocations());
    f.sourcePeak = std::move(sourcePeak);
    return f;
}

} // namespace gpumem::replay::detail
