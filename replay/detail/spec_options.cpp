#include "replay/detail/spec_options.h"

#include "core/error.h"
#include "core/units.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpumem::replay::detail {

SpecOptions::SpecOptions(const PolicySpec& spec, std::vector<std::string> validKeys)
    : m_spec(spec)
{
    std::vector<std::string> seen;
    for (const auto& [key, value] : spec.options) {
        if (std::find(validKeys.begin(), validKeys.end(), key) == validKeys.end()) {
            std::string list;
            for (const auto& k : validKeys)
                list += (list.empty() ? "" : ", ") + k;
            throw UsageError("unknown " + spec.policy + " option '" + key + "'; valid options: " + list);
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end())
            throw UsageError(spec.policy + " option " + key + " is given twice; write it once");
        seen.push_back(key);
    }
}

std::optional<std::string> SpecOptions::raw(const std::string& key) const
{
    for (const auto& [k, v] : m_spec.options)
        if (k == key)
            return v;
    return std::nullopt;
}

void SpecOptions::bad(
    const PolicySpec& spec, const std::string& key, const std::string& value, const std::string& expected)
{
    throw UsageError(spec.policy + " option " + key + ": '" + value + "' " + expected);
}

bool SpecOptions::flag(const std::string& key, bool fallback) const
{
    auto v = raw(key);
    if (!v)
        return fallback;
    if (*v == "True" || *v == "true" || *v == "1")
        return true;
    if (*v == "False" || *v == "false" || *v == "0")
        return false;
    bad(key, *v, "must be true or false");
}

Bytes SpecOptions::bytes(const std::string& key, Bytes fallback, Bytes multiple) const
{
    auto v = raw(key);
    if (!v)
        return fallback;
    Bytes b = parseBytes(*v, m_spec.policy + " option " + key);
    if (multiple > 1 && b % multiple != 0)
        bad(key, *v, "must be a multiple of " + std::to_string(multiple) + " bytes");
    return b;
}

Bytes SpecOptions::size(const std::string& key, Bytes fallback) const
{
    Bytes b = bytes(key, fallback);
    if (b == 0)
        bad(key, *raw(key), "must be greater than 0 (bytes, or with units: 512, 2MiB, 1GiB)");
    return b;
}

Bytes SpecOptions::powerOfTwo(const std::string& key, Bytes fallback) const
{
    Bytes b = size(key, fallback);
    if ((b & (b - 1)) != 0)
        bad(key, *raw(key), "must be a power of two in bytes (256, 512, 1KiB, 2MiB, …)");
    return b;
}

double SpecOptions::number(const std::string& key, double fallback, double lo, double hi) const
{
    auto v = raw(key);
    if (!v)
        return fallback;
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size() || !std::isfinite(d) || d < lo || d > hi) {
        char range[64];
        std::snprintf(range, sizeof range, "must be a number from %g to %g", lo, hi);
        bad(key, *v, range);
    }
    return d;
}

std::uint64_t SpecOptions::integer(
    const std::string& key, std::uint64_t fallback, std::uint64_t lo, std::uint64_t hi) const
{
    auto v = raw(key);
    if (!v)
        return fallback;
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n < lo || n > hi)
        bad(key, *v, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    return n;
}

} // namespace gpumem::replay::detail
