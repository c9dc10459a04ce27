#pragma once
// The code tree (issue 18, docs/stacks.md): the blocks live at one moment as a tree by call stack,
// outermost frame at the root, as memory_viz's and Mosaic's flame graphs draw it. Each block's stack is
// folded first (analyze/frame_folding.h), so a path reads <module> → train → forward → … and ends in
// the C++ frames below the innermost Python line that say what ran. A node is one frame under one
// parent; it holds the bytes and blocks of the blocks whose folded stack ends there (self) and of every
// block beneath it (total). The root's total is exactly the live bytes of the blocks given, and every
// node's total is its self plus its children's totals.
//
// Blocks without a stack hang under "(no stack)"; blocks a snapshot importer rebuilt from before the
// trace window hang under "(allocated before the trace)" with their recorded stack beneath, except
// where the importer could only take the stack of their later free (then no stack: it is not where they
// were allocated; the same rule as the peak breakdown's site rows, analyze/peak_breakdown.cpp).
//
// The CLI prints it (`analyze --by stack`, `--format folded`), the HTML report draws it as a flame
// graph, the viewer shows it as a tree and a flame graph. A CodeTree is an immutable value, safe to read
// from many threads; buildCodeTree() is thread-safe.
#include "analyze/frame_folding.h"
#include "analyze/peak_breakdown.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpumem::analyze {

using CodeNodeId = std::uint32_t;
inline constexpr CodeNodeId kNoCodeNode = std::numeric_limits<CodeNodeId>::max();
inline constexpr FrameId kNoFrame = std::numeric_limits<FrameId>::max();

struct CodeTreeNode {
    // The frame (an index into trace.frames()); kNoFrame for the root and the two grouping nodes.
    FrameId frame = kNoFrame;
    std::string label;  // stackFrameLabel(): "forward (model.py:101)"; "all" for the root
    std::string file;   // the frame's file as recorded (full path); "" when unknown or synthetic
    std::int32_t line = 0; // 0 if unknown
    CodeNodeId parent = kNoCodeNode;
    std::vector<CodeNodeId> children; // by total bytes, descending; then by label
    std::uint32_t depth = 0;          // 0 for the root
    Bytes selfBytes = 0, totalBytes = 0;
    std::uint64_t selfBlocks = 0, totalBlocks = 0;
};

struct CodeTreeBlock; // code_tree.cpp: one block as the tree places it

class CodeTree {
public:
    // Node 0 is the root; ids are stable for the life of the tree; parents come before children.
    const CodeTreeNode& root() const { return m_nodes.front(); }
    const CodeTreeNode& node(CodeNodeId id) const { return m_nodes.at(id); }
    std::span<const CodeTreeNode> nodes() const { return m_nodes; }
    std::size_t size() const { return m_nodes.size(); }
    Bytes liveBytes() const { return root().totalBytes; }
    std::uint64_t liveBlocks() const { return root().totalBlocks; }
    // The labels from the root's child down to `id` (the root itself left out).
    std::vector<std::string> path(CodeNodeId id) const;
    // The nodes in pre-order (children in their sorted order), the root first.
    std::vector<CodeNodeId> preorder() const;
    // "file:line" of a node's frame ("file" without a line); nullopt for the root and grouping nodes.
    std::optional<std::string> location(CodeNodeId id) const;

private:
    friend CodeTree buildCodeTreeOf(const Trace&, std::span<const CodeTreeBlock>, const FoldOptions&);
    std::vector<CodeTreeNode> m_nodes;
};

// The tree of the given allocations (indices into trace.allocations(), e.g. Breakdown::liveAllocations;
// those without an alloc event are skipped). O(blocks × stack depth).
CodeTree buildCodeTree(const Trace& trace, std::span<const std::size_t> allocations, const FoldOptions& options = {});
// The same tree from the blocks a breakdown grouped (Breakdown::blocks, for a trace analysed in passes whose
// skeleton has no allocations): reads only the trace's tables (sites, frames, strings).
CodeTree buildCodeTree(const Trace& trace, std::span<const LiveBlock> blocks, const FoldOptions& options = {});

inline constexpr std::string_view kNoStackLabel = "(no stack)";
inline constexpr std::string_view kBeforeTraceLabel = "(allocated before the trace)";

// Folded stacks, one line per node with self bytes: the labels from the root's child down, joined by
// ';', a space, the bytes ("<module> (train.py:9);forward (model.py:40) 1048576"), in pre-order. The
// input of flamegraph.pl, speedscope and inferno; the numbers sum to tree.liveBytes(). ';' and line
// breaks inside a label are written as ':' and ' ' so every line parses.
void writeFoldedStacks(const CodeTree& tree, std::ostream& out);

// The tree as indented text within `width` columns (≥ 60): total, self and blocks, then the label
// indented by depth; at most `top` children per node (the rest summed in one "… N more" line).
void writeCodeTreeText(const CodeTree& tree, std::size_t top, std::size_t width, std::ostream& out);

// {"label","file","line","self_bytes","total_bytes","self_blocks","total_blocks","children":[…]}; the
// root labelled "all"; at most `maxDepth` levels of children.
nlohmann::json codeTreeToJson(const CodeTree& tree, std::size_t maxDepth = 64);

// `raw` made fit for a terminal (textForTerminal) and cut to `width` display columns at a character
// boundary, "…" marking the cut; unchanged when it fits.
std::string cutToColumns(std::string_view raw, std::size_t width);

} // namespace gpumem::analyze
