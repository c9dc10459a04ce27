#pragma once
// The bottom of every policy stack (design.md §5): a simulated GPU with a capacity that hands out
// address ranges and counts device calls (cudaMalloc/cudaFree, and cuMemMap/cuMemUnmap for
// expandable segments) and the bytes reserved from it. Addresses are simulated, never the trace's,
// except where a replay asks for them: adopt() takes a recorded segment at its recorded address (the
// initial state of a trace window) and addressHints() lets a fidelity replay hand out the recorded
// segment addresses so that address-ordered tie breaks match the recording.
// Every device call is reported to an optional DeviceObserver (the replay's segment-event record).
// Not thread-safe: one device per replay.
#include "core/types.h"
#include "replay/detail/address_map.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>

namespace gpumem::replay {

// The stream a request runs on, as the source names it (cudaStream_t value; 0 = default stream).
using StreamKey = std::uint64_t;

// The most bytes an "unlimited" device (capacity 0) hands out, and the most live request bytes a replay
// accepts: 4 EiB, far above any device [choice]. Below it every policy's rounding (at most to the next
// power of two) and every sum of two such sizes stays below 2^64, so no counter wraps.
inline constexpr Bytes kMaxDeviceBytes = Bytes(1) << 62;

struct DeviceCounters {
    std::uint64_t mallocCalls = 0; // cudaMalloc (successful)
    std::uint64_t freeCalls = 0; // cudaFree
    std::uint64_t mapCalls = 0; // map calls of physical pages into an expandable segment (one per call)
    std::uint64_t unmapCalls = 0; // unmap calls
    std::uint64_t failedCalls = 0; // requests refused for lack of capacity
    Bytes reserved = 0; // bytes currently taken from the device
    Bytes peakReserved = 0;
    std::uint64_t deviceCalls() const { return mallocCalls + freeCalls + mapCalls + unmapCalls; }
};

// One device call as a segment-level event (kind is SegmentAlloc/Free/Map/Unmap, or Oom when a
// policy reports a failed request: size = the rounded request, address 0).
struct DeviceCall {
    EventKind kind = EventKind::SegmentAlloc;
    Address address = 0;
    Bytes size = 0;
    StreamKey stream = 0;
};

// Memory that several SimulatedDevices draw from together: one GPU shared by several processes
// (ColocatedReplay). Each device still enforces its own capacity (a per-process limit); a device joined
// to a SharedCapacity also fails a call that would take the shared total above `capacity`.
struct SharedCapacity {
    Bytes capacity = 0; // 0 = unlimited
    Bytes reserved = 0; // bytes the joined devices hold together
    Bytes peakReserved = 0;
    Bytes freeBytes() const { return capacity == 0 ? ~Bytes(0) : capacity - std::min(capacity, reserved); }
};

class DeviceObserver {
public:
    virtual ~DeviceObserver() = default;
    virtual void onDeviceCall(const DeviceCall& call) = 0;
};

class SimulatedDevice {
public:
    // capacity: bytes the device may hand out (0 = unlimited). granularity: every cudaMalloc is
    // rounded up to it (512 B by default: PyTorch's own sizes are already multiples of 512 B and it
    // asks for at least 2 MiB, allocators.md §0). totalMemory: what the device reports as its total
    // memory (PyTorch sizes the expandable-segment VA reservation and the memory fraction from it);
    // 0 = the capacity, or 80 GiB when both are 0 [choice].
    explicit SimulatedDevice(Bytes capacity = 0, Bytes granularity = 512, Bytes totalMemory = 0);

    // cudaMalloc: a fresh address range of `bytes` (rounded to the granularity), or nullopt when the
    // capacity would be exceeded (the call is counted as failed).
    std::optional<Address> malloc(Bytes bytes, StreamKey stream = 0);
    // cudaFree of a range returned by malloc or adopt(); throws gpumem::Error on an unknown address.
    void free(Address address, StreamKey stream = 0);
    // Takes a segment that existed before the replay began (a snapshot's `segments`) at its recorded
    // address: reserved grows, no call is counted and none is observed. Throws gpumem::Error if the
    // range overlaps a live one.
    void adopt(Address address, Bytes bytes);
    // Expandable segments: reserve a virtual range (no physical memory, no capacity used)…
    Address reserveVirtual(Bytes bytes);
    // …and map/unmap physical pages into it; map fails (false, nothing mapped) when the capacity
    // would be exceeded. One call each, whatever the number of pages (PyTorch counts num_device_alloc
    // once per map_block).
    bool map(Address address, Bytes bytes, StreamKey stream = 0);
    void unmap(Address address, Bytes bytes, StreamKey stream = 0);
    // Reports a failed request to the observer (PyTorch's `oom` trace entry).
    void reportOom(Bytes bytes, StreamKey stream = 0);

    // Recorded segment_alloc addresses to hand out, oldest first: malloc(n) takes the front hint when
    // its size equals n (and drops it otherwise). Used by fidelity replays only.
    void addAddressHint(Address address, Bytes bytes) { m_hints.push_back({ address, bytes }); }

    void setObserver(DeviceObserver* observer) { m_observer = observer; }
    // Joins the device to memory shared with other devices (before its first call; the caller keeps
    // `shared` alive longer than the device). nullptr = not shared.
    void setSharedCapacity(SharedCapacity* shared) { m_shared = shared; }
    Bytes capacity() const { return m_capacity; }
    // What malloc/map never exceed and the largest request a replay hands a policy (RequestFeeder): the
    // capacity, but never above kMaxDeviceBytes (the one limit, also when unlimited: capacity 0).
    Bytes limit() const { return m_capacity != 0 ? std::min(m_capacity, kMaxDeviceBytes) : kMaxDeviceBytes; }
    Bytes granularity() const { return m_granularity; }
    Bytes totalMemory() const { return m_totalMemory; }
    // Bytes still available to malloc/map (the driver's "free"); the maximum value when unlimited.
    // With a SharedCapacity, the smaller of this device's and the shared free bytes.
    Bytes freeBytes() const
    {
        Bytes own = m_capacity == 0 ? ~Bytes(0) : m_capacity - m_counters.reserved;
        return m_shared ? std::min(own, m_shared->freeBytes()) : own;
    }
    const DeviceCounters& counters() const { return m_counters; }
    std::size_t liveRanges() const { return m_ranges.size(); }
    // True if [address, address + bytes) overlaps a live range (linear in the live ranges).
    bool overlaps(Address address, Bytes bytes) const;

private:
    bool take(Bytes bytes);
    void notify(EventKind kind, Address address, Bytes bytes, StreamKey stream);
    Address bump(Bytes bytes);
    struct Hint {
        Address address;
        Bytes bytes;
    };
    Bytes m_capacity;
    Bytes m_granularity;
    Bytes m_totalMemory;
    Address m_nextAddress = Address(1) << 48; // above any recorded address; never reused
    detail::AddressMap<Bytes> m_ranges; // live cudaMalloc (and adopted) ranges
    std::deque<Hint> m_hints;
    DeviceCounters m_counters;
    DeviceObserver* m_observer = nullptr;
    SharedCapacity* m_shared = nullptr;
    void release(Bytes bytes);
};

} // namespace gpumem::replay
