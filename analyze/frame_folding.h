#pragma once
// Call stacks that read like Python (issue 18, docs/stacks.md): a recorded stack (a PyTorch snapshot's
// frames, innermost first) starts with a score of C++ frames of the unwinder, the caching allocator,
// the dispatcher and the interpreter — the same for every block — before the first line of the program.
// foldStack() drops them by a table of patterns (foldRules(), data, printed by `gpumem analyze
// --fold-rules` and listed in docs/stacks.md) and orders what is left outermost first: the Python frames,
// then the C++ frames below the innermost Python frame that no pattern folds; a stack without any Python
// frame (an autograd thread's) keeps its C++ frames that no pattern folds. FoldOptions::allFrames keeps
// every frame (`--all-frames`). Every front end that shows a stack (the CLI's code tree and folded
// stacks, the HTML report's flame graph, the JSON, the viewer's stack panes) goes through foldStack().
// Free functions and an immutable table: thread-safe; StackFolder is a per-thread cache.
#include "core/trace.h"

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpumem::analyze {

// One folding pattern. `function` is a glob ('*' matches any run of characters, everything else itself)
// on the frame's qualified function (qualifiedFunction(): no return type or argument list); `file`, when
// not empty, a glob on its file with '\\' read as '/'. A frame matching both is folded.
struct FoldRule {
    std::string_view function;
    std::string_view file;
    std::string_view what; // what the frames are: "unwinder", "caching allocator", "dispatcher", …
};

// The built-in patterns, in the order docs/stacks.md lists them.
std::span<const FoldRule> foldRules();
// The rule that folds `frame`, or nullptr.
const FoldRule* foldRuleFor(const Trace& trace, const Frame& frame);
// '*'-only glob over the whole text.
bool globMatch(std::string_view pattern, std::string_view text);

struct FoldOptions {
    bool allFrames = false; // keep every frame, innermost last (`--all-frames`)
};

// A frame of Python code: its file ends in ".py" (what PyTorch's unwinder records for interpreted frames).
bool isPythonFrame(const Trace& trace, const Frame& frame);

// The frames of a stack given innermost first (Trace::siteFrames), folded and ordered outermost first.
// When the patterns fold every frame of a stack with no Python frame, its innermost frame stays, so a
// recorded stack never becomes empty.
std::vector<FrameId> foldStack(const Trace& trace, std::span<const FrameId> innermostFirst, const FoldOptions& options = {});

// foldStack() of each site, computed once per site. Holds a reference to the trace; one per thread.
class StackFolder {
public:
    explicit StackFolder(const Trace& trace, FoldOptions options = {});
    // The folded stack of `site`, outermost first; empty for site 0 or a site without frames.
    std::span<const FrameId> stack(SiteId site);
    const Trace& trace() const { return m_trace; }

private:
    const Trace& m_trace;
    FoldOptions m_options;
    std::unordered_map<SiteId, std::vector<FrameId>> m_cache;
};

// The folded stack of a site as one line, outermost first: "<module> (train.py:9) → forward (model.py:40)";
// "" for site 0.
std::string foldedStackText(const Trace& trace, SiteId site, const FoldOptions& options = {});

// A frame name without the object addresses Python writes into some ("<built-in method bmm of type
// object at 0x7ce6…>" → "<built-in method bmm of type object>"), which change from run to run.
std::string cleanFrameName(std::string_view name);
// The qualified function of a C++ frame name, without its return type and argument list:
// "void at::cuda::blas::bgemm<float>(char, …)" → "at::cuda::blas::bgemm<float>". "(anonymous namespace)"
// is kept as a name part.
std::string qualifiedFunction(std::string_view name);
// "func (file.py:12)" with the file's base name; the cleaned name alone without a file.
std::string frameText(const Trace& trace, const Frame& frame);
// What a stack view shows for a frame: frameText() of a Python frame, the qualified function of a C++
// frame with its file's base name when known ("at::native::mul_out (BinaryOps.cpp)").
std::string stackFrameLabel(const Trace& trace, const Frame& frame);

} // namespace gpumem::analyze
