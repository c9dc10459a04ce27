// The state the address map draws (describeState) and the fragmentation sample agree with the policy's
// own counters for the classic policies, after every step of a random multi-stream workload: blocks
// tile their segments, segments add up to reserved, allocated blocks to allocated, free blocks to the
// sample's free bytes.
#include "replay/policies/gmlake_policy.h"
#include "replay_test_support.h"

#include <map>
#include <random>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
class ClassicPolicyState : public ::testing::TestWithParam<const char*> { };
}

TEST_P(ClassicPolicyState, DescribedStateMatchesTheCountersAtEveryStep)
{
    Rig r(GetParam());
    std::mt19937_64 rng(11);
    std::map<Address, StreamKey> live;
    for (int step = 0; step < 1500; ++step) {
        if (!live.empty() && rng() % 5 < 2) {
            auto it = std::next(live.begin(), std::ptrdiff_t(rng() % live.size()));
            r.free(it->first, it->second);
            live.erase(it);
        } else {
            Bytes n = rng() % 6 == 0 ? 1 + rng() % (48 * MiB) : 1 + rng() % (2 * MiB);
            StreamKey s = rng() % 2;
            live[r.alloc(n, s)] = s;
        }
        if (step % 100 == 99)
            r.policy->releaseCached();
        PolicyState state = r.policy->describeState();
        Bytes segments = 0, allocated = 0, freeBytes = 0;
        Address previousEnd = 0;
        for (const auto& seg : state.segments) {
            ASSERT_GE(seg.address, previousEnd) << "segments overlap or are out of order at step " << step;
            previousEnd = seg.address + seg.size;
            Address at = seg.address;
            for (const auto& b : seg.blocks) {
                ASSERT_EQ(b.address, at) << "blocks do not tile segment " << seg.address << " at step " << step;
                at += b.size;
                (b.state == BlockState::Allocated ? allocated : freeBytes) += b.size;
            }
            ASSERT_EQ(at, seg.address + seg.size);
            segments += seg.size;
        }
        ASSERT_EQ(segments, r.policy->stats().reserved) << "step " << step;
        ASSERT_EQ(segments, r.device.counters().reserved) << "step " << step;
        ASSERT_EQ(allocated, r.policy->stats().allocated) << "step " << step;
        FragmentationSample f = r.policy->fragmentation();
        ASSERT_EQ(f.freeBytes, freeBytes) << "step " << step;
        ASSERT_EQ(f.reserved, segments);
        ASSERT_LE(f.largestFree, f.freeBytes);
    }
    if (auto* gmlake = dynamic_cast<GmlakePolicy*>(r.policy.get())) { // the states included stitched blocks
        EXPECT_GT(gmlake->counters().stitches, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Classic, ClassicPolicyState,
    ::testing::Values("first-fit", "next-fit", "best-fit", "worst-fit", "best-fit:segments:true", "buddy",
        "size-class", "gmlake:frag_limit_mb:4"),
    paramName);
