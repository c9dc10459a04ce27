#include "replay/policies/simple_block_policy.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>

namespace gpumem::replay {

SimpleBlockPolicy::SimpleBlockPolicy(SimulatedDevice& device, std::string name, Bytes alignment)
    : AllocatorPolicy(device)
    , m_name(std::move(name))
    , m_alignment(std::max<Bytes>(alignment, 1))
{
}

std::string SimpleBlockPolicy::name() const
{
    return m_alignment == 512 ? m_name : m_name + ":alignment:" + std::to_string(m_alignment);
}

std::optional<Address> SimpleBlockPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes size = detail::roundUpToMultiple(std::max<Bytes>(bytes, 1), m_alignment);
    auto a = m_live.settle(obtain(size, stream), size, bytes, stream, m_stats, device(), stream);
    if (a)
        m_stats.reserved = reservedNow();
    return a;
}

void SimpleBlockPolicy::doDeallocate(Address address, Bytes, StreamKey stream)
{
    Bytes size = m_live.release(address, m_stats, m_name).size;
    release(address, size, stream);
    m_stats.reserved = reservedNow();
}

PolicyState SimpleBlockPolicy::describeState() const
{
    PolicyState state;
    m_live.forEach([&](Address a, const auto& l) {
        state.segments.push_back(SegmentInfo {
            a, l.size, l.tag, false, false, { BlockInfo { a, l.size, l.requested, BlockState::Allocated } } });
    });
    std::sort(state.segments.begin(), state.segments.end(),
        [](const auto& x, const auto& y) { return x.address < y.address; });
    return state;
}

} // namespace gpumem::replay
