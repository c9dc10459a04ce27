#include "replay/allocator_policy.h"

#include <algorithm>

namespace gpumem::replay {

std::string_view toString(BlockState state)
{
    switch (state) {
    case BlockState::Allocated:
        return "active_allocated";
    case BlockState::PendingFree:
        return "active_pending_free";
    case BlockState::Free:
        return "inactive";
    case BlockState::Unmapped:
        return "unmapped";
    }
    return "unknown";
}

FragmentationSample fragmentationOf(const PolicyState& state, const PolicyStats& stats)
{
    FragmentationSample s;
    s.reserved = stats.reserved;
    s.allocated = stats.allocated;
    for (const auto& seg : state.segments) {
        bool split = seg.blocks.size() > 1;
        for (const auto& b : seg.blocks) {
            if (b.state != BlockState::Free)
                continue;
            s.freeBytes += b.size;
            s.largestFree = std::max(s.largestFree, b.size);
            if (split && !seg.expandable)
                s.inactiveSplit += b.size;
        }
    }
    return s;
}

} // namespace gpumem::replay
