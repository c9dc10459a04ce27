#include "replay/simulated_device.h"

#include "core/error.h"

#include <algorithm>
#include <string>

namespace gpumem::replay {

namespace {
    Bytes roundUp(Bytes value, Bytes multiple) { return multiple <= 1 ? value : (value + multiple - 1) / multiple * multiple; }
}

SimulatedDevice::SimulatedDevice(Bytes capacity, Bytes granularity)
    : m_capacity(capacity)
    , m_granularity(std::max<Bytes>(granularity, 1))
{
}

bool SimulatedDevice::take(Bytes bytes)
{
    if (m_capacity != 0 && bytes > m_capacity - m_counters.reserved) {
        ++m_counters.failedCalls;
        return false;
    }
    m_counters.reserved += bytes;
    m_counters.peakReserved = std::max(m_counters.peakReserved, m_counters.reserved);
    return true;
}

std::optional<Address> SimulatedDevice::malloc(Bytes bytes)
{
    Bytes rounded = roundUp(bytes, m_granularity);
    if (!take(rounded))
        return std::nullopt;
    ++m_counters.mallocCalls;
    Address a = m_nextAddress;
    // Leave a gap so that neighbouring segments never look contiguous (cudaMalloc gives no such promise).
    m_nextAddress += roundUp(rounded, Bytes(2) << 20) + (Bytes(2) << 20);
    m_ranges.emplace(a, rounded);
    return a;
}

void SimulatedDevice::free(Address address)
{
    auto it = m_ranges.find(address);
    if (it == m_ranges.end())
        throw Error("simulated cudaFree of address " + std::to_string(address) + " that was never returned by malloc");
    m_counters.reserved -= it->second;
    ++m_counters.freeCalls;
    m_ranges.erase(it);
}

Address SimulatedDevice::reserveVirtual(Bytes bytes)
{
    Address a = m_nextAddress;
    m_nextAddress += roundUp(bytes, Bytes(2) << 20) + (Bytes(2) << 20);
    return a;
}

bool SimulatedDevice::map(Bytes bytes)
{
    if (!take(bytes))
        return false;
    ++m_counters.mapCalls;
    return true;
}

void SimulatedDevice::unmap(Bytes bytes)
{
    m_counters.reserved -= std::min(bytes, m_counters.reserved);
    ++m_counters.unmapCalls;
}

} // namespace gpumem::replay
