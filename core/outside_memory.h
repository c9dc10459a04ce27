#pragma once
// Memory on a device that the traced allocator does not hold (issue 19, "a layer outside the
// allocator"): the CUDA context, NCCL buffers, libraries that call cudaMalloc themselves, and other
// processes on the same GPU. The layers are allocated ⊂ reserved ⊂ process ⊂ device: `process` is this
// process's memory outside the allocator (process in use − reserved), `otherProcesses` what the other
// processes hold. Both count against the device capacity in every replay, fit and colocation.
// Stored per device in the trace metadata "outside_allocator" (docs/trace-format.md): an array of
// {"device": ORDINAL, "bytes": N, "process_bytes": P, "other_processes_bytes": O, "source": S}.
// A `gpumem record` trace with CUPTI's allocation source (metadata "allocation_source": true, each
// segment_alloc a one-frame site naming the library that called the driver, docs/tracer.md) gives it
// without the key: the peak of the live segment bytes that no allocator library took (kAllocatorLibraries).
// Plain value type and free functions; thread-safe.
#include "core/types.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

class Trace;
struct MemoryEventColumns;

struct OutsideMemory {
    Bytes process = 0; // this process, outside the traced allocator
    Bytes otherProcesses = 0; // other processes on the device
    // Where the figure comes from: "oom_message" (PyTorch's out-of-memory text), "command_line"
    // (--outside BYTES), or what a writer put there.
    std::string source;
    // Counted against the capacity; saturates at 2^64 - 1 (two figures of a hand-edited trace summed to 0 B).
    Bytes bytes() const { return process > ~Bytes(0) - otherProcesses ? ~Bytes(0) : process + otherProcesses; }
};

// Libraries whose driver allocations are the traced allocator's, by file-name prefix [choice]: PyTorch's
// caching allocator (libc10_cuda, libc10_hip), RMM (librmm) and TensorFlow/XLA's BFC allocator
// (libtensorflow_framework, _pywrap_tensorflow_internal, xla_extension).
bool isAllocatorLibrary(std::string_view libraryFile);

// The figure of device `device` (an index into Trace::devices()); nullopt when the trace has none.
// Entries whose fields have the wrong type are ignored (checkOutsideMemoryMetadata warns of each). Without the metadata key, a tracer trace with
// allocation sources gives process = that peak, source "tracer_allocation_source" (linear in the memory
// events).
std::optional<OutsideMemory> outsideMemory(const Trace& trace, DeviceId device);

// Whether outsideMemory(trace, device) reads the memory events (a tracer trace with allocation sources
// and no "outside_allocator" key): a streaming reader then feeds an AllocationSourcePeak.
bool outsideMemoryNeedsEvents(const Trace& trace);

// The tracer's allocation-source figure of one device, fed the memory events in trace order (whole or
// chunk by chunk): the peak of live segment bytes that no allocator library took. `tables` gives the
// sites, frames and strings (a Trace or a source's skeleton); it must outlive the peak.
class AllocationSourcePeak {
public:
    AllocationSourcePeak(const Trace& tables, DeviceId device);
    void add(const MemoryEventColumns& m, std::size_t i); // event i of `m`
    // The peak; nullopt when no segment_alloc of the device had a library site.
    std::optional<Bytes> peak() const;

private:
    const Trace* m_tables;
    DeviceId m_device;
    std::map<Address, Bytes> m_live;
    Bytes m_now = 0, m_peak = 0;
    bool m_sourced = false;
};

// outsideMemory from the metadata, with the events' figure given (`fromEvents`, used only where
// outsideMemoryNeedsEvents): what a streaming reader calls.
std::optional<OutsideMemory> outsideMemory(const Trace& trace, DeviceId device, const AllocationSourcePeak* fromEvents);

// The entries of metadata["outside_allocator"] that outsideMemory ignores or reads in part, each added to
// `stats` as one "outside_allocator_ignored" warning (the first with its detail, the rest counted): the key
// not an array, an entry not an object, without an integer "device", naming an ordinal no device of
// `devices` has, or a byte field ("bytes", "process_bytes", "other_processes_bytes") that is not a
// non-negative integer (read as 0). Nothing is added where `stats` has that code already (a .gmt written
// from such a trace carries it). Called by TraceBuilder::build (review finding: a hand-written
// "process_bytes": "3GiB" vanished from every replay without a word).
struct Device;
class ImportStats;
void checkOutsideMemoryMetadata(const nlohmann::json& metadata, const std::vector<Device>& devices, ImportStats& stats);

// Adds (or replaces) the entry of device ordinal `ordinal` in `metadata`["outside_allocator"].
void setOutsideMemory(nlohmann::json& metadata, std::int32_t ordinal, const OutsideMemory& outside);

} // namespace gpumem
