// Byte and time formatting shared by every report (core/units.h).
#include "core/units.h"

#include <gtest/gtest.h>

using namespace gpumem;

TEST(Units, FormatsBytesWithBinaryPrefixes)
{
    EXPECT_EQ(formatBytes(0), "0 B");
    EXPECT_EQ(formatBytes(512), "512 B");
    EXPECT_EQ(formatBytes(1536), "1.50 KiB");
    EXPECT_EQ(formatBytes(Bytes(13) << 28), "3.25 GiB");
}

TEST(Units, OffsetsCarryTheirSign)
{
    // A ProfilerStep that began before the first memory event printed "+-0.019424 s".
    EXPECT_EQ(formatOffset(-19424000), "-0.019424 s");
    EXPECT_EQ(formatOffset(0), "+0.000000 s");
    EXPECT_EQ(formatOffset(1500000000), "+1.500000 s");
}
