#include "replay/policies/buddy_policy.h"

#include "core/error.h"

#include <algorithm>
#include <bit>

namespace gpumem::replay {

namespace {
    std::uint8_t orderOf(Bytes powerOfTwo) { return std::uint8_t(std::countr_zero(powerOfTwo)); }
}

BuddyPolicy::BuddyPolicy(SimulatedDevice& device, BuddyConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
{
}

std::string BuddyPolicy::name() const
{
    std::string options;
    if (m_config.minOrder != 512)
        options += "min_order:" + std::to_string(m_config.minOrder);
    if (m_config.minSegment != (Bytes(2) << 20))
        options += (options.empty() ? "" : ",") + std::string("min_segment:") + std::to_string(m_config.minSegment);
    return options.empty() ? "buddy" : "buddy:" + options;
}

Bytes BuddyPolicy::roundSize(Bytes bytes) const { return std::bit_ceil(std::max(bytes, m_config.minOrder)); }

void BuddyPolicy::insertFree(Address address, const Block& block)
{
    m_blocks.insert(address, block);
    m_free.insert({ block.stream, block.order, address });
}

bool BuddyPolicy::newSegment(std::uint8_t order, StreamKey stream)
{
    order = std::max(order, orderOf(m_config.minSegment));
    auto ptr = device().malloc(Bytes(1) << order, stream);
    if (!ptr)
        return false;
    m_segments[*ptr] = Segment { order, stream };
    insertFree(*ptr, Block { *ptr, stream, order, true, 0 });
    return true;
}

void BuddyPolicy::releaseFreeSegments()
{
    for (auto it = m_segments.begin(); it != m_segments.end();) {
        const Block* b = m_blocks.find(it->first);
        if (b->free && b->order == it->second.order) {
            m_free.erase({ it->second.stream, it->second.order, it->first });
            m_blocks.erase(it->first);
            device().free(it->first, it->second.stream);
            it = m_segments.erase(it);
        } else {
            ++it;
        }
    }
}

std::optional<Address> BuddyPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes rounded = roundSize(bytes);
    std::uint8_t k = orderOf(rounded);
    auto smallestFit = [&] {
        auto it = m_free.lower_bound({ stream, k, 0 });
        return it != m_free.end() && std::get<0>(*it) == stream ? it : m_free.end();
    };
    auto it = smallestFit();
    if (it == m_free.end()) {
        bool grown = newSegment(k, stream);
        if (!grown) {
            ++m_stats.allocRetries; // give back cached segments and try once more
            releaseFreeSegments();
            grown = newSegment(k, stream);
        }
        m_stats.reserved = device().counters().reserved;
        if (!grown) {
            ++m_stats.ooms;
            device().reportOom(rounded, stream);
            return std::nullopt;
        }
        it = smallestFit();
    }
    auto [s, order, address] = *it;
    m_free.erase(it);
    const Address segment = m_blocks.find(address)->segment;
    // Split down to order k: the lower half goes on, the upper half is a free buddy.
    while (order > k) {
        --order;
        insertFree(address + (Bytes(1) << order), Block { segment, stream, order, true, 0 });
    }
    Block& taken = *m_blocks.find(address); // found again: the inserts may have moved it
    taken.order = k;
    taken.free = false;
    taken.requested = bytes;
    m_stats.allocated += rounded;
    m_stats.requested += bytes;
    return address;
}

void BuddyPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    const Block* found = m_blocks.find(address);
    if (!found || found->free)
        throw Error("buddy policy: free of address " + std::to_string(address) + " that is not allocated");
    Block block = *found;
    m_stats.allocated -= Bytes(1) << block.order;
    m_stats.requested -= block.requested;
    m_blocks.erase(address);
    const std::uint8_t top = m_segments.at(block.segment).order;
    while (block.order < top) {
        Bytes size = Bytes(1) << block.order;
        Address buddy = block.segment + ((address - block.segment) ^ size);
        const Block* b = m_blocks.find(buddy);
        if (!b || !b->free || b->order != block.order)
            break;
        m_free.erase({ block.stream, block.order, buddy });
        m_blocks.erase(buddy);
        address = std::min(address, buddy);
        ++block.order;
    }
    block.free = true;
    block.requested = 0;
    insertFree(address, block);
}

void BuddyPolicy::doReleaseCached()
{
    releaseFreeSegments();
    m_stats.reserved = device().counters().reserved;
}

PolicyState BuddyPolicy::describeState() const
{
    PolicyState state;
    for (const auto& [base, seg] : m_segments) {
        Bytes size = Bytes(1) << seg.order;
        SegmentInfo info { base, size, seg.stream, false, false, {} };
        // The blocks tile the segment: each one's size leads to the next.
        for (Address a = base; a < base + size;) {
            const Block& b = *m_blocks.find(a);
            info.blocks.push_back(
                BlockInfo { a, Bytes(1) << b.order, b.requested, b.free ? BlockState::Free : BlockState::Allocated });
            a += Bytes(1) << b.order;
        }
        state.segments.push_back(std::move(info));
    }
    return state;
}

FragmentationSample BuddyPolicy::fragmentation() const
{
    FragmentationSample s;
    s.reserved = m_stats.reserved;
    s.allocated = m_stats.allocated;
    for (const auto& [stream, order, address] : m_free) {
        Bytes size = Bytes(1) << order;
        s.freeBytes += size;
        s.largestFree = std::max(s.largestFree, size);
        if (order < m_segments.at(m_blocks.find(address)->segment).order)
            s.inactiveSplit += size;
    }
    return s;
}

} // namespace gpumem::replay
