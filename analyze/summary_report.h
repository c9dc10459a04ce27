#pragma once
// Writers for TraceSummary: the text block `gpumem info` prints and its JSON form. Deterministic
// (golden tests compare them byte for byte). Times are shown relative to the trace start.
#include "analyze/trace_summary.h"

#include <nlohmann/json_fwd.hpp>

#include <iosfwd>
#include <string_view>

namespace gpumem::analyze {

// `label` names the trace (the path as given); `reader` is the importer that read it ("gmt", …).
void writeSummaryText(const TraceSummary& summary, std::string_view label, std::string_view reader, std::ostream& out);
nlohmann::json summaryToJson(const TraceSummary& summary, std::string_view label, std::string_view reader);

} // namespace gpumem::analyze
