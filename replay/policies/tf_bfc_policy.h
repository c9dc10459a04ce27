#pragma once
// TensorFlow/XLA's best-fit-with-coalescing allocator (BFC), one device, as allocators.md §2
// paraphrases openxla/xla xla/tsl/framework/bfc_allocator.cc (BFCAllocator): requests rounded up to
// 256 B, free chunks in 21 bins ordered by (size, address), the split rule with
// max_internal_fragmentation_bytes, coalescing with free neighbours on free, region growth by
// `Extend` (2 MiB doubling with allow_growth, the whole memory limit without it, the 0.9 back-off
// when the device refuses, once per allocator), and garbage collection (`DeallocateFreeRegions`)
// after a failed Extend.
// Regions come from a sub-allocator that never returns adjacent ranges, so regions are never merged.
// Not modelled: the timestamped-chunk mode (freed_at_count), spatial partitioning, the retry
// allocator's wait for other threads. Owns its chunks; uses the SimulatedDevice it was given.
// Not thread-safe.
#include "replay/allocator_policy.h"
#include "replay/detail/round_to_multiple.h"

#include <array>
#include <map>
#include <set>

namespace gpumem::replay {

struct TfBfcConfig {
    bool allowGrowth = true; // GPUOptions.allow_growth / TF_FORCE_GPU_ALLOW_GROWTH [brief default]
    bool garbageCollection = true; // TF_ENABLE_GPU_GARBAGE_COLLECTION (TF GPU default true, §2.4)
    Bytes maxInternalFragmentation = Bytes(128) << 20; // max_internal_fragmentation_bytes (128 MiB)
    double fragmentationFraction = 0.0; // > 0: the split limit is fraction × memory limit
    Bytes memoryLimit = 0; // 0 = the device capacity, else its total memory
};

// BFC's counters beyond PolicyStats (AllocatorStats names where they exist, §2.6).
struct TfBfcCounters {
    std::uint64_t extends = 0; // successful Extend calls (= regions created)
    std::uint64_t backoffs = 0; // smaller sizes tried by the 0.9 shrink (only in the first refused Extend)
    std::uint64_t gcRegionsFreed = 0; // regions freed by DeallocateFreeRegions
};

class TfBfcPolicy final : public AllocatorPolicy {
public:
    static constexpr Bytes kMinAllocationSize = 256; // kMinAllocationSize
    static constexpr int kNumBins = 21; // kNumBins

    TfBfcPolicy(SimulatedDevice& device, TfBfcConfig config);

    // RoundedBytes: n rounded up to 256 B (n > 0).
    static Bytes roundedBytes(Bytes n) { return detail::roundUpToMultiple(n, kMinAllocationSize); }
    // BinNumForSize: min(20, floor(log2(max(size, 256) / 256))).
    static int binFor(Bytes size);
    // The bytes the next Extend will try first (curr_region_allocation_bytes_).
    Bytes nextRegionSize() const { return m_currRegionBytes; }
    Bytes memoryLimit() const { return m_memoryLimit; }
    // The split limit in bytes (max_internal_fragmentation_bytes_ after fragmentation_fraction).
    Bytes maxInternalFragmentation() const { return m_maxInternalFragmentation; }
    // The bin of the free chunk at `address`, or -1 when no free chunk starts there.
    int binOf(Address address) const;
    const TfBfcCounters& counters() const { return m_counters; }

    std::string name() const override;
    PolicyState describeState() const override;

private:
    struct Chunk {
        Bytes size = 0;
        Bytes requested = 0; // 0 while free
        Address region = 0;
        bool inUse = false;
    };
    using ChunkIt = std::map<Address, Chunk>::iterator;

    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    std::optional<Address> findChunk(Bytes rounded, Bytes requested);
    bool extend(Bytes rounded, StreamKey stream);
    bool deallocateFreeRegions(Bytes rounded);
    void freeRegion(Address region);
    bool regionInUse(Address region) const;
    void insertFree(ChunkIt it);
    void removeFree(ChunkIt it);
    void updateReserved();

    TfBfcConfig m_config;
    Bytes m_memoryLimit = 0;
    Bytes m_maxInternalFragmentation = 0;
    Bytes m_currRegionBytes = 0;
    Bytes m_poolBytes = 0; // total_region_allocated_bytes_
    bool m_startedBackpedal = false; // started_backpedal_
    std::map<Address, Bytes> m_regions; // region base → size
    std::map<Address, Chunk> m_chunks; // every chunk, address order
    std::array<std::set<std::pair<Bytes, Address>>, kNumBins> m_bins; // free chunks by (size, address)
    TfBfcCounters m_counters;
};

} // namespace gpumem::replay
