#include "replay/policy_spec.h"

#include "core/error.h"

#include <cctype>

namespace gpumem::replay {

PolicySpec parsePolicySpec(std::string_view text)
{
    PolicySpec spec;
    spec.text = std::string(text);
    std::size_t colon = text.find(':');
    std::string_view head = text.substr(0, colon);
    while (!head.empty() && std::isspace(static_cast<unsigned char>(head.back())))
        head.remove_suffix(1);
    while (!head.empty() && std::isspace(static_cast<unsigned char>(head.front())))
        head.remove_prefix(1);
    std::size_t at = head.find('@');
    spec.policy = std::string(head.substr(0, at));
    if (at != std::string_view::npos)
        spec.version = std::string(head.substr(at + 1));
    if (spec.policy.empty())
        throw UsageError("policy spec '" + std::string(text)
            + "' has no policy name; write NAME[@VERSION][:OPTIONS], e.g. pytorch:expandable_segments:True");
    if (at != std::string_view::npos && spec.version.empty())
        throw UsageError(
            "policy spec '" + std::string(text) + "': '@' must be followed by a version, e.g. pytorch@2.0");
    if (colon != std::string_view::npos)
        spec.options = splitAllocConf(text.substr(colon + 1));
    return spec;
}

} // namespace gpumem::replay
