#include "replay/policies/compaction_policy.h"

#include <algorithm>

namespace gpumem::replay {

CompactionPolicy::CompactionPolicy(
    std::unique_ptr<AllocatorPolicy> inner, CompactionSchedule schedule, CompactionOrder order)
    : PolicyAdaptor(*inner)
    , m_inner(std::move(inner))
    , m_schedule(std::move(schedule))
    , m_order(order)
{
}

std::string CompactionPolicy::name() const
{
    std::string params;
    auto add = [&](const std::string& p) { params += (params.empty() ? "" : ",") + p; };
    // The default pattern applies only without `every`; anything else is written out.
    if (!m_schedule.annotationGlob.empty() && (m_schedule.annotationGlob != "ProfilerStep*" || m_schedule.everyRequests))
        add("at=" + m_schedule.annotationGlob);
    if (m_schedule.everyRequests != 0)
        add("every=" + std::to_string(m_schedule.everyRequests));
    if (m_order == CompactionOrder::SizeDescending)
        add("order=size");
    return "compaction" + (params.empty() ? std::string() : "[" + params + "]") + ":" + m_inner->name();
}

std::optional<Address> CompactionPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    auto a = PolicyAdaptor::doAllocate(bytes, stream);
    if (a)
        m_live.insert(*a, Live { bytes, stream, false });
    return a;
}

void CompactionPolicy::doDeallocate(Address address, Bytes bytes, StreamKey stream)
{
    PolicyAdaptor::doDeallocate(address, bytes, stream);
    m_live.erase(address);
}

void CompactionPolicy::doRequestFree(Address address)
{
    PolicyAdaptor::doRequestFree(address);
    if (Live* l = m_live.find(address))
        l->pending = true;
}

bool CompactionPolicy::doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream)
{
    bool ok = PolicyAdaptor::doAdoptBlock(address, size, requested, stream);
    if (ok)
        m_live.insert(address, Live { requested, stream, false });
    return ok;
}

CompactionPass CompactionPolicy::doCompact()
{
    ++m_passes;
    struct Block {
        Address address;
        Live live;
    };
    std::vector<Block> blocks;
    blocks.reserve(m_live.size());
    m_live.forEach([&](Address a, const Live& l) { blocks.push_back({ a, l }); });
    std::sort(blocks.begin(), blocks.end(), [&](const Block& x, const Block& y) {
        if (m_order == CompactionOrder::SizeDescending && x.live.requested != y.live.requested)
            return x.live.requested > y.live.requested;
        return x.address < y.address;
    });
    for (const Block& b : blocks)
        m_inner->deallocate(b.address, b.live.requested, b.live.stream);
    m_live = {};
    CompactionPass pass;
    for (const Block& b : blocks) {
        auto a = m_inner->allocate(b.live.requested, b.live.stream);
        if (!a) {
            pass.moves.push_back({ b.address, 0, b.live.requested, b.live.stream });
            continue;
        }
        if (b.live.pending)
            m_inner->requestFree(*a);
        m_live.insert(*a, b.live);
        if (*a != b.address) {
            pass.moves.push_back({ b.address, *a, b.live.requested, b.live.stream });
            pass.bytesMoved += b.live.requested;
        }
    }
    // Segments the blocks left behind go back to the device.
    m_inner->releaseCached();
    syncStats();
    return pass;
}

} // namespace gpumem::replay
