#pragma once
// GPU sharing what-if (`gpumem replay A B --colocate`): several processes' traces replayed on one
// simulated GPU in time order, each through its own policy stack (its own allocator, as separate
// processes have) on its own SimulatedDevice, all devices joined to one SharedCapacity (the GPU's
// memory). A process may also have its own limit (an MPS pinned-memory limit or a MIG slice): its
// device's capacity.
//
// Rules [choice]:
// - Time: each trace is aligned at its own first memory event on the replayed device (time 0 of the
//   colocated run), plus the process's offset; events at equal times go in process order, then trace
//   order, with the memory from before a trace (below) ahead of events at its time. Reported times
//   are nanoseconds since that common start.
// - Each process replays its device's request-level events with RequestFeeder (the Replayer's rules);
//   a ring-buffer window's initial state is allocated like any request (not adopted at recorded
//   addresses: two processes' recorded addresses may overlap).
// - A policy that reserves without device calls (`ideal`) has what it reserves beyond its device's
//   count charged to the shared memory after each call (so the other processes' devices see it), and is
//   held to the shared capacity after its allocate(): a request that takes the shared total above the
//   capacity is handed back and counted as failed.
// - The total memory each process's device reports (PyTorch's memory fraction and expandable-segment
//   reservation use it) is its limit if it has one, else the shared capacity (else the trace's).
// - Memory allocated before a profiler trace began (its opening Total Allocated, which the trace does
//   not itemise: replay::openingAllocated) is given per process as `openingAllocated` and held as one
//   opaque live block from the process's start (its time 0 + offset, before its first event), the rule
//   of ReplayOptions::openingAllocated [choice]. Leaving it out undercounts every process: two runs that
//   each hold 8 GiB before their traces do not fit in 12 GiB. A block that does not fit is a failed
//   request like any other (ColocatedFailure::beforeTrace).
// - OnOom::Stop ends the whole run at the first failed request of any process; Skip drops that request
//   (and its frees) and goes on.
// Deterministic; run() is const and may be called from several threads on the same traces.
#include "replay/replayer.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay {

struct ColocatedProcess {
    std::string name; // how reports name the process
    const Trace* trace = nullptr; // not owned; must outlive run()
    PolicySpec spec;
    Bytes limit = 0; // this process's own limit; 0 = only the shared capacity
    TimeNs offset = 0; // start after the common start, >= 0
    std::optional<DeviceId> device; // default: defaultReplayDevice(trace)
    Bytes openingAllocated = 0; // bytes live before the trace began that it does not list; 0 = none
};

struct ColocatedOptions {
    Bytes capacity = 0; // the GPU's memory shared by all processes; 0 = unlimited
    OnOom onOom = OnOom::Stop;
};

struct ColocatedProcessResult {
    std::string name;
    std::string policy; // the policy's name with its effective options
    DeviceId device = 0;
    Bytes limit = 0;
    TimeNs offset = 0;
    TimeNs traceStart = 0; // the trace time that maps to the process's time 0 (+ offset)
    Bytes openingAllocated = 0; // as given: held live from the process's start
    std::uint64_t requestEvents = 0, allocations = 0, ooms = 0;
    PeakAt peakReserved, peakAllocated; // times on the colocated clock; event = index in its trace
    Bytes finalReserved = 0;
    std::vector<FailedRequest> failures; // times on the colocated clock
    DeviceCounters deviceCounters;
};

struct ColocatedFailure {
    std::size_t process = 0; // index into ColocatedResult::processes
    FailedRequest request; // time on the colocated clock, event = index in the process's trace
    bool byLimit = false; // the process's own limit refused it (else the shared capacity did)
    Bytes combinedReserved = 0; // all processes' reserved bytes when it failed
    bool beforeTrace = false; // the request was the process's openingAllocated block (event = its first event)
};

struct ColocatedResult {
    Bytes capacity = 0;
    // The processes' memory outside their allocators (their traces' "outside_allocator" process bytes),
    // held on the shared device from the start: the lanes share capacity − outsideBytes.
    Bytes outsideBytes = 0;
    std::vector<ColocatedProcessResult> processes;
    Bytes combinedPeakReserved = 0;
    TimeNs combinedPeakTime = 0;
    std::uint64_t ooms = 0;
    std::optional<ColocatedFailure> firstFailure;
    bool stopped = false; // OnOom::Stop ended the run
    TimeNs end = 0; // the colocated time of the last event replayed
};

class ColocatedReplay {
public:
    explicit ColocatedReplay(ColocatedOptions options = {});
    // Throws UsageError for no process, a null trace, a bad spec, a negative offset or a device index
    // out of range.
    ColocatedResult run(const std::vector<ColocatedProcess>& processes) const;

private:
    ColocatedOptions m_options;
};

} // namespace gpumem::replay
