#include "core/string_table.h"

#include <algorithm>

namespace gpumem {

namespace {
    // Chunks grow from 4 KiB (most tables are small: tests, one-kernel traces) to 64 KiB.
    constexpr std::size_t kFirstChunkBytes = 4 * 1024;
    constexpr std::size_t kChunkBytes = 64 * 1024;
}

StringTable::StringTable() { intern(""); }

StringTable::StringTable(const StringTable& other) { copyFrom(other); }

StringTable& StringTable::operator=(const StringTable& other)
{
    if (this != &other) {
        m_strings.clear();
        m_chunks.clear();
        m_chunkFree = m_chunkBytes = 0;
        m_chunkNext = nullptr;
        m_index.clear();
        copyFrom(other);
    }
    return *this;
}

void StringTable::copyFrom(const StringTable& other)
{
    // Re-interning keeps the ids (they follow insertion order) and packs the copy into fresh chunks.
    m_strings.reserve(other.m_strings.size());
    m_index.reserve(other.m_strings.size());
    for (std::string_view s : other.m_strings)
        intern(s);
}

std::string_view StringTable::store(std::string_view text)
{
    if (text.empty())
        return std::string_view();
    if (text.size() > kChunkBytes / 4) {
        // A long string gets a chunk of its own; the current chunk (m_chunkNext) stays in use.
        char* own = m_chunks.emplace_back(std::make_unique_for_overwrite<char[]>(text.size())).get();
        std::copy(text.begin(), text.end(), own);
        return std::string_view(own, text.size());
    }
    if (text.size() > m_chunkFree) {
        const std::size_t bytes = std::max(
            text.size(), std::min(kChunkBytes, m_chunkBytes == 0 ? kFirstChunkBytes : 2 * m_chunkBytes));
        m_chunkNext = m_chunks.emplace_back(std::make_unique_for_overwrite<char[]>(bytes)).get();
        m_chunkFree = m_chunkBytes = bytes;
    }
    char* p = m_chunkNext;
    std::copy(text.begin(), text.end(), p);
    m_chunkNext += text.size();
    m_chunkFree -= text.size();
    return std::string_view(p, text.size());
}

StringId StringTable::intern(std::string_view text)
{
    const std::uint64_t h = detail::hashBytes(text);
    const std::uint32_t none = ~0u;
    std::uint32_t found = m_index.find(h, none, [&](std::uint32_t id) { return m_strings[id] == text; });
    if (found != none)
        return static_cast<StringId>(found);
    auto id = static_cast<StringId>(m_strings.size());
    m_strings.push_back(store(text));
    m_index.insert(h, id);
    return id;
}

std::optional<StringId> StringTable::find(std::string_view text) const
{
    const std::uint32_t none = ~0u;
    std::uint32_t found
        = m_index.find(detail::hashBytes(text), none, [&](std::uint32_t id) { return m_strings[id] == text; });
    if (found == none)
        return std::nullopt;
    return static_cast<StringId>(found);
}

} // namespace gpumem
