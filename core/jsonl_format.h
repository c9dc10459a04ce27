#pragma once
// The `.jsonl` interchange form of a trace: one JSON object a line, the same content as .gmt and a
// lossless round trip with it (docs/trace-format.md §JSONL). What tests write by hand and people read.
#include "core/importer.h"
#include "core/trace.h"

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

// The same from text in memory (already decompressed); `name` stands for the file in messages.
Trace readJsonlText(std::string_view content, std::string_view name, const LoadOptions& options = {});

} // namespace gpumem
