#pragma once
// The base of every adaptor (design.md §5, RMM's resource adaptors): an AllocatorPolicy that forwards
// each call to the upstream it wraps and then calls afterCall(), where a derived adaptor adds its one
// concern. Its stats() mirror the upstream's after every call. The upstream must outlive the adaptor.
// Not thread-safe.
#include "replay/allocator_policy.h"

namespace gpumem::replay {

// Where a replay is: the time and index of the trace event being fed. The Replayer owns it and
// adaptors read it.
struct ReplayClock {
    TimeNs time = 0;
    std::uint64_t event = 0;
};

enum class PolicyCall : std::uint8_t { Allocate, Deallocate, RequestFree, ReleaseCached, Adopt, Compact };

class PolicyAdaptor : public AllocatorPolicy {
public:
    std::string name() const override { return m_upstream->name(); }
    PolicyState describeState() const override { return m_upstream->describeState(); }
    FragmentationSample fragmentation() const override { return m_upstream->fragmentation(); }
    AllocatorPolicy& upstream() const { return *m_upstream; }

protected:
    PolicyAdaptor(AllocatorPolicy& upstream, const ReplayClock& clock)
        : AllocatorPolicy(upstream.device())
        , m_clock(&clock)
        , m_upstream(&upstream)
    {
        m_stats = upstream.stats();
    }
    // Called after every forwarded call; ok is false for a failed allocate or adopt.
    virtual void afterCall(PolicyCall call, bool ok) = 0;
    const ReplayClock* m_clock;

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) final
    {
        auto a = m_upstream->allocate(bytes, stream);
        finish(PolicyCall::Allocate, a.has_value());
        return a;
    }
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) final
    {
        m_upstream->deallocate(address, bytes, stream);
        finish(PolicyCall::Deallocate, true);
    }
    void doRequestFree(Address address) final
    {
        m_upstream->requestFree(address);
        finish(PolicyCall::RequestFree, true);
    }
    void doReleaseCached() final
    {
        m_upstream->releaseCached();
        finish(PolicyCall::ReleaseCached, true);
    }
    bool doAdoptSegment(const SegmentInfo& segment) final
    {
        bool ok = m_upstream->adoptSegment(segment);
        finish(PolicyCall::Adopt, ok);
        return ok;
    }
    bool doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream) final
    {
        bool ok = m_upstream->adoptBlock(address, size, requested, stream);
        finish(PolicyCall::Adopt, ok);
        return ok;
    }
    bool doNeedsPlan() const final { return m_upstream->needsPlan(); }
    void doPlan(const RequestPlan& requests) final { m_upstream->plan(requests); }
    const CompactionSchedule* doCompactionSchedule() const final { return m_upstream->compactionSchedule(); }
    CompactionPass doCompact() final
    {
        CompactionPass pass = m_upstream->compact();
        finish(PolicyCall::Compact, true);
        return pass;
    }
    void finish(PolicyCall call, bool ok)
    {
        m_stats = m_upstream->stats();
        afterCall(call, ok);
    }
    AllocatorPolicy* m_upstream;
};

} // namespace gpumem::replay
