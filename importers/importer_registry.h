#pragma once
// The format registry: every importer gpumem has (core's native .gmt and .jsonl and the foreign
// formats in importers/), asked in a fixed order to recognise a file by its content, never by its
// extension (design.md §4). It lives above core because it names the foreign formats; the tracer,
// which links core alone, writes .gmt and never needs it. Stateless and thread-safe: the list is
// built once on first use.
#include "core/importer.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

// All registered importers, in the order they are asked to sniff.
const std::vector<std::unique_ptr<Importer>>& importers();

// The importer for this file, or nullptr when no importer recognises it. Throws IoError, and
// FormatError for an empty file.
const Importer* detectFormat(const std::string& path);

// Detects the format and loads the file; with options.strict, anomalies of warning or error
// severity become a FormatError. Throws FormatError listing the formats when none matches, and Error with
// outOfMemoryWhileReading() when the memory runs out (std::bad_alloc) while the importer reads it.
// `used`, when given, receives the importer that read the file (for "format: …" lines).
Trace loadTrace(const std::string& path, const LoadOptions& options = {}, const Importer** used = nullptr);

// The .gmt beside a trace, the name `gpumem convert PATH -o …` is advised with: run.json.gz → run.gmt,
// v1.2/run → v1.2/run.gmt (a trailing .gz, then the extension, replaced).
std::string gmtPathBeside(const std::string& path);

// The end of every out-of-memory message: where else to run.
inline constexpr std::string_view kRunWithMoreMemory = "run where it may use more (ulimit -v, the job's or container's memory limit)";

// What loadTrace says when reading `path` as `format` (an importer's name()) runs out of memory: "PATH: out of
// memory while reading it as FORMAT (the trace needs more memory than the process may use): " and what to do,
// which depends on the format (docs/streaming.md): a jsonl trace converts to .gmt as it is read, in memory that
// grows with its tables, not its events; a .gmt is read whole only by the verbs and options that need the
// trace in memory; every other format is read whole by its importer, by `gpumem convert` too. One line.
std::string outOfMemoryWhileReading(const std::string& path, std::string_view format);

} // namespace gpumem
