#pragma once
// Interned strings: each distinct string is stored once and named by a dense StringId. Id 0 is
// always the empty string. Ids are assigned in order of first interning, so a table written and
// read back keeps its ids. Not thread-safe for writers; immutable tables may be read concurrently.
#include "core/types.h"

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpumem {

class StringTable {
public:
    StringTable();
    StringTable(const StringTable& other);
    StringTable& operator=(const StringTable& other);
    StringTable(StringTable&&) noexcept = default;
    StringTable& operator=(StringTable&&) noexcept = default;

    // Returns the id of `text`, adding it if new.
    StringId intern(std::string_view text);
    // Returns the id of `text` if present.
    std::optional<StringId> find(std::string_view text) const;
    // The string for `id`; empty for an id out of range.
    std::string_view at(StringId id) const { return id < m_strings.size() ? std::string_view(m_strings[id]) : ""; }
    std::size_t size() const { return m_strings.size(); }

private:
    void rebuildIndex();
    // A deque keeps element addresses stable, so the index can key on string_views into it.
    std::deque<std::string> m_strings;
    std::unordered_map<std::string_view, StringId> m_index;
};

} // namespace gpumem
