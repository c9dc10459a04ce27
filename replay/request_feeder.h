#pragma once
// Feeds the request-level events (alloc, free, free_completed) of one device to a policy stack, one
// event at a time — the part of a replay that the single-trace Replayer and the multi-trace
// ColocatedReplay share. It maps trace addresses to simulated ones through the trace's alloc → free
// pairing (an allocation index per event: Trace::allocations(), or a ChunkPairing over the chunks of a
// MemoryEventSource), never by address equality, and applies the rules of replayer.h:
// the request size is requestedSize where known, else size; a free whose allocation has a later
// free_completed is a requestFree and the block is deallocated at the free_completed; a free followed
// at once by its own free_completed is handled at the free_completed; a free of an allocation that never
// got a simulated block (dropped after an OOM, or before the window) changes nothing.
// A request larger than the device's limit() (its capacity, capped at kMaxDeviceBytes, the one limit), or one that
// would take the live requested bytes above kMaxDeviceBytes, fails here, before any policy rounds it: no
// allocator could serve it, so every policy gives the same answer and no counter wraps.
//
// Two ways to drive it: feed(Event) with the pairing given by the caller (the Replayer, which reads the
// trace chunk by chunk; the feeder then holds one entry per allocation with a simulated block), or
// feed(i) on a whole Trace (the constructor taking it pairs through Trace::allocations(), 4 B per event).
// Not thread-safe; holds references to the policy (and the trace), which must outlive it.
#include "core/trace.h"
#include "replay/allocator_policy.h"
#include "replay/detail/address_map.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace gpumem::replay {

class RequestFeeder {
public:
    static constexpr std::uint32_t kNoAllocation = Trace::kNoAllocationOfEvent;

    enum class Outcome : std::uint8_t {
        Ignored = 0, // not a request-level event
        Allocated = 1,
        ZeroSize = 2, // an alloc of 0 bytes (never reaches an allocator)
        Failed = 3, // allocate() returned nullopt: the caller records the OOM
        Freed = 4, // deallocate() was called (address: the simulated block)
        FreeDeferred = 5, // nothing to do now (its free_completed follows) or nothing live to free
        UnmatchedFree = 6, // a free the trace could not pair with an alloc (before the window)
        FreeRequested = 7, // requestFree() was called: reusable at its later free_completed
    };
    struct Step {
        Outcome outcome = Outcome::Ignored;
        Bytes request = 0; // the request (alloc) or freed size
        StreamKey stream = 0;
        std::optional<Address> address; // the simulated block of an Allocated, Freed or FreeRequested step
        // With the global event queue: blocks queued before this one whose free completed in this step too
        // (deallocate() was called for each, after the step's own block if it has one).
        std::vector<Address> alsoFreed;
    };
    // One memory event of the device, with what the pairing knows of it.
    struct Event {
        EventKind kind = EventKind::Alloc;
        Bytes request = 0; // requestedSize where known, else size
        StreamKey stream = 0;
        std::uint32_t allocation = kNoAllocation; // the allocation the event belongs to (Trace::allocations())
        // For a free of an allocation: whether that allocation has a later free_completed, and whether
        // that completion is the device's next event (then the free is handled there).
        bool laterCompletion = false;
        bool completionFollows = false;
    };

    // Driven by feed(Event). maxRequest: the largest request handed to `top` (0 = top.device().limit()); a
    // dry run on an unlimited device passes the real run's limit so that both refuse the same requests.
    explicit RequestFeeder(AllocatorPolicy& top, Bytes maxRequest = 0);
    // Driven by feed(i) over the events of `device` in `trace`.
    RequestFeeder(const Trace& trace, DeviceId device, AllocatorPolicy& top, Bytes maxRequest = 0);

    // True if feeding the events of `device` calls requestFree() at least once: some free has a later
    // free_completed that does not follow it at once (the Replayer then applies the pending-free rule,
    // PendingFreeAdaptor, to a policy that does not apply it itself). Linear in the allocations.
    static bool requestsFrees(const Trace& trace, DeviceId device);

    // True if a request of `request` bytes may be handed to the policy now: at most the limit
    // (maxRequest, or the device's limit()) and not taking the live requested bytes above kMaxDeviceBytes.
    // feed() refuses an alloc that fails it; the Replayer asks it of the opening allocation too.
    bool admits(Bytes request) const;

    // Handles one event of the device. Alloc/Free/FreeCompleted only; other kinds return Ignored.
    Step feed(const Event& event);
    // Handles memory event i of the trace given to the constructor (which must be on the device).
    Step feed(std::size_t i);
    // Event i of that trace with its pairing.
    Event eventOf(std::size_t i) const;

    // PyTorch before PR #71745 (PyTorchConfig::globalEventQueue): the blocks freed with a later free_completed
    // wait in one FIFO in the order of their frees; a recorded free_completed makes its block reusable only
    // once every block queued before it has completed too (process_events popped from the front and stopped
    // at the first event not yet complete). Off (the default): each block at its own free_completed.
    void setGlobalEventQueue(bool on) { m_globalQueue = on; }

    // The allocation (index into Trace::allocations()) event i of the constructor's trace belongs to, or
    // kNoAllocation.
    std::uint32_t allocationOf(std::size_t i) const { return m_allocOf[i]; }
    // The simulated address of allocation a (0 = none live).
    Address simulatedAddress(std::uint32_t a) const
    {
        if (!m_dense.empty())
            return m_dense[a];
        const Address* addr = m_simAddress.find(Address(a) + 1);
        return addr ? *addr : 0;
    }
    void setSimulatedAddress(std::uint32_t a, Address address)
    {
        if (!m_dense.empty())
            m_dense[a] = address;
        else if (address == 0)
            m_simAddress.erase(Address(a) + 1);
        else
            m_simAddress.insert(Address(a) + 1, address);
    }
    // The allocation count when it is known (a whole trace): the addresses are then a vector by
    // allocation, 8 B each, faster than the map a streamed replay keeps of the live ones.
    void useDenseAddresses(std::size_t allocations)
    {
        if (allocations > 0)
            m_dense.assign(allocations, 0);
    }
    // The allocations with a simulated block and their addresses, by allocation index.
    std::vector<std::pair<std::uint32_t, Address>> simulatedBlocks() const;
    // The stream handle of event i of the constructor's trace (cudaStream_t value as recorded).
    StreamKey streamOf(std::size_t i) const { return m_streamKey[m_trace->memory().stream[i]]; }

private:
    const Trace* m_trace = nullptr;
    DeviceId m_device = 0;
    AllocatorPolicy& m_top;
    Bytes m_maxRequest;
    std::span<const Allocation> m_allocs;
    std::span<const std::uint32_t> m_allocOf; // Trace::allocationOfEvents of m_trace
    std::vector<StreamKey> m_streamKey;
    detail::AddressMap<Address> m_simAddress; // allocation + 1 → its simulated block
    std::vector<Address> m_dense; // or by allocation (useDenseAddresses)
    bool m_globalQueue = false;
    // The allocations whose free was requested, in free order; `completed` once their free_completed was
    // seen (with that event's request and stream, for the deallocate).
    struct Queued {
        std::uint32_t allocation = 0;
        bool completed = false;
        Bytes request = 0;
        StreamKey stream = 0;
    };
    std::deque<Queued> m_queue;
};

} // namespace gpumem::replay
