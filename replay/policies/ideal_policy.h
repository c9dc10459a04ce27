#pragma once
// The lower bound every policy is measured against (allocators.md §6.1): reserved memory equals the
// bytes live at each instant, so its peak reserved is the maximum live bytes. Sizes are rounded up to
// `alignment` (default 512 B, PyTorch's smallest block, so that the bound is comparable with the
// caching policies; `ideal:alignment:1` gives the raw requested bytes). It takes nothing from the
// device and makes no device calls; with a capacity set, a request fails when live bytes would exceed
// it. Addresses come from per-size free lists over a private address range, so live blocks never
// overlap and a freed block's address is reused by the next request of its size.
// Not thread-safe.
#include "replay/policies/simple_block_policy.h"

#include <unordered_map>
#include <vector>

namespace gpumem::replay {

class IdealPolicy final : public SimpleBlockPolicy {
public:
    explicit IdealPolicy(SimulatedDevice& device, Bytes alignment = 512)
        : SimpleBlockPolicy(device, "ideal", alignment)
    {
    }

private:
    std::optional<Address> obtain(Bytes size, StreamKey stream) override;
    void release(Address address, Bytes size, StreamKey stream) override;
    Bytes reservedNow() const override { return m_stats.allocated; }
    Address m_next = Address(1) << 56;
    std::unordered_map<Bytes, std::vector<Address>> m_freeBySize;
};

} // namespace gpumem::replay
