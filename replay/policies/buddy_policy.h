#pragma once
// Binary buddy allocation (allocators.md §6 table; Knowlton 1965, Knuth TAOCP Vol. 1 §2.5, as surveyed
// by Wilson et al. 1995). A request is rounded up to a power of two 2^k ≥ max(request, min_order);
// it takes the lowest-addressed free block of order k on its stream, else splits the smallest larger
// free block (lowest address) in halves, keeping the lower half and freeing the upper, down to order k.
// With no free block large enough, a new segment of max(2^k, min_segment) bytes is one cudaMalloc
// ("per-2^k segment growth"). On free a block merges with its buddy (offset XOR size relative to its
// segment's base) while the buddy is free and of the same order, up to the whole segment. Whole free
// segments stay cached until releaseCached() or an out-of-memory retry gives them back.
// Blocks are reused only by their stream (as in the other policies, §1.12) [choice].
// Owns its blocks; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/detail/address_map.h"

#include <map>
#include <set>
#include <tuple>

namespace gpumem::replay {

struct BuddyConfig {
    Bytes minOrder = 512; // smallest block (power of two)
    Bytes minSegment = Bytes(2) << 20; // smallest segment (power of two ≥ minOrder)
};

class BuddyPolicy final : public AllocatorPolicy {
public:
    BuddyPolicy(SimulatedDevice& device, BuddyConfig config);

    std::string name() const override;
    PolicyState describeState() const override;
    FragmentationSample fragmentation() const override;
    // The block size a request of `bytes` gets: the power of two ≥ max(bytes, min_order).
    Bytes roundSize(Bytes bytes) const;

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    struct Block {
        Address segment = 0; // base of its segment
        StreamKey stream = 0;
        std::uint8_t order = 0; // size = 2^order
        bool free = true;
        Bytes requested = 0;
    };
    struct Segment {
        std::uint8_t order = 0;
        StreamKey stream = 0;
    };
    using FreeKey = std::tuple<StreamKey, std::uint8_t, Address>;
    bool newSegment(std::uint8_t order, StreamKey stream);
    void releaseFreeSegments();
    void insertFree(Address address, const Block& block);

    BuddyConfig m_config;
    detail::AddressMap<Block> m_blocks; // every block, free or not, by address
    std::set<FreeKey> m_free; // free blocks by (stream, order, address)
    std::map<Address, Segment> m_segments;
};

} // namespace gpumem::replay
