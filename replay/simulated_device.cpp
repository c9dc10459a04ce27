#include "replay/simulated_device.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>
#include <string>

namespace gpumem::replay {

namespace {
    constexpr Bytes kTwoMiB = Bytes(2) << 20;
    constexpr Bytes kDefaultTotalMemory = Bytes(80) << 30;
}

SimulatedDevice::SimulatedDevice(Bytes capacity, Bytes granularity, Bytes totalMemory)
    : m_capacity(capacity)
    , m_granularity(std::max<Bytes>(granularity, 1))
    , m_totalMemory(totalMemory != 0 ? totalMemory : (capacity != 0 ? capacity : kDefaultTotalMemory))
{
}

bool SimulatedDevice::take(Bytes bytes)
{
    if (m_counters.reserved > limit() || bytes > limit() - m_counters.reserved) {
        ++m_counters.failedCalls;
        return false;
    }
    if (m_shared) {
        if (bytes > m_shared->freeBytes()) {
            ++m_counters.failedCalls;
            return false;
        }
        m_shared->reserved += bytes;
        m_shared->peakReserved = std::max(m_shared->peakReserved, m_shared->reserved);
    }
    m_counters.reserved += bytes;
    m_counters.peakReserved = std::max(m_counters.peakReserved, m_counters.reserved);
    return true;
}

void SimulatedDevice::release(Bytes bytes)
{
    bytes = std::min(bytes, m_counters.reserved);
    m_counters.reserved -= bytes;
    if (m_shared)
        m_shared->reserved -= std::min(bytes, m_shared->reserved);
}

void SimulatedDevice::notify(EventKind kind, Address address, Bytes bytes, StreamKey stream)
{
    if (m_observer)
        m_observer->onDeviceCall(DeviceCall { kind, address, bytes, stream });
}

Address SimulatedDevice::bump(Bytes bytes)
{
    Address a = m_nextAddress;
    // Leave a gap so that neighbouring segments never look contiguous (cudaMalloc gives no such promise).
    m_nextAddress += detail::roundUpToMultiple(bytes, kTwoMiB) + kTwoMiB;
    return a;
}

std::optional<Address> SimulatedDevice::malloc(Bytes bytes, StreamKey stream)
{
    if (bytes > limit()) { // before rounding, which gives 0 near 2^64 (and take(0) would succeed)
        ++m_counters.failedCalls;
        return std::nullopt;
    }
    Bytes rounded = detail::roundUpToMultiple(bytes, m_granularity);
    if (!take(rounded))
        return std::nullopt;
    ++m_counters.mallocCalls;
    Address a = 0;
    while (!m_hints.empty() && a == 0) {
        Hint h = m_hints.front();
        m_hints.pop_front();
        if (h.bytes == bytes && !overlaps(h.address, rounded))
            a = h.address;
    }
    if (a == 0)
        a = bump(rounded);
    m_ranges.insert(a, rounded);
    notify(EventKind::SegmentAlloc, a, rounded, stream);
    return a;
}

void SimulatedDevice::free(Address address, StreamKey stream)
{
    const Bytes* range = m_ranges.find(address);
    if (!range)
        throw Error("simulated cudaFree of address " + std::to_string(address) + " that was never returned by malloc");
    Bytes bytes = *range;
    release(bytes);
    ++m_counters.freeCalls;
    m_ranges.erase(address);
    notify(EventKind::SegmentFree, address, bytes, stream);
}

void SimulatedDevice::adopt(Address address, Bytes bytes)
{
    if (address == 0 || overlaps(address, bytes))
        throw Error("initial state: segment at address " + std::to_string(address) + " overlaps another segment");
    m_ranges.insert(address, bytes);
    m_counters.reserved += bytes;
    m_counters.peakReserved = std::max(m_counters.peakReserved, m_counters.reserved);
    if (m_shared) {
        m_shared->reserved += bytes;
        m_shared->peakReserved = std::max(m_shared->peakReserved, m_shared->reserved);
    }
}

bool SimulatedDevice::overlaps(Address address, Bytes bytes) const
{
    bool hit = false;
    m_ranges.forEach([&](Address a, Bytes n) { hit = hit || (a < address + bytes && address < a + n); });
    return hit;
}

Address SimulatedDevice::reserveVirtual(Bytes bytes) { return bump(bytes); }

bool SimulatedDevice::map(Address address, Bytes bytes, StreamKey stream)
{
    if (!take(bytes))
        return false;
    ++m_counters.mapCalls;
    notify(EventKind::SegmentMap, address, bytes, stream);
    return true;
}

void SimulatedDevice::unmap(Address address, Bytes bytes, StreamKey stream)
{
    release(bytes);
    ++m_counters.unmapCalls;
    notify(EventKind::SegmentUnmap, address, bytes, stream);
}

void SimulatedDevice::reportOom(Bytes bytes, StreamKey stream) { notify(EventKind::Oom, 0, bytes, stream); }

} // namespace gpumem::replay
