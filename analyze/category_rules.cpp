#include "analyze/category_rules.h"

#include "analyze/frame_folding.h"
#include "analyze/steps.h"
#include "core/byte_total.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/message_quote.h"

#include <algorithm>
#include <map>

namespace gpumem::analyze {

std::string_view toString(CategorySource source)
{
    switch (source) {
    case CategorySource::Recorded: return "recorded";
    case CategorySource::Inferred: return "inferred";
    case CategorySource::Rule: return "rule";
    }
    return "?";
}

CategoryRules CategoryRules::parse(std::string_view text, std::string_view path)
{
    CategoryRules out;
    std::size_t number = 0;
    auto fail = [&](const std::string& what) {
        return FormatError(std::string(path) + ":" + std::to_string(number) + ": " + what
            + " (a rule is: CATEGORY frame|file|module REGEX; docs/stacks.md)");
    };
    while (!text.empty()) {
        ++number;
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        auto skipSpace = [&] {
            while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
                line.remove_prefix(1);
        };
        auto word = [&] {
            skipSpace();
            std::size_t end = 0;
            while (end < line.size() && line[end] != ' ' && line[end] != '\t')
                ++end;
            const auto w = line.substr(0, end);
            line.remove_prefix(end);
            return w;
        };
        skipSpace();
        if (line.empty() || line.front() == '#')
            continue;
        CategoryRule rule;
        rule.line = number;
        const auto category = word();
        const auto c = categoryFromString(category);
        if (!c)
            throw fail("'" + quoteForMessage(category) + "' is not a category (parameter, gradient, activation, optimizer_state, "
                                                         "input, temporary, autograd_detail, unknown)");
        rule.category = *c;
        const auto field = word();
        if (field == "frame")
            rule.field = CategoryRule::Field::Frame;
        else if (field == "file")
            rule.field = CategoryRule::Field::File;
        else if (field == "module")
            rule.field = CategoryRule::Field::Module;
        else
            throw fail(field.empty() ? std::string("a field (frame, file or module) is missing")
                                     : "'" + quoteForMessage(field) + "' is not frame, file or module");
        skipSpace();
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t'))
            line.remove_suffix(1);
        if (line.empty())
            throw fail("the regular expression is missing");
        rule.pattern = std::string(line);
        try {
            rule.regex = std::regex(rule.pattern, std::regex::ECMAScript | std::regex::optimize);
        } catch (const std::regex_error& e) {
            throw fail("'" + quoteForMessage(rule.pattern) + "' is not a regular expression: " + e.what());
        }
        out.m_rules.push_back(std::move(rule));
    }
    return out;
}

CategoryRules CategoryRules::load(const std::string& path)
{
    std::string text;
    try {
        text = readFileMaybeGzip(path);
    } catch (const Error& e) {
        throw IoError("--categories: cannot read the rules file " + textForTerminal(path) + ": " + e.what());
    }
    return parse(text, path);
}

const CategoryRule* CategoryRules::match(const Trace& trace, SiteId site, ScopeId scope) const
{
    // The folded stack: the frames a person sees (docs/stacks.md), not the allocator's.
    std::vector<FrameId> frames;
    if (site != 0 && site < trace.siteCount())
        frames = foldStack(trace, trace.siteFrames(site));
    std::string module;
    bool moduleDone = false;
    for (const auto& rule : m_rules) {
        switch (rule.field) {
        case CategoryRule::Field::Frame:
            for (FrameId f : frames)
                if (std::regex_search(cleanFrameName(trace.str(trace.frames()[f].name)), rule.regex))
                    return &rule;
            break;
        case CategoryRule::Field::File:
            for (FrameId f : frames) {
                const auto file = trace.str(trace.frames()[f].file);
                if (std::regex_search(file.begin(), file.end(), rule.regex))
                    return &rule;
            }
            break;
        case CategoryRule::Field::Module:
            if (!moduleDone) {
                module = scopePath(trace, scope);
                moduleDone = true;
            }
            if (!module.empty() && std::regex_search(module, rule.regex))
                return &rule;
            break;
        }
    }
    return nullptr;
}

std::vector<CategorySource> applyCategoryRules(
    const Trace& trace, const CategoryRules& rules, std::vector<Category>& categories, bool recorded)
{
    const auto& m = trace.memory();
    const auto allocations = trace.allocations();
    std::vector<CategorySource> sources(categories.size(), recorded ? CategorySource::Recorded : CategorySource::Inferred);
    std::map<std::pair<SiteId, ScopeId>, const CategoryRule*> memo; // blocks of one line share site and scope
    for (std::size_t i = 0; i < allocations.size() && i < categories.size(); ++i) {
        const auto ev = allocations[i].allocEvent;
        if (ev == kNoIndex)
            continue;
        const auto key = std::make_pair(m.site[ev], m.scope[ev]);
        auto it = memo.find(key);
        if (it == memo.end())
            it = memo.emplace(key, rules.match(trace, key.first, key.second)).first;
        if (it->second) {
            categories[i] = it->second->category;
            sources[i] = CategorySource::Rule;
        }
    }
    return sources;
}

std::vector<GroupRow> categoryRowsBySource(std::span<const std::size_t> live, const Trace& trace,
    std::span<const Category> categories, std::span<const CategorySource> sources)
{
    const auto& m = trace.memory();
    const auto allocations = trace.allocations();
    std::map<std::pair<Category, CategorySource>, GroupRow> rows;
    for (auto i : live) {
        if (i >= allocations.size() || allocations[i].allocEvent == kNoIndex)
            continue;
        const Category c = i < categories.size() ? categories[i] : Category::Unknown;
        const CategorySource s = i < sources.size() ? sources[i] : CategorySource::Inferred;
        auto& r = rows[{ c, s }];
        if (r.key.empty())
            r.key = r.label = std::string(toString(c)) + " (" + std::string(toString(s)) + ")";
        const Bytes size = m.size[allocations[i].allocEvent];
        r.selfBytes = r.totalBytes = addSaturated(r.totalBytes, size);
        ++r.selfBlocks;
        ++r.totalBlocks;
    }
    std::vector<GroupRow> out;
    for (auto& [key, r] : rows)
        out.push_back(std::move(r));
    std::stable_sort(out.begin(), out.end(), [](const GroupRow& a, const GroupRow& b) { return a.totalBytes > b.totalBytes; });
    return out;
}

} // namespace gpumem::analyze
