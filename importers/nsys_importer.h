#pragma once
// Importer for Nsight Systems SQLite exports (`nsys export --type sqlite report.nsys-rep`), read with
// libsqlite3 (schema: shared/traces/public/SOURCES.md §F; NVIDIA's "SQLite Export Schema Reference").
// Tables read, each optional because nsys only creates a table that has rows:
//   - CUDA_GPU_MEMORY_USAGE_EVENTS (recorded with `nsys profile --cuda-memory-usage=true`): each row is
//     one cudaMalloc*/cudaFree* seen by the driver → request-level Alloc / Free by memoryOperationType
//     (0 allocation, 1 deallocation), size = requested = `bytes`, stream = `streamId`. For a program
//     that uses a caching allocator (PyTorch, RMM pools) these are its segments. memKind decides the
//     device (docs/importers.md, "Nsight Systems"):
//       Device (2), Device Static (5), Array (3)  → CUDA device `deviceId`, stream `streamId`;
//       Pageable (0), Pinned (1)                  → one host device (DeviceType::Cpu, ordinal -1);
//       Managed (4), Managed Static (6), other    → CUDA device `deviceId`, on a stream of its own per
//                                                   kind (handle kNsysMemKindStreamTag | kind << 32 |
//                                                   streamId) named "<kind> memory, stream <id>".
//   - CUPTI_ACTIVITY_KIND_KERNEL → kernels (start/end ns, deviceId, streamId, correlationId), named by
//     demangledName, else shortName, through StringIds.
//   - CUDA_GPU_MEMORY_POOL_EVENTS (cudaMallocAsync pools) → instant annotations "memory pool
//     created|destroyed|trimmed" on the device and, where the columns exist, counters "Memory Pool
//     Size" and "Memory Pool Utilized" (bytes).
//   - TARGET_INFO_GPU (name, totalMemory by cuDevice) and TARGET_INFO_SESSION_START_TIME (utcEpochNs),
//     when present, for device names and metadata.
// Times are nsys's ns since the session start. Stateless free functions; thread-safe.
#include "core/importer.h"

#include <memory>
#include <string>
#include <string_view>

namespace gpumem {

// Bit 63 marks the synthetic streams that hold managed/unknown-kind memory (see above).
inline constexpr std::uint64_t kNsysMemKindStreamTag = std::uint64_t { 1 } << 63;

// True if `head` starts with the SQLite 3 file magic "SQLite format 3\0". Never throws. Whether the
// database is an Nsight export is decided at load (a FormatError lists the tables looked for).
bool looksLikeSqlite(std::string_view head);

// Reads an Nsight Systems SQLite export. Throws IoError when the file cannot be opened, FormatError
// when it is not SQLite, is corrupt, holds none of the memory/kernel tables (the message lists the
// tables looked for) or lacks a required column (naming table and column). Missing optional tables
// are counted as anomalies (nsys_no_memory_usage_table, nsys_no_kernel_table, …).
Trace readNsysSqlite(const std::string& path, const LoadOptions& options = {});

std::unique_ptr<Importer> makeNsysSqliteImporter();

} // namespace gpumem
