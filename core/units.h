#pragma once
// Human-readable units and their parsing, shared by every front end.
#include "core/types.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace gpumem {

// "0 B", "512 B", "1.50 KiB", "12.00 MiB", "3.25 GiB" (binary prefixes, two decimals).
std::string formatBytes(Bytes bytes);
// Seconds with microsecond precision: "1.234567 s".
std::string formatSeconds(TimeNs duration);
// An offset from a start, signed: "+1.234567 s", "-0.019424 s" (an event before the start).
std::string formatOffset(TimeNs offset);
// The same for `to − from`, computed without overflow: any two int64 times are at most 2^64 − 1 ns
// apart, which `to − from` in int64 cannot hold (INT64_MIN to INT64_MAX printed "-0.000000 s").
std::string formatSecondsBetween(TimeNs from, TimeNs to);
std::string formatOffsetBetween(TimeNs from, TimeNs to);
// `n` with the noun it counts: "1 block", "2 blocks", "0 blocks" (`one` when n == 1, else `many`).
std::string counted(std::uint64_t n, std::string_view one, std::string_view many);
// `to − from` in ns for `to` ≥ `from`, in unsigned 64-bit: exact for any two int64 times, whose distance
// (up to 2^64 − 1) int64 cannot hold. Arithmetic is modulo 2^64, so `to` < `from` wraps: callers order
// the two first (or pass them the other way round).
constexpr std::uint64_t nsBetween(TimeNs from, TimeNs to)
{
    return static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
}
// Parses "80GiB", "80 GB", "512MiB", "2MB", "1024", "1.5GiB", "2PiB", "1EB" (KB … EB are powers of 10,
// KiB … EiB powers of 2; units are case-insensitive) exactly, in integers. A size must be a whole
// number of bytes after its unit (1.5KiB = 1536 B; 1.5B or 0.1B throw UsageError quoting the text).
// Throws UsageError naming `what` and the accepted forms on anything else, and naming `what` and
// the limit for a size above 2^64 − 1 B.
Bytes parseBytes(std::string_view text, std::string_view what = "size");

} // namespace gpumem
