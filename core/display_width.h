#pragma once
// The terminal display width of UTF-8 text, for padding and cutting the columns of text tables: East
// Asian wide characters and emoji take two columns, combining marks none, every other printable
// character one. The one width rule every padded text output uses (brief esc item 2). The widths come
// from libutf8proc (utf8proc_charwidth, Unicode's EastAsianWidth and general categories), not our own table.
// Free functions, no state: thread-safe.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpumem {

// Columns `utf8` takes on a terminal. A byte that does not begin valid UTF-8 counts one column (it is
// printed as U+FFFD by textForTerminal); control characters count none (text is escaped before it is
// measured, so none are left).
std::size_t displayWidth(std::string_view utf8);

// The byte length of the character at `utf8[i]` (1 for a byte that does not begin valid UTF-8), for
// cutting text at character boundaries. Requires i < utf8.size().
std::size_t characterLength(std::string_view utf8, std::size_t i);

// `text` padded with spaces on the right (padRight) or left (padLeft) to `width` display columns; text
// already as wide or wider is returned unchanged.
std::string padRight(std::string_view text, std::size_t width);
std::string padLeft(std::string_view text, std::size_t width);

} // namespace gpumem
