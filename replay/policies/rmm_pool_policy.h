#pragma once
// RAPIDS RMM's pool_memory_resource over cuda_memory_resource, one device, as allocators.md §3.1–3.2
// paraphrase rapidsai/rmm (pool_memory_resource.hpp, detail/stream_ordered_memory_resource.hpp,
// detail/coalescing_free_list.hpp): sizes aligned to 256 B, one address-ordered coalescing free list
// per stream, best fit with the allocation carved from the front, the 4-step get_block order across
// streams, a block that starts an upstream allocation ("head") never merged onto its predecessor,
// growth by size_to_grow with initial_pool_size / maximum_pool_size and try_to_expand halving. Memory
// is never returned to the device while the pool lives; releaseCached() stands for the pool's
// destruction, per upstream allocation: one with no allocated block goes back to the device.
// rmm-binning uses it as its upstream through allocateBlock/deallocateBlock.
// Owns its blocks; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/policies/rmm_stream_lists.h"

#include <map>
#include <optional>
#include <set>

namespace gpumem::replay {

// Which RMM release's pool rules apply (docs/policies.md "Versions").
// - Main: initial_pool_size required (0 allowed), no maximum by default, size_to_grow max(size, pool_size)
//   without a maximum, try_to_expand halving the attempt on failure (rapidsai/rmm PR #601, first in 0.16).
// - V23_02: Main's growth, but initial_pool_size defaults to min(free, total/2) aligned up to 256 B.
// - V0_15: before PR #601 (rapidsai/rmm branch-0.15 pool_memory_resource.hpp, size_to_grow and
//   expand_pool, after PR #498): initial min(free, total/2) aligned up to 256 B, maximum_pool_size
//   default = the device's free memory at construction; size_to_grow(size) with remaining =
//   align256(maximum − pool_size): remaining/2 if align256(size) <= remaining/2, else align256(size) if it
//   fits in remaining, else refused ("Maximum pool size exceeded"); one upstream attempt, no halving.
enum class RmmPoolVersion : std::uint8_t { Main = 0, V23_02 = 1, V0_15 = 2 };

struct RmmPoolConfig {
    std::optional<Bytes> initialPoolSize; // nullopt: 0 (newest), or min(free, total/2) for @23.02 and @0.15
    std::optional<Bytes> maximumPoolSize; // nullopt: unlimited (@0.15: the device's free memory)
    RmmPoolVersion version = RmmPoolVersion::Main;
};

class RmmPoolPolicy final : public AllocatorPolicy {
public:
    static constexpr Bytes kAlignment = 256; // CUDA_ALLOCATION_ALIGNMENT

    // Takes the initial pool from the device at once; throws UsageError when the device cannot hold
    // it (RMM throws out_of_memory from the constructor), or when it exceeds maximum_pool_size.
    RmmPoolPolicy(SimulatedDevice& device, RmmPoolConfig config);

    // The pool without the policy wrapper: `size` already aligned to 256 B; nullopt (nothing reported)
    // when the device cannot grow the pool. `requested` is kept for describeState.
    std::optional<Address> allocateBlock(Bytes size, StreamKey stream, Bytes requested);
    // The block at `address` goes to `stream`'s free list (the deallocating stream, §3.1).
    void deallocateBlock(Address address, StreamKey stream);
    // pool_size(): the sum of upstream allocations as RMM asked for them (RMM's reserved; 256 B-aligned
    // sizes, not the device's 512 B-rounded ones: pool_memory_resource.hpp, try_to_expand adds try_size
    // to current_pool_size_).
    Bytes poolSize() const { return m_poolSize; }
    // The free blocks (address, size) of `stream`'s list; empty when it has none.
    std::vector<std::pair<Address, Bytes>> freeBlocks(StreamKey stream) const;
    // The upstream allocations (address, size) in address order.
    std::vector<std::pair<Address, Bytes>> upstreamAllocations() const;
    // size_to_grow(size) for the current pool (§3.2).
    Bytes sizeToGrow(Bytes size) const;

    std::string name() const override;
    PolicyState describeState() const override;

private:
    struct Block {
        Bytes size = 0;
        bool head = false;
    };
    struct FreeList {
        std::map<Address, Block> blocks;
        std::set<std::pair<Bytes, Address>> bySize; // the same blocks by (size, address): best fit in log n
        bool empty() const { return blocks.empty(); }
        void insert(Address a, Block b);
        void absorb(FreeList&& other);
        std::optional<std::pair<Address, Block>> bestFit(Bytes size);
        void eraseRange(Address lo, Address hi);
    };
    struct Live {
        Bytes size = 0;
        Bytes requested = 0;
        bool head = false;
    };
    struct Upstream {
        Bytes size = 0;
        StreamKey stream = 0;
    };

    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    std::optional<Address> tryToExpand(Bytes trySize, Bytes minSize, StreamKey stream);
    Address carve(Address a, Block b, Bytes size, Bytes requested, FreeList& into);

    RmmPoolConfig m_config;
    std::optional<Bytes> m_maximum; // the effective maximum_pool_size (@0.15: defaulted at construction)
    Bytes m_poolSize = 0;
    std::map<Address, Upstream> m_upstream;
    std::map<Address, Live> m_live;
    detail::StreamFreeLists<FreeList> m_lists;
};

} // namespace gpumem::replay
