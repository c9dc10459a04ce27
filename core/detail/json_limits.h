#pragma once
// Parsing of JSON that gpumem keeps and writes back out (trace metadata): nlohmann's parser is
// iterative, but dump() and merge_patch() recurse, so a hostile file nested 100,000 levels deep would
// overflow the stack when the trace is written. Metadata is shallow in practice.
#include <nlohmann/json.hpp>

#include <string_view>

namespace gpumem::detail {

inline constexpr int kMaxMetadataDepth = 64;

// Parses `text`; returns a discarded value if it is not JSON or nests deeper than kMaxMetadataDepth
// (then `tooDeep` is set). Never throws.
inline nlohmann::json parseShallowJson(std::string_view text, bool& tooDeep)
{
    tooDeep = false;
    nlohmann::json::parser_callback_t depthCheck = [&tooDeep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxMetadataDepth)
            tooDeep = true;
        return true;
    };
    auto j = nlohmann::json::parse(text, depthCheck, false);
    return tooDeep ? nlohmann::json(nlohmann::json::value_t::discarded) : j;
}

} // namespace gpumem::detail
