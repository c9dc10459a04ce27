#include "replay/policies/ideal_policy.h"

namespace gpumem::replay {

std::optional<Address> IdealPolicy::obtain(Bytes size, StreamKey)
{
    Bytes capacity = device().capacity();
    if (capacity != 0 && (m_stats.allocated > capacity || size > capacity - m_stats.allocated))
        return std::nullopt;
    auto it = m_freeBySize.find(size);
    if (it != m_freeBySize.end() && !it->second.empty()) {
        Address a = it->second.back();
        it->second.pop_back();
        return a;
    }
    Address a = m_next;
    m_next += size;
    return a;
}

void IdealPolicy::release(Address address, Bytes size, StreamKey) { m_freeBySize[size].push_back(address); }

} // namespace gpumem::replay
