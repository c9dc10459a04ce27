// Allocator versions and backends (issue 19): PyTorch before/after PR #71745 (one global record_stream
// event queue vs one per stream), a trace's recorded PyTorch version, pytorch:backend:cudaMallocAsync with
// and without PyTorch's sync-trim-retry on OOM, RMM before 0.16 (PR #601), and the two RMM defects.
// Every expected figure is derived in the comments from the rule it tests.
#include "replay_test_support.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "replay/policies/rmm_pool_policy.h"
#include "replay/policy_grid.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {
const std::string kData = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/";
constexpr Bytes GiB = Bytes(1) << 30;

ReplayResult replayOf(const Trace& trace, const std::string& spec, Bytes capacity = 0)
{
    ReplayOptions options;
    options.capacity = capacity;
    return Replayer(options).run(trace, parsePolicySpec(spec));
}
} // namespace

// --- item 6: the two RMM defects --------------------------------------------------------------------

TEST(RmmPoolDefects, AMaximumBelowHalfOfEightyGiBIsAcceptedBeforeTheDeviceIsKnown)
{
    // RMM 23.02 pool_memory_resource.hpp, initialize_pool: the default initial size is
    // min(free, total/2) of *the device the pool is built on*; the spec check used to build it on a
    // scratch 80 GiB device (40 GiB initial) and refused every maximum_pool_size below 40 GiB.
    EXPECT_NO_THROW(validatePolicySpec(parsePolicySpec("rmm-pool@23.02:maximum_pool_size:10GiB")));
    // The rule itself still applies on the replay's device: on a 16 GiB device the initial pool is
    // min(free = unlimited, 16 GiB / 2) = 8 GiB <= 10 GiB: one cudaMalloc of 8 GiB, the 1 MiB request
    // carved from it, no OOM.
    Trace t = loadTrace(kData + "rmm/pool_2302_small_device.jsonl");
    auto r = replayOf(t, "rmm-pool@23.02:maximum_pool_size:10GiB");
    EXPECT_EQ(r.peakReserved.bytes, 8 * GiB);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 1u);
    EXPECT_EQ(r.ooms, 0u);
    // With maximum_pool_size 6 GiB the 8 GiB initial pool exceeds it: RMM's RMM_EXPECTS("Initial pool
    // size exceeds the maximum pool size!") — refused when the replay builds the pool.
    EXPECT_THROW(replayOf(t, "rmm-pool@23.02:maximum_pool_size:6GiB"), UsageError);
}

TEST(RmmPoolDefects, ReservedIsPoolSizeNotTheDevicesRoundedBytes)
{
    // pool_memory_resource.hpp: allocate aligns 700 B to 768 B (CUDA_ALLOCATION_ALIGNMENT 256);
    // size_to_grow(768) with no maximum = max(768, pool_size 0) = 768; try_to_expand asks the upstream
    // for 768 B and adds 768 to current_pool_size_; pool_size() = 768. The simulated device rounds the
    // cudaMalloc to its 512 B granularity (1024 B), which RMM never counts.
    Trace t = loadTrace(kData + "rmm/pool_size_unrounded.jsonl");
    auto r = replayOf(t, "rmm-pool");
    EXPECT_EQ(r.peakReserved.bytes, 768u); // was 1024 B: 256 B high
    EXPECT_EQ(r.deviceCounters.peakReserved, 1024u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 1u);
    // rmm-binning: 700 B goes to the 2^18 B bin, whose fixed_size resource takes 128 blocks (32 MiB)
    // from the pool: pool_size 32 MiB, a multiple of 512 B, so both counts agree.
    auto b = replayOf(t, "rmm-binning");
    EXPECT_EQ(b.peakReserved.bytes, b.deviceCounters.peakReserved);
}

// --- item 5: RMM before 0.16 ------------------------------------------------------------------------

TEST(RmmPoolVersions, Before016ThePoolGrowsByHalfWhatRemainsOfTheDevice)
{
    // rmm-pool@0.15 (branch-0.15 pool_memory_resource.hpp): maximum_pool_size defaults to the free
    // memory at construction, 1 GiB here; size_to_grow(1 MiB): remaining = 1 GiB, 1 MiB <= 512 MiB ->
    // grow by 512 MiB. Then 600 MiB: the free 511 MiB block does not fit; remaining = 1 GiB − 512 MiB =
    // 512 MiB < 600 MiB -> 0 -> "Maximum pool size exceeded": an OOM.
    Rig old("rmm-pool@0.15:initial_pool_size:0", 1 * GiB, 1 * GiB);
    old.alloc(1 * MiB);
    EXPECT_EQ(old.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 512 * MiB }));
    EXPECT_FALSE(old.policy->allocate(600 * MiB, 0).has_value());
    EXPECT_EQ(old.policy->name(), "rmm-pool@0.15:initial_pool_size:0");
    // Newest (PR #601, 0.16): no maximum, size_to_grow = max(size, pool_size): 1 MiB, then
    // max(600 MiB, 1 MiB) = 600 MiB; both fit in the 1 GiB device.
    Rig now("rmm-pool:initial_pool_size:0", 1 * GiB, 1 * GiB);
    now.alloc(1 * MiB);
    now.alloc(600 * MiB);
    EXPECT_EQ(now.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 1 * MiB, 600 * MiB }));
}

TEST(RmmPoolVersions, Before016AFailedGrowthIsNotRetriedSmaller)
{
    // Capacity 100 MiB with maximum_pool_size 1 GiB: size_to_grow(1 MiB) = remaining/2 = 512 MiB, more
    // than the device holds. 0.15's expand_pool makes one upstream call and fails; the newest
    // try_to_expand halves 512 -> 256 -> 128 -> 64 MiB, which fits.
    Rig old("rmm-pool@0.15:initial_pool_size:0,maximum_pool_size:1GiB", 100 * MiB);
    EXPECT_FALSE(old.policy->allocate(1 * MiB, 0).has_value());
    EXPECT_EQ(old.device.counters().mallocCalls, 0u);
    Rig now("rmm-pool:initial_pool_size:0,maximum_pool_size:1GiB", 100 * MiB);
    now.alloc(1 * MiB);
    EXPECT_EQ(now.log.sizes(EventKind::SegmentAlloc), std::vector<Bytes>({ 64 * MiB }));
}

// --- item 5: PyTorch's record_stream queue (PR #71745) ----------------------------------------------

TEST(PyTorchVersions, BeforePr71745ABlockWaitsForEveryBlockQueuedBeforeIt)
{
    // record_stream_queue.jsonl: A and B, 12 MiB each (>= 10 MiB: a segment of their size, rounded to
    // 2 MiB, allocators.md §1.4), two cudaMallocs, 24 MiB; a 1000 B request adds a 2 MiB small-pool
    // segment (26 MiB, 3 cudaMalloc). A is freed first, then B, both pending their record_stream events;
    // B's free completes at t=5900, a 12 MiB request comes at t=6000, A's free completes at t=7000.
    Trace t = loadTrace(kData + "versions/record_stream_queue.jsonl");
    // Per-stream queues (main, 2.0, … after PR #71745): B is free at t=6000 and is reused: 26 MiB, 3 cudaMalloc.
    for (const char* spec : { "pytorch", "pytorch@2.0", "pytorch@2.10" }) {
        auto r = replayOf(t, spec);
        EXPECT_EQ(r.peakReserved.bytes, 26 * MiB) << spec;
        EXPECT_EQ(r.deviceCounters.mallocCalls, 3u) << spec;
    }
    // One global queue (before PR #71745): B's event sits behind A's, which is not complete at t=6000, so
    // B is not reusable yet: a fourth segment of 12 MiB, 38 MiB, 4 cudaMalloc.
    auto old = replayOf(t, "pytorch@1.11");
    EXPECT_EQ(old.policy, "pytorch@1.11");
    EXPECT_EQ(old.peakReserved.bytes, 38 * MiB);
    EXPECT_EQ(old.deviceCounters.mallocCalls, 4u);
    EXPECT_EQ(old.ooms, 0u);
    // At t=7000 A completes and B, queued behind it, with it: both are free at the end.
    EXPECT_EQ(old.finalAllocated, 0u);
}

TEST(PyTorchVersions, TheTracesRecordedVersionChoosesTheRulesOfABarePyTorchSpec)
{
    // The same trace with metadata pytorch_version "1.10.2+cu113": before 1.12 -> the 1.11 rules, so a
    // bare `pytorch` replays with the global queue (38 MiB, as above) and names the recorded release.
    Trace t = loadTrace(kData + "versions/record_stream_queue_torch110.jsonl");
    auto r = replayOf(t, "pytorch");
    EXPECT_EQ(r.policy, "pytorch@1.10");
    EXPECT_EQ(r.peakReserved.bytes, 38 * MiB);
    // A version in the spec wins over the recorded one.
    EXPECT_EQ(replayOf(t, "pytorch@2.10").peakReserved.bytes, 26 * MiB);
}

TEST(PyTorchVersions, TheSweepsBraceExpandsIntoThreeValidVersions)
{
    const auto specs = expandBraceGrid("pytorch@{2.0,2.5,2.10}");
    ASSERT_EQ(specs, std::vector<std::string>({ "pytorch@2.0", "pytorch@2.5", "pytorch@2.10" }));
    for (const auto& s : specs)
        EXPECT_NO_THROW(validatePolicySpec(parsePolicySpec(s))) << s;
    EXPECT_THROW(validatePolicySpec(parsePolicySpec("pytorch@2.9")), UsageError);
}

// --- item 4: PyTorch's backends by their names ------------------------------------------------------

TEST(PyTorchAsyncBackend, TrimsThePoolAndRetriesOnceOnOom)
{
    // Device of 4 MiB. 2 MiB: a 2 MiB chunk (cuda-async: the request rounded up to 2 MiB, allocators.md
    // §4). Freed: the chunk stays in the pool (release threshold UINT64_MAX). 3 MiB: no free block fits,
    // a 4 MiB chunk; 2 + 4 > 4 MiB: the device refuses. PyTorch (PR #188110, CUDAMallocAsyncAllocator.cpp
    // mallocAsync): synchronize, cudaMemPoolTrimTo(pool, 0) — the free 2 MiB chunk goes back — and retry
    // once: the 4 MiB chunk fits. 2 cudaMalloc, 1 cudaFree, 4 MiB reserved, no OOM.
    Rig r("pytorch:backend:cudaMallocAsync", 4 * MiB);
    EXPECT_EQ(r.policy->name(), "pytorch:backend:cudaMallocAsync");
    r.free(r.alloc(2 * MiB));
    r.alloc(3 * MiB);
    EXPECT_EQ(r.device.counters().mallocCalls, 2u);
    EXPECT_EQ(r.device.counters().freeCalls, 1u);
    EXPECT_EQ(r.policy->stats().reserved, 4 * MiB);
    // Older PyTorch raises at once (the 2.0-era mallocAsync: cudaMallocAsync fails -> OutOfMemoryError):
    // the named releases, or async_oom_retry:False on main. The 2 MiB chunk stays; the request fails.
    for (const char* spec : { "pytorch@2.10:backend:cudaMallocAsync", "pytorch:backend:cudaMallocAsync,async_oom_retry:False" }) {
        Rig old(spec, 4 * MiB);
        old.free(old.alloc(2 * MiB));
        EXPECT_FALSE(old.policy->allocate(3 * MiB, 0).has_value()) << spec;
        EXPECT_EQ(old.device.counters().freeCalls, 0u) << spec;
        EXPECT_EQ(old.policy->stats().reserved, 2 * MiB) << spec;
    }
}

TEST(PyTorchAsyncBackend, MemoryFractionLimitsLiveBytesWithoutADeviceCall)
{
    // per_process_memory_fraction 0.5 on an 80 GiB device: pytorch_memory_limits = 40 GiB; mallocAsync
    // refuses when pytorch_used_bytes + size > limit, before cudaMallocAsync. 30 GiB fits; 20 GiB more
    // would make 50 GiB: refused, no device call.
    Rig r("pytorch:backend:cudaMallocAsync,per_process_memory_fraction:0.5", 0, 80 * GiB);
    r.alloc(30 * GiB);
    EXPECT_FALSE(r.policy->allocate(20 * GiB, 0).has_value());
    EXPECT_EQ(r.device.counters().mallocCalls, 1u);
    EXPECT_EQ(r.device.counters().failedCalls, 0u);
}

TEST(PyTorchAsyncBackend, EveryApproximatedPolicySaysSo)
{
    Trace t = loadTrace(kData + "tiny_alloc_free.jsonl");
    EXPECT_FALSE(replayOf(t, "pytorch:backend:cudaMallocAsync").approximation.empty());
    EXPECT_FALSE(replayOf(t, "cuda-async").approximation.empty());
    EXPECT_TRUE(replayOf(t, "pytorch").approximation.empty());
    EXPECT_TRUE(replayOf(t, "rmm-pool").approximation.empty());
    EXPECT_THROW(validatePolicySpec(parsePolicySpec("pytorch:backend:bogus")), UsageError);
}
