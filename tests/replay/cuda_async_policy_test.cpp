// cuda-async on small hand-made request sequences: exact-size blocks, 2 MiB-granular growth, best fit
// across streams, coalescing, release_threshold and trimming (allocators.md §4, the approximation
// docs/policies.md states).
#include "replay_test_support.h"

#include "core/error.h"
#include "replay/policies/cuda_async_policy.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
constexpr Bytes KiB = 1024;
}

TEST(CudaAsyncPolicy, RequestsAreNotRoundedBeyond256BAndThePoolGrowsIn2MiBSteps)
{
    Rig r("cuda-async");
    Address a = r.alloc(1000);
    EXPECT_EQ(r.block(a).size, 1024u);
    EXPECT_EQ(r.block(a).requested, 1000u);
    Address b = r.alloc(1000); // right after a in the same chunk
    EXPECT_EQ(b, a + 1024);
    r.alloc(3 * MiB + 1); // nothing fits: a 4 MiB chunk
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 4 * MiB }));
    EXPECT_EQ(r.policy->stats().allocated, 2048 + 3 * MiB + 256);
    EXPECT_EQ(r.policy->stats().reserved, 6 * MiB);
}

TEST(CudaAsyncPolicy, BestFitSpansChunksAndStreams)
{
    Rig r("cuda-async");
    Address a = r.alloc(1 * MiB, 1); // chunk A [0, 2)
    r.alloc(1 * MiB, 1);
    Address c = r.alloc(512 * KiB, 2); // chunk B, on stream 2
    r.alloc(3 * MiB / 2, 2);
    r.free(a, 1); // free: a 1 MiB (chunk A), c 512 KiB (chunk B)
    r.free(c, 2);
    EXPECT_EQ(r.alloc(500 * KiB, 1), c); // the smallest that fits, whatever the stream
    EXPECT_EQ(r.alloc(500 * KiB, 3), a);
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 2u);
}

TEST(CudaAsyncPolicy, FreedBlocksCoalesceInsideTheirChunk)
{
    Rig r("cuda-async");
    Address a = r.alloc(512 * KiB);
    Address b = r.alloc(512 * KiB);
    Address c = r.alloc(512 * KiB);
    r.free(b);
    r.free(a);
    EXPECT_EQ(r.block(a).size, 1 * MiB);
    r.free(c);
    auto seg = r.segmentOf(a);
    ASSERT_EQ(seg.blocks.size(), 1u);
    EXPECT_EQ(seg.blocks[0].size, 2 * MiB);
    EXPECT_EQ(r.alloc(2 * MiB), a); // the whole chunk again, no growth
    EXPECT_EQ(r.log.count(EventKind::SegmentAlloc), 1u);
}

TEST(CudaAsyncPolicy, TheDefaultThresholdKeepsEverythingUntilReleaseCached)
{
    Rig r("cuda-async");
    Address a = r.alloc(3 * MiB); // 4 MiB chunk
    Address b = r.alloc(3 * MiB / 2); // 1 MiB left there is too small: 2 MiB chunk
    r.free(a);
    r.free(b);
    EXPECT_EQ(r.policy->stats().reserved, 6 * MiB);
    r.policy->releaseCached(); // cudaMemPoolTrimTo(pool, 0)
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB, 4 * MiB })); // highest first
    EXPECT_EQ(r.policy->stats().reserved, 0u);
}

TEST(CudaAsyncPolicy, AReleaseThresholdTrimsWhollyFreeChunksAfterAFree)
{
    Rig zero("cuda-async:release_threshold:0");
    Address a = zero.alloc(1 * MiB);
    Address b = zero.alloc(512 * KiB);
    zero.free(a); // the chunk still holds b
    EXPECT_EQ(zero.log.count(EventKind::SegmentFree), 0u);
    zero.free(b);
    EXPECT_EQ(zero.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB }));
    EXPECT_EQ(zero.policy->stats().reserved, 0u);
    Rig keep("cuda-async:release_threshold:4MiB");
    Address c = keep.alloc(3 * MiB); // 4 MiB chunk
    Address d = keep.alloc(2 * MiB); // 2 MiB chunk: 6 MiB held
    keep.free(c); // 6 > 4: the free 4 MiB chunk goes; 2 MiB held
    EXPECT_EQ(keep.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 4 * MiB }));
    keep.free(d); // 2 ≤ 4: kept
    EXPECT_EQ(keep.policy->stats().reserved, 2 * MiB);
}

TEST(CudaAsyncPolicy, WhenTheDeviceRefusesAChunkFreeChunksGoBackAndGrowthIsRetried)
{
    Rig r("cuda-async", 4 * MiB);
    Address a = r.alloc(2 * MiB);
    Address b = r.alloc(2 * MiB);
    r.free(a);
    r.free(b);
    r.alloc(3 * MiB); // 4 MiB refused while 4 MiB are held: trim both, then the 4 MiB chunk
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB, 2 * MiB }));
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 2 * MiB, 4 * MiB }));
    EXPECT_FALSE(r.policy->allocate(2 * MiB, 0).has_value()); // 1 MiB free, nothing to trim
    EXPECT_EQ(r.policy->stats().ooms, 1u);
}

TEST(CudaAsyncPolicy, ReadsTheThresholdAsBytesOrMax)
{
    SimulatedDevice d;
    EXPECT_EQ(makePolicy(parsePolicySpec("cuda-async:release_threshold:max"), d)->name(), "cuda-async");
    EXPECT_EQ(makePolicy(parsePolicySpec("cuda-async:release_threshold:1GiB"), d)->name(),
        "cuda-async:release_threshold:1073741824");
    EXPECT_THROW(makePolicy(parsePolicySpec("cuda-async:release_threshold:lots"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("cuda-async:expandable_segments:True"), d), UsageError);
}

TEST(CudaAsyncPolicy, ARequestLargerThanAnyDeviceIsAnOutOfMemoryNotAWrappedSize)
{
    // Every new policy: a size near 2^64 must not wrap around when rounded (the device is unlimited).
    for (const char* spec : { "cuda-async", "tf-bfc", "rmm-pool", "rmm-arena", "rmm-binning" }) {
        Rig r(spec);
        EXPECT_FALSE(r.policy->allocate(~Bytes(0) - 100, 0).has_value()) << spec;
        EXPECT_EQ(r.policy->stats().ooms, 1u) << spec;
        EXPECT_EQ(r.policy->stats().allocated, 0u) << spec;
        EXPECT_TRUE(r.policy->allocate(1000, 0).has_value()) << spec;
    }
}
