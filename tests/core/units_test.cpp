// Byte and time formatting shared by every report (core/units.h).
#include "core/units.h"

#include "core/error.h"

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

// Brief tx item 3: PB, EB, PiB and EiB were refused; a size is parsed exactly, in integers (a double
// lost the low bits above 2^53 and sizes ≥ 2^63 overflowed llround); above 2^64 − 1 B is an error
// naming the option.
TEST(Units, ParsesEverySizeUnitExactly)
{
    EXPECT_EQ(parseBytes("1024"), 1024u);
    EXPECT_EQ(parseBytes("80GiB"), Bytes(80) << 30);
    EXPECT_EQ(parseBytes("80 GB"), 80000000000u);
    EXPECT_EQ(parseBytes("1.5GiB"), 1610612736u);
    EXPECT_EQ(parseBytes("2PB"), 2000000000000000u);
    EXPECT_EQ(parseBytes("2pib"), Bytes(2) << 50);
    EXPECT_EQ(parseBytes("1EB"), 1000000000000000000u);
    EXPECT_EQ(parseBytes("15EiB"), Bytes(15) << 60);
    EXPECT_EQ(parseBytes("15.5 EiB"), Bytes(31) << 59);
    EXPECT_EQ(parseBytes("18EB"), 18000000000000000000u);
    EXPECT_EQ(parseBytes("18446744073709551615"), 18446744073709551615u);
    EXPECT_EQ(parseBytes("9007199254740993B"), 9007199254740993u);
    EXPECT_EQ(parseBytes(".5KiB"), 512u);
    EXPECT_EQ(parseBytes("1.5KiB"), 1536u);
    EXPECT_EQ(parseBytes("2.000B"), 2u); // zeros after the point are whole bytes
    EXPECT_EQ(parseBytes("1.0000000000000000000000000KiB"), 1024u);
}

// Task "lim" item 4: a fraction of a byte was rounded silently (1.5B → 2 B, 0.1B → 0 and then "give the
// GPU's memory"); a size must be whole bytes after its unit, and the refusal quotes the input.
TEST(Units, RefusesAFractionOfAByteQuotingTheInput)
{
    for (const char* text : { "1.5", "1.5B", "0.1B", "0.5", "1.0000001KiB", "1.5KB5", "1.00000000000000000000001GiB" }) {
        SCOPED_TRACE(text);
        try {
            parseBytes(text, "--capacity");
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            const std::string what = e.what();
            if (std::string(text) == "1.5KB5")
                EXPECT_NE(what.find("cannot read '1.5KB5'"), std::string::npos) << what;
            else
                EXPECT_EQ(what, "--capacity: '" + std::string(text)
                        + "' is not a whole number of bytes; give whole bytes (e.g. 2B) or a unit that makes the "
                          "fraction whole (1.5KiB = 1536 B)");
        }
    }
}

TEST(Units, RefusesASizeAboveTwoToThe64WithTheOptionsName)
{
    const std::string limit = "' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), the largest size gpumem handles";
    for (const char* text : { "16EiB", "18446744073709551616", "18.5EB", "99999999999999999999999999 GiB" }) {
        SCOPED_TRACE(text);
        try {
            parseBytes(text, "--capacity");
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            EXPECT_EQ(e.what(), "--capacity: '" + std::string(text) + limit);
        }
    }
    for (const char* text : { "", ".", "-1", "1.2.3", "1 ZB", "GiB", "1e3" }) {
        SCOPED_TRACE(text);
        try {
            parseBytes(text, "--limit");
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            EXPECT_EQ(e.what(), "--limit: cannot read '" + std::string(text)
                    + "' as a size; write bytes or a number with a unit: B, KB, MB, GB, TB, PB, EB (powers of 10) or "
                      "KiB, MiB, GiB, TiB, PiB, EiB (powers of 2), e.g. 80GiB");
        }
    }
}

TEST(Units, CountsWithTheNounThatAgrees)
{
    EXPECT_EQ(counted(0, "block", "blocks"), "0 blocks");
    EXPECT_EQ(counted(1, "block", "blocks"), "1 block");
    EXPECT_EQ(counted(2, "live block", "live blocks"), "2 live blocks");
}
