#include "core/message_quote.h"

#include <algorithm>
#include <cstdint>

namespace gpumem {

namespace {
    // The length of the valid UTF-8 sequence at `s[i]`, or 0 when it is not one (overlong forms,
    // surrogates and code points beyond U+10FFFF are invalid, as in RFC 3629).
    std::size_t utf8Length(std::string_view s, std::size_t i)
    {
        const auto b0 = static_cast<std::uint8_t>(s[i]);
        std::size_t n = 0;
        std::uint8_t lo = 0x80, hi = 0xBF;
        if (b0 < 0x80)
            return 1;
        if (b0 >= 0xC2 && b0 <= 0xDF)
            n = 2;
        else if (b0 >= 0xE0 && b0 <= 0xEF) {
            n = 3;
            lo = b0 == 0xE0 ? 0xA0 : 0x80;
            hi = b0 == 0xED ? 0x9F : 0xBF;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            n = 4;
            lo = b0 == 0xF0 ? 0x90 : 0x80;
            hi = b0 == 0xF4 ? 0x8F : 0xBF;
        } else
            return 0;
        if (i + n > s.size())
            return 0;
        for (std::size_t k = 1; k < n; ++k) {
            const auto b = static_cast<std::uint8_t>(s[i + k]);
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
                return 0;
        }
        return n;
    }

    // The code point of the valid 3-byte sequence at `s[i]`.
    char32_t decode3(std::string_view s, std::size_t i)
    {
        auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<std::uint8_t>(s[i + k])); };
        return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    }

    // The invisible controls that reorder the text around them on a terminal or in a GUI (Unicode
    // UAX #9: LRM, RLM, the embeddings and overrides LRE–RLO and PDF, the isolates LRI–PDI), so that a
    // quoted name could make the rest of a message read differently (CVE-2021-42574, "Trojan Source").
    bool isBidiControl(char32_t cp)
    {
        return cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
    }
    // What else would break a message's one line or hide in it: the line and paragraph separators
    // U+2028/U+2029 (line breaks to many terminals, editors and log viewers) and the C1 controls
    // U+0080–U+009F (NEL among them), two-byte sequences.
    bool isOtherControl(char32_t cp) { return cp == 0x2028 || cp == 0x2029 || (cp >= 0x80 && cp <= 0x9F); }
    char32_t decode2(std::string_view s, std::size_t i)
    {
        return (static_cast<char32_t>(static_cast<std::uint8_t>(s[i])) & 0x1F) << 6
            | (static_cast<char32_t>(static_cast<std::uint8_t>(s[i + 1])) & 0x3F);
    }
} // namespace

std::size_t firstInvalidUtf8(std::string_view input)
{
    std::size_t i = 0;
    while (i < input.size()) {
        // Runs of ASCII are most of a JSON file: skip them without the per-sequence checks.
        while (i < input.size() && static_cast<std::uint8_t>(input[i]) < 0x80)
            ++i;
        if (i == input.size())
            break;
        const std::size_t n = utf8Length(input, i);
        if (n == 0)
            return i;
        i += n;
    }
    return input.size();
}

namespace {
    // quoteForMessage's escaping; `escapeBackslash` also doubles a literal "\\" so that the escaped
    // form maps back to one input (textForTerminal; brief esc item 1).
    std::string quote(std::string_view input, std::size_t maxBytes, bool escapeBackslash);
} // namespace

std::string textForTerminal(std::string_view input)
{
    return quote(input, input.size(), true);
}

std::string messageForTerminal(std::string_view message)
{
    return quote(message, message.size(), false);
}

std::string quoteForMessage(std::string_view input, std::size_t maxBytes)
{
    return quote(input, maxBytes, false);
}

namespace {
std::string quote(std::string_view input, std::size_t maxBytes, bool escapeBackslash)
{
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(std::min(input.size(), maxBytes) + 8);
    std::size_t i = 0;
    while (i < input.size()) {
        const std::size_t n = utf8Length(input, i);
        const std::size_t take = n == 0 ? 1 : n;
        if (i + take > maxBytes)
            break;
        const auto b = static_cast<std::uint8_t>(input[i]);
        if (n == 0)
            out += "\xEF\xBF\xBD"; // U+FFFD
        else if (b == '\\' && escapeBackslash)
            out += "\\\\";
        else if (n == 1 && (b < 0x20 || b == 0x7F)) {
            out += "\\x";
            out += kHex[b >> 4];
            out += kHex[b & 0xF];
        } else if (const char32_t cp = n == 3 ? decode3(input, i) : n == 2 ? decode2(input, i) : 0;
                   isBidiControl(cp) || isOtherControl(cp)) {
            out += "\\u";
            for (int shift = 12; shift >= 0; shift -= 4)
                out += kHex[(cp >> shift) & 0xF];
        } else
            out.append(input.substr(i, n));
        i += take;
    }
    if (i < input.size())
        out += "\xE2\x80\xA6"; // …
    return out;
}
} // namespace

} // namespace gpumem
