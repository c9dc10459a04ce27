#include "replay/adaptors/pending_free_adaptor.h"

#include <algorithm>
#include <vector>

namespace gpumem::replay {

void PendingFreeAdaptor::adjust()
{
    syncStats();
    m_stats.allocated -= std::min(m_stats.allocated, m_pendingAllocated);
    m_stats.requested -= std::min(m_stats.requested, m_pendingRequested);
}

void PendingFreeAdaptor::track(Address address, const PolicyStats& before)
{
    const PolicyStats& after = upstream().stats();
    m_blocks.insert(address,
        Block { after.allocated - std::min(after.allocated, before.allocated),
            after.requested - std::min(after.requested, before.requested), false });
}

void PendingFreeAdaptor::untrack(Address address)
{
    if (const Block* b = m_blocks.find(address)) {
        if (b->pending) {
            m_pendingAllocated -= b->allocated;
            m_pendingRequested -= b->requested;
        }
        m_blocks.erase(address);
    }
}

std::optional<Address> PendingFreeAdaptor::doAllocate(Bytes bytes, StreamKey stream)
{
    const PolicyStats before = upstream().stats();
    auto a = PolicyAdaptor::doAllocate(bytes, stream);
    if (a)
        track(*a, before);
    return a;
}

bool PendingFreeAdaptor::doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream)
{
    const PolicyStats before = upstream().stats();
    bool ok = PolicyAdaptor::doAdoptBlock(address, size, requested, stream);
    if (ok)
        track(address, before);
    return ok;
}

void PendingFreeAdaptor::doDeallocate(Address address, Bytes bytes, StreamKey stream)
{
    untrack(address);
    PolicyAdaptor::doDeallocate(address, bytes, stream);
}

void PendingFreeAdaptor::doRequestFree(Address address)
{
    if (Block* b = m_blocks.find(address); b && !b->pending) {
        b->pending = true;
        m_pendingAllocated += b->allocated;
        m_pendingRequested += b->requested;
    }
    PolicyAdaptor::doRequestFree(address);
}

CompactionPass PendingFreeAdaptor::doCompact()
{
    CompactionPass pass = PolicyAdaptor::doCompact();
    // Re-key the moved blocks (all taken out first: one block may move to another's old address).
    std::vector<std::pair<Address, Block>> moved;
    moved.reserve(pass.moves.size());
    for (const BlockMove& mv : pass.moves)
        if (const Block* b = m_blocks.find(mv.from)) {
            moved.emplace_back(mv.to, *b);
            if (mv.to == 0)
                untrack(mv.from); // lost in the pass: its bytes are gone from the upstream too
            else
                m_blocks.erase(mv.from);
        }
    for (const auto& [to, b] : moved)
        if (to != 0)
            m_blocks.insert(to, b);
    adjust();
    return pass;
}

AllocatorPolicy& withPendingFreeRule(
    AllocatorPolicy& policy, bool requestsFrees, std::unique_ptr<PendingFreeAdaptor>& holder)
{
    holder.reset();
    if (!requestsFrees || policy.countsPendingFrees())
        return policy;
    holder = std::make_unique<PendingFreeAdaptor>(policy);
    return *holder;
}

} // namespace gpumem::replay
