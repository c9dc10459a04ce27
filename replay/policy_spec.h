#pragma once
// A policy and its parameters as data (design.md §5), parsed from one string:
//   NAME[@VERSION][:OPTIONS]   e.g. "pytorch", "pytorch:expandable_segments:True,max_split_size_mb:128",
//   "pytorch@2.0:roundup_power2_divisions:4", "direct", "ideal:alignment:1".
// OPTIONS use PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax for every policy (key:value pairs separated by
// commas, list values in [...]), so users paste what they already use.
// A wrapper policy (today `compaction`) wraps another spec and takes its own parameters in brackets
// right after its name:
//   WRAPPER[\[key=value,…\]]:INNER_SPEC   e.g. "compaction:pytorch",
//   "compaction[every=1000]:pytorch:expandable_segments:True", "compaction[at=nccl:*]:best-fit".
// Everything after the wrapper's ':' is the inner spec, parsed the same way (wrappers nest). Bracket
// values may hold ':' but not ',' or ']'. The syntax has no braces, so a sweep may expand `{a,b}`
// anywhere in the text before parsing ("compaction[every={100,1000}]:pytorch"). Plain value type.
#include "replay/policies/pytorch_config.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::replay {

struct PolicySpec {
    std::string text; // as written
    std::string policy; // "pytorch", "direct", "ideal"
    std::string version; // "" (newest rules) or e.g. "2.0"
    std::vector<ConfOption> options;
    std::vector<ConfOption> params; // NAME[key=value,…] (wrappers), in order as written
    std::shared_ptr<const PolicySpec> inner; // the wrapped spec of a wrapper policy, else null
};

// Names whose ':' introduces an inner spec rather than options ("compaction").
bool isWrapperPolicy(std::string_view name);

// Syntax only (the registry checks names, options and values). Throws UsageError on an empty name, a
// malformed option list, an unclosed '[', or a wrapper without an inner spec.
PolicySpec parsePolicySpec(std::string_view text);

} // namespace gpumem::replay
