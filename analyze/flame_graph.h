#pragma once
// A flame graph of a code tree (analyze/code_tree.h) as one inline SVG element with no script, for the
// HTML report (issue 18 item 3): the root at the bottom, each frame a box as wide as its total bytes
// and stacked on its caller; hovering a box shows its frame, bytes, blocks and file:line (an SVG
// <title>, which browsers show as a tooltip). Python frames are drawn warm, C++ frames cool, the
// grouping nodes grey. Stateless; thread-safe.
#include "analyze/code_tree.h"

#include <iosfwd>

namespace gpumem::analyze {

struct FlameGraphOptions {
    double width = 1000;     // px
    double rowHeight = 17;   // px per frame level
    double minBoxWidth = 0.5; // px; narrower boxes (and what is above them) are left out
    std::size_t maxDepth = 80; // levels drawn above the root
};

// `tree` must have been built from `trace` (its frames name the palette of each box).
void writeFlameGraphSvg(const Trace& trace, const CodeTree& tree, const FlameGraphOptions& options, std::ostream& out);

} // namespace gpumem::analyze
