#pragma once
// Exact decimal parsing of JSON number tokens for the JSON importers. Kineto writes timestamps as
// microseconds with three decimals ("1419116105360.746"); going through a double loses the last
// nanosecond for values above 2^53 ns, so the digits are scaled as integers instead.
#include <cstdint>
#include <string_view>

namespace gpumem::detail {

// Parses the JSON number at the start of `token` (trailing bytes after the number are ignored) and
// returns value × 10^scale rounded half away from zero. Exponents and mantissas beyond 2^64 go
// through a double. Returns false if `token` does not start with a number or the result does not
// fit in int64.
bool parseScaledDecimal(std::string_view token, int scale, std::int64_t& out);

// Parses an id that may be written as a number (7), a digit string ("25738") or a Kineto label with
// a trailing number ("stream 7"). Returns false for anything else ("Spans").
bool parseLooseId(std::string_view text, bool isString, std::int64_t& out);

// A simdjson raw_json_token() without the JSON blanks that follow it (for quoting it in a message).
inline std::string_view withoutTrailingBlanks(std::string_view token)
{
    return token.substr(0, token.find_last_not_of(" \t\r\n") + 1);
}

} // namespace gpumem::detail
