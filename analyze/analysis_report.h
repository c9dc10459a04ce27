#pragma once
// Writers for an Analysis: the text summary `gpumem analyze` prints (boxed like
// torch.cuda.memory_summary(), so PyTorch users read it at once), its JSON form and a CSV of the
// breakdown rows. Deterministic; stateless; thread-safe.
#include "analyze/analysis.h"

#include <nlohmann/json_fwd.hpp>

#include <iosfwd>
#include <string_view>

namespace gpumem::analyze {

struct ReportOptions {
    std::vector<GroupBy> groups { GroupBy::Module, GroupBy::Category, GroupBy::Site, GroupBy::SizeClass, GroupBy::Stream };
    std::size_t top = 10; // rows per grouping (the module tree keeps whole ancestor chains)
    // Text: the other fragmentation definitions (GMLake, STAlloc, TF, PyTorch inactive split, waste at
    // the reserved peak and over time) beside the headline (`analyze --details`); JSON always has them.
    bool details = false;
};

// The rows of a grouping to show: the first `top` by bytes; for the module tree the rows whose total
// is among the `top` largest totals, in tree order (ancestors are always kept, their totals are ≥);
// for size classes the `top` holding the most bytes, in ascending size (the smaller class on a tie).
std::vector<const GroupRow*> topRows(const Breakdown& b, GroupBy g, std::size_t top);

// PyTorch's memory_summary size cell: "{:6d} {B  |KiB|MiB|GiB|TiB}", the unit chosen from `reference`
// (torch/cuda/memory.py, _format_size).
std::string torchSize(Bytes bytes, Bytes reference);

void writeAnalysisText(const Trace& trace, const Analysis& a, std::string_view label, const ReportOptions& options, std::ostream& out);
nlohmann::json analysisToJson(const Trace& trace, const Analysis& a, std::string_view label, const ReportOptions& options);
// Header: trace,instant,time_ns,group,depth,key,label,self_bytes,total_bytes,self_blocks,total_blocks
void writeAnalysisCsv(const Analysis& a, std::string_view label, const ReportOptions& options, std::ostream& out, bool header = true);

// True when a byte figure of the analysis saturated at 2^64 − 1 (core/byte_total.h): the text marks it
// "≥ 16 EiB", the JSON says "bytes_saturated": true.
bool bytesSaturated(const Analysis& a);
// The fragmentation figures to show, as (label, value) rows in a fixed order (text and HTML reports).
// The headline first ("Reserved beyond live" at its moment), the lower bound, peak reserved and the one
// overhead figure; with `details` also the other definitions (docs/analysis.md).
std::vector<std::pair<std::string, std::string>> fragmentationRows(const FragmentationSummary& f, bool details = true);
// "12.5 %" with one decimal.
std::string percent(double fraction);
// CSV field quoting (RFC 4180), of the text made fit for a terminal line first (textForTerminal,
// core/message_quote.h): a CSV is read in terminals and spreadsheets too, so controls are escaped.
std::string csvField(std::string_view text);

} // namespace gpumem::analyze
