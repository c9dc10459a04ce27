// rmm-arena on small hand-made request sequences: the arena as one upstream allocation, superblock
// acquisition and splitting, the > 1 MiB global path, coalescing of empty superblocks, and
// defragment-and-retry (allocators.md §3.3).
#include "replay_test_support.h"

#include "core/error.h"
#include "replay/policies/rmm_arena_policy.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
RmmArenaPolicy& arena(Rig& r) { return dynamic_cast<RmmArenaPolicy&>(*r.policy); }
using Blocks = std::vector<std::pair<Address, Bytes>>;
constexpr Bytes GiB = Bytes(1) << 30;
}

TEST(RmmArenaPolicy, TheArenaIsOneUpstreamAllocationOfHalfTheFreeDeviceMemory)
{
    Rig unlimited("rmm-arena", 0, 80 * GiB);
    EXPECT_EQ(unlimited.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 40 * GiB }));
    EXPECT_EQ(unlimited.policy->stats().reserved, 40 * GiB);
    Rig capped("rmm-arena", 64 * MiB, 80 * GiB);
    EXPECT_EQ(arena(capped).arenaSize(), 32 * MiB);
    Rig sized("rmm-arena:arena_size:16MiB");
    EXPECT_EQ(sized.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 16 * MiB }));
    Address a = sized.alloc(3 * MiB);
    sized.alloc(1000, 1);
    sized.free(a);
    EXPECT_EQ(sized.log.count(EventKind::SegmentAlloc), 1u); // requests never reach the device
    auto segs = sized.policy->describeState().segments;
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0].size, 16 * MiB);
}

TEST(RmmArenaPolicy, ASmallRequestAcquiresA1MiBSuperblockSplitOffTheGlobalArena)
{
    Rig r("rmm-arena:arena_size:16MiB");
    const Address base = arena(r).globalSuperblocks().at(0).first;
    Address a = r.alloc(1000, 1); // aligned to 1024
    EXPECT_EQ(a, base);
    EXPECT_EQ(r.block(a).size, 1024u);
    EXPECT_EQ(arena(r).streamSuperblocks(1), Blocks({ { base, 1 * MiB } }));
    EXPECT_EQ(arena(r).globalSuperblocks(), Blocks({ { base + 1 * MiB, 15 * MiB } }));
    EXPECT_EQ(r.alloc(1000, 1), base + 1024); // first fit inside the stream's superblock
    EXPECT_EQ(r.alloc(1000, 2), base + 1 * MiB); // another stream, another arena
    EXPECT_EQ(arena(r).streamSuperblocks(2), Blocks({ { base + 1 * MiB, 1 * MiB } }));
}

TEST(RmmArenaPolicy, RequestsAbove1MiBAreServedByTheGlobalArena)
{
    Rig r("rmm-arena:arena_size:16MiB");
    const Address base = arena(r).globalSuperblocks().at(0).first;
    Address big = r.alloc(3 * MiB, 1); // its own 3 MiB superblock, kept in the global arena
    EXPECT_EQ(big, base);
    EXPECT_EQ(arena(r).globalSuperblocks(), Blocks({ { base, 3 * MiB }, { base + 3 * MiB, 13 * MiB } }));
    EXPECT_TRUE(arena(r).streamSuperblocks(1).empty());
    Address one = r.alloc(1 * MiB, 1); // exactly 1 MiB is small: the stream acquires a superblock
    EXPECT_EQ(one, base + 3 * MiB);
    EXPECT_EQ(arena(r).streamSuperblocks(1), Blocks({ { base + 3 * MiB, 1 * MiB } }));
    // An empty superblock too small to split is handed out whole.
    Rig tight("rmm-arena:arena_size:3MiB");
    Address t = tight.alloc(2 * MiB + 256);
    EXPECT_EQ(arena(tight).globalSuperblocks().size(), 1u);
    EXPECT_EQ(arena(tight).globalSuperblocks().at(0).second, 3 * MiB);
    EXPECT_EQ(tight.block(t).size, 2 * MiB + 256);
}

TEST(RmmArenaPolicy, AnEmptiedGlobalSuperblockMergesWithEmptyNeighbours)
{
    Rig r("rmm-arena:arena_size:16MiB");
    const Address base = arena(r).globalSuperblocks().at(0).first;
    Address a = r.alloc(2 * MiB);
    Address b = r.alloc(3 * MiB);
    EXPECT_EQ(arena(r).globalSuperblocks(),
        Blocks({ { base, 2 * MiB }, { base + 2 * MiB, 3 * MiB }, { base + 5 * MiB, 11 * MiB } }));
    r.free(a); // empty, but its neighbour b is not
    EXPECT_EQ(arena(r).globalSuperblocks().size(), 3u);
    r.free(b); // merges with a before it and the tail after it
    EXPECT_EQ(arena(r).globalSuperblocks(), Blocks({ { base, 16 * MiB } }));
}

TEST(RmmArenaPolicy, SmallFreesStayInTheStreamsArenaUntilDefragmentRetriesAFailedRequest)
{
    Rig r("rmm-arena:arena_size:4MiB");
    const Address base = arena(r).globalSuperblocks().at(0).first;
    Address a = r.alloc(1000, 1); // superblock [0, 1) MiB → stream 1
    Address b = r.alloc(1000, 2); // superblock [1, 2) MiB → stream 2; global keeps [2, 4)
    r.free(a, 1);
    r.free(b, 2);
    EXPECT_EQ(arena(r).streamSuperblocks(1), Blocks({ { base, 1 * MiB } })); // empty, not returned
    EXPECT_EQ(arena(r).globalSuperblocks(), Blocks({ { base + 2 * MiB, 2 * MiB } }));
    // 3 MiB: nothing in the global arena fits; defragment returns both superblocks, they merge into
    // one 4 MiB superblock, and the retry succeeds at the base.
    EXPECT_EQ(r.alloc(3 * MiB, 1), base);
    EXPECT_EQ(arena(r).defragmentations(), 1u);
    EXPECT_TRUE(arena(r).streamSuperblocks(1).empty());
    EXPECT_TRUE(arena(r).streamSuperblocks(2).empty());
    EXPECT_EQ(arena(r).globalSuperblocks(), Blocks({ { base, 3 * MiB }, { base + 3 * MiB, 1 * MiB } }));
    EXPECT_FALSE(r.policy->allocate(2 * MiB, 1).has_value()); // defragments again, still no room
    EXPECT_EQ(arena(r).defragmentations(), 2u);
    EXPECT_EQ(r.policy->stats().ooms, 1u);
    EXPECT_EQ(r.log.count(EventKind::Oom), 1u);
}

TEST(RmmArenaPolicy, ABlockFreedOnAnotherStreamGoesBackToItsOwnSuperblock)
{
    Rig r("rmm-arena:arena_size:4MiB");
    const Address base = arena(r).globalSuperblocks().at(0).first;
    Address a = r.alloc(1000, 1);
    r.free(a, 2);
    EXPECT_EQ(arena(r).streamSuperblocks(1), Blocks({ { base, 1 * MiB } }));
    EXPECT_TRUE(arena(r).streamSuperblocks(2).empty());
    EXPECT_EQ(r.alloc(1000, 1), base); // reusable by stream 1 at once
}

TEST(RmmArenaPolicy, ReleaseCachedGivesTheArenaBackOnlyWhenNothingIsAllocated)
{
    Rig r("rmm-arena:arena_size:4MiB");
    Address a = r.alloc(1000, 1);
    r.policy->releaseCached();
    EXPECT_EQ(r.policy->stats().reserved, 4 * MiB);
    r.free(a, 1);
    r.policy->releaseCached();
    EXPECT_EQ(r.policy->stats().reserved, 0u);
    EXPECT_TRUE(r.policy->describeState().segments.empty());
    r.alloc(1000, 1); // a new arena
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 4 * MiB, 4 * MiB }));
}

TEST(RmmArenaPolicy, RefusesAnArenaSmallerThanOneSuperblockOrLargerThanTheDevice)
{
    SimulatedDevice d;
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-arena:arena_size:512KiB"), d), UsageError);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-arena:superblock:2MiB"), d), UsageError);
    SimulatedDevice small(8 * MiB);
    EXPECT_THROW(makePolicy(parsePolicySpec("rmm-arena:arena_size:16MiB"), small), UsageError);
    EXPECT_EQ(makePolicy(parsePolicySpec("rmm-arena:arena_size:1GiB"), d)->name(), "rmm-arena:arena_size:1073741824");
}
