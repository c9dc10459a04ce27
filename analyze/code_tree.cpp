#include "analyze/code_tree.h"

#include "core/byte_total.h"
#include "core/display_width.h"
#include "core/message_quote.h"
#include "core/units.h"
#include "replay/start_state.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <ostream>

namespace gpumem::analyze {

std::vector<std::string> CodeTree::path(CodeNodeId id) const
{
    std::vector<std::string> labels;
    for (CodeNodeId n = id; n != 0 && n < m_nodes.size(); n = m_nodes[n].parent)
        labels.push_back(m_nodes[n].label);
    std::reverse(labels.begin(), labels.end());
    return labels;
}

std::vector<CodeNodeId> CodeTree::preorder() const
{
    std::vector<CodeNodeId> order, pending { 0 };
    order.reserve(m_nodes.size());
    while (!pending.empty()) {
        const CodeNodeId n = pending.back();
        pending.pop_back();
        order.push_back(n);
        const auto& kids = m_nodes[n].children;
        pending.insert(pending.end(), kids.rbegin(), kids.rend());
    }
    return order;
}

std::optional<std::string> CodeTree::location(CodeNodeId id) const
{
    const auto& n = m_nodes.at(id);
    if (n.frame == kNoFrame || n.file.empty() || n.file == "??")
        return std::nullopt;
    return n.line ? n.file + ":" + std::to_string(n.line) : n.file;
}

// One block as the tree places it: its size, its site, whether it is among the blocks from before the trace
// window, and whether its stack is known (not taken from its later free).
struct CodeTreeBlock {
    Bytes size = 0;
    SiteId site = 0;
    bool beforeWindow = false, stackKnown = true;
};

CodeTree buildCodeTreeOf(const Trace& trace, std::span<const CodeTreeBlock> blocks, const FoldOptions& options)
{
    CodeTree tree;
    auto& nodes = tree.m_nodes;
    nodes.push_back({});
    nodes[0].label = "all";
    StackFolder folder(trace, options);
    std::map<std::pair<CodeNodeId, FrameId>, CodeNodeId> childOf; // (parent, frame) → node
    auto child = [&](CodeNodeId parent, FrameId frame, std::string_view syntheticLabel) {
        auto [it, inserted] = childOf.emplace(std::make_pair(parent, frame), CodeNodeId(nodes.size()));
        if (inserted) {
            CodeTreeNode n;
            n.parent = parent;
            n.depth = nodes[parent].depth + 1;
            if (!syntheticLabel.empty())
                n.label = std::string(syntheticLabel); // n.frame stays kNoFrame
            else {
                const Frame& f = trace.frames()[frame];
                n.frame = frame;
                n.label = stackFrameLabel(trace, f);
                n.file = std::string(trace.str(f.file));
                n.line = f.line;
            }
            nodes.push_back(std::move(n));
            nodes[parent].children.push_back(it->second);
        }
        return it->second;
    };
    // Synthetic children use frame ids no frame has, so they never meet a real frame's node.
    constexpr FrameId kNoStackKey = kNoFrame, kBeforeKey = kNoFrame - 1;
    for (const auto& b : blocks) {
        CodeNodeId at = 0;
        if (b.beforeWindow)
            at = child(0, kBeforeKey, kBeforeTraceLabel);
        const auto stack = b.stackKnown ? folder.stack(b.site) : std::span<const FrameId> {};
        if (stack.empty() && at == 0) {
            at = child(0, kNoStackKey, kNoStackLabel);
        }
        for (FrameId f : stack)
            at = child(at, f, {});
        auto& leaf = nodes[at];
        leaf.selfBytes = addSaturated(leaf.selfBytes, b.size);
        ++leaf.selfBlocks;
        for (CodeNodeId n = at;; n = nodes[n].parent) {
            nodes[n].totalBytes = addSaturated(nodes[n].totalBytes, b.size);
            ++nodes[n].totalBlocks;
            if (n == 0)
                break;
        }
    }
    for (auto& n : nodes)
        std::sort(n.children.begin(), n.children.end(), [&](CodeNodeId x, CodeNodeId y) {
            if (nodes[x].totalBytes != nodes[y].totalBytes)
                return nodes[x].totalBytes > nodes[y].totalBytes;
            return nodes[x].label != nodes[y].label ? nodes[x].label < nodes[y].label : x < y;
        });
    return tree;
}

CodeTree buildCodeTree(const Trace& trace, std::span<const std::size_t> indices, const FoldOptions& options)
{
    const auto& m = trace.memory();
    const auto allocations = trace.allocations();
    std::vector<std::size_t> firstWindow(trace.devices().size(), 0);
    for (DeviceId d = 0; d < firstWindow.size(); ++d)
        if (replay::initialStateEventCount(trace, d) > 0)
            firstWindow[d] = replay::firstWindowEvent(trace, d);
    std::vector<CodeTreeBlock> blocks;
    blocks.reserve(indices.size());
    for (auto i : indices) {
        if (i >= allocations.size() || allocations[i].allocEvent == kNoIndex)
            continue;
        const auto& a = allocations[i];
        const auto ev = a.allocEvent;
        CodeTreeBlock b { m.size[ev], m.site[ev] };
        if (m.device[ev] < firstWindow.size() && ev < firstWindow[m.device[ev]]) {
            b.beforeWindow = true;
            // The importer's stack for such a block may be that of its later free (peak_breakdown.cpp).
            b.stackKnown = !(a.freeEvent != kNoIndex && m.site[a.freeEvent] == b.site && b.site != 0);
        }
        blocks.push_back(b);
    }
    return buildCodeTreeOf(trace, blocks, options);
}

CodeTree buildCodeTree(const Trace& trace, std::span<const LiveBlock> live, const FoldOptions& options)
{
    std::vector<CodeTreeBlock> blocks;
    blocks.reserve(live.size());
    for (const auto& l : live)
        blocks.push_back({ l.size, l.site, l.beforeWindow, !(l.beforeWindow && l.siteFromFree) });
    return buildCodeTreeOf(trace, blocks, options);
}

namespace {
    // A label fit for one folded line: the two characters the format gives meaning to are replaced.
    std::string foldedLabel(std::string_view label)
    {
        std::string s(label);
        for (auto& c : s)
            if (c == ';')
                c = ':';
            else if (c == '\n' || c == '\r')
                c = ' ';
        return s;
    }
} // namespace

std::string cutToColumns(std::string_view raw, std::size_t width)
{
    const std::string text = textForTerminal(raw);
    if (displayWidth(text) <= width)
        return text;
    std::string out;
    std::size_t used = 0;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t len = characterLength(text, i);
        const std::size_t w = displayWidth(std::string_view(text).substr(i, len));
        if (used + w + 1 > width)
            break;
        out.append(text, i, len);
        used += w;
        i += len;
    }
    return out + "…";
}

void writeFoldedStacks(const CodeTree& tree, std::ostream& out)
{
    for (CodeNodeId id : tree.preorder()) {
        const auto& n = tree.node(id);
        if (id == 0 || n.selfBlocks == 0)
            continue;
        std::string line;
        for (const auto& label : tree.path(id))
            line += (line.empty() ? "" : ";") + foldedLabel(label);
        out << line << ' ' << n.selfBytes << '\n';
    }
}

void writeCodeTreeText(const CodeTree& tree, std::size_t top, std::size_t width, std::ostream& out)
{
    constexpr std::size_t kNumbers = 32; // "  total  " 11 + " self " 11 + " blocks " 8 + 2 spaces
    width = std::max<std::size_t>(width, 60);
    const std::size_t labelWidth = width - kNumbers;
    out << padLeft("total", 11) << padLeft("self", 11) << padLeft("blocks", 8) << "  stack (outermost first)\n";
    auto row = [&](Bytes total, Bytes self, std::uint64_t blocks, std::size_t depth, std::string_view label) {
        // Deep stacks indent by one column per level past 12 levels, so labels keep room.
        const std::size_t indent = std::min<std::size_t>(depth <= 12 ? depth * 2 : 24 + (depth - 12), labelWidth / 2);
        out << padLeft(formatBytes(total), 11) << padLeft(self ? formatBytes(self) : std::string("-"), 11)
            << padLeft(std::to_string(blocks), 8) << "  " << std::string(indent, ' ') << cutToColumns(label, labelWidth - indent) << '\n';
    };
    // Recursion depth is the folded stack depth (a few hundred frames at most).
    auto walk = [&](auto&& self, CodeNodeId id) -> void {
        const auto& n = tree.node(id);
        row(n.totalBytes, n.selfBytes, n.totalBlocks, n.depth, id == 0 ? "all (live blocks)" : std::string_view(n.label));
        const std::size_t shown = top == 0 ? n.children.size() : std::min(top, n.children.size());
        for (std::size_t k = 0; k < shown; ++k)
            self(self, n.children[k]);
        if (shown == n.children.size())
            return;
        Bytes rest = 0;
        std::uint64_t blocks = 0;
        for (std::size_t k = shown; k < n.children.size(); ++k) {
            rest = addSaturated(rest, tree.node(n.children[k]).totalBytes);
            blocks += tree.node(n.children[k]).totalBlocks;
        }
        const std::size_t more = n.children.size() - shown;
        row(rest, 0, blocks, n.depth + 1, "… " + std::to_string(more) + (more == 1 ? " more frame" : " more frames"));
    };
    walk(walk, 0);
}

nlohmann::json codeTreeToJson(const CodeTree& tree, std::size_t maxDepth)
{
    auto emit = [&](auto&& self, CodeNodeId id) -> nlohmann::json {
        const auto& n = tree.node(id);
        nlohmann::json j { { "label", n.label }, { "file", n.file }, { "line", n.line }, { "self_bytes", n.selfBytes },
            { "total_bytes", n.totalBytes }, { "self_blocks", n.selfBlocks }, { "total_blocks", n.totalBlocks } };
        nlohmann::json kids = nlohmann::json::array();
        if (n.depth < maxDepth)
            for (CodeNodeId c : n.children)
                kids.push_back(self(self, c));
        j["children"] = std::move(kids);
        return j;
    };
    return emit(emit, 0);
}

} // namespace gpumem::analyze
