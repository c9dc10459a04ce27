#include "replay/adaptors/statistics_adaptor.h"

namespace gpumem::replay {

void StatisticsAdaptor::afterCall(PolicyCall call, bool ok)
{
    if (call == PolicyCall::Allocate)
        ++(ok ? m_calls.allocations : m_calls.failures);
    else if (call == PolicyCall::Deallocate)
        ++m_calls.deallocations;
    if (m_peaksPaused)
        return;
    if (m_stats.reserved > m_peakReserved.bytes) {
        m_peakReserved = { m_stats.reserved, m_clock->time, m_clock->event };
        m_atPeak = upstream().fragmentation();
    } else if (m_stats.reserved == m_peakReserved.bytes && m_stats.allocated > m_atPeak.allocated) {
        // Still at the peak reservation, and more of it in use: the waste the peak really had.
        m_atPeak = upstream().fragmentation();
    }
    if (m_stats.allocated > m_peakAllocated.bytes)
        m_peakAllocated = { m_stats.allocated, m_clock->time, m_clock->event };
    if (m_stats.requested > m_peakRequested.bytes)
        m_peakRequested = { m_stats.requested, m_clock->time, m_clock->event };
}

} // namespace gpumem::replay
