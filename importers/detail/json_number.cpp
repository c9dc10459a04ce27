#include "importers/detail/json_number.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace gpumem::detail {

namespace {
    constexpr std::int64_t kPow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000 };

    bool viaDouble(std::string_view token, int scale, std::int64_t& out)
    {
        std::string copy(token.substr(0, 64));
        char* end = nullptr;
        double v = std::strtod(copy.c_str(), &end);
        if (end == copy.c_str())
            return false;
        v *= static_cast<double>(kPow10[scale]);
        if (!std::isfinite(v) || std::fabs(v) >= 9.2e18)
            return false;
        out = std::llround(v);
        return true;
    }
} // namespace

bool isJsonNumber(std::string_view token)
{
    token = withoutTrailingBlanks(token);
    std::size_t i = 0;
    auto digits = [&] {
        const std::size_t from = i;
        while (i < token.size() && token[i] >= '0' && token[i] <= '9')
            ++i;
        return i - from;
    };
    if (i < token.size() && token[i] == '-')
        ++i;
    if (i < token.size() && token[i] == '0')
        ++i;
    else if (digits() == 0)
        return false;
    if (i < token.size() && token[i] == '.') {
        ++i;
        if (digits() == 0)
            return false;
    }
    if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
        ++i;
        if (i < token.size() && (token[i] == '+' || token[i] == '-'))
            ++i;
        if (digits() == 0)
            return false;
    }
    return i == token.size();
}

bool isJsonNull(std::string_view token) { return withoutTrailingBlanks(token) == "null"; }

bool parseScaledDecimal(std::string_view token, int scale, std::int64_t& out)
{
    if (scale < 0 || scale > 9 || !isJsonNumber(token))
        return false;
    token = withoutTrailingBlanks(token);
    std::size_t i = 0;
    const bool negative = i < token.size() && token[i] == '-';
    if (negative)
        ++i;
    if (i >= token.size() || token[i] < '0' || token[i] > '9')
        return false;
    // mantissa·10 + 9 must stay below 2^64; anything longer goes through a double.
    constexpr std::uint64_t kLimit = (std::numeric_limits<std::uint64_t>::max() - 9) / 10;
    std::uint64_t mantissa = 0;
    while (i < token.size() && token[i] >= '0' && token[i] <= '9') {
        if (mantissa > kLimit)
            return viaDouble(token, scale, out);
        mantissa = mantissa * 10 + static_cast<std::uint64_t>(token[i] - '0');
        ++i;
    }
    int fractionDigits = 0;
    bool roundUp = false;
    if (i < token.size() && token[i] == '.') {
        ++i;
        while (i < token.size() && token[i] >= '0' && token[i] <= '9') {
            if (fractionDigits < scale) {
                if (mantissa > kLimit)
                    return viaDouble(token, scale, out);
                mantissa = mantissa * 10 + static_cast<std::uint64_t>(token[i] - '0');
                ++fractionDigits;
            } else if (fractionDigits == scale) {
                roundUp = token[i] >= '5';
                ++fractionDigits; // later digits cannot change a half-away-from-zero rounding decided here
            }
            ++i;
        }
    }
    if (i < token.size() && (token[i] == 'e' || token[i] == 'E'))
        return viaDouble(token, scale, out);
    for (int f = std::min(fractionDigits, scale); f < scale; ++f) {
        if (mantissa > kLimit)
            return viaDouble(token, scale, out);
        mantissa *= 10;
    }
    if (roundUp)
        ++mantissa;
    if (mantissa > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return false;
    out = negative ? -static_cast<std::int64_t>(mantissa) : static_cast<std::int64_t>(mantissa);
    return true;
}

bool parseLooseId(std::string_view text, bool isString, std::int64_t& out)
{
    if (!isString)
        return parseScaledDecimal(text, 0, out);
    // "25738", "-1", "stream 7", "stream 7 " — the number is the last run of digits.
    std::size_t end = text.find_last_of("0123456789");
    if (end == std::string_view::npos)
        return false;
    std::size_t begin = end;
    while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9')
        --begin;
    if (begin > 0 && text[begin - 1] == '-')
        --begin;
    const std::string_view prefix = text.substr(0, begin);
    if (!prefix.empty() && prefix != "stream " && prefix != "stream")
        return false;
    if (end + 1 < text.size() && text.find_first_not_of(' ', end + 1) != std::string_view::npos)
        return false;
    if (end + 1 - begin > 18)
        return false;
    return parseScaledDecimal(text.substr(begin, end + 1 - begin), 0, out);
}

} // namespace gpumem::detail
