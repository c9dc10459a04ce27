// Tests of SegmentBlockMap (importers/snapshot_state.h) on hand-made event sequences.
#include "importers/snapshot_state.h"

#include <gtest/gtest.h>

using namespace gpumem;

namespace {
constexpr Address kBase = 0x7f0000000000;
constexpr Bytes kMiB = 1 << 20;

std::vector<std::tuple<Address, Bytes, SnapshotBlockState>> blocksOf(const SnapshotSegment& s)
{
    std::vector<std::tuple<Address, Bytes, SnapshotBlockState>> out;
    for (const auto& b : s.blocks)
        out.emplace_back(b.address - kBase, b.size, b.state);
    return out;
}
} // namespace

TEST(SegmentBlockMap, TilesSegmentsWithMergedFreeGaps)
{
    SegmentBlockMap map;
    std::string detail;
    EXPECT_EQ(map.addSegment(kBase, 20 * kMiB, false, detail), "");
    EXPECT_EQ(map.allocate(kBase + 2 * kMiB, 2 * kMiB, 100, detail), "");
    EXPECT_EQ(map.allocate(kBase + 6 * kMiB, 4 * kMiB, 100, detail), "");
    EXPECT_EQ(map.freeBlockAt(kBase), 2 * kMiB);
    EXPECT_EQ(map.freeBlockAt(kBase + 4 * kMiB), 2 * kMiB);
    EXPECT_EQ(map.freeBlockAt(kBase + 5 * kMiB), std::nullopt) << "the middle of free space is not a block start";
    EXPECT_EQ(map.freeBlockAt(kBase + 2 * kMiB), std::nullopt) << "an active block starts there";
    EXPECT_EQ(map.slackAfter(kBase + 6 * kMiB), 10 * kMiB);
    EXPECT_EQ(map.freeRequested(kBase + 2 * kMiB, detail), "");
    auto dump = map.dump(3);
    ASSERT_EQ(dump.size(), 1u);
    EXPECT_EQ(dump[0].device, 3);
    using S = SnapshotBlockState;
    EXPECT_EQ(blocksOf(dump[0]),
        (std::vector<std::tuple<Address, Bytes, S>> { { 0, 2 * kMiB, S::Inactive },
            { 2 * kMiB, 2 * kMiB, S::ActivePendingFree }, { 4 * kMiB, 2 * kMiB, S::Inactive },
            { 6 * kMiB, 4 * kMiB, S::ActiveAllocated }, { 10 * kMiB, 10 * kMiB, S::Inactive } }));
    EXPECT_EQ(map.freeCompleted(kBase + 2 * kMiB, detail), "");
    EXPECT_EQ(blocksOf(map.dump(0)[0]).size(), 3u) << "the freed block merges with both neighbours";
    EXPECT_EQ(map.freeCompleted(kBase + 2 * kMiB, detail), "free_of_unknown_block");
    EXPECT_EQ(map.allocate(kBase + 30 * kMiB, kMiB, 1, detail), "alloc_outside_segment");
    EXPECT_EQ(map.allocate(kBase + 9 * kMiB, 2 * kMiB, 1, detail), "alloc_overlaps_block");
    EXPECT_EQ(map.removeSegment(kBase, 20 * kMiB, false, detail), "segment_free_with_live_blocks");
    EXPECT_EQ(map.segmentCount(), 0u);
}

TEST(SegmentBlockMap, MergesAndSplitsExpandableRangesAndCopiesSafely)
{
    SegmentBlockMap map;
    std::string detail;
    EXPECT_EQ(map.addSegment(kBase, 2 * kMiB, true, detail), "");
    EXPECT_EQ(map.addSegment(kBase + 4 * kMiB, 2 * kMiB, true, detail), "");
    EXPECT_EQ(map.segmentCount(), 2u);
    EXPECT_EQ(map.addSegment(kBase + 2 * kMiB, 2 * kMiB, true, detail), "");
    ASSERT_EQ(map.segmentCount(), 1u) << "contiguous mapped ranges are one segment, as snapshot() reports them";
    EXPECT_EQ(map.dump(0)[0].totalSize, 6 * kMiB);
    EXPECT_EQ(map.allocate(kBase + kMiB, 512, 1, detail), "");
    EXPECT_TRUE(map.inExpandable(kBase + 5 * kMiB));

    SegmentBlockMap copy = map; // the copy must not share the lookup cache with the original
    EXPECT_EQ(copy.removeSegment(kBase + 2 * kMiB, 2 * kMiB, true, detail), "");
    EXPECT_EQ(copy.segmentCount(), 2u);
    EXPECT_EQ(map.segmentCount(), 1u);
    EXPECT_NE(copy.activeBlock(kBase + kMiB), nullptr);
    EXPECT_NE(map.activeBlock(kBase + kMiB), nullptr);
    EXPECT_EQ(copy.removeSegment(kBase + kMiB, 512, true, detail), "segment_free_with_live_blocks");
    EXPECT_EQ(copy.activeBlock(kBase + kMiB), nullptr);
    EXPECT_EQ(copy.addSegment(kBase + 5 * kMiB, kMiB, false, detail), "segment_overlap");
    EXPECT_EQ(copy.removeSegment(kBase + 40 * kMiB, kMiB, true, detail), "segment_unmap_of_unmapped_range");
}

TEST(SegmentBlockMap, ALookupKeptForTheNextChangeFollowsEveryChangeInBetween)
{
    // freeBlockAt/activeBlock keep their lookup for the allocate/free that follows; any block added
    // or removed in between must make the next call search again.
    SegmentBlockMap map;
    std::string detail;
    ASSERT_EQ(map.addSegment(kBase, 2 * kMiB, false, detail), "");
    ASSERT_EQ(map.freeBlockAt(kBase + 4096), std::nullopt); // in the middle of free space
    ASSERT_EQ(map.freeBlockAt(kBase), 2 * kMiB);
    EXPECT_EQ(map.allocate(kBase + 1024, 1024, 1000, detail), ""); // another address in between
    EXPECT_EQ(map.allocate(kBase, 1024, 1000, detail), ""); // the kept lookup of kBase is stale now
    EXPECT_EQ(map.freeBlockAt(kBase + 2048), 2 * kMiB - 2048);
    ASSERT_NE(map.activeBlock(kBase + 1024), nullptr);
    EXPECT_EQ(map.freeCompleted(kBase, detail), ""); // a change elsewhere ...
    EXPECT_EQ(map.freeRequested(kBase + 1024, detail), ""); // ... then the block looked up before
    EXPECT_EQ(map.activeBlock(kBase + 1024)->state, SnapshotBlockState::ActivePendingFree);
    EXPECT_EQ(map.freeRequested(kBase + 1024, detail), "free_of_unknown_block"); // already pending
    EXPECT_EQ(map.freeBlockAt(kBase), 1024u);
    EXPECT_EQ(map.freeCompleted(kBase + 1024, detail), "");
    EXPECT_EQ(map.freeCompleted(kBase + 1024, detail), "free_of_unknown_block");
    EXPECT_EQ(map.freeBlockAt(kBase), 2 * kMiB);
    EXPECT_EQ(map.activeBlockCount(), 0u);
}

TEST(SegmentBlockMap, ReusesTheNodesOfFreedBlocksAndSurvivesCopiesAndMoves)
{
    SegmentBlockMap map;
    std::string detail;
    ASSERT_EQ(map.addSegment(kBase, 64 * kMiB, false, detail), "");
    // More blocks than one chunk of nodes, freed and allocated again in another order.
    for (int round = 0; round < 3; ++round) {
        for (Address i = 0; i < 200; ++i)
            ASSERT_EQ(map.allocate(kBase + i * 4096, 4096, 4000, detail), "") << i;
        EXPECT_EQ(map.activeBlockCount(), 200u);
        for (Address i = 0; i < 200; i += 2)
            ASSERT_EQ(map.freeCompleted(kBase + i * 4096, detail), "");
        SegmentBlockMap copy = map;
        SegmentBlockMap moved = std::move(copy);
        EXPECT_EQ(moved.activeBlockCount(), 100u);
        EXPECT_EQ(moved.freeBlockAt(kBase), 4096u);
        EXPECT_EQ(moved.allocate(kBase, 4096, 1, detail), "");
        EXPECT_EQ(map.freeBlockAt(kBase), 4096u); // the original did not change
        copy = moved; // a moved-from map can be assigned and used again
        EXPECT_EQ(copy.activeBlockCount(), 101u);
        for (Address i = 1; i < 200; i += 2)
            ASSERT_EQ(map.freeCompleted(kBase + i * 4096, detail), "");
        EXPECT_EQ(map.activeBlockCount(), 0u);
        EXPECT_EQ(moved.activeBlockCount(), 101u);
    }
}
