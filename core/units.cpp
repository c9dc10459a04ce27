#include "core/units.h"

#include "core/error.h"

#include <array>
#include <cctype>
#include <cmath>
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

Bytes parseBytes(std::string_view text, std::string_view what)
{
    auto fail = [&]() -> Bytes {
        throw UsageError(std::string(what) + ": cannot read '" + std::string(text)
            + "' as a size; write bytes or a number with a unit: B, KB, MB, GB, TB (powers of 10) or KiB, MiB, "
              "GiB, TiB (powers of 2), e.g. 80GiB");
    };
    std::size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
        ++i;
    if (i == 0)
        return fail();
    std::string number(text.substr(0, i));
    if (number.find('.') != number.rfind('.'))
        return fail();
    std::size_t j = i;
    while (j < text.size() && text[j] == ' ')
        ++j;
    std::string unit;
    for (; j < text.size(); ++j)
        unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
    static const std::array<std::pair<std::string_view, double>, 10> kUnits = { {
        { "b", 1.0 }, { "kb", 1e3 }, { "mb", 1e6 }, { "gb", 1e9 }, { "tb", 1e12 }, { "kib", 1024.0 },
        { "mib", 1048576.0 }, { "gib", 1073741824.0 }, { "tib", 1099511627776.0 }, { "", 1.0 } } };
    for (auto [name, factor] : kUnits) {
        if (unit == name) {
            double value = std::stod(number) * factor;
            if (!std::isfinite(value) || value >= 1.8e19)
                return fail();
            return static_cast<Bytes>(std::llround(value));
        }
    }
    return fail();
}

} // namespace gpumem
