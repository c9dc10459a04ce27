#include "replay/colocated_replay.h"

#include "core/outside_memory.h"

#include "core/error.h"
#include "replay/adaptors/pending_free_adaptor.h"
#include "replay/policy_registry.h"
#include "replay/request_feeder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace gpumem::replay {

namespace {
    // One process's policy stack and its place in its trace.
    struct Lane {
        const Trace* trace = nullptr;
        DeviceId device = 0;
        std::unique_ptr<SimulatedDevice> sim;
        std::unique_ptr<AllocatorPolicy> policy;
        ReplayClock clock;
        std::unique_ptr<PendingFreeAdaptor> pending; // the pending-free rule (replayer.cpp), where needed
        std::unique_ptr<StatisticsAdaptor> stats;
        std::unique_ptr<RequestFeeder> feeder;
        std::vector<std::uint64_t> events; // the device's event indices, in trace order
        std::size_t next = 0;
        TimeNs shift = 0; // colocated time = trace time + shift
        Bytes outside = 0; // bytes the policy reserves without device calls (ideal), charged to the shared memory
        Bytes opening = 0; // ColocatedProcess::openingAllocated, until it is allocated
        TimeNs start = 0; // the process's time 0 + offset on the colocated clock
        TimeNs nextTime() const { return opening > 0 ? start : trace->memory().time[events[next]] + shift; }
        bool done() const { return opening == 0 && next >= events.size(); }
    };
} // namespace

ColocatedReplay::ColocatedReplay(ColocatedOptions options)
    : m_options(options)
{
}

ColocatedResult ColocatedReplay::run(const std::vector<ColocatedProcess>& processes) const
{
    if (processes.empty())
        throw UsageError("colocated replay: no process to replay");
    ColocatedResult result;
    result.capacity = m_options.capacity;
    SharedCapacity shared { m_options.capacity, 0, 0 };
    std::vector<Lane> lanes(processes.size());
    result.processes.resize(processes.size());
    for (std::size_t p = 0; p < processes.size(); ++p) {
        const auto& proc = processes[p];
        auto& lane = lanes[p];
        auto& out = result.processes[p];
        if (!proc.trace)
            throw UsageError("colocated replay: process '" + proc.name + "' has no trace");
        if (proc.offset < 0)
            throw UsageError("colocated replay: process '" + proc.name + "' has a negative offset");
        const Trace& trace = *proc.trace;
        if (proc.device && *proc.device >= trace.devices().size())
            throw UsageError("colocated replay: device " + std::to_string(*proc.device) + " of process '" + proc.name
                + "' does not exist");
        lane.trace = &trace;
        lane.device = proc.device ? *proc.device : defaultReplayDevice(trace).value_or(0);
        Bytes total = proc.limit != 0 ? proc.limit : m_options.capacity;
        if (total == 0 && lane.device < trace.devices().size())
            total = trace.devices()[lane.device].totalMemory;
        lane.sim = std::make_unique<SimulatedDevice>(proc.limit, 512, total);
        lane.sim->setSharedCapacity(&shared);
        const PolicyContext context = policyContextOf(trace.metadata());
        lane.policy = makePolicy(proc.spec, *lane.sim, context);
        // This process's memory outside its allocator (core/outside_memory.h; not the other processes' part:
        // those are the colocated lanes) is held on the shared device for the whole run.
        if (auto outside = outsideMemory(trace, lane.device))
            result.outsideBytes += outside->process;
        // Processes share the device event by event: a policy that needs the whole trace first (optimal)
        // or moves blocks between events (compaction) has no meaning here, and would fail or silently
        // act as its inner policy.
        if (lane.policy->needsPlan() || lane.policy->compactionSchedule())
            throw UsageError("colocated replay: '" + proc.spec.text + "' (process '" + proc.name
                + "') plans or compacts over one whole trace; colocated processes take online policies "
                  "(pytorch, tf-bfc, rmm-pool, best-fit, …)");
        lane.stats = std::make_unique<StatisticsAdaptor>(
            withPendingFreeRule(*lane.policy, RequestFeeder::requestsFrees(trace, lane.device), lane.pending),
            lane.clock);
        lane.feeder = std::make_unique<RequestFeeder>(trace, lane.device, *lane.stats);
        if (proc.spec.policy == "pytorch") // before PR #71745: one global event queue (request_feeder.h)
            lane.feeder->setGlobalEventQueue(pytorchConfigFor(proc.spec, context).globalEventQueue);
        const auto& m = trace.memory();
        for (std::size_t i = 0; i < m.count(); ++i)
            if (m.device[i] == lane.device)
                lane.events.push_back(i);
        out.name = proc.name;
        out.policy = lane.policy->name();
        out.device = lane.device;
        out.limit = proc.limit;
        out.offset = proc.offset;
        out.traceStart = lane.events.empty() ? 0 : m.time[lane.events.front()];
        lane.shift = proc.offset - out.traceStart;
        lane.start = proc.offset;
        lane.opening = lane.events.empty() ? 0 : proc.openingAllocated;
        out.openingAllocated = lane.opening;
    }

    if (shared.capacity != 0)
        shared.capacity = std::max<Bytes>(1, shared.capacity - std::min(shared.capacity, result.outsideBytes));

    // Charges what a lane's policy reserves beyond its device calls to the shared memory, so that the
    // other processes' devices see it too.
    auto charge = [&](Lane& lane) {
        const Bytes policy = lane.stats->stats().reserved, device = lane.sim->counters().reserved;
        const Bytes outside = policy > device ? policy - device : 0;
        shared.reserved = shared.reserved - std::min(shared.reserved, lane.outside) + outside;
        lane.outside = outside;
    };
    for (;;) {
        // The lane with the earliest next event (ties: memory from before a trace first, then the lower
        // process index).
        std::size_t p = lanes.size();
        auto before = [&](const Lane& a, const Lane& b) {
            return a.nextTime() != b.nextTime() ? a.nextTime() < b.nextTime() : a.opening > 0 && b.opening == 0;
        };
        for (std::size_t q = 0; q < lanes.size(); ++q)
            if (!lanes[q].done() && (p == lanes.size() || before(lanes[q], lanes[p])))
                p = q;
        if (p == lanes.size())
            break;
        auto& lane = lanes[p];
        auto& out = result.processes[p];
        const bool beforeTrace = lane.opening > 0;
        const std::uint64_t i = lane.events[beforeTrace ? 0 : lane.next];
        const TimeNs now = lane.nextTime();
        lane.clock.time = now;
        lane.clock.event = i;
        result.end = std::max(result.end, now);
        RequestFeeder::Step step;
        if (beforeTrace) {
            // The memory from before the trace: one opaque block that stays live (replayer.cpp's rule).
            step.request = lane.opening;
            lane.opening = 0;
            std::optional<std::uint64_t> address;
            if (lane.feeder->admits(step.request))
                address = lane.stats->allocate(step.request, 0);
            step.outcome = address ? RequestFeeder::Outcome::Allocated : RequestFeeder::Outcome::Failed;
            step.address = address;
        } else {
            ++lane.next;
            const EventKind kind = lane.trace->memory().kind[i];
            if (kind != EventKind::Alloc && kind != EventKind::Free && kind != EventKind::FreeCompleted)
                continue;
            ++out.requestEvents;
            step = lane.feeder->feed(i);
        }
        charge(lane);
        if (step.outcome == RequestFeeder::Outcome::Allocated && m_options.capacity != 0
            && shared.reserved > shared.capacity) {
            // A policy that reserves without device calls (ideal) went past the shared memory: undo.
            lane.stats->deallocate(*step.address, step.request, step.stream);
            if (!beforeTrace)
                lane.feeder->setSimulatedAddress(lane.feeder->allocationOf(i), 0);
            charge(lane);
            step.outcome = RequestFeeder::Outcome::Failed;
        }
        if (step.outcome == RequestFeeder::Outcome::Allocated)
            ++out.allocations;
        if (step.outcome == RequestFeeder::Outcome::Failed) {
            const auto& st = lane.stats->stats();
            const Bytes sharedFree = shared.freeBytes();
            const Bytes ownFree = out.limit == 0 ? ~Bytes(0) : out.limit - std::min(out.limit, st.reserved);
            FailedRequest f { now, i, step.request, step.stream, st.reserved, st.allocated,
                std::min(sharedFree, ownFree), false, {} };
            ++out.ooms;
            ++result.ooms;
            out.failures.push_back(f);
            if (!result.firstFailure)
                result.firstFailure = ColocatedFailure { p, f, ownFree < sharedFree, shared.reserved, beforeTrace };
            if (m_options.onOom == OnOom::Stop) {
                result.stopped = true;
                break;
            }
        }
        if (shared.reserved > result.combinedPeakReserved) {
            result.combinedPeakReserved = shared.reserved;
            result.combinedPeakTime = now;
        }
    }
    for (std::size_t p = 0; p < lanes.size(); ++p) {
        auto& out = result.processes[p];
        out.peakReserved = lanes[p].stats->peakReserved();
        out.peakAllocated = lanes[p].stats->peakAllocated();
        out.finalReserved = lanes[p].stats->stats().reserved;
        out.deviceCounters = lanes[p].sim->counters();
    }
    return result;
}

} // namespace gpumem::replay
