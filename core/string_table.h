#pragma once
// Interned strings: each distinct string is stored once and named by a dense StringId. Id 0 is
// always the empty string. Ids are assigned in order of first interning, so a table written and
// read back keeps its ids. Not thread-safe for writers; immutable tables may be read concurrently.
//
// Storage: the bytes live in an arena of large chunks (no allocation per string; a string_view
// returned by at() stays valid for the table's life, across moves, but not across copies), and the
// index is a flat open-addressing table of ids (core/detail/flat_id_index.h).
#include "core/detail/flat_id_index.h"
#include "core/types.h"

#include <deque> // not used here any more; kept for files that relied on this include
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map> // likewise
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
    std::string_view at(StringId id) const { return id < m_strings.size() ? m_strings[id] : std::string_view(); }
    std::size_t size() const { return m_strings.size(); }

private:
    void copyFrom(const StringTable& other);
    std::string_view store(std::string_view text);
    std::vector<std::string_view> m_strings; // views into m_chunks
    std::vector<std::unique_ptr<char[]>> m_chunks; // the arena; a chunk never moves
    std::size_t m_chunkFree = 0; // bytes left after m_chunkNext in the chunk being filled
    std::size_t m_chunkBytes = 0; // size of that chunk
    char* m_chunkNext = nullptr;
    detail::FlatIdIndex m_index;
};

} // namespace gpumem
