// size-class (allocators.md §6): jemalloc-like rounding, equal regions in slabs, empty slabs given
// back at once, best fit above max_small, and pools reserved up front.
#include "replay/policies/size_class_policy.h"
#include "core/error.h"
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

TEST(SizeClassPolicy, ClassesAreFourPerDoubling)
{
    const std::pair<Bytes, Bytes> cases[] = {
        { 1, 512 }, { 512, 512 }, { 513, 1024 }, { 1500, 1536 }, { 2048, 2048 }, // multiples of 512 up to 2 KiB
        { 2049, 2560 }, { 3000, 3072 }, { 4096, 4096 }, // 2^11 + j * 2^9
        { 4097, 5120 }, { 7000, 7168 }, { 100000, 114688 }, // 2^16 + 3 * 2^14
        { 700 * 1024, 768 * 1024 }, { MiB, MiB }, { MiB + 1, MiB + MiB / 4 }, { 3 * MiB + 1, 3 * MiB + MiB / 2 },
    };
    for (auto [n, c] : cases)
        EXPECT_EQ(SizeClassPolicy::classSize(n), c) << n;
    EXPECT_EQ(SizeClassPolicy::slabSize(512), 2 * MiB);
    EXPECT_EQ(SizeClassPolicy::slabSize(256 * 1024), 2 * MiB);
    EXPECT_EQ(SizeClassPolicy::slabSize(320 * 1024), 4 * MiB);
    EXPECT_EQ(SizeClassPolicy::slabSize(MiB), 8 * MiB);
}

TEST(SizeClassPolicy, RequestsOfOneClassShareASlabAndAnEmptySlabGoesBack)
{
    Rig r("size-class");
    Address a = r.alloc(700); // class 1024
    Address b = r.alloc(1000); // same class, next region
    Address c = r.alloc(1100); // class 1536: a slab of its own
    EXPECT_EQ(b, a + 1024);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 2 * MiB, 2 * MiB }));
    EXPECT_EQ(r.policy->stats().allocated, 1024u + 1024u + 1536u);
    auto seg = r.segmentOf(a);
    EXPECT_TRUE(seg.smallPool);
    EXPECT_EQ(seg.blocks.size(), 2048u); // 2 MiB / 1 KiB regions
    EXPECT_EQ(r.block(b).requested, 1000u);
    r.free(a);
    Address d = r.alloc(900); // the lowest free region of the class
    EXPECT_EQ(d, a);
    r.free(d);
    EXPECT_TRUE(r.log.sizes(EventKind::SegmentFree).empty());
    r.free(b); // the slab is empty: back to the device at once
    EXPECT_EQ(r.log.sizes(EventKind::SegmentFree), std::vector<Bytes>({ 2 * MiB }));
    EXPECT_EQ(r.device.counters().reserved, 2 * MiB);
    r.free(c);
    EXPECT_EQ(r.device.counters().reserved, 0u);
    EXPECT_EQ(r.policy->stats().allocated, 0u);
}

TEST(SizeClassPolicy, AFullSlabStartsANewOne)
{
    Rig r("size-class");
    std::vector<Address> a;
    for (int i = 0; i < 8; ++i)
        a.push_back(r.alloc(MiB)); // class 1 MiB: 8 regions in an 8 MiB slab
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 8 * MiB }));
    Address ninth = r.alloc(MiB);
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 8 * MiB, 8 * MiB }));
    r.free(a[3]);
    EXPECT_EQ(r.alloc(MiB - 100), a[3]); // the lowest-addressed slab with a free region first
    EXPECT_NE(r.segmentOf(ninth).address, r.segmentOf(a[0]).address);
    FragmentationSample f = r.policy->fragmentation();
    EXPECT_EQ(f.freeBytes, 7 * MiB); // the second slab's empty regions
    EXPECT_EQ(f.largestFree, MiB); // regions never coalesce
}

TEST(SizeClassPolicy, AboveMaxSmallRequestsTakeABestFitOnTheHeap)
{
    Rig r("size-class");
    Address a = r.alloc(3 * MiB + 1); // 3 MiB + 512 B block in a heap that grew by 3 MiB + 512 B
    EXPECT_EQ(r.block(a).size, 3 * MiB + 512);
    EXPECT_FALSE(r.segmentOf(a).smallPool);
    EXPECT_EQ(r.device.counters().reserved, 3 * MiB + 512);
    EXPECT_EQ(r.log.count(EventKind::SegmentMap), 1u);
    r.free(a);
    Address b = r.alloc(2 * MiB);
    EXPECT_EQ(b, a);
    Rig bigger("size-class:max_small:4MiB"); // now 3 MiB + 1 is class 3.5 MiB in a 28 MiB slab
    Address c = bigger.alloc(3 * MiB + 1);
    EXPECT_EQ(bigger.block(c).size, 3 * MiB + MiB / 2);
    EXPECT_EQ(bigger.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 28 * MiB }));
}

TEST(SizeClassPolicy, ReservedPoolsAreTakenUpFrontUsedFirstAndKept)
{
    Rig r("size-class:reserve:[4MiB:2,700KiB:3]");
    // 2 x 4 MiB and 3 x 768 KiB (700 KiB's class), one cudaMalloc each, before any request.
    EXPECT_EQ(r.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 8 * MiB, 3 * 768 * 1024 }));
    EXPECT_EQ(r.policy->stats().reserved, 8 * MiB + 3 * 768 * 1024);
    Address a = r.alloc(3 * MiB + MiB / 2 + 1); // class 4 MiB
    Address b = r.alloc(4 * MiB);
    EXPECT_EQ(b, a + 4 * MiB);
    Address c = r.alloc(4 * MiB); // the pool is used up: the heap takes it
    EXPECT_FALSE(r.segmentOf(c).address == r.segmentOf(a).address);
    EXPECT_EQ(r.log.count(EventKind::SegmentMap), 1u);
    Address d = r.alloc(3 * MiB + MiB / 2); // class 3.5 MiB: not the pool's
    EXPECT_NE(r.segmentOf(d).address, r.segmentOf(a).address);
    Address e = r.alloc(700 * 1024); // a small class with a pool: the pool first
    EXPECT_EQ(r.segmentOf(e).size, 3 * 768 * 1024);
    for (Address x : { a, b, c, d, e })
        r.free(x);
    r.policy->releaseCached();
    EXPECT_EQ(r.device.counters().reserved, 8 * MiB + 3 * 768 * 1024); // the pools stay
    EXPECT_EQ(r.policy->stats().allocated, 0u);
    EXPECT_EQ(r.policy->name(), "size-class:reserve:[4194304:2,786432:3]");
}

TEST(SizeClassPolicy, BadOptionsAreRefusedWithTheirForm)
{
    for (const char* bad : { "size-class:reserve:4MiB", "size-class:reserve:[4MiB]", "size-class:reserve:[4MiB:0]",
             "size-class:max_small:1000000", "size-class:slab:2MiB" })
        EXPECT_THROW(validatePolicySpec(parsePolicySpec(bad)), UsageError) << bad;
    SimulatedDevice small(16 * MiB);
    EXPECT_THROW(makePolicy(parsePolicySpec("size-class:reserve:[64MiB:1]"), small), UsageError);
}
