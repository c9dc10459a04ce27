#pragma once
// Importer for PyTorch profiler / Kineto Chrome traces (`*.pt.trace.json[.gz]`, both the 2021
// "Operator/Kernel/Runtime" schema and the current "cpu_op/kernel/cuda_runtime" one). The format is
// described in traces/public/SOURCES.md §A; the mapping to the trace model is in docs/kineto-import.md.
//
// What becomes what:
//   [memory] instant events  → request-level Alloc (Bytes > 0) / Free (Bytes < 0) on stream handle 0 of
//                              (Device Type, Device Id); sequence = "Ev Idx" (file order if absent);
//                              "Total Allocated" / "Total Reserved" → counter series per device.
//   kernel / Kernel          → Kernel (device, stream, correlation).
//   nn.Module python_function, cpu_op / Operator, user_annotation → the scope tree (Module, Op, Range),
//                              nested by interval containment on the same pid/tid; each memory event
//                              gets the innermost containing scope.
//   other python_function    → Python frames; "Call stack" strings (2021) → frames; each memory event
//                              gets the site of the frames containing it.
//   user_annotation          → Annotation Range; ProfilerStep#N → Annotation Step.
// Files whose [memory] events carry no "Addr" (PyTorch ≤ 1.9) cannot be paired: they are imported as
// a derived counter per device ("Allocated (sum of Bytes)") and the "no_addresses" anomaly, whose detail
// and the metadata "unaddressed_memory_events" give the alloc/free counts per device.
//
// Stateless and thread-safe: load() may run concurrently on different files.
#include "core/importer.h"

#include <cstddef>
#include <memory>
#include <string_view>

namespace gpumem {

std::unique_ptr<Importer> makeKinetoImporter();

// Parses Kineto JSON already in memory (what load() does after reading the file); `source` names
// it in errors. `json` must have at least 64 bytes of readable spare capacity after its end
// (std::string capacity; see kReadPadding) or it is copied once. A file cut short (its top-level object
// never closes; detail/json_cut.h finds where) follows one rule: a cut inside traceEvents keeps every
// complete event before it, a cut after the list closed keeps all of them (without the top-level member
// being cut), each with one "truncated" anomaly (severity error) naming the byte where the JSON ends, the
// place (which event; in a number, string or key) and the events kept; `json` is shortened in place
// then. A cut before the first complete event is a FormatError naming the file and that byte. Throws
// FormatError for invalid JSON that is not a cut.
Trace importKinetoJson(std::string& json, std::string_view source, const LoadOptions& options = {});

// As above, for `json` inflated from a gzip stream that ends early (GzipEnd, core/file_io.h; what load()
// does with a cut `.json.gz`): the same rule on the inflated bytes, with the anomaly's detail (or the
// FormatError) first naming the compressed byte where the stream ends, then where the JSON ends. When the
// inflated JSON is whole (the cut fell in the gzip trailer) every event is kept, still with the
// "truncated" anomaly: the stream's CRC-32 could not be checked. `compressedBytes`: the bytes of the cut
// stream.
Trace importKinetoJsonFromCutGzip(
    std::string& json, std::string_view source, std::size_t compressedBytes, const LoadOptions& options = {});

} // namespace gpumem
