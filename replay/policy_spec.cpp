#include "replay/policy_spec.h"

#include "core/error.h"

#include <cctype>

namespace gpumem::replay {

namespace {
    std::string_view trimmed(std::string_view s)
    {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
            s.remove_suffix(1);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
            s.remove_prefix(1);
        return s;
    }

    // "key=value,key=value" of a wrapper's brackets.
    std::vector<ConfOption> bracketParams(std::string_view body, std::string_view text)
    {
        std::vector<ConfOption> out;
        while (!body.empty()) {
            std::size_t comma = body.find(',');
            std::string_view item = trimmed(body.substr(0, comma));
            std::size_t eq = item.find('=');
            if (eq == std::string_view::npos || trimmed(item.substr(0, eq)).empty())
                throw UsageError("policy spec '" + std::string(text) + "': parameter '" + std::string(item)
                    + "' must be key=value, e.g. compaction[every=1000]:pytorch");
            out.emplace_back(std::string(trimmed(item.substr(0, eq))), std::string(trimmed(item.substr(eq + 1))));
            if (comma == std::string_view::npos)
                break;
            body.remove_prefix(comma + 1);
        }
        return out;
    }
} // namespace

bool isWrapperPolicy(std::string_view name) { return name == "compaction"; }

PolicySpec parsePolicySpec(std::string_view text)
{
    PolicySpec spec;
    spec.text = std::string(text);
    // The head ends at the first ':' or at a '[' that opens wrapper parameters (whose values may hold ':').
    std::size_t end = text.find_first_of(":[");
    std::size_t colon = end;
    std::string_view head = trimmed(text.substr(0, end));
    if (end != std::string_view::npos && text[end] == '[') {
        std::size_t close = text.find(']', end);
        if (close == std::string_view::npos)
            throw UsageError("policy spec '" + std::string(text) + "': '[' is not closed by ']'");
        spec.params = bracketParams(text.substr(end + 1, close - end - 1), text);
        colon = close + 1;
        if (!trimmed(text.substr(colon, text.find(':', colon) - colon)).empty())
            throw UsageError("policy spec '" + std::string(text) + "': expected ':' after ']'");
        colon = text.find(':', colon);
    }
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
    if (isWrapperPolicy(spec.policy)) {
        if (colon == std::string_view::npos || trimmed(text.substr(colon + 1)).empty())
            throw UsageError("policy spec '" + std::string(text) + "': " + spec.policy
                + " wraps another policy; write e.g. " + spec.policy + ":pytorch or " + spec.policy
                + "[every=1000]:pytorch:expandable_segments:True");
        // One wrapper level, checked before parsing the inner spec: compacting an already compacting
        // policy moves nothing more, and a spec nested 10^4 deep took gigabytes and a minute.
        const std::string_view innerText = trimmed(text.substr(colon + 1));
        const std::string_view innerHead = trimmed(innerText.substr(0, innerText.find_first_of(":[@")));
        if (isWrapperPolicy(innerHead))
            throw UsageError("policy spec '" + std::string(text.substr(0, std::min<std::size_t>(text.size(), 80)))
                + (text.size() > 80 ? "…" : "") + "': " + spec.policy + " cannot wrap " + std::string(innerHead)
                + "; write " + spec.policy + ":POLICY with a policy that is not a wrapper");
        spec.inner = std::make_shared<const PolicySpec>(parsePolicySpec(innerText));
    } else if (colon != std::string_view::npos)
        spec.options = splitAllocConf(text.substr(colon + 1));
    return spec;
}

} // namespace gpumem::replay
