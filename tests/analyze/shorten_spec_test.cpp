// analyze::shortenSpec: a policy spec wider than its column keeps every option's value, its keys cut short
// first. Review finding (2026-12-04): the sweep table cut specs in the middle, so the four rows of the grid
// max_split_size_mb:{64,256} × roundup_power2_divisions:{1,4} read as two pairs of identical rows.
#include "analyze/comparison.h"
#include "core/display_width.h"

#include <gtest/gtest.h>


using gpumem::analyze::shortenSpec;

TEST(ShortenSpec, KeepsEveryValueAndCutsTheLongestKeysFirst)
{
    const std::string a = "pytorch:max_split_size_mb:64,roundup_power2_divisions:1";
    EXPECT_EQ(shortenSpec(a, 100), a); // fits: unchanged
    EXPECT_EQ(shortenSpec(a, 36), "pytorch:max_split_…:64,roundup_po…:1");
    EXPECT_EQ(gpumem::displayWidth(shortenSpec(a, 36)), 36u);
    EXPECT_EQ(shortenSpec("pytorch:max_split_size_mb:256,roundup_power2_divisions:4", 36),
        "pytorch:max_split…:256,roundup_po…:4");
    // Keys stop at four columns and "…"; past that, the middle cut of shortenMiddle.
    const std::string tight = shortenSpec(a, 20);
    EXPECT_EQ(gpumem::displayWidth(tight), 20u) << tight;
    EXPECT_EQ(shortenSpec("direct", 3), gpumem::analyze::shortenMiddle("direct", 3)); // no options
}

// Review finding L7 (2026-12-04): a wrapped note split "+0.000004 s" and "20.00 MiB" across lines.
TEST(WrapText, KeepsAFigureAndItsUnitOnOneLine)
{
    using gpumem::analyze::wrapText;
    EXPECT_EQ(wrapText("the first at +0.000004 s).", 24), "the first at\n  +0.000004 s).\n");
    EXPECT_EQ(wrapText("reserved 20.00 MiB, then", 16), "reserved\n  20.00 MiB,\n  then\n");
    // A word after a figure that is not a unit wraps on its own; "x" is the ratio's unit.
    EXPECT_EQ(wrapText("step 3 sizes 1.039 x", 13), "step 3 sizes\n  1.039 x\n");
    EXPECT_EQ(wrapText("in 3 steps", 5), "in 3\n  steps\n");
}
