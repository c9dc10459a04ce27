#pragma once
// What a replay must know before it feeds the events of one device (replay/replayer.h), and livePeak
// too: one pass over a MemoryEventSource ahead of the replay (docs/streaming.md "Replay"). It holds
// one entry per recorded segment of a fidelity replay and per free without an alloc where asked, and
// two bits per allocation once the trace has a free_completed; nothing per event.
#include "core/chunk_pairing.h"
#include "core/event_source.h"
#include "core/outside_memory.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <span>
#include <vector>

namespace gpumem::replay::detail {

// The pairing of each event of a pass (the rules of Trace::allocations()): a ChunkPairing over the
// chunks of a source, or, for a whole trace (MemoryEventSource::wholeTrace), the trace's own pairing
// looked up by event (4 B per event, built once per replay: pairing again on every pass cost a
// replay a third of its speed). Either way, step() gives each event in trace order its outcome and
// its allocation (index into Trace::allocations(), allocs in trace order).
class EventPairing {
public:
    struct Paired {
        ChunkPairing::Pairing pairing = ChunkPairing::Pairing::None;
        std::uint32_t allocation = 0; // for Opened, Closed, Completed
    };
    // For a whole trace, the allocation of each event (kNoAllocation where none: Trace::allocationOfEvents,
    // kept with the trace); empty otherwise.
    static std::span<const std::uint32_t> allocationOfEvents(const MemoryEventSource& source);
    // `allocationOf`: allocationOfEvents(source) where the source is a whole trace, else empty (a
    // ChunkPairing pairs, tracking completions if `completions`). Must outlive the pairing.
    EventPairing(std::span<const std::uint32_t> allocationOf, bool completions);
    Paired step(const MemoryEventColumns& m, std::size_t j, std::uint64_t index)
    {
        if (m_pairing)
            return streamedStep(m, j, index);
        using P = ChunkPairing::Pairing;
        const std::uint32_t a = m_allocationOf[index];
        switch (m.kind[j]) {
        case EventKind::Alloc:
            ++m_allocations;
            return { P::Opened, a };
        case EventKind::Free:
            return a == kNone ? Paired { P::Unmatched, 0 } : Paired { P::Closed, a };
        case EventKind::FreeCompleted:
            return a == kNone ? Paired { P::Uncompleted, 0 } : Paired { P::Completed, a };
        default:
            return {};
        }
    }
    std::uint64_t allocations() const { return m_allocations; } // allocs so far

private:
    static constexpr std::uint32_t kNone = Trace::kNoAllocationOfEvent; // = RequestFeeder::kNoAllocation
    Paired streamedStep(const MemoryEventColumns& m, std::size_t j, std::uint64_t index);
    std::span<const std::uint32_t> m_allocationOf;
    ImportStats m_discarded; // the pairing's anomalies are the trace's (info and analyze report them)
    std::optional<ChunkPairing> m_pairing;
    std::uint64_t m_allocations = 0;
};

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
// allocationOf: EventPairing::allocationOfEvents(source).
// `alsoVisit`, when given, sees every chunk of the pass before the look-ahead reads it (a caller's own facts in
// the same pass: replay::foreseeWith); the pass then reads every event (no early end), and when it starts over
// with completions (a source's first free_completed) `restarted` is called first, so that the caller drops what
// it gathered.
struct PassVisitor {
    std::function<void(const MemoryEventColumns&, std::uint64_t first)> chunk;
    std::function<void()> restarted;
};
Foresight foresee(const MemoryEventSource& source, std::span<const std::uint32_t> allocationOf, DeviceId dev,
    std::uint64_t preWindow, const ReplayOptions& options, bool needSourcePeak, const PassVisitor* alsoVisit = nullptr);

} // namespace gpumem::replay::detail

namespace gpumem::replay {

// ReplayOptions::foresight (replay/replayer.h): foresee()'s result by what it depends on besides the events.
class ForesightMemo {
public:
    struct Key {
        DeviceId device = 0;
        std::uint64_t preWindow = 0;
        bool followRecorded = false;
        Bytes openingAllocated = 0;
        bool needSourcePeak = false;
        bool wholeTrace = false; // paired by the trace's own allocations (the same result, kept apart)
        friend bool operator==(const Key&, const Key&) = default;
    };
    // The foresight for `key`, made by compute() the first time (under the lock: replays running in parallel
    // wait for the one pass rather than each running it). What compute() throws is thrown and nothing is kept.
    template <typename F> std::shared_ptr<const detail::Foresight> of(const Key& key, F&& compute)
    {
        std::lock_guard lock(m_mutex);
        for (const auto& [k, f] : m_entries)
            if (k == key)
                return f;
        auto made = std::make_shared<const detail::Foresight>(compute());
        m_entries.emplace_back(key, made);
        return made;
    }

private:
    std::mutex m_mutex;
    std::vector<std::pair<Key, std::shared_ptr<const detail::Foresight>>> m_entries;
};

} // namespace gpumem::replay
