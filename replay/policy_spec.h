#pragma once
// A policy and its parameters as data (design.md §5), parsed from one string:
//   NAME[@VERSION][:OPTIONS]   e.g. "pytorch", "pytorch:expandable_segments:True,max_split_size_mb:128",
//   "pytorch@2.0:roundup_power2_divisions:4", "direct", "ideal:alignment:1".
// OPTIONS use PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax for every policy (key:value pairs separated by
// commas, list values in [...]), so users paste what they already use. Plain value type.
#include "replay/policies/pytorch_config.h"

#include <string>
#include <string_view>
#include <vector>

namespace gpumem::replay {

struct PolicySpec {
    std::string text; // as written
    std::string policy; // "pytorch", "direct", "ideal"
    std::string version; // "" (newest rules) or e.g. "2.0"
    std::vector<ConfOption> options;
};

// Syntax only (the registry checks names, options and values). Throws UsageError on an empty name or
// a malformed option list.
PolicySpec parsePolicySpec(std::string_view text);

} // namespace gpumem::replay
