#pragma once
// The format registry: every importer gpumem has (core's native .gmt and .jsonl and the foreign
// formats in importers/), asked in a fixed order to recognise a file by its content, never by its
// extension (design.md §4). It lives above core because it names the foreign formats; the tracer,
// which links core alone, writes .gmt and never needs it. Stateless and thread-safe: the list is
// built once on first use.
#include "core/importer.h"

#include <memory>
#include <string>
#include <vector>

namespace gpumem {

// All registered importers, in the order they are asked to sniff.
const std::vector<std::unique_ptr<Importer>>& importers();

// The importer for this file, or nullptr when no importer recognises it. Throws IoError, and
// FormatError for an empty file.
const Importer* detectFormat(const std::string& path);

// Detects the format and loads the file; with options.strict, anomalies of warning or error
// severity become a FormatError. Throws FormatError listing the formats when none matches.
// `used`, when given, receives the importer that read the file (for "format: …" lines).
Trace loadTrace(const std::string& path, const LoadOptions& options = {}, const Importer** used = nullptr);

} // namespace gpumem
