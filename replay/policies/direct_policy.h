#pragma once
// The no-cache baseline: every request is its own cudaMalloc and every free its own cudaFree, as
// PyTorch does with PYTORCH_NO_CUDA_MEMORY_CACHING (allocators.md §1.13). Sizes are rounded up to
// `alignment` bytes (default 512, the device granularity of this simulator) [choice].
// Not thread-safe.
#include "replay/policies/simple_block_policy.h"

namespace gpumem::replay {

class DirectPolicy final : public SimpleBlockPolicy {
public:
    explicit DirectPolicy(SimulatedDevice& device, Bytes alignment = 512)
        : SimpleBlockPolicy(device, "direct", alignment)
    {
    }

private:
    std::optional<Address> obtain(Bytes size, StreamKey stream) override { return device().malloc(size, stream); }
    void release(Address address, Bytes, StreamKey stream) override { device().free(address, stream); }
    Bytes reservedNow() const override { return device().counters().reserved; }
};

} // namespace gpumem::replay
