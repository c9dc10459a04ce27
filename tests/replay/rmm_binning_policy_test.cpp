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

TEST(RmmBinningPolicy, ABinTakesChunksOf128BlocksFromThePoolAndHandsThemOutInOrder)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 32 * MiB })); // 256 KiB × 128
    EXPECT_EQ(binning(r).chunksOf(256 * KiB), std::vector<Address>({ a }));
    EXPECT_EQ(r.alloc(200 * KiB), a + 256 * KiB);
    EXPECT_EQ(r.policy->stats().allocated, 512 * KiB); // whole blocks
    EXPECT_EQ(r.policy->stats().requested, 1000 + 200 * KiB);
    EXPECT_EQ(r.block(a).size, 256 * KiB);
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 128u); // the chunk shows as its blocks
    EXPECT_EQ(seg.blocks[2].state, BlockState::Free);
}

TEST(RmmBinningPolicy, FreedBlocksGoToTheBackOfTheList)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000);
    Address b = r.alloc(1000);
    r.free(a);
    EXPECT_EQ(r.alloc(1000), b + 256 * KiB); // the front: the third block, not a
}

TEST(RmmBinningPolicy, LargerRequestsFallThroughToThePool)
{
    Rig r("rmm-binning");
    r.alloc(1000); // 32 MiB chunk: pool 32 MiB
    Address big = r.alloc(5 * MiB); // no bin: the pool grows by max(5, 32) MiB
    EXPECT_EQ(r.block(big).size, 5 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 32 * MiB, 32 * MiB }));
    Address c = r.alloc(1 * MiB); // 1 MiB bin: a 128 MiB chunk, the pool grows by max(128, 64)
    EXPECT_EQ(binning(r).chunksOf(1 * MiB), std::vector<Address>({ c }));
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 32 * MiB, 32 * MiB, 128 * MiB }));
    Address d = r.alloc(2 * MiB + 1); // 4 MiB bin: 512 MiB chunk
    EXPECT_EQ(r.block(d).size, 4 * MiB);
    EXPECT_EQ(binning(r).pool().poolSize(), 704 * MiB);
}

TEST(RmmBinningPolicy, AnotherStreamTakesTheFrontOfTheFirstStreamsList)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000, 1); // the chunk's blocks go to stream 1's list
    EXPECT_EQ(r.alloc(1000, 2), a + 256 * KiB); // stream 2 has none: stream 1's front
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(RmmBinningPolicy, ReleaseCachedGivesUnusedChunksToThePoolAndThePoolToTheDevice)
{
    Rig r("rmm-binning");
    Address a = r.alloc(1000);
    Address b = r.alloc(1 * MiB);
    r.free(b);
    r.policy->releaseCached(); // the 1 MiB bin's chunk is unused: back to the pool, then the device
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 128 * MiB }));
    EXPECT_TRUE(binning(r).chunksOf(1 * MiB).empty());
    r.free(a);
    r.policy->releaseCached();
    EXPECT_EQ(r.policy->stats().reserved, 0u);
    r.alloc(1000); // a new chunk from a new pool allocation
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 32 * MiB, 128 * MiB, 32 * MiB }));
}

TEST(RmmBinningPolicy, RefusesBadExponents)
{
    SimulatedDevice d;
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:min_exp:23,max_exp:22"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:min_exp:4"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-binning:max_exp:x"), d), UsageError);
}
