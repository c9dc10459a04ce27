#pragma once
// Adaptor that applies the pending-free rule to a policy that does not apply it itself
// (countsPendingFrees() false): when the program frees a block that is still in use on another stream
// (requestFree), the block's requested and allocated bytes leave stats() at once, while its memory stays
// occupied — the policy keeps it live, so reserved does not change and nothing reuses it — until the
// free completes (deallocate). Rule: PyTorch c10/cuda/CUDACachingAllocator.cpp free(): allocated_bytes
// and requested_bytes decrease at the user's free, before insert_events(); the block stays active and its
// memory reserved until the events complete (free_block), allocators.md §1.7. The Replayer puts it
// directly above such a policy, so that every policy reports the same requested/allocated bytes for the
// same trace whether its blocks were fed or adopted.
// It measures a block's bytes as the change of the upstream's stats over the allocate()/adoptBlock()
// call, and follows the moves of a compaction pass. Owns nothing; the upstream must outlive it.
// Not thread-safe.
#include "replay/adaptors/policy_adaptor.h"
#include "replay/detail/address_map.h"

#include <memory>

namespace gpumem::replay {

namespace detail {
    // PendingFreeAdaptor's record of a block, at namespace scope: nested in the class, clang (the fuzz build)
    // found it not default-constructible where the class's AddressMap<Block> member is declared, before the
    // class is complete.
    struct PendingFreeBlock {
        Bytes allocated = 0; // what the block added to the upstream's stats().allocated
        Bytes requested = 0;
        bool pending = false;
    };
}

class PendingFreeAdaptor final : public PolicyAdaptor {
public:
    explicit PendingFreeAdaptor(AllocatorPolicy& upstream)
        : PolicyAdaptor(upstream)
    {
    }

private:
    using Block = detail::PendingFreeBlock;
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doRequestFree(Address address) override;
    bool doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream) override;
    CompactionPass doCompact() override;
    bool doCountsPendingFrees() const override { return true; }
    void afterCall(PolicyCall, bool) override { adjust(); }
    // stats() = the upstream's less the pending blocks' bytes.
    void adjust();
    void track(Address address, const PolicyStats& before);
    void untrack(Address address);

    detail::AddressMap<Block> m_blocks;
    Bytes m_pendingAllocated = 0, m_pendingRequested = 0; // of the blocks whose free has not completed
};

// The policy a replay feeds: `policy` itself, or a PendingFreeAdaptor made in `holder` above it when the
// replay will call requestFree() (`requestsFrees`, e.g. RequestFeeder::requestsFrees) and the policy does
// not apply the rule itself. `holder` must outlive the returned reference's use.
AllocatorPolicy& withPendingFreeRule(
    AllocatorPolicy& policy, bool requestsFrees, std::unique_ptr<PendingFreeAdaptor>& holder);

} // namespace gpumem::replay
