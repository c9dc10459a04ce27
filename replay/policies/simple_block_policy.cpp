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
    auto a = obtain(size, stream);
    if (!a) {
        ++m_stats.ooms;
        device().reportOom(size, stream);
        return std::nullopt;
    }
    m_live.insert(*a, Live { size, bytes, stream });
    m_stats.allocated += size;
    m_stats.requested += bytes;
    m_stats.reserved = reservedNow();
    return a;
}

void SimpleBlockPolicy::doDeallocate(Address address, Bytes, StreamKey stream)
{
    const Live* live = m_live.find(address);
    if (!live)
        throw Error(m_name + " policy: free of address " + std::to_string(address) + " that is not allocated");
    Bytes size = live->size;
    m_stats.allocated -= size;
    m_stats.requested -= live->requested;
    m_live.erase(address);
    release(address, size, stream);
    m_stats.reserved = reservedNow();
}

PolicyState SimpleBlockPolicy::describeState() const
{
    PolicyState state;
    m_live.forEach([&](Address a, const Live& l) {
        state.segments.push_back(SegmentInfo {
            a, l.size, l.stream, false, false, { BlockInfo { a, l.size, l.requested, BlockState::Allocated } } });
    });
    std::sort(state.segments.begin(), state.segments.end(),
        [](const auto& x, const auto& y) { return x.address < y.address; });
    return state;
}

} // namespace gpumem::replay
