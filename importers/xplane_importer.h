#pragma once
// Importer for XLA / TSL profiler XSpace protobufs (`*.xplane.pb`, written by the JAX, TensorFlow 2
// and PyTorch/XLA profilers). The file is parsed with libprotobuf from importers/xplane.proto, a
// subset of tsl/profiler/protobuf/xplane.proto holding the fields of shared/traces/public/SOURCES.md §D.
// What it produces (docs/importers.md, "XLA xplane"):
//   - one Device per BFC allocator `GPU_N_bfc` (ordinal N); DeviceType::Hip when a /device:GPU plane's
//     `device_vendor` stat says "AMD", else DeviceType::Cuda; totalMemory from that plane's `memory_size`;
//   - request-level Alloc/Free events from the `MemoryAllocation` / `MemoryDeallocation` TraceMe
//     events (size = allocation_bytes, requested = requested_bytes, scope = `tf_op` as ScopeKind::Op);
//   - recorded counters per allocator device: "Bytes Allocated", "Bytes Reserved", "Peak Bytes In Use"
//     (bytes) and "Fragmentation (ppm)" (the allocator's 0–1 fragmentation × 10^6, rounded);
//   - kernels (and memcpys) from the /device:GPU:N planes, one Stream per XLine (handle = line id);
//   - steps and XLA modules from the derived "Steps" / "XLA Modules" lines as annotations.
// Times are the file's own nanoseconds: ns = floor((line.timestamp_ns·1000 + event.offset_ps) / 1000).
// Stateless free functions; safe to call from several threads at once.
#include "core/importer.h"

#include <memory>
#include <string>
#include <string_view>

namespace gpumem {

// The largest .xplane.pb accepted (bytes after gzip decompression). libprotobuf takes an int length;
// a bigger file is refused with a FormatError rather than truncated.
inline constexpr std::size_t kMaxXplaneBytes = std::size_t { 1 } << 30;

// True if `head` (the first bytes of a file's content) looks like an XSpace: protobuf field 1,
// length-delimited (an XPlane), whose optional id is followed by a name starting with "/host:",
// "/device:" or "Task Environment". Never throws; false for pickles, gzip, JSON and random bytes.
bool looksLikeXplane(std::string_view head);

// Imports an XSpace held in memory. `source` names it in messages (a path). Throws FormatError
// when the bytes are not an XSpace (naming `source` and what to do) or exceed kMaxXplaneBytes;
// Cancelled when options.progress returns false. Anomalies (missing stats, unknown allocators,
// times out of range) are counted in the Trace's stats.
Trace importXplane(std::string_view bytes, const std::string& source, const LoadOptions& options = {});

// Reads a file (gzip-compressed or not) and imports it with importXplane. Throws IoError too.
Trace readXplane(const std::string& path, const LoadOptions& options = {});

std::unique_ptr<Importer> makeXplaneImporter();

} // namespace gpumem
