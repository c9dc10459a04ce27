#pragma once
// Importer for PyTorch's memory-timeline raw export (`export_memory_timeline(path.raw.gz)`, made by
// torch.profiler._memory_profiler.MemoryProfileTimeline.export_memory_timeline_raw): a JSON list of
// `[ts_ns, action, bytes, category]` for one device (SOURCES.md §B). No addresses, streams or stacks.
//
// Mapping (docs/kineto-import.md §Memory timeline):
//   PREEXISTING (1), CREATE (2), INCREMENT_VERSION with +bytes (3) → Alloc with the record's category;
//   DESTROY (4), INCREMENT_VERSION with −bytes (3)                  → Free with the record's category.
//   PREEXISTING records (ts −1) are placed at the first real timestamp, before everything else.
// Because every event keeps its own category and sign, the per-category running sums of the export
// are exactly Σ alloc − Σ free per category up to any time. The export has no tensor ids, so pairing
// uses synthetic addresses: a negative record closes the most recently opened live lifetime with the
// same (bytes, category) — last in, first out — and an INCREMENT_VERSION's positive half reopens that
// lifetime's address with its new category. Paired lifetimes therefore always have equal size and
// category, so live-set sums by category equal the running sums exactly (the "synthetic_addresses"
// anomaly says the addresses are invented). The device is recorded as cuda:0, the exporter's default.
//
// Stateless and thread-safe.
#include "core/importer.h"

#include <memory>

namespace gpumem {

std::unique_ptr<Importer> makeMemoryTimelineImporter();

// Parses the raw export already in memory; `source` names it in errors. Throws FormatError.
// A file cut short keeps its complete records with a "truncated" anomaly (error); cut before its first
// complete record, or damaged otherwise, it is a FormatError naming the byte offset and the record.
Trace importMemoryTimelineJson(std::string& json, std::string_view source, const LoadOptions& options = {});

// The same for the JSON inflated from a gzip stream that ends early at `compressedBytes` (GzipEnd,
// core/file_io.h): the messages name that byte first; a JSON that is whole keeps every record, with a
// "truncated" anomaly saying the stream's CRC-32 could not be checked.
Trace importMemoryTimelineJsonFromCutGzip(
    std::string& json, std::string_view source, std::size_t compressedBytes, const LoadOptions& options = {});

} // namespace gpumem
