#include "core/units.h"

#include "core/error.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace gpumem {

std::string formatBytes(Bytes bytes)
{
    if (bytes < 1024)
        return std::to_string(bytes) + " B";
    static constexpr std::array<const char*, 6> kUnits = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double value = static_cast<double>(bytes) / 1024.0;
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < kUnits.size()) {
        value /= 1024.0;
        ++unit;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2f %s", value, kUnits[unit]);
    return buf;
}

namespace {
    std::string secondsText(bool negative, std::uint64_t d)
    {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s%llu.%06llu s", negative ? "-" : "", static_cast<unsigned long long>(d / 1000000000ull),
            static_cast<unsigned long long>((d % 1000000000ull) / 1000ull));
        return buf;
    }
} // namespace

std::string formatSeconds(TimeNs duration) { return formatSecondsBetween(0, duration); }

std::string formatOffset(TimeNs offset) { return formatOffsetBetween(0, offset); }

std::string formatSecondsBetween(TimeNs from, TimeNs to)
{
    return to >= from ? secondsText(false, nsBetween(from, to)) : secondsText(true, nsBetween(to, from));
}

std::string formatOffsetBetween(TimeNs from, TimeNs to) { return (to < from ? "" : "+") + formatSecondsBetween(from, to); }

std::string counted(std::uint64_t n, std::string_view one, std::string_view many)
{
    return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

Bytes parseBytes(std::string_view text, std::string_view what)
{
    auto fail = [&]() -> Bytes {
        throw UsageError(std::string(what) + ": cannot read '" + std::string(text)
            + "' as a size; write bytes or a number with a unit: B, KB, MB, GB, TB, PB, EB (powers of 10) or KiB, "
              "MiB, GiB, TiB, PiB, EiB (powers of 2), e.g. 80GiB");
    };
    // Exact integer arithmetic (a double holds 53 bits: "18446744073709551615" or "9007199254740993"
    // would not survive it): whole part × unit + fraction × unit, rounded half away from zero.
    __extension__ typedef unsigned __int128 Wide; // __extension__: GCC and Clang have it; -Wpedantic stays quiet
    constexpr Wide kMaxScale = Wide(10000000000u) * 10000000000u;
    std::size_t i = 0;
    Wide whole = 0;
    bool tooLarge = false, anyDigit = false;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        anyDigit = true;
        whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
        tooLarge |= whole > Wide(~Bytes(0));
        if (tooLarge)
            whole = Wide(~Bytes(0)) + 1; // stays above the limit without overflowing
    }
    // Up to 20 fraction digits count (2^60 × 10^20 fits in 128 bits); a nonzero later one is below
    // 0.02 B and makes the size a fraction of a byte.
    Wide fraction = 0, scale = 1;
    bool fractionDropped = false;
    if (i < text.size() && text[i] == '.') {
        for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
            anyDigit = true;
            if (scale < kMaxScale) {
                fraction = fraction * 10 + static_cast<unsigned>(text[i] - '0');
                scale *= 10;
            } else
                fractionDropped |= text[i] != '0';
        }
    }
    if (!anyDigit)
        return fail();
    std::size_t j = i;
    while (j < text.size() && text[j] == ' ')
        ++j;
    std::string unit;
    for (; j < text.size(); ++j)
        unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
    static constexpr std::uint64_t kE3 = 1000;
    static const std::array<std::pair<std::string_view, std::uint64_t>, 14> kUnits = { {
        { "", 1 }, { "b", 1 }, { "kb", kE3 }, { "mb", kE3 * kE3 }, { "gb", kE3 * kE3 * kE3 },
        { "tb", kE3 * kE3 * kE3 * kE3 }, { "pb", kE3 * kE3 * kE3 * kE3 * kE3 }, { "eb", kE3 * kE3 * kE3 * kE3 * kE3 * kE3 },
        { "kib", std::uint64_t(1) << 10 }, { "mib", std::uint64_t(1) << 20 }, { "gib", std::uint64_t(1) << 30 },
        { "tib", std::uint64_t(1) << 40 }, { "pib", std::uint64_t(1) << 50 }, { "eib", std::uint64_t(1) << 60 } } };
    for (auto [name, factor] : kUnits) {
        if (unit != name)
            continue;
        const Wide part = fraction * factor;
        // A size is a whole number of bytes after its unit (1.5KiB = 1536 B); no silent rounding.
        if (part % scale != 0 || fractionDropped)
            throw UsageError(std::string(what) + ": '" + std::string(text)
                + "' is not a whole number of bytes; give whole bytes (e.g. 2B) or a unit that makes the fraction "
                  "whole (1.5KiB = 1536 B)");
        Wide value = part / scale;
        if (!tooLarge)
            value += whole * factor; // whole ≤ 2^64 − 1 and factor ≤ 2^60: fits in 128 bits
        if (tooLarge || value > Wide(~Bytes(0)))
            throw UsageError(std::string(what) + ": '" + std::string(text)
                + "' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), the largest size gpumem handles");
        return static_cast<Bytes>(value);
    }
    return fail();
}

} // namespace gpumem
