// The offline planner `optimal` (allocators.md §6.1–6.2): its plan through the Replayer, the checks a
// policy must pass (run from a plan: optimal cannot run online, so it is not in the typed conformance
// suite), and its gap to the lower bound `ideal` on every public trace with addresses.
#include "replay_test_support.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"
#include "replay/offset_planner.h"
#include "replay/policies/optimal_policy.h"
#include "replay/replayer.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

struct Sketch {
    TraceBuilder tb;
    DeviceId gpu = tb.device(DeviceType::Cuda, 0);
    TimeNs t = 100;
    void ev(EventKind k, Address a, Bytes n)
    {
        MemoryEvent e;
        e.time = t++;
        e.kind = k;
        e.device = gpu;
        e.stream = tb.stream(gpu, 0);
        e.address = a;
        e.size = n;
        e.requestedSize = n;
        tb.add(e);
    }
    void alloc(Address a, Bytes n) { ev(EventKind::Alloc, a, n); }
    void free(Address a, Bytes n) { ev(EventKind::Free, a, n); }
};

// A churn workload as a list of operations, so that its plan can be made before it runs.
struct Op {
    bool alloc;
    Bytes bytes; // alloc: the request
    StreamKey stream;
    std::size_t victim; // free: index into the live list at that point
};

std::vector<Op> churn(std::uint64_t seed, int steps)
{
    std::mt19937_64 rng(seed);
    std::vector<Op> ops;
    std::size_t live = 0;
    for (int i = 0; i < steps; ++i) {
        if (live > 0 && rng() % 5 < 2) {
            ops.push_back({ false, 0, 0, std::size_t(rng() % live) });
            --live;
        } else {
            Bytes n = rng() % 8 == 0 ? 1 + rng() % (64 * MiB) : 1 + rng() % (3 * MiB / 2);
            ops.push_back({ true, n, rng() % 3, 0 });
            ++live;
        }
    }
    return ops;
}

// The plan the Replayer would make for `ops` (positions count allocate and deallocate calls).
RequestPlan planOf(const std::vector<Op>& ops)
{
    RequestPlan plan;
    std::vector<std::size_t> live; // request index, in the order the workload lists them
    for (const Op& op : ops) {
        if (op.alloc) {
            live.push_back(plan.requests.size());
            plan.requests.push_back({ op.bytes, op.stream, plan.calls++ });
        } else {
            plan.requests[live[op.victim]].freeAt = plan.calls++;
            live.erase(live.begin() + std::ptrdiff_t(op.victim));
        }
    }
    return plan;
}

} // namespace

TEST(OptimalPolicy, ServesEachRequestAtItsPlannedOffsetAndReservesTheArena)
{
    // The trace of OffsetPlanner.PutsABlockInTheSmallestGapThatFits, in units of 512 B.
    Sketch s;
    const Bytes u = 512;
    s.alloc(0x1000, 10 * u); // big1 [0,2)
    s.alloc(0x2000, 4 * u); // med  [1,6)
    s.free(0x1000, 10 * u);
    s.alloc(0x3000, 8 * u); // big2
    s.alloc(0x4000, 2 * u); // small
    s.free(0x4000, 2 * u);
    s.free(0x3000, 8 * u);
    s.free(0x2000, 4 * u);
    Trace trace = s.tb.build();
    ReplayOptions o;
    o.recordAllocAddresses = true;
    o.recordTimeline = true;
    ReplayResult r = Replayer(o).run(trace, parsePolicySpec("optimal"));
    ASSERT_EQ(r.allocAddresses.size(), 4u);
    const Address base = OptimalPolicy::base();
    // big1 @0, big2 @0 (big1 is gone), med above them @10u, small in the 2u hole [8u,10u) above big2.
    EXPECT_EQ(r.allocAddresses[0].second, base);
    EXPECT_EQ(r.allocAddresses[1].second, base + 10 * u);
    EXPECT_EQ(r.allocAddresses[2].second, base);
    EXPECT_EQ(r.allocAddresses[3].second, base + 8 * u);
    EXPECT_EQ(r.peakReserved.bytes, 14 * u);
    EXPECT_EQ(r.peakAllocated.bytes, 14 * u);
    EXPECT_EQ(r.deviceCalls(), 0u);
    EXPECT_EQ(r.finalAllocated, 0u);
    EXPECT_EQ(r.finalReserved, 14 * u); // the arena only grows
    EXPECT_EQ(r.timeline.front().reserved, 10 * u);
    auto ideal = Replayer(o).run(trace, parsePolicySpec("ideal"));
    EXPECT_EQ(ideal.peakReserved.bytes, 14 * u); // optimal reaches the bound here
}

TEST(OptimalPolicy, FailsRequestsWhosePlannedBlockEndsBeyondTheCapacity)
{
    Sketch s;
    s.alloc(0x1000, 40 * MiB);
    s.alloc(0x2000, 40 * MiB); // planned at 40 MiB, ends at 80 MiB > 64 MiB
    s.alloc(0x3000, 4 * MiB); // planned at 80 MiB: also beyond
    s.free(0x2000, 40 * MiB);
    s.free(0x1000, 40 * MiB);
    s.alloc(0x4000, 8 * MiB); // planned at 0
    Trace trace = s.tb.build();
    ReplayOptions o;
    o.capacity = 64 * MiB;
    ReplayResult skip = Replayer(o).run(trace, parsePolicySpec("optimal"));
    EXPECT_EQ(skip.ooms, 2u);
    EXPECT_EQ(skip.allocations, 2u);
    EXPECT_EQ(skip.peakReserved.bytes, 40 * MiB);
    ASSERT_EQ(skip.failures.size(), 2u);
    EXPECT_EQ(skip.failures[0].size, 40 * MiB);
    o.onOom = OnOom::Stop;
    ReplayResult stop = Replayer(o).run(trace, parsePolicySpec("optimal"));
    EXPECT_TRUE(stop.stopped);
    EXPECT_EQ(stop.allocations, 1u);
}

TEST(OptimalPolicy, PlansWarmupPassesAndTheOpeningBlock)
{
    Sketch s;
    s.alloc(0x1000, 6 * MiB);
    s.alloc(0x2000, 2 * MiB);
    s.free(0x1000, 6 * MiB);
    s.alloc(0x3000, 4 * MiB); // 0x2000 stays live: freed between passes
    Trace trace = s.tb.build();
    ReplayOptions o;
    o.warmupPasses = 2;
    o.openingAllocated = 3 * MiB;
    ReplayResult r = Replayer(o).run(trace, parsePolicySpec("optimal"));
    ReplayResult ideal = Replayer(o).run(trace, parsePolicySpec("ideal"));
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_EQ(r.allocations, 3u);
    // Opening 3 MiB is placed first at 0; each pass needs 3 + 6 + 2 MiB at most, and a pass's blocks
    // are freed before the next, so the arena is one pass's: 11 MiB, the bound.
    EXPECT_EQ(ideal.peakReserved.bytes, 11 * MiB);
    EXPECT_EQ(r.peakReserved.bytes, 11 * MiB);
    EXPECT_EQ(r.finalAllocated, 3 * MiB + 2 * MiB + 4 * MiB);
}

TEST(OptimalPolicy, RefusesToRunWithoutAPlan)
{
    Rig r("optimal");
    EXPECT_TRUE(r.policy->needsPlan());
    EXPECT_THROW(r.policy->allocate(1000, 0), Error);
    r.policy->plan(RequestPlan { { { 1000, 0, 0, 1 } }, 2 });
    EXPECT_THROW(r.policy->allocate(5000, 0), Error); // differs from the plan
}

// The conformance checks of tests/replay/policy_conformance_test.cpp, from a plan: live blocks never
// overlap and stay aligned, reserved ≥ allocated ≥ requested = live bytes, freed space is reused
// (reserved never exceeds the planned arena), everything goes back at the end.
TEST(OptimalPolicy, PassesThePolicyChecksWhenRunFromItsPlan)
{
    for (std::uint64_t seed : { 1u, 2u, 3u }) {
        auto ops = churn(seed, 3000);
        Rig r("optimal");
        r.policy->plan(planOf(ops));
        const Bytes arena = dynamic_cast<OptimalPolicy&>(*r.policy).plannedArena();
        std::vector<std::pair<Address, Op>> liveList;
        std::map<Address, Bytes> live;
        Bytes liveBytes = 0;
        for (const Op& op : ops) {
            if (op.alloc) {
                auto a = r.policy->allocate(op.bytes, op.stream);
                ASSERT_TRUE(a);
                ASSERT_EQ(*a % 512, 0u);
                auto next = live.lower_bound(*a);
                ASSERT_TRUE(next == live.end() || next->first >= *a + op.bytes) << "overlap, seed " << seed;
                ASSERT_TRUE(next == live.begin() || std::prev(next)->first + std::prev(next)->second <= *a);
                live[*a] = op.bytes;
                liveList.push_back({ *a, op });
                liveBytes += op.bytes;
            } else {
                auto [a, alloc] = liveList[op.victim];
                r.policy->deallocate(a, alloc.bytes, alloc.stream);
                live.erase(a);
                liveList.erase(liveList.begin() + std::ptrdiff_t(op.victim));
                liveBytes -= alloc.bytes;
            }
            const auto& st = r.policy->stats();
            ASSERT_EQ(st.requested, liveBytes);
            ASSERT_GE(st.allocated, st.requested);
            ASSERT_GE(st.reserved, st.allocated);
            ASSERT_LE(st.reserved, arena);
        }
        EXPECT_EQ(r.policy->stats().reserved, arena);
        for (const auto& [a, op] : liveList)
            r.policy->deallocate(a, op.bytes, op.stream);
        r.policy->releaseCached();
        EXPECT_EQ(r.policy->stats().allocated, 0u);
        EXPECT_EQ(r.policy->stats().reserved, 0u);
        EXPECT_TRUE(r.policy->describeState().segments.empty());
        EXPECT_EQ(r.device.counters().deviceCalls(), 0u);
    }
}

// optimal ≥ ideal on every public trace with addresses (SOURCES.md), and the gap printed; the issue
// wants optimal within 5 % of ideal or the gaps reported (docs/policies.md has the table).
TEST(OptimalPolicy, IsAtLeastTheLowerBoundOnThePublicTraces)
{
    const char* files[] = {
        "cs336-bcrafton/memory_snapshot.pickle",
        "cs336-magma27/memory_snapshot.pickle",
        "cs336-silmont2000/mem_snapshot.pickle",
        "cs336-silmont2000/memory_forward_bf16_128.pickle",
        "hta/df_index_resolver.json.gz",
        "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
        "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/mi300-normalization/normalization_layer_test.json.gz",
        "tracelens/mi300-vllm-graph-capture/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
        "tracelens/jax-xplane/jax_conv_minimal_legacy.xplane.pb",
    };
    int seen = 0;
    for (const char* f : files) {
        std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + f;
        if (!std::filesystem::exists(path))
            continue;
        ++seen;
        Trace trace = loadTrace(path);
        ReplayResult ideal = Replayer().run(trace, parsePolicySpec("ideal"));
        ReplayResult optimal = Replayer().run(trace, parsePolicySpec("optimal"));
        ReplayResult pytorch = Replayer().run(trace, parsePolicySpec("pytorch"));
        EXPECT_GE(optimal.peakReserved.bytes, ideal.peakReserved.bytes) << f;
        EXPECT_EQ(optimal.allocations, ideal.allocations) << f;
        EXPECT_EQ(optimal.ooms, 0u) << f;
        const double gap = ideal.peakReserved.bytes
            ? double(optimal.peakReserved.bytes) / double(ideal.peakReserved.bytes) - 1.0
            : 0.0;
        EXPECT_LT(gap, 0.05) << f; // the target; measured ≤ 4.5 % (docs/policies.md)
        std::printf("optimal/ideal  %-90s ideal %14llu  optimal %14llu  gap %+7.3f %%  pytorch %14llu  allocs %llu\n",
            f, (unsigned long long)ideal.peakReserved.bytes, (unsigned long long)optimal.peakReserved.bytes,
            gap * 100.0, (unsigned long long)pytorch.peakReserved.bytes, (unsigned long long)optimal.allocations);
    }
    if (seen == 0)
        GTEST_SKIP() << "public traces absent at " << GPUMEM_PUBLIC_TRACES;
}

TEST(OptimalPolicy, RequestsAboveTheDeviceAreOneOomInTheEngineAndNothingWraps) { checkHugeRequests("optimal"); }
