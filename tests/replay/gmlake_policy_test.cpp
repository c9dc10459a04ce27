// gmlake (allocators.md §5.1): virtual memory stitching of free non-contiguous large blocks serves a
// request that pytorch@2.0 needs a new segment for, without reserving more; stitched blocks are
// cached and reused; below frag_limit it is PyTorch 2.0.
#include "replay/policies/gmlake_policy.h"
#include "core/error.h"
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

// Three 40 MiB segments, the first and the last freed: 80 MiB free in two non-contiguous blocks.
struct TwoHoles {
    explicit TwoHoles(const std::string& spec)
        : r(spec)
    {
        a = r.alloc(40 * MiB);
        b = r.alloc(40 * MiB);
        c = r.alloc(40 * MiB);
        r.free(a);
        r.free(c);
    }
    Rig r;
    Address a = 0, b = 0, c = 0;
};

const GmlakeCounters& countersOf(Rig& r) { return dynamic_cast<GmlakePolicy&>(*r.policy).counters(); }

} // namespace

TEST(GmlakePolicy, StitchesTwoNonContiguousFreeBlocksInsteadOfANewSegment)
{
    TwoHoles pytorch("pytorch@2.0");
    pytorch.r.alloc(80 * MiB);
    EXPECT_EQ(pytorch.r.device.counters().reserved, 200 * MiB); // a fourth segment

    TwoHoles g("gmlake:frag_limit_mb:64");
    Address s = g.r.alloc(80 * MiB);
    EXPECT_EQ(g.r.device.counters().reserved, 120 * MiB); // nothing new reserved
    EXPECT_EQ(g.r.device.counters().mallocCalls, 3u);
    EXPECT_EQ(countersOf(g.r).stitches, 1u);
    EXPECT_NE(s, g.a);
    EXPECT_NE(s, g.c);
    // The physical blocks behind the stitched range are allocated in their segments.
    EXPECT_EQ(g.r.block(g.a).state, BlockState::Allocated);
    EXPECT_EQ(g.r.block(g.c).state, BlockState::Allocated);
    EXPECT_EQ(g.r.policy->stats().allocated, 120 * MiB);
    EXPECT_EQ(g.r.policy->stats().requested, 120 * MiB);
    EXPECT_EQ(g.r.policy->fragmentation().freeBytes, 0u);
}

TEST(GmlakePolicy, AFreedStitchedBlockIsCachedAndReusedWithinTheReuseLimit)
{
    TwoHoles g("gmlake:frag_limit_mb:64");
    Address s = g.r.alloc(80 * MiB);
    g.r.free(s);
    EXPECT_EQ(g.r.block(g.a).state, BlockState::Free); // the physical blocks are free again
    EXPECT_EQ(g.r.alloc(70 * MiB), s); // 80 ≤ 70 × 10: the cached stitched block, same address
    EXPECT_EQ(countersOf(g.r).stitchReuses, 1u);
    EXPECT_EQ(g.r.device.counters().reserved, 120 * MiB);
    g.r.free(s);
    // A primitive block handed out alone makes the cached stitched block unusable.
    Address a = g.r.alloc(40 * MiB);
    EXPECT_EQ(a, g.a);
    g.r.alloc(70 * MiB); // cannot stitch 40 MiB of free memory: a new segment
    EXPECT_EQ(countersOf(g.r).stitchedDropped, 1u);
    EXPECT_EQ(g.r.device.counters().reserved, 190 * MiB);
}

TEST(GmlakePolicy, TheLastBlockIsSplitWhenTheOvershootIsAChunkOrMore)
{
    TwoHoles g("gmlake:frag_limit_mb:64");
    g.r.alloc(66 * MiB); // largest first: a (40), then c: 26 of its 40 MiB
    auto seg = g.r.segmentOf(g.c);
    ASSERT_EQ(seg.blocks.size(), 2u);
    EXPECT_EQ(seg.blocks[0].size, 26 * MiB);
    EXPECT_EQ(seg.blocks[0].state, BlockState::Allocated);
    EXPECT_EQ(seg.blocks[1].size, 14 * MiB);
    EXPECT_EQ(seg.blocks[1].state, BlockState::Free);
    EXPECT_EQ(g.r.policy->stats().allocated, 40 * MiB + 66 * MiB);
}

TEST(GmlakePolicy, BelowFragLimitItIsPyTorch20WithTwoMiBChunks)
{
    TwoHoles g("gmlake"); // frag_limit 512 MiB as in GMLake's code
    g.r.alloc(80 * MiB);
    EXPECT_EQ(g.r.device.counters().reserved, 200 * MiB);
    EXPECT_EQ(countersOf(g.r).stitches, 0u);
    // Large requests are whole 2 MiB chunks; small ones are PyTorch's.
    Address x = g.r.alloc(3 * MiB + 1);
    EXPECT_EQ(g.r.block(x).size, 4 * MiB);
    Address y = g.r.alloc(1000);
    EXPECT_EQ(g.r.block(y).size, 1024u);
    EXPECT_TRUE(g.r.segmentOf(y).smallPool);
}

TEST(GmlakePolicy, StitchingNeedsEnoughFreeMemoryOnTheStream)
{
    TwoHoles g("gmlake:frag_limit_mb:64");
    g.r.alloc(80 * MiB, 1); // the free blocks belong to stream 0
    EXPECT_EQ(countersOf(g.r).stitches, 0u);
    EXPECT_EQ(g.r.device.counters().reserved, 200 * MiB);
}

TEST(GmlakePolicy, OptionsPassPyTorch20SettingsThrough)
{
    Rig r("gmlake:max_split_size_mb:64,frag_limit:256MiB,reuse_limit:2");
    auto& g = dynamic_cast<GmlakePolicy&>(*r.policy);
    EXPECT_EQ(g.config().fragLimit, 256 * MiB);
    EXPECT_EQ(g.config().reuseLimit, 2.0);
    EXPECT_EQ(g.config().pytorch.maxSplitSize, 64 * MiB);
    EXPECT_EQ(g.config().pytorch.version, PyTorchVersion::V2_0);
    EXPECT_EQ(r.policy->name(), "gmlake:max_split_size_mb:64,frag_limit:268435456,reuse_limit:2");
    for (const char* bad : { "gmlake:reuse_limit:0.5", "gmlake:expandable_segments:True", "gmlake:frag_limit:x",
             "gmlake@2.0" })
        EXPECT_THROW(validatePolicySpec(parsePolicySpec(bad)), UsageError) << bad;
}
