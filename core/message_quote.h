#pragma once
// Quoting input bytes inside an error message, anomaly detail or any text line gpumem prints. A message must stay one short,
// printable, valid UTF-8 line whatever the input holds (a 20 MB CSV field, a NUL, invalid UTF-8).
// Free function, no state: thread-safe.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpumem {

// `input` made safe to print: at most `maxBytes` bytes of it are kept (cut at a character boundary)
// and "…" is appended when it was longer; control bytes (0x00–0x1F, 0x7F) become "\xNN"; the bidi
// controls U+200E, U+200F, U+202A–U+202E and U+2066–U+2069 (which reorder the text around them) become
// "\uNNNN" (lower-case hex); each byte of invalid UTF-8 becomes U+FFFD. No quotes are added. The result is at most
// about 4 × maxBytes + 3 bytes. Rule: brief fx2 item 5 (review finding: unbounded and truncated messages).
std::string quoteForMessage(std::string_view input, std::size_t maxBytes = 120);

// `input` made fit for one terminal line, whole: every character quoteForMessage escapes is escaped the
// same way (C0 controls and DEL as "\xNN"; bidi controls, U+2028/U+2029 and the C1 controls such as NEL
// as "\uNNNN"; invalid UTF-8 as U+FFFD), and a literal backslash becomes "\\" so that every escaped
// form maps back to one input (a name holding the text "\x0a" and one holding a line feed differ; brief
// esc item 1); nothing is cut and no quotes are added. The one function every
// text output of names, labels, paths and echoed option values goes through (brief tx item 1); JSON
// output does its own escaping and does not use it. The result is at most 6 × input.size() bytes.
std::string textForTerminal(std::string_view input);

// A message (an exception's what(), an ImportStats anomaly detail) made fit for one terminal line: as
// textForTerminal but a backslash is kept, so the "\xNN"/"\uNNNN" that quoteForMessage already put in it
// print once, not as "\\xNN" (escaping twice changes nothing). For text already built with
// quoteForMessage; names go through textForTerminal.
std::string messageForTerminal(std::string_view message);

// The byte offset of the first byte in `input` that does not begin a valid UTF-8 sequence (RFC 3629:
// overlong forms, surrogates and code points beyond U+10FFFF are invalid), or input.size() when all
// of it is valid. For naming the offset of damage that a parser reports without one.
std::size_t firstInvalidUtf8(std::string_view input);

} // namespace gpumem
