// The typed conformance suite every policy passes (design.md §5, RMM's mr_tests shape). Adding a
// policy = one line in PolicyTypes below.
#include "replay_test_support.h"

#include <map>
#include <random>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

struct PyTorchDefault {
    static constexpr const char* spec = "pytorch";
};
struct PyTorchExpandable {
    static constexpr const char* spec = "pytorch:expandable_segments:True";
};
struct PyTorchTuned {
    static constexpr const char* spec = "pytorch:max_split_size_mb:64,roundup_power2_divisions:[64:8,>:2],garbage_"
                                        "collection_threshold:0.6,per_process_memory_fraction:0.9";
};
struct PyTorch20 {
    static constexpr const char* spec = "pytorch@2.0:max_split_size_mb:64,roundup_power2_divisions:2";
};
struct Direct {
    static constexpr const char* spec = "direct";
};
struct Ideal {
    static constexpr const char* spec = "ideal";
};
struct FirstFit {
    static constexpr const char* spec = "first-fit";
};
struct NextFit {
    static constexpr const char* spec = "next-fit";
};
struct BestFit {
    static constexpr const char* spec = "best-fit";
};
struct WorstFit {
    static constexpr const char* spec = "worst-fit";
};
struct BestFitSegments {
    static constexpr const char* spec = "best-fit:segments:true";
};
struct Buddy {
    static constexpr const char* spec = "buddy";
};
struct SizeClass {
    static constexpr const char* spec = "size-class";
};
struct Gmlake {
    static constexpr const char* spec = "gmlake:frag_limit_mb:4";
};

template <typename T> class PolicyConformance : public ::testing::Test {
protected:
    // A random workload over three streams: a mix of small and large requests, frees in random order.
    // Checks the invariants after every step through `check`.
    template <typename Check> void churn(Rig& r, int steps, std::uint64_t seed, Check&& check)
    {
        std::mt19937_64 rng(seed);
        for (int i = 0; i < steps; ++i) {
            if (!live.empty() && rng() % 5 < 2) {
                auto it = std::next(live.begin(), std::ptrdiff_t(rng() % live.size()));
                r.policy->deallocate(it->first, it->second.first, it->second.second);
                live.erase(it);
            } else {
                Bytes n = rng() % 8 == 0 ? 1 + rng() % (64 * MiB) : 1 + rng() % (3 * MiB / 2);
                StreamKey s = rng() % 3;
                auto a = r.policy->allocate(n, s);
                if (a)
                    live[*a] = { n, s };
            }
            check();
        }
    }
    std::map<Address, std::pair<Bytes, StreamKey>> live; // address → (request, stream)
};

using PolicyTypes = ::testing::Types<PyTorchDefault, PyTorchExpandable, PyTorchTuned, PyTorch20, Direct, Ideal,
    FirstFit, NextFit, BestFit, WorstFit, BestFitSegments, Buddy, SizeClass, Gmlake>;
TYPED_TEST_SUITE(PolicyConformance, PolicyTypes);

} // namespace

TYPED_TEST(PolicyConformance, LiveBlocksNeverOverlapAndStayAligned)
{
    Rig r(TypeParam::spec);
    std::uint64_t steps = 0;
    this->churn(r, 3000, 1, [&] {
        Address end = 0;
        for (const auto& [a, info] : this->live) {
            ASSERT_GE(a, end) << "overlap at " << a << " after step " << steps;
            ASSERT_EQ(a % 512, 0u) << "misaligned " << a;
            end = a + info.first;
        }
        ++steps;
    });
    EXPECT_GT(this->live.size(), 100u);
}

TYPED_TEST(PolicyConformance, ReservedCoversLiveBytesAtEveryStep)
{
    Rig r(TypeParam::spec);
    this->churn(r, 3000, 2, [&] {
        Bytes liveBytes = 0;
        for (const auto& [a, info] : this->live)
            liveBytes += info.first;
        const auto& st = r.policy->stats();
        ASSERT_EQ(st.requested, liveBytes);
        ASSERT_GE(st.allocated, st.requested);
        ASSERT_GE(st.reserved, st.allocated);
    });
}

TYPED_TEST(PolicyConformance, FreedMemoryIsReused)
{
    Rig r(TypeParam::spec);
    for (Bytes n : { Bytes(700), 3 * MiB, 48 * MiB }) {
        auto first = r.policy->allocate(n, 0);
        ASSERT_TRUE(first);
        const Bytes reserved = r.policy->stats().reserved;
        r.policy->deallocate(*first, n, 0);
        for (int i = 0; i < 200; ++i) {
            auto a = r.policy->allocate(n, 0);
            ASSERT_TRUE(a);
            EXPECT_EQ(r.policy->stats().reserved, reserved);
            r.policy->deallocate(*a, n, 0);
        }
    }
}

TYPED_TEST(PolicyConformance, OutOfMemoryReturnsEmptyAndTheStateStaysUsable)
{
    Rig r(TypeParam::spec, 64 * MiB, 64 * MiB);
    auto keep = r.policy->allocate(10 * MiB, 0);
    ASSERT_TRUE(keep);
    auto before = r.policy->stats();
    EXPECT_FALSE(r.policy->allocate(Bytes(1) << 30, 0).has_value());
    EXPECT_EQ(r.policy->stats().ooms, before.ooms + 1);
    EXPECT_EQ(r.policy->stats().allocated, before.allocated);
    auto small = r.policy->allocate(1000, 0);
    EXPECT_TRUE(small.has_value());
    r.policy->deallocate(*keep, 10 * MiB, 0);
    if (small)
        r.policy->deallocate(*small, 1000, 0);
    EXPECT_EQ(r.policy->stats().allocated, 0u);
}

TYPED_TEST(PolicyConformance, EverythingGoesBackToTheDeviceAtTheEnd)
{
    Rig r(TypeParam::spec);
    this->churn(r, 2000, 3, [] {});
    for (const auto& [a, info] : this->live)
        r.policy->deallocate(a, info.first, info.second);
    this->live.clear();
    r.policy->releaseCached();
    EXPECT_EQ(r.policy->stats().allocated, 0u);
    EXPECT_EQ(r.policy->stats().requested, 0u);
    EXPECT_EQ(r.policy->stats().reserved, 0u);
    const auto& c = r.device.counters();
    EXPECT_EQ(c.reserved, 0u);
    EXPECT_EQ(c.mallocCalls, c.freeCalls);
    EXPECT_EQ(r.device.liveRanges(), 0u);
    EXPECT_TRUE(r.policy->describeState().segments.empty());
}
