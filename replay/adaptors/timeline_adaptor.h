#pragma once
// Adaptor that records the reserved and allocated curves: after every call to its upstream it appends
// a point (time and event index from the ReplayClock) when either value changed. Several points may
// share a time; the last point of a time is the state after all of its events. Not thread-safe.
#include "replay/adaptors/policy_adaptor.h"

#include <vector>

namespace gpumem::replay {

struct TimelinePoint {
    TimeNs time = 0;
    std::uint64_t event = 0;
    Bytes reserved = 0;
    Bytes allocated = 0;
    friend bool operator==(const TimelinePoint&, const TimelinePoint&) = default;
};

class TimelineAdaptor final : public PolicyAdaptor {
public:
    TimelineAdaptor(AllocatorPolicy& upstream, const ReplayClock& clock)
        : PolicyAdaptor(upstream, clock)
    {
    }
    const std::vector<TimelinePoint>& points() const { return m_points; }
    std::vector<TimelinePoint> takePoints() { return std::move(m_points); }

private:
    void afterCall(PolicyCall, bool) override
    {
        if (!m_points.empty() && m_points.back().reserved == m_stats.reserved
            && m_points.back().allocated == m_stats.allocated)
            return;
        m_points.push_back({ m_clock->time, m_clock->event, m_stats.reserved, m_stats.allocated });
    }
    std::vector<TimelinePoint> m_points;
};

} // namespace gpumem::replay
