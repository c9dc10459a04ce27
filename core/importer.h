#pragma once
// The importer interface. Every input format (the native .gmt and .jsonl here in core, and the
// foreign traces in importers/) is an Importer; loadTrace() (importers/importer_registry.h) picks one
// by content, never by extension (design.md §4). Importers follow Perfetto's staged ingest: read → sort → pair → store, counting
// anomalies in ImportStats and throwing FormatError only when nothing sensible can be read.
#include "core/error.h"
#include "core/trace.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

struct LoadOptions {
    // Warnings and errors in ImportStats become a FormatError (design.md §3).
    bool strict = false;
    // Called now and then with the fraction done (0–1); return false to cancel (throws Cancelled).
    std::function<bool(double)> progress;
};

class Cancelled : public Error {
public:
    Cancelled()
        : Error("cancelled")
    {
    }
};

// What an importer looks at to recognise its format.
struct SniffInput {
    std::string_view path;
    std::string_view raw;     // the first bytes of the file as stored
    std::string_view content; // the first bytes after gzip decompression (== raw if not gzip)
    bool gzip = false;
};

class Importer {
public:
    virtual ~Importer() = default;
    // Stable short name shown by `gpumem info` ("gmt", "jsonl", "pytorch-snapshot", …).
    virtual std::string_view name() const = 0;
    // One line for `gpumem help formats`.
    virtual std::string_view description() const = 0;
    // True if the head looks like this format. Must not throw.
    virtual bool sniff(const SniffInput& input) const = 0;
    // Reads the whole file. Throws IoError / FormatError naming the path and offset or field.
    // Sets metadata "source_format" to name().
    virtual Trace load(const std::string& path, const LoadOptions& options) const = 0;
};

} // namespace gpumem
