#include "replay/start_state.h"

#include "core/error.h"
#include "core/units.h"
#include "replay/fidelity.h"

namespace gpumem::replay {

std::string_view toString(StartState start) { return start == StartState::Empty ? "empty" : "recorded"; }

StartState parseStartState(std::string_view text)
{
    if (text == "recorded")
        return StartState::Recorded;
    if (text == "empty")
        return StartState::Empty;
    throw UsageError("--start '" + std::string(text)
        + "' is not one of: recorded (the memory from before the trace is live from the start, the default), "
          "empty");
}

void applyStartState(ReplayOptions& options, const Trace& trace, StartState start)
{
    applyStartState(options, *traceView(trace), start);
}

void applyStartState(ReplayOptions& options, const MemoryEventSource& source, StartState start)
{
    if (start == StartState::Empty) {
        options.initialState = InitialStateMode::Empty;
        options.openingAllocated = 0;
        return;
    }
    options.initialState = InitialStateMode::Allocate;
    const auto device = options.device ? options.device : defaultReplayDevice(source);
    options.openingAllocated = device ? openingAllocated(source, *device) : 0;
}

MemoryBeforeWindow memoryBeforeWindow(const Trace& trace, DeviceId device)
{
    return memoryBeforeWindow(*traceView(trace), device);
}

MemoryBeforeWindow memoryBeforeWindow(const MemoryEventSource& source, DeviceId device)
{
    return { openingAllocated(source, device), initialStateEventCount(source.skeleton(), device) };
}

std::size_t firstWindowEvent(const Trace& trace, DeviceId device)
{
    const auto& m = trace.memory();
    const std::uint64_t rebuilt = initialStateEventCount(trace, device);
    std::size_t first = 0;
    for (std::uint64_t seen = 0; first < m.count(); ++first)
        if (m.device[first] == device && seen++ == rebuilt)
            break;
    return first;
}

std::string startStateSentence(StartState start, const MemoryBeforeWindow& before)
{
    if (!before.any())
        return "start: " + std::string(toString(start)) + " (the trace holds nothing from before its window)";
    std::string what;
    if (before.openingAllocated > 0)
        what = "the " + formatBytes(before.openingAllocated) + " allocated before the trace";
    if (before.rebuiltEvents > 0)
        what += (what.empty() ? "the " : " and the ") + counted(before.rebuiltEvents, "event", "events")
            + " rebuilt from before the window";
    if (start == StartState::Empty)
        return "start: empty: every row leaves out " + what + ", so every figure undercounts the run (≥)";
    std::string s = "start: recorded: every row starts with " + what;
    if (before.openingAllocated > 0)
        s += " (held as opaque blocks; the cache reserved around them is not known, so reserved is a lower bound, "
             "≥)";
    else
        s += " (each policy lays those blocks out as its own requests)";
    return s;
}

} // namespace gpumem::replay
