#pragma once
// The bottom of every policy stack (design.md §5): a simulated GPU with a capacity that hands out
// address ranges and counts device calls (cudaMalloc/cudaFree, and cuMemMap/cuMemUnmap for
// expandable segments) and the bytes reserved from it. Addresses are simulated, never the trace's.
// Not thread-safe: one device per replay.
#include "core/types.h"

#include <cstdint>
#include <map>
#include <optional>

namespace gpumem::replay {

struct DeviceCounters {
    std::uint64_t mallocCalls = 0; // cudaMalloc (successful)
    std::uint64_t freeCalls = 0;   // cudaFree
    std::uint64_t mapCalls = 0;    // cuMemMap of physical pages
    std::uint64_t unmapCalls = 0;  // cuMemUnmap
    std::uint64_t failedCalls = 0; // requests refused for lack of capacity
    Bytes reserved = 0;            // bytes currently taken from the device
    Bytes peakReserved = 0;
};

class SimulatedDevice {
public:
    // capacity: bytes the device may hand out (0 = unlimited). granularity: every reservation is
    // rounded up to it (cudaMalloc hands out 2 MiB-aligned ranges for large requests on current GPUs;
    // PyTorch never asks for less than 2 MiB for its large pool, allocators.md §0).
    explicit SimulatedDevice(Bytes capacity = 0, Bytes granularity = 512);

    // cudaMalloc: a fresh address range of `bytes` (rounded to the granularity), or nullopt when the
    // capacity would be exceeded (the call is counted as failed).
    std::optional<Address> malloc(Bytes bytes);
    // cudaFree of a range returned by malloc; throws gpumem::Error on an unknown address.
    void free(Address address);
    // Expandable segments: reserve a virtual range (no physical memory, no capacity used)…
    Address reserveVirtual(Bytes bytes);
    // …and map/unmap physical pages into it; map fails (false) when the capacity would be exceeded.
    bool map(Bytes bytes);
    void unmap(Bytes bytes);

    Bytes capacity() const { return m_capacity; }
    Bytes granularity() const { return m_granularity; }
    Bytes freeBytes() const { return m_capacity == 0 ? ~Bytes(0) : m_capacity - m_counters.reserved; }
    const DeviceCounters& counters() const { return m_counters; }

private:
    bool take(Bytes bytes);
    Bytes m_capacity;
    Bytes m_granularity;
    Address m_nextAddress = Address(1) << 40; // simulated addresses start high and never reuse
    std::map<Address, Bytes> m_ranges;       // live cudaMalloc ranges
    DeviceCounters m_counters;
};

} // namespace gpumem::replay
