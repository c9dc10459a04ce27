#pragma once
// The shared, read-only body of a Trace. Only TraceBuilder writes it, before it is shared.
#include "core/trace.h"

#include <nlohmann/json.hpp>

#include <mutex>

namespace gpumem::detail {

struct TraceBody {
    nlohmann::json metadata = nlohmann::json::object();
    StringTable strings;
    std::vector<Device> devices;
    std::vector<Stream> streams;
    std::vector<Frame> frames { Frame {} };      // frame 0: unknown
    std::vector<Scope> scopes { Scope {} };      // scope 0: root
    std::vector<MemoryPool> pools { MemoryPool {} }; // pool 0: the default pool
    std::vector<std::uint32_t> siteOffsets { 0, 0 }; // site i's frames: [siteOffsets[i], siteOffsets[i+1]); site 0 empty
    std::vector<FrameId> siteFrames;
    MemoryEventColumns memory;
    std::vector<Kernel> kernels;
    std::vector<Annotation> annotations;
    std::vector<CounterSeries> counterSeries;
    std::vector<CounterSample> counterSamples;
    ImportStats importStats;

    // Derived on first use (Trace::allocations / Trace::stats).
    mutable std::once_flag pairedOnce;
    mutable std::vector<Allocation> allocations;
    mutable ImportStats stats;
    void pair() const;
    mutable std::once_flag allocationOfEventsOnce;
    mutable std::vector<std::uint32_t> allocationOfEvents;
};

} // namespace gpumem::detail
