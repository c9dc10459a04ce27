#pragma once
// The base of every adaptor (design.md §5, RMM's resource adaptors): an AllocatorPolicy that forwards
// each call to the upstream it wraps and then calls afterCall(), where a derived adaptor adds its one
// concern. Its stats() mirror the upstream's after every call. A derived adaptor that needs a call's
// arguments or result (compaction keeps the live blocks) overrides that call and calls the base's
// first; one with its own compaction schedule and pass overrides those two. The upstream must outlive
// the adaptor (a derived adaptor may own it). Not thread-safe.
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
        : PolicyAdaptor(upstream, &clock)
    {
    }
    // An adaptor that never reads the replay's time (m_clock is null).
    explicit PolicyAdaptor(AllocatorPolicy& upstream)
        : PolicyAdaptor(upstream, nullptr)
    {
    }
    // Called after every forwarded call; ok is false for a failed allocate or adopt. Default: nothing.
    virtual void afterCall(PolicyCall, bool) { }
    // stats() = the upstream's (after a derived adaptor called the upstream itself).
    void syncStats() { m_stats = m_upstream->stats(); }
    const ReplayClock* m_clock;

    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override
    {
        auto a = m_upstream->allocate(bytes, stream);
        finish(PolicyCall::Allocate, a.has_value());
        return a;
    }
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override
    {
        m_upstream->deallocate(address, bytes, stream);
        finish(PolicyCall::Deallocate, true);
    }
    void doRequestFree(Address address) override
    {
        m_upstream->requestFree(address);
        finish(PolicyCall::RequestFree, true);
    }
    void doReleaseCached() override
    {
        m_upstream->releaseCached();
        finish(PolicyCall::ReleaseCached, true);
    }
    void doDeclarePool(PoolId pool, bool useOnOom) override { m_upstream->declarePool(pool, useOnOom); }
    void doSelectPool(PoolId pool) override { m_upstream->selectPool(pool); }
    void doReleasePool(PoolId pool) override
    {
        m_upstream->releasePool(pool);
        finish(PolicyCall::ReleaseCached, true);
    }
    bool doKeepsPoolsApart() const override { return m_upstream->keepsPoolsApart(); }
    std::vector<PoolMemory> doPoolMemory() const override { return m_upstream->poolMemory(); }
    bool doAdoptSegment(const SegmentInfo& segment) override
    {
        bool ok = m_upstream->adoptSegment(segment);
        finish(PolicyCall::Adopt, ok);
        return ok;
    }
    bool doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream) override
    {
        bool ok = m_upstream->adoptBlock(address, size, requested, stream);
        finish(PolicyCall::Adopt, ok);
        return ok;
    }
    bool doCountsPendingFrees() const override { return m_upstream->countsPendingFrees(); }
    bool doNeedsPlan() const override { return m_upstream->needsPlan(); }
    void doPlan(const RequestPlan& requests) override { m_upstream->plan(requests); }
    const CompactionSchedule* doCompactionSchedule() const override { return m_upstream->compactionSchedule(); }
    CompactionPass doCompact() override
    {
        CompactionPass pass = m_upstream->compact();
        finish(PolicyCall::Compact, true);
        return pass;
    }

private:
    PolicyAdaptor(AllocatorPolicy& upstream, const ReplayClock* clock)
        : AllocatorPolicy(upstream.device())
        , m_clock(clock)
        , m_upstream(&upstream)
    {
        m_stats = upstream.stats();
    }
    void finish(PolicyCall call, bool ok)
    {
        syncStats();
        afterCall(call, ok);
    }
    AllocatorPolicy* m_upstream;
};

} // namespace gpumem::replay
