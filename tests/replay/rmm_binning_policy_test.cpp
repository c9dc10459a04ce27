// rmm-binning on small hand-made request sequences: bin choice, chunks of block_size × 128 from the
// rmm-pool upstream, FIFO free lists, the fall-through to the pool (allocators.md §3.4).
#include "replay_test_support.h"

#include "core/error.h"
#include "replay/policies/rmm_binning_policy.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
RmmBinningPolicy& binning(Rig& r) { return dynamic_cast<RmmBinningPolicy&>(*r.policy); }
constexpr Bytes KiB = 1024;
}

TEST(RmmBinningPolicy, ARequestGoesToTheSmallestBinAtLeastItsSize)
{
    Rig r("rmm-binning");
    EXPECT_EQ(binning(r).binFor(1), 256 * KiB);
    EXPECT_EQ(binning(r).binFor(256 * KiB), 256 * KiB);
    EXPECT_EQ(binning(r).binFor(256 * KiB + 1), 512 * KiB);
    EXPECT_EQ(binning(r).binFor(3 * MiB), 4 * MiB);
    EXPECT_EQ(binning(r).binFor(4 * MiB), 4 * MiB);
    EXPECT_EQ(binning(r).binFor(4 * MiB + 1), 0u); // the pool
    Rig custom("rmm-binning:min_exp:10,max_exp:12");
    EXPECT_EQ(binning(custom).binFor(1000), 1024u);
    EXPECT_EQ(binning(custom).binFor(4097), 0u);
}

TEST(RmmBinningPolicy, EachBinTakesAChunkOf128BlocksFromThePoolAtConstruction)
{
    Rig r("rmm-binning");
    // Bins in ascending order, each chunk one pool growth: max(chunk, pool size).
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc),
        std::vector<Bytes>({ 32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB }));
    Address a = r.alloc(1000);
    EXPECT_EQ(binning(r).chunksOf(256 * KiB), std::vector<Address>({ a }));
    EXPECT_EQ(r.alloc(200 * KiB), a + 256 * KiB);
    EXPECT_EQ(r.policy->stats().allocated, 512 * KiB); // whole blocks
    EXPECT_EQ(r.policy->stats().requested, 1000 + 200 * KiB);
    EXPECT_EQ(r.block(a).size, 256 * KiB);
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 128u); // the chunk shows as its blocks
    EXPECT_EQ(seg.blocks[2].state, BlockState::Free);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 5u);
}

TEST(RmmBinningPolicy, ABinTheDeviceCannotFillAtConstructionStartsEmpty)
{
    Rig r("rmm-binning", 64 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 32 * MiB }));
    EXPECT_EQ(r.device.counters().failedCalls, 4u); // 64, 128, 256 and 512 MiB refused
    EXPECT_TRUE(binning(r).chunksOf(512 * KiB).empty());
    EXPECT_FALSE(r.policy->allocate(300 * KiB, 0).has_value()); // 64 MiB chunk: still no room
    EXPECT_TRUE(r.policy->allocate(1000, 0).has_value());
}

TEST(RmmBinningPolicy, FreedBlocksGoToTheBackOfTheList)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000);
    Address b = r.alloc(1000);
    r.free(a);
    EXPECT_EQ(r.alloc(1000), b + 256 * KiB); // the front: the third block, not a
}

TEST(RmmBinningPolicy, LargerRequestsFallThroughToThePoolAndFullBinsTakeChunksFromIt)
{
    Rig r("rmm-binning"); // pool: 992 MiB, all of it bin chunks
    Address big = r.alloc(5 * MiB); // no bin: the pool grows by max(5, 992) MiB
    EXPECT_EQ(r.block(big).size, 5 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc).back(), 992 * MiB);
    EXPECT_EQ(r.alloc(1 * MiB), binning(r).chunksOf(1 * MiB).at(0)); // the 1 MiB bin's first block
    EXPECT_EQ(r.block(r.alloc(2 * MiB + 1)).size, 4 * MiB);
    for (int i = 0; i < 129; ++i)
        r.alloc(1000);
    // The 129th 256 KiB block: a second chunk, carved from the pool's free 987 MiB after `big`.
    auto chunks = binning(r).chunksOf(256 * KiB);
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[1], big + 5 * MiB);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 6u);
    EXPECT_EQ(binning(r).pool().poolSize(), 1984 * MiB);
}

TEST(RmmBinningPolicy, TheFirstChunkSitsOnTheDefaultStreamAndOtherStreamsTakeItsFront)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000, 1); // stream 1 has no list: the default stream's front
    EXPECT_EQ(a, binning(r).chunksOf(256 * KiB).at(0));
    r.free(a, 1); // stream 1's list: a
    EXPECT_EQ(r.alloc(1000, 2), a + 256 * KiB); // the default stream's list comes first
    EXPECT_EQ(r.alloc(1000, 1), a); // its own list
}

TEST(RmmBinningPolicy, ReleaseCachedGivesUnusedChunksToThePoolAndThePoolToTheDevice)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000);
    Address b = r.alloc(1 * MiB);
    r.free(b);
    r.policy->releaseCached(); // every chunk but the 256 KiB bin's is unused
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB }));
    EXPECT_TRUE(binning(r).chunksOf(1 * MiB).empty());
    r.free(a);
    r.policy->releaseCached();
    EXPECT_EQ(r.policy->stats().reserved, 0u);
    r.alloc(1000); // a new chunk from a new pool allocation
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc).back(), 32 * MiB);
}

TEST(RmmBinningPolicy, RefusesBadExponents)
{
    SimulatedDevice d;
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:min_exp:23,max_exp:22"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:min_exp:4"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:max_exp:x"), d), UsageError);
}
