#pragma once
// Segregated size classes, jemalloc-style (allocators.md §6 table; jemalloc include/jemalloc/internal/
// sc.h with LG_NGROUP = 2). Requests up to the largest small class (max_small, default 1 MiB) are
// rounded up to a class: 512, 1024, 1536, 2048 B, then four classes per doubling, 2^g + j·2^(g−2) for
// j = 1..4 (2560, 3072, 3584, 4096, 5120, …). Each class is served from slabs of equal regions; a slab
// is the smallest multiple of 2 MiB that holds 8 regions (2 MiB up to the 256 KiB class, 8 MiB for
// 1 MiB) [choice], one cudaMalloc, per stream. A request takes the lowest free region of the
// lowest-addressed slab of its class that has one; there is no coalescing; a slab whose last region
// is freed goes back to the device at once. Requests above max_small take a best fit on the common
// free-list heap (replay/detail/free_list_heap.h; heap mode, 2 MiB growth).
// Reserved pools (`reserve:[SIZE:COUNT,…]`) are taken from the device when the policy is built: COUNT
// regions of SIZE's class in one cudaMalloc, stream-agnostic, never given back; a request whose class
// is SIZE's class takes a free region there first [choice].
// Owns its slabs; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/detail/address_map.h"
#include "replay/detail/free_list_heap.h"

#include <map>
#include <set>
#include <vector>

namespace gpumem::replay {

struct SizeClassConfig {
    Bytes maxSmall = Bytes(1) << 20; // the largest small class
    std::vector<std::pair<Bytes, std::uint32_t>> reserve; // (size, count) pools reserved up front
};

class SizeClassPolicy final : public AllocatorPolicy {
public:
    // Throws UsageError when the device cannot hold the reserved pools.
    SizeClassPolicy(SimulatedDevice& device, SizeClassConfig config);

    std::string name() const override;
    PolicyState describeState() const override;
    FragmentationSample fragmentation() const override;

    // The class of a request of `bytes` (> 0): the smallest class ≥ bytes (the grid continues above
    // max_small for the reserved pools).
    static Bytes classSize(Bytes bytes);
    // The slab size for a class.
    static Bytes slabSize(Bytes classBytes);

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    struct Slab {
        Address base = 0;
        Bytes size = 0;
        Bytes region = 0; // class size
        StreamKey stream = 0;
        std::uint32_t regions = 0;
        std::uint32_t used = 0;
        bool reserved = false; // a pool reserved up front
        std::vector<std::uint64_t> freeBits; // bit i set: region i is free
        std::vector<Bytes> requested; // per region, 0 when free
    };
    struct Live {
        Address slab = 0;
    };
    using ClassKey = std::pair<StreamKey, Bytes>; // (stream, class); reserved pools use kReserveStream
    Slab* newSlab(Bytes classBytes, StreamKey stream, Bytes size, bool reserved);
    std::optional<Address> takeRegion(const ClassKey& key);
    void syncReserved();

    SizeClassConfig m_config;
    detail::FreeListHeap m_heap;
    std::map<Address, Slab> m_slabs;
    std::map<ClassKey, std::set<Address>> m_partial; // slabs with a free region, by class
    detail::AddressMap<Live> m_live; // small regions handed out
};

} // namespace gpumem::replay
