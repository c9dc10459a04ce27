#include "replay/policies/optimal_policy.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"
#include "replay/offset_planner.h"

#include <algorithm>

namespace gpumem::replay {

OptimalPolicy::OptimalPolicy(SimulatedDevice& device, Bytes alignment)
    : SimpleBlockPolicy(device, "optimal", alignment)
    , m_alignment(std::max<Bytes>(alignment, 1))
{
}

void OptimalPolicy::doPlan(const RequestPlan& requests)
{
    std::vector<PlanBlock> blocks(requests.requests.size());
    for (std::size_t k = 0; k < blocks.size(); ++k) {
        const PlannedRequest& r = requests.requests[k];
        Bytes size = detail::roundUpToMultiple(std::max<Bytes>(r.bytes, 1), m_alignment);
        blocks[k] = { size, r.allocAt, std::max(r.freeAt, r.allocAt + 1), r.initial };
    }
    OffsetPlan plan = planOffsetsBest(blocks);
    m_offsets = std::move(plan.offsets);
    m_arena = plan.arena;
    m_sizes.resize(blocks.size());
    for (std::size_t k = 0; k < blocks.size(); ++k)
        m_sizes[k] = blocks[k].size;
    m_next = 0;
    m_planned = true;
}

std::optional<Address> OptimalPolicy::obtain(Bytes size, StreamKey)
{
    if (m_next >= m_offsets.size())
        throw Error("optimal policy: request #" + std::to_string(m_next + 1) + " (" + std::to_string(size)
            + " B) is not in its plan" + (m_planned ? " of " + std::to_string(m_offsets.size()) + " requests" : "")
            + "; optimal plans offline, so it runs only inside a replay (gpumem replay), which hands it the "
              "request sequence first");
    const std::size_t k = m_next++;
    if (m_sizes[k] != size)
        throw Error("optimal policy: request #" + std::to_string(k + 1) + " is " + std::to_string(size)
            + " B but the plan has " + std::to_string(m_sizes[k]) + " B (the replay differs from its plan)");
    const Bytes end = m_offsets[k] + size;
    const Bytes capacity = device().capacity();
    if (capacity != 0 && end > capacity)
        return std::nullopt;
    m_liveEnds.insert(end);
    m_high = std::max(m_high, end);
    return base() + m_offsets[k];
}

void OptimalPolicy::release(Address address, Bytes size, StreamKey)
{
    m_liveEnds.erase(m_liveEnds.find(address - base() + size));
}

void OptimalPolicy::doReleaseCached()
{
    m_high = m_liveEnds.empty() ? 0 : *m_liveEnds.rbegin();
    m_stats.reserved = m_high;
}

} // namespace gpumem::replay
