#pragma once
// What `gpumem VERB` says when memory runs out (std::bad_alloc reaching cli/main.cpp): the verb, the
// trace(s) it was working on, and what to do — convert to .gmt where the verb streams one, leave out the
// options that read a .gmt whole, or run where the process may use more memory (docs/streaming.md).
// Pure functions.
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::cli {

// Whether `verb` reads a .gmt chunk by chunk (docs/streaming.md "Which verbs stream"): info, analyze,
// report, replay, sweep, fit.
bool streamsGmt(std::string_view verb);

// The message after "gpumem VERB: error: ", one line. `inputs`: the trace paths given (may be empty);
// `gmt[k]`: whether inputs[k] holds a .gmt (by content; false where unknown).
std::string outOfMemoryMessage(std::string_view verb, const std::vector<std::string>& inputs, const std::vector<bool>& gmt);

} // namespace gpumem::cli
