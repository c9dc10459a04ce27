#pragma once
// The `.jsonl` interchange form of a trace: one JSON object a line, the same content as .gmt and a
// lossless round trip with it (docs/trace-format.md §JSONL). What tests write by hand and people read.
#include "core/importer.h"
#include "core/trace.h"

#include <iosfwd>
#include <string>

namespace gpumem {

// Writes the canonical form (fields in a fixed order, defaults omitted). Deterministic.
void writeJsonl(const Trace& trace, std::ostream& out);
void writeJsonl(const Trace& trace, const std::string& path); // throws IoError

// Reads the file; a malformed line is a FormatError naming path:line and the field.
Trace readJsonl(const std::string& path, const LoadOptions& options = {});

} // namespace gpumem
