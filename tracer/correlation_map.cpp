#include "tracer/correlation_map.h"

namespace gpumem::tracer {

CorrelationMap::CorrelationMap(std::size_t capacity)
    : m_capacity(capacity == 0 ? 1 : capacity)
{
}

void CorrelationMap::remember(std::uint32_t correlationId, CallOrigin origin)
{
    std::lock_guard lock(m_mutex);
    m_origins[correlationId] = origin;
    while (m_origins.size() > m_capacity)
        m_origins.erase(m_origins.begin());
}

std::optional<CallOrigin> CorrelationMap::take(std::uint32_t correlationId)
{
    std::lock_guard lock(m_mutex);
    auto it = m_origins.find(correlationId);
    if (it == m_origins.end())
        return std::nullopt;
    CallOrigin o = it->second;
    m_origins.erase(it);
    return o;
}

std::size_t CorrelationMap::size() const
{
    std::lock_guard lock(m_mutex);
    return m_origins.size();
}

} // namespace gpumem::tracer
