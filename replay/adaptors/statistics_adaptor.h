#pragma once
// Adaptor that adds counts and peaks to the policy it wraps: peak reserved, allocated and requested
// bytes with the time and event index of their first occurrence (from the ReplayClock), the
// fragmentation at the reserved peak, and the number of calls and failures. Not thread-safe.
#include "replay/adaptors/policy_adaptor.h"

namespace gpumem::replay {

struct PeakAt {
    Bytes bytes = 0;
    TimeNs time = 0;
    std::uint64_t event = 0;
};

struct CallCounts {
    std::uint64_t allocations = 0;
    std::uint64_t deallocations = 0;
    std::uint64_t failures = 0;
};

class StatisticsAdaptor final : public PolicyAdaptor {
public:
    StatisticsAdaptor(AllocatorPolicy& upstream, const ReplayClock& clock)
        : PolicyAdaptor(upstream, clock)
    {
        afterCall(PolicyCall::Adopt, true);
    }
    const PeakAt& peakReserved() const { return m_peakReserved; }
    const PeakAt& peakAllocated() const { return m_peakAllocated; }
    const PeakAt& peakRequested() const { return m_peakRequested; }
    // Fragmentation while reserved is at its peak, sampled when the most of it was allocated (a policy
    // that reaches its peak reservation early and fills it later — a planned arena — is not charged
    // with the waste of the first instant).
    const FragmentationSample& atPeakReserved() const { return m_atPeak; }
    const CallCounts& calls() const { return m_calls; }
    // Restarts the peaks from the current state (after adopting a trace window's initial state, whose
    // segments arrive before their blocks).
    void resetPeaks()
    {
        m_peaksPaused = false;
        m_peakReserved = m_peakAllocated = m_peakRequested = PeakAt {};
        afterCall(PolicyCall::Adopt, true);
    }
    // Until the next resetPeaks(), calls keep the stats and counts but not the peaks: the state adopted
    // before a window, whose peaks restart at the window anyway (sampling the fragmentation at each new
    // peak while segments are adopted one by one walks the growing state once per segment, in every
    // probe of `gpumem fit`).
    void pausePeaks() { m_peaksPaused = true; }
    bool peaksPaused() const { return m_peaksPaused; }

private:
    void afterCall(PolicyCall call, bool ok) override;
    PeakAt m_peakReserved, m_peakAllocated, m_peakRequested;
    FragmentationSample m_atPeak;
    CallCounts m_calls;
    bool m_peaksPaused = false;
};

} // namespace gpumem::replay
