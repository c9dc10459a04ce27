#include "analyze/flame_graph.h"

#include "analyze/html_report.h"
#include "core/units.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace gpumem::analyze {

namespace {
    std::string px(double v)
    {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }
    // A colour that stays the same for a label across reports (FNV-1a of the label picks it in the palette).
    std::string colour(std::string_view label, int kind)
    {
        std::uint32_t h = 2166136261u;
        for (unsigned char c : label)
            h = (h ^ c) * 16777619u;
        const int v = static_cast<int>(h % 56);
        char buf[16];
        if (kind == 0) // Python: flamegraph.pl's warm reds and oranges
            std::snprintf(buf, sizeof buf, "#%02x%02x%02x", 205 + v, 90 + 2 * v, 40 + v / 2);
        else if (kind == 1) // C++: blues
            std::snprintf(buf, sizeof buf, "#%02x%02x%02x", 90 + v, 150 + v, 205 + v / 2);
        else
            std::snprintf(buf, sizeof buf, "#%02x%02x%02x", 190 + v / 4, 190 + v / 4, 190 + v / 4);
        return buf;
    }
} // namespace

void writeFlameGraphSvg(const Trace& trace, const CodeTree& tree, const FlameGraphOptions& o, std::ostream& out)
{
    const Bytes total = tree.liveBytes();
    std::size_t depth = 0;
    for (const auto& n : tree.nodes())
        depth = std::max<std::size_t>(depth, n.depth);
    depth = std::min(depth, o.maxDepth);
    const double height = static_cast<double>(depth + 1) * o.rowHeight + 2;
    out << "<svg xmlns='http://www.w3.org/2000/svg' class='flame' width='" << px(o.width) << "' height='" << px(height)
        << "' font-size='11' font-family='monospace' role='img'><title>live bytes by call stack (flame graph)</title>";
    if (total == 0) {
        out << "</svg>";
        return;
    }
    // Pre-order with each node's left edge: children laid out left to right in their (bytes) order.
    struct Item {
        CodeNodeId id;
        double x;
    };
    std::vector<Item> pending { { 0, 0.0 } };
    while (!pending.empty()) {
        const auto [id, x] = pending.back();
        pending.pop_back();
        const auto& n = tree.node(id);
        const double w = o.width * static_cast<double>(n.totalBytes) / static_cast<double>(total);
        if (w < o.minBoxWidth || n.depth > depth)
            continue;
        const double y = height - 1 - static_cast<double>(n.depth + 1) * o.rowHeight;
        const int kind = n.frame == kNoFrame ? 2 : isPythonFrame(trace, trace.frames()[n.frame]) ? 0 : 1;
        const std::string label = id == 0 ? std::string("all") : n.label;
        char share[32];
        std::snprintf(share, sizeof share, "%.1f %%", 100.0 * static_cast<double>(n.totalBytes) / static_cast<double>(total));
        std::string tip = label + " — " + formatBytes(n.totalBytes) + " (" + share + ") in " + counted(n.totalBlocks, "block", "blocks");
        if (n.selfBytes)
            tip += ", " + formatBytes(n.selfBytes) + " allocated here";
        if (auto where = tree.location(id))
            tip += "; " + *where;
        out << "<g><title>" << htmlEscape(tip) << "</title><rect x='" << px(x) << "' y='" << px(y) << "' width='" << px(std::max(w - 0.5, 0.1))
            << "' height='" << px(o.rowHeight - 1) << "' fill='" << colour(label, kind) << "'/>";
        // The label where it fits (about 6.6 px a character at 11 px monospace), cut with "…".
        const auto chars = static_cast<std::size_t>((w - 6) / 6.6);
        if (chars >= 3)
            out << "<text x='" << px(x + 3) << "' y='" << px(y + o.rowHeight - 5) << "'>" << htmlEscape(cutToColumns(label, chars))
                << "</text>";
        out << "</g>";
        double childX = x;
        std::vector<Item> kids;
        for (CodeNodeId c : n.children) {
            kids.push_back({ c, childX });
            childX += o.width * static_cast<double>(tree.node(c).totalBytes) / static_cast<double>(total);
        }
        pending.insert(pending.end(), kids.rbegin(), kids.rend());
    }
    out << "</svg>";
}

} // namespace gpumem::analyze
