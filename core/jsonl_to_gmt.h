#pragma once
// `gpumem convert X.jsonl -o Y.gmt` in memory that grows with the trace's tables, not with its events
// (issue 22; docs/streaming.md). The .gmt written is, byte for byte, writeGmt(readJsonl(X), Y): the
// memory events (and kernels) are encoded into MEMV (KERN) chunks as they are read, to an unnamed
// spool file (GmtChunkSpool, core/gmt_format.h), and copied after the tables once the input has been
// read to its end, since the strings, frames and sites the writer puts first are known only then.
// That needs the input in trace order — memory events in (time, sequence) order, kernels by start,
// which is how writeJsonl and every gpumem writer lays them out. An input that is not is detected
// while reading, and read again whole to be sorted, as before (the result says why).
//
// Memory: the tables, the annotations and counter samples, one chunk of events and one of kernels,
// and with `strict` the blocks live at once (ChunkPairing, core/chunk_pairing.h). Disk: the spool,
// about the size of the events' chunks in the output, until the output is written.
#include "core/import_stats.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpumem {

struct JsonlToGmtOptions {
    // As LoadOptions::strict (loadTrace's --strict): an import or pairing anomaly of warning or error
    // severity is a FormatError naming the input, raised before the output is written.
    bool strict = false;
    // Memory events (kernels, annotations, counter samples) per chunk, clamped to 1..kGmtMaxEventsPerChunk:
    // writeGmt's. Tests pass tiny ones to break the chunks at awkward places.
    std::size_t eventsPerChunk = 65536;
    // Where the spool goes: empty for the folder of the output (or the temporary folder when the
    // output is not a regular file: a FIFO, /dev/stdout).
    std::string spoolFolder;
    // Read the trace whole, as convert did before it streamed (the baseline of bench/convert_scale.sh).
    bool whole = false;
};

struct JsonlToGmtResult {
    std::uint64_t memoryEvents = 0;
    bool streamed = false;
    // Why the trace was read whole although streaming was asked for ("X:LINE: …"); empty otherwise.
    std::string fallback;
    // The input's import anomalies, as written to the output (Trace::importStats(); a damaged trace's
    // `truncated` or `corrupt_chunk` carried in its .jsonl, for instance): the caller says the errors.
    ImportStats importStats;
};

// Writes the .gmt of the .jsonl (gzip allowed) at `jsonlPath` to `gmtPath` (created or truncated).
// Errors: readJsonl's (FormatError naming path:line and the field; IoError), IoError for the output
// or the spool. On error `gmtPath` may hold a partial file: write to a temporary and rename it when
// this returns (cli/output_file.h does).
JsonlToGmtResult writeGmtFromJsonl(const std::string& jsonlPath, const std::string& gmtPath, const JsonlToGmtOptions& options = {});

} // namespace gpumem
