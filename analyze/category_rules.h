#pragma once
// User-defined category rules (issue 18 item 5, docs/stacks.md §Category rules; Mosaic's custom
// categories): a file of first-match rules, each a regular expression on a block's frames, their files
// or its module (scope path) and the category it gives. They run before the recording and the
// inference: a block a rule matches takes the rule's category; the others keep the recorded category
// where the trace has them, else the inferred one. Every category then says where it came from
// (CategorySource). A CategoryRules is immutable after parsing and safe to share between threads.
#include "analyze/peak_breakdown.h"

#include <regex>
#include <span>
#include <string>
#include <vector>

namespace gpumem::analyze {

enum class CategorySource : std::uint8_t { Recorded, Inferred, Rule };
std::string_view toString(CategorySource source); // "recorded", "inferred", "rule"

struct CategoryRule {
    enum class Field : std::uint8_t { Frame, File, Module } field = Field::Frame;
    std::string pattern; // ECMAScript regular expression, searched (not anchored unless it says ^…$)
    std::regex regex;
    Category category = Category::Unknown;
    std::size_t line = 0; // in the rules file, 1-based
};

class CategoryRules {
public:
    // The rules file's text: one rule a line, "CATEGORY FIELD REGEX" separated by spaces or tabs (the
    // regex is the rest of the line, spaces included); '#' starts a comment line; blank lines are
    // skipped. CATEGORY is one of parameter, gradient, activation, optimizer_state, input, temporary,
    // autograd_detail, unknown; FIELD one of frame (a frame's function, each frame of the folded stack),
    // file (a frame's file as recorded, each frame) or module (the block's scope path, "outer/inner").
    // Throws FormatError naming `path`, the line and what is wrong.
    static CategoryRules parse(std::string_view text, std::string_view path);
    // Reads and parses the file; IoError when it cannot be read.
    static CategoryRules load(const std::string& path);

    std::span<const CategoryRule> rules() const { return m_rules; }
    // The first rule matching a block allocated at `site` in `scope`, or nullptr.
    const CategoryRule* match(const Trace& trace, SiteId site, ScopeId scope) const;

private:
    std::vector<CategoryRule> m_rules;
};

// Applies `rules` to every allocation: where one matches, categories[i] becomes its category. Returns
// the source of each entry of `categories` afterwards (Rule, else Recorded when `recorded`, else Inferred).
// `categories` has one entry per trace.allocations(). O(allocations + distinct (site, scope) × rules).
std::vector<CategorySource> applyCategoryRules(
    const Trace& trace, const CategoryRules& rules, std::vector<Category>& categories, bool recorded);

// The category rows of a breakdown with each category split by its source: "activation (rule)",
// "activation (inferred)", by bytes descending; they sum to the live bytes as the plain rows do.
std::vector<GroupRow> categoryRowsBySource(std::span<const std::size_t> liveAllocations, const Trace& trace,
    std::span<const Category> categories, std::span<const CategorySource> sources);

} // namespace gpumem::analyze
