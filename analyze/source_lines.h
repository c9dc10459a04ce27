#pragma once
// Live bytes per line of one source file (issue 18 item 4, docs/stacks.md §Per source line), as Mosaic's
// per-file view: each live block is attributed to the innermost frame of its recorded stack that is in
// the file (the line of the model that made it, directly or through calls into other files). Blocks
// whose stack never passes through the file are counted apart. Pure functions; thread-safe.
#include "core/trace.h"

#include <iosfwd>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace gpumem::analyze {

// True when `recorded` (a frame's file as the trace has it) and `given` (a path a person typed) name the
// same file: with '\\' read as '/', one's path components end with all of the other's ("model.py" and
// "cs336_basics/model.py" both match "/home/b/cs336_basics/model.py").
bool sameSourceFile(std::string_view recorded, std::string_view given);

struct SourceLines {
    std::string given;                       // the path asked for
    std::vector<std::string> recordedFiles;  // the trace's file names that matched it
    struct Line {
        Bytes bytes = 0;
        std::uint64_t blocks = 0;
    };
    std::map<std::int32_t, Line> lines;      // line number (1-based; 0 = frames without a line) → bytes
    Bytes attributedBytes = 0, liveBytes = 0; // liveBytes: all blocks given
    std::uint64_t attributedBlocks = 0, liveBlocks = 0;
};

// Attributes the given allocations (indices into trace.allocations()). A frame matches by
// sameSourceFile(); when none does, by base name alone if exactly one recorded file has that base name.
SourceLines attributeSourceLines(const Trace& trace, std::span<const std::size_t> allocations, std::string_view path);

// The file's text, one row per line "bytes  blocks  number  text", within `width` columns (text cut
// with "…"; tabs shown as spaces), then the bytes attributed to frames without a line number. `source` is
// the file's content.
void writeSourceLines(const SourceLines& lines, std::string_view source, std::size_t width, std::ostream& out);

} // namespace gpumem::analyze
