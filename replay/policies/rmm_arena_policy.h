#pragma once
// RAPIDS RMM's arena_memory_resource, one device, as allocators.md §3.3 paraphrases rapidsai/rmm
// (arena_memory_resource.hpp, detail/arena.hpp): one upstream allocation of arena_size (the global
// arena, split into address-ordered superblocks of at least 1 MiB), one arena per stream holding the
// superblocks it acquired, requests > 1 MiB served by the global arena directly (first superblock
// that fits, split off when it is empty and large enough), requests ≤ 1 MiB by the stream's arena
// (first fit over its superblocks, else a superblock acquired from the global arena), frees
// coalesced into their superblock (an empty superblock of the global arena merges with empty
// neighbours), and on a failed request `defragment` (every arena gives all its superblocks back to
// the global arena) and one retry. Sizes are aligned to 256 B (no RMM_ARENA_USE_SIZE_CLASSES).
// Reserved is the arena: one device allocation taken at construction, whatever is in use.
// Not modelled: per-thread arenas (cudaStreamPerThread; every stream here gets its own arena), the
// 1 TiB superblock maximum. Owns its superblocks; uses the SimulatedDevice it was given.
// Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/detail/free_ranges.h"

#include <map>

namespace gpumem::replay {

struct RmmArenaConfig {
    Bytes arenaSize = 0; // 0 = half the device's free memory at construction, aligned down to 256 B
};

class RmmArenaPolicy final : public AllocatorPolicy {
public:
    static constexpr Bytes kAlignment = 256;
    static constexpr Bytes kSuperblockMinimum = Bytes(1) << 20; // superblock::minimum_size

    // Takes the arena from the device at once (RMM's constructor does); throws UsageError when the
    // device cannot hold it or arena_size is below 1 MiB. After releaseCached() gave it back, the next
    // request takes a new one.
    RmmArenaPolicy(SimulatedDevice& device, RmmArenaConfig config);

    Bytes arenaSize() const { return m_arenaSize; }
    // Superblocks (address, size) owned by the global arena, or by `stream`'s arena.
    std::vector<std::pair<Address, Bytes>> globalSuperblocks() const;
    std::vector<std::pair<Address, Bytes>> streamSuperblocks(StreamKey stream) const;
    std::uint64_t defragmentations() const { return m_defragmentations; }

    std::string name() const override;
    PolicyState describeState() const override;

private:
    static constexpr StreamKey kGlobal = ~StreamKey(0); // owner of the global arena's superblocks
    struct Superblock {
        Address address = 0;
        Bytes size = 0;
        StreamKey owner = kGlobal;
        std::map<Address, Bytes> free; // free blocks, address order, coalesced
        Bytes maxFree = 0; // the largest free block (superblock::max_free_size)
        bool empty() const { return free.size() == 1 && free.begin()->second == size; }
        bool fits(Bytes n) const { return maxFree >= n; }
        void reset(Bytes newSize); // one free block over the whole superblock
        Address firstFit(Bytes n);
        void coalesce(Address a, Bytes n);
    };
    using SuperblockSet = std::map<Address, Superblock*>; // address order
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    bool acquireUpstream();
    std::optional<Address> tryAllocate(Bytes size, StreamKey stream);
    Superblock* globalFirstFit(Bytes size);
    void globalCoalesce(Superblock* superblock);
    void putGlobal(Superblock* superblock);
    void defragment();

    RmmArenaConfig m_config;
    Bytes m_arenaSize = 0;
    std::optional<Address> m_upstream;
    Superblock* newSuperblock(Address a, Bytes size);
    std::map<Address, Superblock> m_superblocks; // every superblock, wherever it is (stable nodes)
    SuperblockSet m_global; // the global arena's superblocks
    SuperblockSet m_globalWithFree; // those of them with a free block (the first-fit scan)
    std::map<StreamKey, SuperblockSet> m_arenas; // per-stream arenas
    detail::LiveBlocks<> m_live;
    std::uint64_t m_defragmentations = 0;
};

} // namespace gpumem::replay
