#pragma once
// Byte totals that never wrap. Sizes are uint64 bytes (design.md §3), and a trace may hold blocks whose
// sizes add up past 2^64 − 1 (three live blocks of about 2^63 B: /work/inputs/v4/over3.jsonl printed
// "live at end 8.00 EiB" and a nonzero "Tot Freed" with no free). Every running total of info, analyze,
// diff and report goes through this one helper:
//   - ByteTotal keeps the exact sum in 128 bits (2^32 events of < 2^64 B cannot overflow it), so a total
//     that rises past 2^64 and falls back below it is exact again afterwards; value() clamps it to
//     kSaturatedBytes, and saturated() says so;
//   - addSaturated() for sums without subtraction (group rows, cumulative "Tot Alloc");
//   - formatByteTotal() prints a saturated figure as "≥ 16 EiB (saturated: …)" instead of a number.
// kSaturatedBytes (2^64 − 1) in a byte field of the JSON or CSV outputs therefore means "at least this"
// (docs/output-formats.md). Plain value types and pure functions; thread-safe as values are.
#include "core/types.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace gpumem {

// The value a saturated total is clamped to: 2^64 − 1 bytes.
inline constexpr Bytes kSaturatedBytes = std::numeric_limits<Bytes>::max();

class ByteTotal {
public:
    ByteTotal() = default;
    explicit ByteTotal(Bytes initial)
        : m_low(initial)
    {
    }
    ByteTotal& operator+=(Bytes bytes)
    {
        m_high += __builtin_add_overflow(m_low, bytes, &m_low);
        return *this;
    }
    // Subtracts, stopping at 0: a free larger than the total (a block allocated before the window) is no
    // negative total.
    ByteTotal& operator-=(Bytes bytes)
    {
        if (m_high == 0) [[likely]] {
            m_low -= m_low < bytes ? m_low : bytes;
            return *this;
        }
        m_high -= __builtin_sub_overflow(m_low, bytes, &m_low); // at least 2^64 before: no clamp needed
        return *this;
    }
    // The total, or kSaturatedBytes where it is ≥ 2^64 − 1.
    Bytes value() const { return m_high != 0 ? kSaturatedBytes : m_low; }
    bool saturated() const { return m_high != 0 || m_low == kSaturatedBytes; }
    bool operator==(const ByteTotal&) const = default; // the same exact sum

private:
    // The exact sum as two 64-bit halves, m_high · 2^64 + m_low: the same 128 bits as an unsigned __int128,
    // with the common case (under 2^64) a branch that is always predicted; the 128-bit compares and
    // selects cost a quarter of the bounded analysis's instructions (issue 22).
    Bytes m_low = 0;
    Bytes m_high = 0;
};

// a + b, or kSaturatedBytes where the sum does not fit (sticky: a saturated operand stays saturated).
constexpr Bytes addSaturated(Bytes a, Bytes b) { return a >= kSaturatedBytes - b ? kSaturatedBytes : a + b; }
constexpr bool isSaturated(Bytes total) { return total == kSaturatedBytes; }

// after − before as int64, clamped to [INT64_MIN, INT64_MAX] (two uint64 totals can differ by more than
// int64 holds; the former static_cast difference wrapped). Exact wherever the true difference fits.
constexpr std::int64_t clampedDelta(Bytes before, Bytes after)
{
    constexpr auto kMax = static_cast<Bytes>(std::numeric_limits<std::int64_t>::max());
    if (after >= before)
        return after - before > kMax ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(after - before);
    return before - after > kMax ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(before - after);
}

// formatBytes(total), or "≥ 16 EiB (saturated: the trace's byte total is at least 2^64 - 1 B)" for a
// saturated total (core/units.h).
std::string formatByteTotal(Bytes total);
// The same without the explanation, for a table cell: "≥ 16 EiB".
std::string formatByteTotalShort(Bytes total);
// The sentence a report prints once below figures shown as "≥ 16 EiB".
inline constexpr std::string_view kSaturatedNote
    = "≥ 16 EiB: saturated, the trace's byte total is at least 2^64 - 1 B (the exact figure may be larger)";
// "+1.00 KiB", "-512 B": the exact change from `before` to `after` (no int64 overflow). With a saturated
// side it is a bound: "≥ +16.00 EiB" (after saturated), "≤ -16.00 EiB" (before saturated), or
// "unknown: both totals saturated".
std::string formatByteChange(Bytes before, Bytes after);

} // namespace gpumem
