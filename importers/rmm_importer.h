#pragma once
// Importer for the CSV log of RAPIDS RMM's `logging_resource_adaptor` (rmm/mr/device/
// logging_resource_adaptor.hpp; format in shared/traces/public/SOURCES.md §E):
//     Thread,Time,Action,Pointer,Size,Stream
//     12345,10:00:01.000100,allocate,0x7f0000a00000,4096,0x0
// Each row is one request to the RMM resource: `allocate` → Alloc, `free` (or `deallocate`) → Free,
// `allocate failure` → Oom (size = the request). Size is both the size and the requested size (RMM logs
// what was asked for). Thread is the OS thread id; Stream the cudaStream_t in hex (0 = legacy default).
// Time is wall-clock time of day with no date: a row more than 12 h earlier than the previous one is
// taken to be on the next day (the log crossed midnight), and times are ns since the first row's
// midnight. A Time written as seconds since the epoch ("1634567890.123456") is read as such.
// The device is CUDA device N when the file name holds `.dev<N>` (rmm.enable_logging writes one file
// per device, e.g. rmm.dev1.log), else 0. File order is the sequence number (ties keep file order).
// Stateless free functions; safe to call from several threads at once.
#include "core/importer.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpumem {

inline constexpr std::string_view kRmmCsvHeader = "Thread,Time,Action,Pointer,Size,Stream";

// True if `head` starts with exactly kRmmCsvHeader followed by a line end (LF or CRLF) or the end.
bool looksLikeRmmCsv(std::string_view head);

// The device ordinal named by `.dev<N>` in the file name of `path` (the last such part), if any.
std::optional<std::int32_t> rmmDeviceOrdinalFromPath(std::string_view path);

// Imports a whole log held in memory; `source` names it in messages. Throws FormatError naming the
// source, the 1-based line and the column for a malformed row (wrong field count, bad number, unknown
// action); a malformed last line without a line end is a truncated write and is counted as the
// anomaly "truncated" instead. Cancelled when options.progress returns false.
Trace importRmmCsv(std::string_view text, const std::string& source, std::int32_t deviceOrdinal, const LoadOptions& options = {});

// Reads a file (gzip or plain) and imports it, taking the device from rmmDeviceOrdinalFromPath.
Trace readRmmCsv(const std::string& path, const LoadOptions& options = {});

std::unique_ptr<Importer> makeRmmCsvImporter();

} // namespace gpumem
