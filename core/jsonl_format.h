#pragma once
// The `.jsonl` interchange form of a trace: one JSON object a line, the same content as .gmt and a
// lossless round trip with it (docs/trace-format.md §JSONL). What tests write by hand and people read.
#include "core/importer.h"
#include "core/trace.h"

#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace gpumem {

// Writes the canonical form (fields in a fixed order, defaults omitted). Deterministic.
void writeJsonl(const Trace& trace, std::ostream& out);
void writeJsonl(const Trace& trace, const std::string& path); // throws IoError

// Reads the file (gzip allowed); a malformed line is a FormatError naming path:line and the field
// (or path:line:column for invalid JSON). A record of an unknown type is skipped and counted as the
// "unknown_record" anomaly (a newer gpumem may add types). Progress every 65536 lines, then 1.0.
Trace readJsonl(const std::string& path, const LoadOptions& options = {});

// Where readJsonl(path, sink) hands the records that may be as many as the lines: each as it is read,
// in file order, with its line number (1-based). An unset member keeps those records in the trace.
// What a sink throws ends the read and passes through.
struct JsonlSink {
    std::function<void(const MemoryEvent& event, std::size_t line)> memoryEvent;
    std::function<void(const Kernel& kernel, std::size_t line)> kernel;
};

// readJsonl, but the memory events (and, with sink.kernel, the kernels) go to `sink` instead of into
// the trace: what is returned is the rest, built as readJsonl builds it (annotations and counter
// samples sorted by time), and its memory grows with the tables, not with the events. The same
// errors; the "seq" an event without one gets is still its position among the file's memory events.
// Since the events are not sorted here, a sink that needs trace order checks it (core/jsonl_to_gmt.h).
Trace readJsonl(const std::string& path, const JsonlSink& sink, const LoadOptions& options = {});

// The same from text in memory (already decompressed); `name` stands for the file in messages.
Trace readJsonlText(std::string_view content, std::string_view name, const LoadOptions& options = {});

} // namespace gpumem
