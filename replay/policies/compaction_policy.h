#pragma once
// `compaction[…]:INNER` — any registered policy plus a compactor: at each compaction point the
// Replayer calls compact(), which moves the live blocks to close the holes between them, and then the
// replay goes on with the inner policy. A pass frees every live block in the inner policy (free blocks
// coalesce with their neighbours), allocates them again from their requested sizes and streams in
// address order (or by descending size, `order=size`) by the inner policy's own rule (PyTorch: best
// fit in the memory it already holds), then gives every segment left wholly free back to the device
// (releaseCached(), torch.cuda.empty_cache()). A block that was pending a free (record_stream) is
// requested free again at its new address. A block that already sits where the rule puts it again
// does not move. The
// moves (old → new address) go back to the Replayer, which remaps the trace's blocks so later frees
// find them. Bytes moved = requested bytes of the blocks whose address changed.
//
// Modelled as an ideal compactor [choice]: the copies need no extra memory (the pass is atomic to the
// statistics: only the state after it is measured) and take no time; the device calls it makes
// (cudaFree of the emptied segments, cudaMalloc of new ones) are counted. If a block cannot be placed
// again (capacity), it is lost: reported as a move to address 0, an OOM of the replay.
//
// Compaction points (CompactionSchedule, resolved by the Replayer): the start and end of every
// annotation whose name matches `at` (default `ProfilerStep*`, PyTorch's profiler step ranges), and/or
// every `every` request events. An adaptor (PolicyAdaptor) over the inner policy, which it owns: every
// call is forwarded and the stats mirror the inner policy's; compaction adds the live-block table and
// its own schedule and pass. Both share the caller's device. Not thread-safe.
#include "replay/adaptors/policy_adaptor.h"
#include "replay/detail/address_map.h"

#include <memory>

namespace gpumem::replay {

enum class CompactionOrder : std::uint8_t { Address = 0, SizeDescending = 1 };

class CompactionPolicy final : public PolicyAdaptor {
public:
    CompactionPolicy(std::unique_ptr<AllocatorPolicy> inner, CompactionSchedule schedule,
        CompactionOrder order = CompactionOrder::Address);
    // "compaction:INNER", with the parameters that differ from the defaults in brackets.
    std::string name() const override;
    AllocatorPolicy& inner() const { return upstream(); }
    std::uint64_t passes() const { return m_passes; }

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doRequestFree(Address address) override;
    bool doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream) override;
    const CompactionSchedule* doCompactionSchedule() const override { return &m_schedule; }
    CompactionPass doCompact() override;
    struct Live {
        Bytes requested = 0;
        StreamKey stream = 0;
        bool pending = false; // requestFree'd, not yet deallocated
    };
    std::unique_ptr<AllocatorPolicy> m_inner; // the upstream, owned
    CompactionSchedule m_schedule;
    CompactionOrder m_order;
    detail::AddressMap<Live> m_live;
    std::uint64_t m_passes = 0;
};

} // namespace gpumem::replay
