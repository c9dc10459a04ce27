#pragma once
// What a replay must know before it feeds the events of one device (replay/replayer.h), and livePeak
// too: one pass over a MemoryEventSource ahead of the replay (docs/streaming.md "Replay"). It holds
// one entry per recorded segment of a fidelity replay and per free without an alloc where asked, and
// two bits per allocation once the trace has a free_completed; nothing per event.
#include "core/event_source.h"
#include "core/outside_memory.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <optional>
#include <utility>
#include <vector>

namespace gpumem::replay::detail {

struct Foresight {
    std::uint64_t events = 0; // memory events of the trace
    std::uint64_t firstDeviceEvent = 0; // the device's first event (events when none)
    TimeNs firstDeviceTime = 0; // its time (the last event's when the device has none)
    std::uint64_t firstWindowEvent = 0; // the device's first event after the rebuilt state (events when none)
    std::uint32_t allocationsBeforeWindow = 0; // allocations (all devices) before firstWindowEvent
    std::optional<FirstRequest> firstRequest; // the device's first request-level event
    bool requestsFrees = false; // RequestFeeder::requestsFrees
    bool completions = false; // the trace has a free_completed event
    // By allocation (empty until the first free_completed of the device): its free has a later
    // free_completed; that completion is the device's next event after the free.
    std::vector<bool> laterCompletion, completionFollows;
    std::vector<std::pair<Address, Bytes>> hints; // the window's recorded segment_alloc (followRecorded)
    struct OpeningFree {
        std::uint64_t event = 0;
        TimeNs time = 0;
        Bytes request = 0;
        StreamKey stream = 0;
    };
    std::vector<OpeningFree> unmatchedFrees; // the device's frees without an alloc (openingAllocated > 0)
    std::optional<AllocationSourcePeak> sourcePeak; // fed where outsideMemory needs the events

    bool laterCompletionOf(std::uint32_t a) const { return a < laterCompletion.size() && laterCompletion[a]; }
    bool completionFollowsOf(std::uint32_t a) const { return a < completionFollows.size() && completionFollows[a]; }
};

// One pass over `source` for device `dev`, whose first `preWindow` events are the state before the
// window. options.followRecorded asks for the hints, options.openingAllocated > 0 for the frees without
// an alloc; needSourcePeak feeds sourcePeak.
Foresight foresee(const MemoryEventSource& source, DeviceId dev, std::uint64_t preWindow, const ReplayOptions& options,
    bool needSourcePeak);

} // namespace gpumem::replay::detail
