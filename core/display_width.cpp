#include "core/display_width.h"

#include <utf8proc.h>

namespace gpumem {

namespace {
    // The code point at utf8[i] and its byte length, or a negative code point for invalid UTF-8.
    utf8proc_ssize_t decode(std::string_view utf8, std::size_t i, utf8proc_int32_t& cp)
    {
        const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data() + i);
        const utf8proc_ssize_t n = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(utf8.size() - i), &cp);
        return n > 0 ? n : (cp = -1, 1);
    }
} // namespace

std::size_t characterLength(std::string_view utf8, std::size_t i)
{
    utf8proc_int32_t cp = 0;
    return static_cast<std::size_t>(decode(utf8, i, cp));
}

std::size_t displayWidth(std::string_view utf8)
{
    std::size_t width = 0;
    for (std::size_t i = 0; i < utf8.size();) {
        utf8proc_int32_t cp = 0;
        i += static_cast<std::size_t>(decode(utf8, i, cp));
        width += cp < 0 ? 1 : static_cast<std::size_t>(utf8proc_charwidth(cp));
    }
    return width;
}

std::string padRight(std::string_view text, std::size_t width)
{
    const std::size_t w = displayWidth(text);
    return std::string(text) + std::string(w < width ? width - w : 0, ' ');
}

std::string padLeft(std::string_view text, std::size_t width)
{
    const std::size_t w = displayWidth(text);
    return std::string(w < width ? width - w : 0, ' ') + std::string(text);
}

} // namespace gpumem
