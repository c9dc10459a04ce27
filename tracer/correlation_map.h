#pragma once
// CorrelationMap: joins what an allocation API callback knew at the moment of the call (the
// calling thread and its NVTX range stack) with the MEMORY2 activity record that CUPTI delivers
// later, on another thread, carrying the same correlationId (cupti.md §2.5). Which of the runtime
// or the driver correlation id a MEMORY2 record carries is unverified, so callbacks remember both
// and the unmatched one is evicted. Bounded: beyond `capacity` entries the oldest ids go first.
// Thread-safe (one mutex, in-memory work only).
#include "core/types.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace gpumem::tracer {

struct CallOrigin {
    ScopeId scope = 0;       // the innermost NVTX range of the calling thread (0: none)
    std::uint64_t thread = 0; // kernel thread id of the caller
};

class CorrelationMap {
public:
    explicit CorrelationMap(std::size_t capacity = std::size_t(1) << 20);
    void remember(std::uint32_t correlationId, CallOrigin origin);
    // The origin remembered for `correlationId`, removed from the map; nullopt when unknown.
    std::optional<CallOrigin> take(std::uint32_t correlationId);
    std::size_t size() const;

private:
    mutable std::mutex m_mutex;
    std::map<std::uint32_t, CallOrigin> m_origins;
    std::size_t m_capacity;
};

} // namespace gpumem::tracer
