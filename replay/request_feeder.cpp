#include "replay/request_feeder.h"

#include <algorithm>

namespace gpumem::replay {

RequestFeeder::RequestFeeder(const Trace& trace, DeviceId device, AllocatorPolicy& top, Bytes maxRequest)
    : m_trace(trace)
    , m_device(device)
    , m_top(top)
    , m_maxRequest(maxRequest != 0 ? std::min(maxRequest, kMaxDeviceBytes) : top.device().limit())
    , m_allocs(trace.allocations())
    , m_allocOf(trace.memory().count(), kNoAllocation)
    , m_simAddress(m_allocs.size(), 0)
    , m_streamKey(trace.streams().size())
{
    for (std::size_t a = 0; a < m_allocs.size(); ++a) {
        for (std::uint64_t e : { m_allocs[a].allocEvent, m_allocs[a].freeEvent, m_allocs[a].freeCompletedEvent })
            if (e != kNoIndex)
                m_allocOf[e] = std::uint32_t(a);
    }
    for (std::size_t s = 0; s < m_streamKey.size(); ++s)
        m_streamKey[s] = trace.streams()[s].handle;
}

bool RequestFeeder::requestsFrees(const Trace& trace, DeviceId device)
{
    const auto& m = trace.memory();
    for (const Allocation& al : trace.allocations()) {
        if (al.freeEvent == kNoIndex || al.freeCompletedEvent == kNoIndex || al.freeCompletedEvent <= al.freeEvent
            || m.device[al.freeEvent] != device)
            continue;
        // feed() defers such a free to its free_completed when that is the device's next event.
        std::size_t next = al.freeEvent + 1;
        while (next < m.count() && m.device[next] != device)
            ++next;
        if (next != al.freeCompletedEvent)
            return true;
    }
    return false;
}

bool RequestFeeder::admits(Bytes request) const
{
    const Bytes live = std::min(m_top.stats().requested, kMaxDeviceBytes);
    return request <= m_maxRequest && request <= kMaxDeviceBytes - live;
}

RequestFeeder::Step RequestFeeder::feed(std::size_t i)
{
    const auto& m = m_trace.memory();
    const EventKind kind = m.kind[i];
    const std::uint32_t a = m_allocOf[i];
    Step step;
    step.request = m.requestedSize[i] ? m.requestedSize[i] : m.size[i];
    step.stream = streamOf(i);
    switch (kind) {
    case EventKind::Alloc: {
        if (step.request == 0) {
            step.outcome = Outcome::ZeroSize;
            return step;
        }
        if (!admits(step.request)) {
            m_top.device().reportOom(step.request, step.stream);
            step.outcome = Outcome::Failed;
            return step;
        }
        step.address = m_top.allocate(step.request, step.stream);
        if (!step.address) {
            step.outcome = Outcome::Failed;
            return step;
        }
        if (a != kNoAllocation)
            m_simAddress[a] = *step.address;
        step.outcome = Outcome::Allocated;
        return step;
    }
    case EventKind::Free:
    case EventKind::FreeCompleted: {
        step.outcome = Outcome::FreeDeferred;
        if (a == kNoAllocation) {
            if (kind == EventKind::Free)
                step.outcome = Outcome::UnmatchedFree;
            return step;
        }
        const std::size_t n = m.count();
        if (kind == EventKind::Free) {
            // The usual case: free_completed follows at once; the block is freed there, in order.
            std::size_t next = i + 1;
            while (next < n && m.device[next] != m_device)
                ++next;
            if (next < n && m.kind[next] == EventKind::FreeCompleted && m_allocOf[next] == a)
                return step;
        }
        Address addr = m_simAddress[a];
        if (addr == 0)
            return step; // never allocated in this replay: dropped after an OOM, or an initial block ignored
        step.address = addr;
        step.outcome = Outcome::Freed;
        if (kind == EventKind::Free && m_allocs[a].freeCompletedEvent != kNoIndex
            && m_allocs[a].freeCompletedEvent > i) {
            m_top.requestFree(addr); // reusable only at its later free_completed
            step.outcome = Outcome::FreeRequested;
            if (m_globalQueue) {
                m_queue.push_back(a);
                if (m_completed.size() < m_allocs.size())
                    m_completed.resize(m_allocs.size(), false);
            }
            return step;
        }
        if (m_globalQueue && kind == EventKind::FreeCompleted
            && std::find(m_queue.begin(), m_queue.end(), a) != m_queue.end()) {
            m_completed[a] = true;
            step.outcome = Outcome::FreeDeferred;
            step.address.reset();
            while (!m_queue.empty() && m_completed[m_queue.front()]) {
                const std::uint32_t q = m_queue.front();
                m_queue.pop_front();
                m_completed[q] = false;
                const Address qa = m_simAddress[q];
                if (qa == 0)
                    continue;
                const Allocation& al = m_allocs[q];
                const std::uint64_t at = al.freeCompletedEvent;
                m_top.deallocate(qa, m.requestedSize[at] ? m.requestedSize[at] : m.size[at], streamOf(at));
                m_simAddress[q] = 0;
                if (q == a) {
                    step.address = qa;
                    step.outcome = Outcome::Freed;
                } else
                    step.alsoFreed.push_back(qa);
            }
            return step;
        }
        m_top.deallocate(addr, step.request, step.stream);
        m_simAddress[a] = 0;
        return step;
    }
    default:
        return step;
    }
}

} // namespace gpumem::replay
