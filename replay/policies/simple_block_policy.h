#pragma once
// The shared part of the policies that hand every request its own block (direct, ideal): sizes
// rounded to an alignment, a map of live blocks, stats and describeState(). A derived policy says
// where a block comes from (obtain) and where it goes (release). Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/detail/free_ranges.h"

namespace gpumem::replay {

class SimpleBlockPolicy : public AllocatorPolicy {
public:
    PolicyState describeState() const override;
    // Every block is allocated, none free: the sample is the stats alone (not describeState(), which
    // sorts every live block and ran at each new peak of reserved — nearly every request of a ramp).
    FragmentationSample fragmentation() const override { return { m_stats.reserved, m_stats.allocated, 0, 0, 0 }; }
    std::string name() const override;

protected:
    SimpleBlockPolicy(SimulatedDevice& device, std::string name, Bytes alignment);
    // A block of `size` bytes (already aligned), or nullopt when there is no room.
    virtual std::optional<Address> obtain(Bytes size, StreamKey stream) = 0;
    virtual void release(Address address, Bytes size, StreamKey stream) = 0;
    // Reserved bytes after a change (the device's, or the live bytes for the lower bound).
    virtual Bytes reservedNow() const = 0;

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) final;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) final;
    std::string m_name;
    Bytes m_alignment;
    detail::LiveBlocks<StreamKey> m_live; // tag: the block's stream (describeState)
};

} // namespace gpumem::replay
