#pragma once
// How every front end shows the layer outside the allocator (core/outside_memory.h): one sentence for
// text reports, one JSON object, and the nesting allocated ⊂ reserved ⊂ process ⊂ device in words.
// Free functions; thread-safe.
#include "core/outside_memory.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

namespace gpumem::analyze {

// "521.93 MiB in this process (CUDA context, NCCL, libraries' own cudaMalloc),
// 1.00 GiB in other processes; from the out-of-memory message"; for the tracer's figure (source
// tracer_allocation_source) "P in this process: the peak of the segments the program and libraries other
// than an allocator took (CUPTI allocation source; the CUDA context is not in it)".
std::string outsideMemoryText(const OutsideMemory& outside);

// {"bytes", "process_bytes", "other_processes_bytes", "source"}.
nlohmann::json outsideMemoryToJson(const OutsideMemory& outside);

// "allocated A ⊂ reserved R ⊂ process R+P ⊂ device D" (device left out when 0; other processes, when any,
// named after the device: "… ⊂ device D (other processes O)"). Without a reserved figure (no segment
// events or reserved counter): "allocated A ⊂ reserved (not recorded) ⊂ process ≥ A+P ⊂ …". Where the
// figure is the tracer's (source tracer_allocation_source: the segments of the program and of libraries
// other than an allocator, which the reserved figure from segment events holds already): "allocated A ⊂
// reserved R, of which up to P not the allocator's (the program's and other libraries' segments) ⊂
// device D".
std::string memoryLayersText(Bytes allocated, std::optional<Bytes> reserved, const OutsideMemory& outside, Bytes device);

} // namespace gpumem::analyze
