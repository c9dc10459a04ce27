// The pytorch policy's free sets (replay/detail/best_fit_block_set.h) give exactly the order and the
// lookups of std::set with PyTorch's key (stream, size, address), whatever mix of streams and sizes:
// the same walk forwards and backwards, the same lower_bound, the same erase results.
#include "replay/detail/best_fit_block_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <tuple>
#include <vector>

using namespace gpumem;

namespace {
struct Block {
    std::uint64_t stream = 0;
    Bytes size = 0;
    Address ptr = 0;
};
using Key = std::tuple<std::uint64_t, Bytes, Address>;
Key keyOf(const Block* b) { return { b->stream, b->size, b->ptr }; }

std::vector<Key> forwards(const replay::detail::BestFitBlockSet<Block>& s)
{
    std::vector<Key> out;
    for (const Block* b : s)
        out.push_back(keyOf(b));
    return out;
}
std::vector<Key> backwards(const replay::detail::BestFitBlockSet<Block>& s)
{
    std::vector<Key> out;
    for (auto it = s.end(); it != s.begin();)
        out.push_back(keyOf(*--it));
    return out;
}

// lower_bound(probe) of the set and of the reference agree, and so do one step on and one back from it.
void expectLowerBoundAsInReference(
    const replay::detail::BestFitBlockSet<Block>& set, const std::set<Key>& reference, const Block& probe)
{
    auto got = set.lower_bound(&probe);
    auto want = reference.lower_bound(keyOf(&probe));
    ASSERT_EQ(got == set.end(), want == reference.end());
    if (want != reference.end()) {
        ASSERT_EQ(keyOf(*got), *want);
        auto wantNext = std::next(want);
        auto gotNext = std::next(got);
        ASSERT_EQ(gotNext == set.end(), wantNext == reference.end());
        if (wantNext != reference.end()) {
            ASSERT_EQ(keyOf(*gotNext), *wantNext);
        }
    }
    if (want != reference.begin()) {
        ASSERT_EQ(keyOf(*std::prev(got)), *std::prev(want));
    }
}
// The walks forwards and backwards visit the reference's keys in its order.
void expectWalksAsInReference(const replay::detail::BestFitBlockSet<Block>& set, const std::set<Key>& reference)
{
    ASSERT_EQ(forwards(set), std::vector<Key>(reference.begin(), reference.end()));
    ASSERT_EQ(backwards(set), std::vector<Key>(reference.rbegin(), reference.rend()));
}
} // namespace

TEST(BestFitBlockSet, OrdersAndFindsLikeAnOrderedSetOfStreamSizeAddress)
{
    // Sizes from 1 B to 2^62 B, 512-multiples and odd ones, equal sizes at many addresses, four streams
    // (one of them 0, one the largest handle), inserts and erases interleaved.
    std::mt19937_64 rng(22);
    const std::uint64_t streams[] = { 0, 7, 1ull << 40, ~std::uint64_t(0) };
    auto randomSize = [&]() -> Bytes {
        switch (rng() % 4) {
        case 0:
            return 512 * (1 + rng() % 80); // the linear buckets and the first octaves
        case 1:
            return Bytes(2) << 20; // many blocks of one size
        case 2:
            return 1 + rng() % (Bytes(1) << (1 + rng() % 62)); // any size up to 2^62
        default:
            return (Bytes(1) << (9 + rng() % 50)) - 512 * (rng() % 2); // bucket edges
        }
    };
    std::vector<Block> blocks(3000);
    for (Block& b : blocks) {
        b.stream = streams[rng() % 4];
        b.size = randomSize();
        b.ptr = (rng() % 64) * 512 + (rng() % 2);
    }
    replay::detail::BestFitBlockSet<Block> set;
    std::set<Key> reference;
    std::vector<bool> in(blocks.size(), false);
    for (int step = 0; step < 20000; ++step) {
        const std::size_t i = rng() % blocks.size();
        const Block* b = &blocks[i];
        if (rng() % 3 != 0) {
            const bool fresh = reference.insert(keyOf(b)).second;
            ASSERT_EQ(set.insert(b), fresh);
            in[i] = in[i] || fresh;
        } else {
            ASSERT_EQ(set.erase(b), reference.erase(keyOf(b)));
        }
        ASSERT_EQ(set.size(), reference.size());
        // A lower_bound for a random key, and a step on and back from it.
        const Block probe { streams[rng() % 4], randomSize(), rng() % 2 ? 0 : Address(rng() % 64) * 512 };
        ASSERT_NO_FATAL_FAILURE(expectLowerBoundAsInReference(set, reference, probe));
        if (step % 1000 == 0) {
            ASSERT_NO_FATAL_FAILURE(expectWalksAsInReference(set, reference));
        }
    }
    EXPECT_GT(reference.size(), 1000u); // the walk above ran over a full set
    EXPECT_EQ(forwards(set), std::vector<Key>(reference.begin(), reference.end()));
    // Erasing by iterator everything, smallest first, empties it.
    while (set.begin() != set.end()) {
        const Key k = keyOf(*set.begin());
        ASSERT_EQ(k, *reference.begin());
        set.erase(set.begin());
        reference.erase(reference.begin());
    }
    EXPECT_EQ(set.size(), 0u);
    EXPECT_TRUE(set.lower_bound(&blocks[0]) == set.end());
}

TEST(BestFitBlockSet, KeepsTheOrderAcrossTheExactBucketsBelowTwoMiB)
{
    // Below 2 MiB every 512 B has its own bucket (4,096 of them, 64 bitmap words); above, 32 buckets per
    // power of two. Sizes from 1.5 MiB to 2.5 MiB, many of nearly one size (2 MiB less a few KiB, as
    // segments with one small block left) and many of exactly 2 MiB, put the walks, lower_bound and the
    // bitmap's summary across that boundary; the answers must be std::set's.
    std::mt19937_64 rng(2026);
    const Bytes MiB = Bytes(1) << 20;
    auto randomSize = [&]() -> Bytes {
        switch (rng() % 4) {
        case 0:
            return 2 * MiB - 512 * (1 + rng() % 20); // just below the boundary, 512 B apart
        case 1:
            return 2 * MiB; // many blocks of one size
        case 2:
            return 2 * MiB + rng() % (MiB / 2); // the first TLSF octave, odd sizes too
        default:
            return 3 * MiB / 2 + rng() % (MiB / 2);
        }
    };
    std::vector<Block> blocks(1500);
    for (Block& b : blocks) {
        b.stream = rng() % 3 == 0 ? 7 : 0;
        b.size = randomSize();
        b.ptr = (rng() % 512) * 512;
    }
    replay::detail::BestFitBlockSet<Block> set;
    std::set<Key> reference;
    for (int step = 0; step < 12000; ++step) {
        const Block* b = &blocks[rng() % blocks.size()];
        if (rng() % 3 != 0)
            ASSERT_EQ(set.insert(b), reference.insert(keyOf(b)).second);
        else
            ASSERT_EQ(set.erase(b), reference.erase(keyOf(b)));
        const Block probe { rng() % 2 ? 7u : 0u, randomSize() - rng() % 2, rng() % 2 ? 0 : Address(rng() % 512) * 512 };
        ASSERT_NO_FATAL_FAILURE(expectLowerBoundAsInReference(set, reference, probe));
        if (step % 500 == 0) {
            ASSERT_NO_FATAL_FAILURE(expectWalksAsInReference(set, reference));
        }
    }
    EXPECT_GT(reference.size(), 500u);
    ASSERT_NO_FATAL_FAILURE(expectWalksAsInReference(set, reference));
    EXPECT_EQ(set.largestSize(), std::get<1>(*std::max_element(reference.begin(), reference.end(),
                                     [](const Key& a, const Key& b) { return std::get<1>(a) < std::get<1>(b); })));
}
