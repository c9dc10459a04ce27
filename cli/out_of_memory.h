#pragma once
// What `gpumem VERB` says when memory runs out (std::bad_alloc reaching cli/main.cpp): the verb, the
// trace(s) it was working on, and what to do — convert to .gmt where the verb streams one, leave out the
// options that read a .gmt whole, or run where the process may use more memory (docs/streaming.md).
// Pure functions.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::cli {

// Whether `verb` reads a .gmt chunk by chunk (docs/streaming.md "Which verbs stream"): info, analyze,
// report, replay, sweep, fit, diff, explain.
bool streamsGmt(std::string_view verb);

// The message after "gpumem VERB: error: ", one line. `inputs`: the trace paths given (may be empty);
// `isGmt(path)`: whether a path holds a .gmt (by content: cli/command.h isGmtFile), asked only where `verb`
// streams a .gmt, in order, up to the first input that does not (the one the message says to convert).
std::string outOfMemoryMessage(
    std::string_view verb, const std::vector<std::string>& inputs, const std::function<bool(const std::string&)>& isGmt);

// What `gpumem convert IN.jsonl -o OUT.gmt` says when memory runs out while it converts (core/jsonl_to_gmt.h):
// it streams a .jsonl whose records are in trace order, holding its tables, and reads one out of order whole;
// `whole`: GPUMEM_CONVERT_WHOLE made it read the file whole. One line, starting with the path.
std::string convertOutOfMemoryMessage(const std::string& in, bool whole);

} // namespace gpumem::cli
