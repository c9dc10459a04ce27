#pragma once
// Feeds the request-level events (alloc, free, free_completed) of one device of a Trace to a policy
// stack, one event at a time — the part of a replay that the single-trace Replayer and the multi-trace
// ColocatedReplay share. It maps trace addresses to simulated ones through the trace's alloc → free
// pairing (Trace::allocations()), never by address equality, and applies the rules of replayer.h:
// the request size is requestedSize where known, else size; a free whose allocation has a later
// free_completed is a requestFree and the block is deallocated at the free_completed; a free followed
// at once by its own free_completed is handled at the free_completed; a free of an allocation that never
// got a simulated block (dropped after an OOM, or before the window) changes nothing.
// A request larger than the device's limit() (its capacity, capped at kMaxDeviceBytes, the one limit), or one that
// would take the live requested bytes above kMaxDeviceBytes, fails here, before any policy rounds it: no
// allocator could serve it, so every policy gives the same answer and no counter wraps.
// Not thread-safe; holds references to the trace and the policy, which must outlive it.
#include "core/trace.h"
#include "replay/allocator_policy.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace gpumem::replay {

class RequestFeeder {
public:
    static constexpr std::uint32_t kNoAllocation = std::numeric_limits<std::uint32_t>::max();

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

    // maxRequest: the largest request handed to `top` (0 = top.device().limit()); a dry run on an
    // unlimited device passes the real run's limit so that both refuse the same requests.
    RequestFeeder(const Trace& trace, DeviceId device, AllocatorPolicy& top, Bytes maxRequest = 0);

    // True if feeding the events of `device` calls requestFree() at least once: some free has a later
    // free_completed that does not follow it at once (the Replayer then applies the pending-free rule,
    // PendingFreeAdaptor, to a policy that does not apply it itself). Linear in the allocations.
    static bool requestsFrees(const Trace& trace, DeviceId device);

    // True if a request of `request` bytes may be handed to the policy now: at most the limit
    // (maxRequest, or the device's limit()) and not taking the live requested bytes above kMaxDeviceBytes.
    // feed() refuses an alloc that fails it; the Replayer asks it of the opening allocation too.
    bool admits(Bytes request) const;

    // Handles memory event i (which must be on the device). Alloc/Free/FreeCompleted only; other kinds
    // return Ignored.
    Step feed(std::size_t i);

    // PyTorch before PR #71745 (PyTorchConfig::globalEventQueue): the blocks freed with a later free_completed
    // wait in one FIFO in the order of their frees; a recorded free_completed makes its block reusable only
    // once every block queued before it has completed too (process_events popped from the front and stopped
    // at the first event not yet complete). Off (the default): each block at its own free_completed.
    void setGlobalEventQueue(bool on) { m_globalQueue = on; }

    // The allocation (index into Trace::allocations()) event i belongs to, or kNoAllocation.
    std::uint32_t allocationOf(std::size_t i) const { return m_allocOf[i]; }
    // The simulated address of allocation a (0 = none live).
    Address simulatedAddress(std::uint32_t a) const { return m_simAddress[a]; }
    void setSimulatedAddress(std::uint32_t a, Address address) { m_simAddress[a] = address; }
    std::size_t allocationCount() const { return m_simAddress.size(); }
    // The stream handle of event i (cudaStream_t value as recorded).
    StreamKey streamOf(std::size_t i) const { return m_streamKey[m_trace.memory().stream[i]]; }
    std::span<const Allocation> allocations() const { return m_allocs; }

private:
    const Trace& m_trace;
    DeviceId m_device;
    AllocatorPolicy& m_top;
    Bytes m_maxRequest;
    std::span<const Allocation> m_allocs;
    std::vector<std::uint32_t> m_allocOf;
    std::vector<Address> m_simAddress;
    std::vector<StreamKey> m_streamKey;
    bool m_globalQueue = false;
    std::deque<std::uint32_t> m_queue; // allocations whose free was requested, in free order
    std::vector<bool> m_completed; // by allocation: its free_completed has been seen while queued
};

} // namespace gpumem::replay
