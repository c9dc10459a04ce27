// displayWidth (core/display_width.h, brief esc item 2): terminal columns from libutf8proc.
#include "core/display_width.h"

#include <gtest/gtest.h>

using gpumem::displayWidth;

TEST(DisplayWidth, CountsWideCharactersTwiceAndCombiningMarksNone)
{
    EXPECT_EQ(displayWidth(""), 0u);
    EXPECT_EQ(displayWidth("abc"), 3u);
    EXPECT_EQ(displayWidth("\xC3\xA9"), 1u); // é, precomposed
    EXPECT_EQ(displayWidth("e\xCC\x81"), 1u); // e + U+0301 combining acute
    EXPECT_EQ(displayWidth("\xE6\xBC\xA2\xE5\xAD\x97"), 4u); // 漢字
    EXPECT_EQ(displayWidth("\xF0\x9F\x98\x80"), 2u); // U+1F600 emoji
    EXPECT_EQ(displayWidth("\xE2\x89\xA5 16 EiB"), 8u); // "≥ 16 EiB": 10 bytes, 8 columns
    EXPECT_EQ(displayWidth("x\x80y"), 3u); // an invalid byte prints as one U+FFFD
}

TEST(DisplayWidth, PadsInColumnsNotBytes)
{
    EXPECT_EQ(gpumem::padRight("\xE6\xBC\xA2", 4), "\xE6\xBC\xA2  ");
    EXPECT_EQ(gpumem::padLeft("\xC3\xA9", 3), "  \xC3\xA9");
    EXPECT_EQ(gpumem::padLeft("abcd", 3), "abcd");
    EXPECT_EQ(gpumem::characterLength("\xF0\x9F\x98\x80", 0), 4u);
    EXPECT_EQ(gpumem::characterLength("\x80", 0), 1u);
}
