// PyTorch policy behaviour beyond the §7 checks: the max_split_size OOM path (§1.10) and expandable
// segments giving pages back (§1.11).
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

TEST(PyTorchPolicy, ReleaseAvailableCachedBlocksFreesTheSmallestSufficientOversizeBlockFirst)
{
    Rig r("pytorch:max_split_size_mb:100", 400 * MiB);
    Address a = r.alloc(150 * MiB);
    Address b = r.alloc(200 * MiB);
    r.free(a);
    r.free(b);
    // 150 >= 120 + 20: not reused; 350 + 120 > 400: release the 150 MiB block only, then allocate.
    r.alloc(120 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 150 * MiB }));
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 150 * MiB, 200 * MiB, 120 * MiB }));
    EXPECT_EQ(r.pytorch().counters().numAllocRetries, 0u); // release_cached_blocks was not needed
    EXPECT_EQ(r.device.counters().reserved, 320 * MiB);
}

TEST(PyTorchPolicy, ReleaseAvailableCachedBlocksFreesOversizeBlocksFromTheLargestDown)
{
    Rig r("pytorch:max_split_size_mb:100", 500 * MiB);
    std::vector<Address> as;
    for (Bytes mb : { 110, 120, 130 })
        as.push_back(r.alloc(mb * MiB));
    for (Address a : as)
        r.free(a);
    // 300 MiB: no single cached block is large enough; 360 + 300 > 500. Largest first: 130 + 120 = 250
    // < 300, then 110: 360 >= 300.
    r.alloc(300 * MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 130 * MiB, 120 * MiB, 110 * MiB }));
    EXPECT_EQ(r.device.counters().reserved, 300 * MiB);
}

TEST(PyTorchPolicy, EmptyCacheUnmapsOnlyWhollyFreePagesOfExpandableSegments)
{
    Rig r("pytorch:expandable_segments:True");
    Address a = r.alloc(25 * MiB); // maps two 20 MiB pages
    Address b = r.alloc(10 * MiB); // [25, 35) MiB
    r.free(a);
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentUnmap), std::vector<Bytes>({ 20 * MiB })); // page 0 only
    EXPECT_EQ(r.device.counters().reserved, 20 * MiB);
    auto seg = r.segmentOf(b);
    EXPECT_EQ(seg.address, a + 20 * MiB); // the snapshot shows the mapped range that is left
    EXPECT_EQ(seg.size, 20 * MiB);
    r.free(b);
    r.policy->releaseCached();
    EXPECT_EQ(r.log.sizes(EventKind::SegmentUnmap), std::vector<Bytes>({ 20 * MiB, 20 * MiB }));
    EXPECT_EQ(r.device.counters().reserved, 0u);
    // The address space is reused: the next request maps at the start again.
    Address c = r.alloc(25 * MiB);
    EXPECT_EQ(r.pytorch().counters().numDeviceAlloc, 2u);
    EXPECT_NE(c, 0u);
}

TEST(PyTorchPolicy, OomRecoveryCompletesPendingFreesAndIgnoresTheirLaterFreeCompleted)
{
    // Found by fuzz_policy (a harness that missed this rule): release_cached_blocks synchronizes and
    // completes every pending free (§1.10 step 1), so the block can be reused before the trace's own
    // free_completed for it arrives; that later free_completed must not free the new owner.
    Rig r("pytorch", 64 * MiB);
    Address a = r.alloc(40 * MiB);
    r.policy->requestFree(a); // record_stream: pending
    Address b = r.alloc(40 * MiB); // 80 > 64: recovery frees the pending block's segment, then retries
    EXPECT_EQ(r.pytorch().counters().numSyncAllStreams, 1u);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 40 * MiB }));
    r.free(a); // the recorded free_completed of the first block
    EXPECT_EQ(r.policy->stats().allocated, 40 * MiB);
    EXPECT_EQ(r.block(b).state, BlockState::Allocated);
    r.free(b);
    EXPECT_EQ(r.policy->stats().allocated, 0u);
}
