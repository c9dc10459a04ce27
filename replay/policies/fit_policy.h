#pragma once
// The textbook placement policies first-fit, next-fit, best-fit and worst-fit (allocators.md §6, after
// Wilson, Johnstone, Neely & Boles, "Dynamic Storage Allocation: A Survey and Critical Review", IWMM
// 1995) on the common coalescing free-list substrate (replay/detail/free_list_heap.h: per-stream heaps
// growing by max(request, growth_chunk), or PyTorch-sized segments with `segments:true`). The rule
// decides which free block a request takes; everything else is shared, so the four differ only in
// placement. Owns its heap; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/detail/free_list_heap.h"

namespace gpumem::replay {

class FitPolicy final : public AllocatorPolicy {
public:
    FitPolicy(SimulatedDevice& device, detail::FreeListConfig config);

    std::string name() const override;
    PolicyState describeState() const override;
    FragmentationSample fragmentation() const override;
    const detail::FreeListConfig& config() const { return m_heap.config(); }

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doReleaseCached() override;

    detail::FreeListHeap m_heap;
};

} // namespace gpumem::replay
