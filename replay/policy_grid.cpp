#include "replay/policy_grid.h"

#include "core/error.h"

#include <algorithm>

namespace gpumem::replay {

namespace {
    [[noreturn]] void bad(std::string_view text, std::size_t offset, const std::string& what)
    {
        throw UsageError("policy grid '" + std::string(text) + "': " + what + " at character "
            + std::to_string(offset + 1)
            + "; write alternatives as {a,b,…} without nesting, e.g. pytorch:max_split_size_mb:{64,128}");
    }
} // namespace

std::vector<std::string> expandBraceGrid(std::string_view text)
{
    // Split into literal parts and brace groups: parts[0] group[0] parts[1] group[1] … parts[n].
    std::vector<std::string> literals(1);
    std::vector<std::vector<std::string>> groups;
    std::size_t open = std::string_view::npos; // offset of the '{' of the group being read
    int bracket = 0; // depth of [...] inside a group
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (open == std::string_view::npos) {
            if (c == '}')
                bad(text, i, "'}' without a matching '{'");
            if (c == '{') {
                open = i;
                bracket = 0;
                groups.emplace_back(1);
                continue;
            }
            literals.back() += c;
            continue;
        }
        auto& alternatives = groups.back();
        if (c == '{')
            bad(text, i, "nested '{'");
        if (c == '}' && bracket > 0)
            bad(text, i, "'}' inside a '[' that is not closed");
        if (c == '[')
            ++bracket;
        else if (c == ']' && bracket > 0)
            --bracket;
        if (bracket == 0 && (c == ',' || c == '}')) {
            // `{64, 128}` is `{64,128}`: blanks around an alternative are not part of it (review finding:
            // the label kept them).
            auto& a = alternatives.back();
            a.erase(0, std::min(a.size(), a.find_first_not_of(" \t")));
            a.erase(a.find_last_not_of(" \t") + 1);
            if (alternatives.back().empty())
                bad(text, i, alternatives.size() == 1 && c == '}' ? "empty braces '{}'" : "an empty alternative");
            if (c == ',') {
                alternatives.emplace_back();
                continue;
            }
            open = std::string_view::npos;
            literals.emplace_back();
            continue;
        }
        alternatives.back() += c;
    }
    if (open != std::string_view::npos)
        bad(text, open, "'{' without a matching '}'");

    std::size_t total = 1;
    for (const auto& g : groups) {
        total *= g.size();
        if (total > kMaxGridSize)
            throw UsageError("policy grid '" + std::string(text) + "' expands to more than "
                + std::to_string(kMaxGridSize) + " specs; split it into smaller sweeps");
    }
    std::vector<std::string> out { literals.front() };
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::vector<std::string> next;
        next.reserve(out.size() * groups[g].size());
        for (const auto& prefix : out)
            for (const auto& alternative : groups[g])
                next.push_back(prefix + alternative + literals[g + 1]);
        out = std::move(next);
    }
    return out;
}

} // namespace gpumem::replay
