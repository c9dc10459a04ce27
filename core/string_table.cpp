#include "core/string_table.h"

namespace gpumem {

StringTable::StringTable() { intern(""); }

StringTable::StringTable(const StringTable& other)
    : m_strings(other.m_strings)
{
    rebuildIndex();
}

StringTable& StringTable::operator=(const StringTable& other)
{
    if (this != &other) {
        m_strings = other.m_strings;
        rebuildIndex();
    }
    return *this;
}

void StringTable::rebuildIndex()
{
    m_index.clear();
    m_index.reserve(m_strings.size());
    for (std::size_t i = 0; i < m_strings.size(); ++i)
        m_index.emplace(m_strings[i], static_cast<StringId>(i));
}

StringId StringTable::intern(std::string_view text)
{
    if (auto it = m_index.find(text); it != m_index.end())
        return it->second;
    auto id = static_cast<StringId>(m_strings.size());
    m_strings.emplace_back(text);
    m_index.emplace(m_strings.back(), id);
    return id;
}

std::optional<StringId> StringTable::find(std::string_view text) const
{
    if (auto it = m_index.find(text); it != m_index.end())
        return it->second;
    return std::nullopt;
}

} // namespace gpumem
