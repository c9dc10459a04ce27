#include "replay/policies/fit_policy.h"

namespace gpumem::replay {

FitPolicy::FitPolicy(SimulatedDevice& device, detail::FreeListConfig config)
    : AllocatorPolicy(device)
    , m_heap(device, config)
{
}

std::string FitPolicy::name() const
{
    std::string options = config().toString();
    std::string rule(detail::toString(config().rule));
    return options.empty() ? rule : rule + ":" + options;
}

std::optional<Address> FitPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    return m_heap.allocateFor(bytes, stream, m_stats);
}

void FitPolicy::doDeallocate(Address address, Bytes, StreamKey) { m_heap.freeFor(address, m_stats); }

void FitPolicy::doReleaseCached()
{
    m_heap.release();
    m_stats.reserved = device().counters().reserved;
}

PolicyState FitPolicy::describeState() const
{
    PolicyState state;
    m_heap.describe(state);
    return state;
}

FragmentationSample FitPolicy::fragmentation() const
{
    FragmentationSample s;
    s.reserved = m_stats.reserved;
    s.allocated = m_stats.allocated;
    m_heap.addFree(s);
    return s;
}

} // namespace gpumem::replay
