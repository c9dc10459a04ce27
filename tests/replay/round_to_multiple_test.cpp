// The one "round to a multiple" helper of replay/ (replay/detail/round_to_multiple.h): the smallest
// multiple at or above the value, and 0 (never a wrapped non-zero value) where none fits in 64 bits.
#include "replay/detail/round_to_multiple.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace gpumem;
using gpumem::replay::detail::roundDownToMultiple;
using gpumem::replay::detail::roundUpToMultiple;

namespace {
// The definition, written without any sum that could wrap.
Bytes reference(Bytes v, Bytes m)
{
    Bytes largest = ~Bytes(0) / m * m;
    if (v > largest)
        return 0;
    return v % m == 0 ? v : v - v % m + m;
}

std::vector<Bytes> probeValues(Bytes m)
{
    const Bytes top = ~Bytes(0);
    std::vector<Bytes> values { 0, 1, m - 1, m, m + 1, 2 * m - 1, 2 * m, Bytes(1) << 48, top, top - 1, top - m + 1,
        top - m, top - m - 1, top / m * m, top / m * m + 1, top / m * m - 1 };
    std::mt19937_64 rng(m);
    for (int i = 0; i < 200; ++i) {
        values.push_back(rng() >> (rng() % 64));
        values.push_back(top - (rng() >> (rng() % 64)));
    }
    return values;
}
} // namespace

TEST(RoundToMultiple, PowerOfTwoMultiplesGiveBitForBitTheFormerSpellingOverTheWholeRange)
{
    for (unsigned k = 0; k < 64; ++k) {
        const Bytes m = Bytes(1) << k;
        for (Bytes v : probeValues(m))
            ASSERT_EQ(roundUpToMultiple(v, m), (v + m - 1) / m * m) << "v=" << v << " m=" << m;
    }
}

TEST(RoundToMultiple, GivesTheSmallestMultipleAtOrAboveOrZeroWhenNoneFitsForAnyMultiple)
{
    std::vector<Bytes> multiples { 3, 7, 1000, 4096, 1'000'000'000, Bytes(3) << 40, ~Bytes(0), ~Bytes(0) - 1 };
    for (unsigned k = 0; k < 64; ++k)
        multiples.push_back(Bytes(1) << k);
    for (Bytes m : multiples) {
        for (Bytes v : probeValues(m)) {
            Bytes r = roundUpToMultiple(v, m);
            ASSERT_EQ(r, reference(v, m)) << "v=" << v << " m=" << m;
            if (r != 0) {
                EXPECT_EQ(r % m, 0u);
                EXPECT_GE(r, v);
                EXPECT_LT(r - v, m);
            }
            EXPECT_EQ(roundDownToMultiple(v, m), v - v % m);
        }
    }
}

TEST(RoundToMultiple, TheTopOfTheRangeGivesZero)
{
    const Bytes top = ~Bytes(0);
    EXPECT_EQ(roundUpToMultiple(top, 512), 0u);
    EXPECT_EQ(roundUpToMultiple(top - 511, 512), top - 511); // the largest multiple of 512 itself
    EXPECT_EQ(roundUpToMultiple(top - 510, 512), 0u);
    EXPECT_EQ(roundUpToMultiple(top, 7), 0u); // the largest multiple of 7 is 2^64 - 2
    EXPECT_EQ(roundUpToMultiple(top - 1, 7), top - 1);
    EXPECT_EQ(roundUpToMultiple(top, 3), top); // 2^64 - 1 is a multiple of 3
    EXPECT_EQ(roundUpToMultiple(Bytes(1) << 63, Bytes(3) << 62), Bytes(3) << 62);
    EXPECT_EQ(roundUpToMultiple((Bytes(3) << 62) + 1, Bytes(3) << 62), 0u);
}
