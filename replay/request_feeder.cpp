#include "replay/request_feeder.h"

#include <algorithm>

namespace gpumem::replay {

RequestFeeder::RequestFeeder(AllocatorPolicy& top, Bytes maxRequest)
    : m_top(top)
    , m_maxRequest(maxRequest != 0 ? std::min(maxRequest, kMaxDeviceBytes) : top.device().limit())
{
}

RequestFeeder::RequestFeeder(const Trace& trace, DeviceId device, AllocatorPolicy& top, Bytes maxRequest)
    : RequestFeeder(top, maxRequest)
{
    m_trace = &trace;
    m_device = device;
    m_allocs = trace.allocations();
    useDenseAddresses(m_allocs.size());
    m_allocOf = trace.allocationOfEvents(); // kept with the trace, shared with its other replays
    m_streamKey.resize(trace.streams().size());
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

std::vector<std::pair<std::uint32_t, Address>> RequestFeeder::simulatedBlocks() const
{
    std::vector<std::pair<std::uint32_t, Address>> out;
    if (!m_dense.empty()) {
        for (std::size_t a = 0; a < m_dense.size(); ++a)
            if (m_dense[a] != 0)
                out.emplace_back(std::uint32_t(a), m_dense[a]);
        return out;
    }
    out.reserve(m_simAddress.size());
    m_simAddress.forEach([&](Address key, Address address) { out.emplace_back(std::uint32_t(key - 1), address); });
    std::sort(out.begin(), out.end());
    return out;
}

RequestFeeder::Event RequestFeeder::eventOf(std::size_t i) const
{
    const auto& m = m_trace->memory();
    Event e;
    e.kind = m.kind[i];
    e.request = m.requestedSize[i] ? m.requestedSize[i] : m.size[i];
    e.stream = streamOf(i);
    e.allocation = m_allocOf[i];
    if (e.kind == EventKind::Free && e.allocation != kNoAllocation) {
        const std::uint64_t completed = m_allocs[e.allocation].freeCompletedEvent;
        e.laterCompletion = completed != kNoIndex && completed > i;
        // The usual case: free_completed follows at once; the block is freed there, in order.
        std::size_t next = i + 1;
        while (next < m.count() && m.device[next] != m_device)
            ++next;
        e.completionFollows = next < m.count() && m.kind[next] == EventKind::FreeCompleted && m_allocOf[next] == e.allocation;
    }
    return e;
}

RequestFeeder::Step RequestFeeder::feed(std::size_t i) { return feed(eventOf(i)); }

RequestFeeder::Step RequestFeeder::feed(const Event& event)
{
    const EventKind kind = event.kind;
    const std::uint32_t a = event.allocation;
    Step step;
    step.request = event.request;
    step.stream = event.stream;
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
            setSimulatedAddress(a, *step.address);
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
        if (kind == EventKind::Free && event.completionFollows)
            return step; // handled at its free_completed, the device's next event
        Address addr = simulatedAddress(a);
        if (addr == 0)
            return step; // never allocated in this replay: dropped after an OOM, or an initial block ignored
        step.address = addr;
        step.outcome = Outcome::Freed;
        if (kind == EventKind::Free && event.laterCompletion) {
            m_top.requestFree(addr); // reusable only at its later free_completed
            step.outcome = Outcome::FreeRequested;
            if (m_globalQueue)
                m_queue.push_back(Queued { a, false, 0, 0 });
            return step;
        }
        auto queued = m_globalQueue && kind == EventKind::FreeCompleted
            ? std::find_if(m_queue.begin(), m_queue.end(), [&](const Queued& q) { return q.allocation == a; })
            : m_queue.end();
        if (queued != m_queue.end()) {
            *queued = Queued { a, true, event.request, event.stream };
            step.outcome = Outcome::FreeDeferred;
            step.address.reset();
            while (!m_queue.empty() && m_queue.front().completed) {
                const Queued q = m_queue.front();
                m_queue.pop_front();
                const Address qa = simulatedAddress(q.allocation);
                if (qa == 0)
                    continue;
                m_top.deallocate(qa, q.request, q.stream);
                setSimulatedAddress(q.allocation, 0);
                if (q.allocation == a) {
                    step.address = qa;
                    step.outcome = Outcome::Freed;
                } else
                    step.alsoFreed.push_back(qa);
            }
            return step;
        }
        m_top.deallocate(addr, step.request, step.stream);
        setSimulatedAddress(a, 0);
        return step;
    }
    default:
        return step;
    }
}

} // namespace gpumem::replay
