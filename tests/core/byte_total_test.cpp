// Byte totals that never wrap (core/byte_total.h).
#include "core/byte_total.h"

#include <gtest/gtest.h>

using namespace gpumem;

namespace {
constexpr Bytes kHalf = 9223372036854775000ull; // the block size of tests/data/live_bytes_past_2pow64.jsonl
}

TEST(ByteTotal, SaturatesPastTwoToTheSixtyFourAndIsExactAgainBelowIt)
{
    ByteTotal t;
    t += kHalf;
    t += kHalf;
    EXPECT_EQ(t.value(), 18446744073709550000ull);
    EXPECT_FALSE(t.saturated());
    t += kHalf; // 27670116110564325000: the uint64 sum wrapped to 9223372036854773384 ("8.00 EiB")
    EXPECT_EQ(t.value(), kSaturatedBytes);
    EXPECT_TRUE(t.saturated());
    t -= kHalf;
    EXPECT_EQ(t.value(), 18446744073709550000ull);
    EXPECT_FALSE(t.saturated());
    t -= kSaturatedBytes; // more than is there: stops at 0
    EXPECT_EQ(t.value(), 0u);
}

TEST(ByteTotal, SaturatedSumsAndDeltasNeverWrap)
{
    EXPECT_EQ(addSaturated(kHalf, kHalf), 18446744073709550000ull);
    EXPECT_EQ(addSaturated(kHalf, kHalf + 1616), kSaturatedBytes);
    EXPECT_EQ(addSaturated(kSaturatedBytes, 0), kSaturatedBytes);
    EXPECT_EQ(clampedDelta(0, kSaturatedBytes), std::numeric_limits<std::int64_t>::max());
    EXPECT_EQ(clampedDelta(kSaturatedBytes, 0), std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(clampedDelta(5, 3), -2);
    EXPECT_EQ(clampedDelta(kHalf, kHalf + 7), 7);
}

TEST(ByteTotal, FormatsASaturatedTotalAsALowerBound)
{
    EXPECT_EQ(formatByteTotal(1536), "1.50 KiB");
    EXPECT_EQ(formatByteTotal(kSaturatedBytes), "≥ 16 EiB (saturated: the trace's byte total is at least 2^64 - 1 B)");
    EXPECT_EQ(formatByteTotalShort(kSaturatedBytes), "≥ 16 EiB");
    EXPECT_EQ(formatByteChange(2048, 1024), "-1.00 KiB");
    EXPECT_EQ(formatByteChange(0, kSaturatedBytes), "≥ +16.00 EiB");
    EXPECT_EQ(formatByteChange(kSaturatedBytes, 4194304), "≤ -16.00 EiB");
    EXPECT_EQ(formatByteChange(kSaturatedBytes, kSaturatedBytes), "unknown: both totals saturated");
}
