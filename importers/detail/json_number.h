#pragma once
// Exact decimal parsing of JSON number tokens for the JSON importers. Kineto writes timestamps as
// microseconds with three decimals ("1419116105360.746"); going through a double loses the last
// nanosecond for values above 2^53 ns, so the digits are scaled as integers instead.
#include <cstdint>
#include <string_view>

namespace gpumem::detail {

// Whether `token` (JSON blanks after it allowed) is one whole JSON number as RFC 8259 §6 writes it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. The one check every JSON importer makes before it
// reads a number from a raw token: simdjson's on-demand parser types a value by its first byte only,
// so "1024abc", "0x7f", "00012" and "2p48" arrive typed as numbers (and "nan" as null; isJsonNull) and a
// reader that stops at the first non-digit would read 1024, 0, 12 and 2 (issue 21). The .jsonl reader
// (nlohmann) and the snapshot-JSON reader (simdjson DOM) parse the same grammar already.
bool isJsonNumber(std::string_view token);

// Whether `token` (JSON blanks after it allowed) is exactly `null` ("nan" and "nullx" are not).
bool isJsonNull(std::string_view token);

// Parses the JSON number `token` (isJsonNumber; blanks after it allowed) and returns value × 10^scale
// rounded half away from zero. Exponents and mantissas beyond 2^64 go through a double. Returns false
// if `token` is not a whole JSON number or the result does not fit in int64.
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
