#pragma once
// Reads the options of one PolicySpec (PYTORCH_CUDA_ALLOC_CONF syntax, policy_spec.h) for the policies
// whose options are plain values: booleans, byte sizes with units, numbers. The constructor refuses
// an unknown key; every getter refuses a bad value. Errors are UsageError naming the policy, the key,
// the value and what is accepted. Holds a reference to the spec (keep it alive). Not thread-safe.
#include "replay/policy_spec.h"

#include "core/types.h"

#include <optional>
#include <string>
#include <vector>

namespace gpumem::replay::detail {

class SpecOptions {
public:
    // Throws UsageError when the spec has a key not in `validKeys`, or a key twice.
    SpecOptions(const PolicySpec& spec, std::vector<std::string> validKeys);

    // The value written for `key`, if any.
    std::optional<std::string> raw(const std::string& key) const;
    // True/true/1 or False/false/0.
    bool flag(const std::string& key, bool fallback) const;
    // Bytes with optional units ("128MiB", "2GB", "4096"), core/units.h parseBytes; `multiple` > 1
    // requires the value to be a multiple of it (RMM's 256 B alignment rule).
    Bytes bytes(const std::string& key, Bytes fallback, Bytes multiple = 1) const;
    // Bytes as bytes(), and greater than 0.
    Bytes size(const std::string& key, Bytes fallback) const;
    // A size that is a power of two (alignments, buddy orders).
    Bytes powerOfTwo(const std::string& key, Bytes fallback) const;
    // A finite number in [lo, hi].
    double number(const std::string& key, double fallback, double lo, double hi) const;
    // A non-negative integer in [lo, hi].
    std::uint64_t integer(const std::string& key, std::uint64_t fallback, std::uint64_t lo, std::uint64_t hi) const;

    // Throws the UsageError of a bad value: "<policy> option <key>: '<value>' <expected>".
    [[noreturn]] static void bad(
        const PolicySpec& spec, const std::string& key, const std::string& value, const std::string& expected);

private:
    [[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& expected) const
    {
        bad(m_spec, key, value, expected);
    }
    const PolicySpec& m_spec;
};

} // namespace gpumem::replay::detail
