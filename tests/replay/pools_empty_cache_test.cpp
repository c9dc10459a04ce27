// empty_cache as an operation of the trace and PyTorch's private pools (issue 19, Deliver 1-2), on
// hand-written micro traces in tests/data/. Every expected figure is derived in the comments from
// PyTorch's rules (c10/cuda/CUDACachingAllocator.cpp; allocators.md §1.4 segment sizes, §1.5 best fit,
// §1.8 the malloc order, §1.10 release_cached_blocks): an 8 MiB request (1 MiB < 8 MiB < 10 MiB) takes a
// 20 MiB segment and splits 8 + 12 MiB; a 30 MiB request (>= 10 MiB) takes a 30 MiB segment; a free
// whole segment is one cached free block of its pool.
#include "importers/snapshot_importer.h"
#include "core/jsonl_format.h"
#include "replay/fidelity.h"
#include "replay/replayer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using namespace gpumem;
using namespace gpumem::replay;

namespace {

constexpr Bytes MiB = Bytes(1) << 20;

Trace data(const std::string& name) { return readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/" + name); }

ReplayResult run(const Trace& trace, const std::string& spec, ReplayOptions options = {})
{
    options.keepFinalState = true;
    return Replayer(options).run(trace, parsePolicySpec(spec));
}

const std::string kGraphPoolSnapshot = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/snapshot/graph_pool.json";

} // namespace

// empty_cache_steps.jsonl: step 1 allocates and frees 8 MiB (a 20 MiB segment, cudaMalloc 1), the program
// calls empty_cache() after it, step 2 allocates and frees 30 MiB, step 3 8 MiB.
TEST(EmptyCache, RecordedCallsAreReplayedByDefault)
{
    const Trace t = data("empty_cache_steps.jsonl");
    // Kept: the empty_cache releases the free 20 MiB segment (cudaFree 1, reserved 0); 30 MiB needs a
    // 30 MiB segment (cudaMalloc 2, reserved 30 MiB); the 8 MiB of step 3 is the best fit in the free
    // 30 MiB block and splits it (rest 22 MiB > 1 MiB): no cudaMalloc. Peak 30 MiB, final 30 MiB.
    const auto r = run(t, "pytorch");
    EXPECT_EQ(r.emptyCacheCalls, 1u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 2u);
    EXPECT_EQ(r.deviceCounters.freeCalls, 1u);
    EXPECT_EQ(r.peakReserved.bytes, 30 * MiB);
    EXPECT_EQ(r.finalReserved, 30 * MiB);
    EXPECT_EQ(r.ooms, 0u);
}

TEST(EmptyCache, DropLeavesTheRecordedCallsOut)
{
    ReplayOptions o;
    o.emptyCache = EmptyCacheMode::Drop;
    // Dropped: the 20 MiB segment stays cached; 30 MiB does not fit in it (best fit needs >= 30 MiB):
    // cudaMalloc 2 of 30 MiB, reserved 50 MiB; the 8 MiB of step 3 takes the smaller fitting free block,
    // the 20 MiB one. cudaFree 0, peak and final 50 MiB.
    const auto r = run(data("empty_cache_steps.jsonl"), "pytorch", o);
    EXPECT_EQ(r.emptyCacheCalls, 0u);
    EXPECT_EQ(r.emptyCacheDropped, 1u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 2u);
    EXPECT_EQ(r.deviceCounters.freeCalls, 0u);
    EXPECT_EQ(r.peakReserved.bytes, 50 * MiB);
    EXPECT_EQ(r.finalReserved, 50 * MiB);
}

TEST(EmptyCache, StepEndAddsACallBeforeTheFirstRequestAfterEachStep)
{
    ReplayOptions o;
    o.emptyCache = EmptyCacheMode::Drop;
    o.addEmptyCache = parseEmptyCacheSchedule("step-end");
    // Step 1 ends at 5 us: before the 30 MiB alloc the 20 MiB segment goes (cudaFree 1), the 30 MiB
    // takes a new segment (cudaMalloc 2, reserved 30 MiB). Step 2 ends at 11 us: before the 8 MiB alloc
    // the 30 MiB segment goes (cudaFree 2), the 8 MiB takes a new 20 MiB one (cudaMalloc 3). Step 3
    // ends after the last request: no call. 2 added; peak 30 MiB (was 50 MiB dropped), final 20 MiB.
    const auto r = run(data("empty_cache_steps.jsonl"), "pytorch", o);
    EXPECT_EQ(r.emptyCacheAdded, 2u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 3u);
    EXPECT_EQ(r.deviceCounters.freeCalls, 2u);
    EXPECT_EQ(r.peakReserved.bytes, 30 * MiB);
    EXPECT_EQ(r.finalReserved, 20 * MiB);

    // every 2: before request events 2 and 4 (the 30 MiB and the last 8 MiB alloc): the same points.
    o.addEmptyCache = parseEmptyCacheSchedule("every 2");
    const auto e = run(data("empty_cache_steps.jsonl"), "pytorch", o);
    EXPECT_EQ(e.emptyCacheAdded, 2u);
    EXPECT_EQ(e.deviceCounters.mallocCalls, 3u);
    EXPECT_EQ(e.peakReserved.bytes, 30 * MiB);

    // annotation GLOB: only after ProfilerStep#2, i.e. before the last 8 MiB alloc; the 20 MiB segment
    // stays through step 2 as when dropped (peak 50 MiB), then both free segments go (cudaFree 2).
    o.addEmptyCache = parseEmptyCacheSchedule("annotation ProfilerStep#2");
    const auto g = run(data("empty_cache_steps.jsonl"), "pytorch", o);
    EXPECT_EQ(g.emptyCacheAdded, 1u);
    EXPECT_EQ(g.deviceCounters.freeCalls, 2u);
    EXPECT_EQ(g.peakReserved.bytes, 50 * MiB);
    EXPECT_EQ(g.finalReserved, 20 * MiB);
}

TEST(EmptyCache, ScheduleTextIsParsedOrRefusedNamingTheForms)
{
    EXPECT_TRUE(parseEmptyCacheSchedule("step-end").stepEnd);
    EXPECT_EQ(parseEmptyCacheSchedule("annotation:Profiler*").annotationGlob, "Profiler*");
    EXPECT_EQ(parseEmptyCacheSchedule("every 100").everyRequests, 100u);
    EXPECT_EQ(parseEmptyCacheSchedule("every 7").text(), "every 7");
    for (const char* bad : { "", "steps", "every 0", "every x", "annotation", "every -1" })
        EXPECT_THROW(parseEmptyCacheSchedule(bad), UsageError) << bad;
}

// mempool_release.jsonl: 8 MiB in MemPool (0,1), freed; 8 MiB in the default pool, freed; ~MemPool
// (empty_cache of pool 1); 8 MiB in the default pool.
TEST(Pools, AMemPoolKeepsItsCachedSegmentApartUntilItsLastUserReleasesIt)
{
    const Trace t = data("mempool_release.jsonl");
    ASSERT_EQ(t.pools().size(), 2u);
    EXPECT_EQ(t.pools()[1].kind, PoolKind::MemPool);
    // Apart: the MemPool's free 20 MiB block is not the default pool's, so the default 8 MiB takes a
    // second 20 MiB segment (cudaMalloc 2, reserved 40 MiB). The release frees the MemPool's segment only
    // (cudaFree 1, release_cached_blocks(mempool_id) leaves the default pool alone): reserved 20 MiB; the
    // last 8 MiB reuses the default pool's cached segment.
    const auto r = run(t, "pytorch");
    EXPECT_EQ(r.deviceCounters.mallocCalls, 2u);
    EXPECT_EQ(r.deviceCounters.freeCalls, 1u);
    EXPECT_EQ(r.peakReserved.bytes, 40 * MiB);
    EXPECT_EQ(r.finalReserved, 20 * MiB);
    EXPECT_EQ(r.emptyCacheCalls, 1u);
    ASSERT_EQ(r.pools.size(), 2u);
    EXPECT_EQ(r.pools[0].pool, 0u);
    EXPECT_EQ(r.pools[0].peakReserved, 20 * MiB);
    EXPECT_EQ(r.pools[0].reserved, 20 * MiB);
    EXPECT_EQ(r.pools[1].pool, 1u);
    EXPECT_EQ(r.pools[1].peakReserved, 20 * MiB);
    EXPECT_EQ(r.pools[1].reserved, 0u);
    EXPECT_TRUE(r.pools[1].released);

    // Dropped release: the MemPool's segment stays (cudaFree 0), final reserved 40 MiB.
    ReplayOptions drop;
    drop.emptyCache = EmptyCacheMode::Drop;
    const auto d = run(t, "pytorch", drop);
    EXPECT_EQ(d.deviceCounters.freeCalls, 0u);
    EXPECT_EQ(d.finalReserved, 40 * MiB);

    // Merged: the default 8 MiB reuses the cached 20 MiB block (cudaMalloc 1, peak 20 MiB); the release
    // of a pool that no longer exists is dropped (cudaFree 0).
    ReplayOptions merge;
    merge.mergePools = true;
    const auto m = run(t, "pytorch", merge);
    EXPECT_EQ(m.deviceCounters.mallocCalls, 1u);
    EXPECT_EQ(m.deviceCounters.freeCalls, 0u);
    EXPECT_EQ(m.peakReserved.bytes, 20 * MiB);
    EXPECT_EQ(m.emptyCacheDropped, 1u);
    EXPECT_TRUE(m.poolsMerged);
    EXPECT_TRUE(m.pools.empty());
}

// mempool_use_on_oom.jsonl: 8 MiB in MemPool (0,1, use_on_oom), freed; then 8 MiB in the default pool,
// on a 30 MiB device.
TEST(Pools, AUseOnOomMemPoolLendsItsCachedBlockWhereTheVersionHasTheFallback)
{
    const Trace t = data("mempool_use_on_oom.jsonl");
    ASSERT_TRUE(t.pools()[1].useOnOom);
    ReplayOptions o;
    o.capacity = 30 * MiB;
    // pytorch (newest): the default pool has no free block; cudaMalloc of 20 MiB fails (20 + 20 > 30);
    // try_mempool_fallback finds the MemPool's free 20 MiB block: no OOM, one cudaMalloc in all.
    const auto r = run(t, "pytorch", o);
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 1u);
    EXPECT_EQ(r.peakReserved.bytes, 20 * MiB);
    // pytorch@2.0 has no fallback: release_cached_blocks frees nothing (the default pools are empty and
    // the MemPool is not freeable), the retry fails: one OOM.
    const auto old = run(t, "pytorch@2.0", o);
    EXPECT_EQ(old.ooms, 1u);
    EXPECT_EQ(old.deviceCounters.mallocCalls, 1u);
}

// graph_pool.json (a snapshot's JSON twin): a CUDA-graph pool (1,0) segment of 20 MiB whose 8 MiB block
// was freed (cached in the graph's pool), then a default-pool 8 MiB request that the recorded allocator
// served from a second 20 MiB segment.
TEST(Pools, TheSnapshotImporterTakesThePoolFromSegmentPoolId)
{
    const Trace t = importPytorchSnapshot(kGraphPoolSnapshot);
    ASSERT_EQ(t.pools().size(), 2u);
    EXPECT_EQ(t.pools()[1].kind, PoolKind::Graph);
    EXPECT_EQ(t.pools()[1].idFirst, 1);
    EXPECT_EQ(t.pools()[1].idSecond, 0);
    const auto& m = t.memory();
    std::size_t inGraph = 0, inDefault = 0;
    for (std::size_t i = 0; i < m.count(); ++i)
        (m.pool[i] == 1 ? inGraph : inDefault) += 1;
    // segment_alloc, alloc, free_requested, free_completed of the graph pool; segment_alloc, alloc of the default.
    EXPECT_EQ(inGraph, 4u);
    EXPECT_EQ(inDefault, 2u);
}

TEST(Pools, FidelityIsExactWithTheGraphPoolKeptApart)
{
    const auto rep = checkFidelityFile(kGraphPoolSnapshot, parsePolicySpec("pytorch"));
    EXPECT_TRUE(rep.exact()) << rep.matched << "/" << rep.recordedSegmentEvents << ", addresses "
                             << rep.allocAddressesMatched << "/" << rep.allocAddressesCompared << ", peak error "
                             << rep.peakReservedError;
    ASSERT_TRUE(rep.endStateDifferences.has_value());
    EXPECT_TRUE(rep.endStateDifferences->empty()) << rep.endStateDifferences->front();
    EXPECT_EQ(rep.recordedSegmentEvents, 2u);
    EXPECT_EQ(rep.recordedPeakReserved, 40 * MiB);
}

TEST(Pools, MergePoolsChangesTheAnswerOfTheGraphPoolSnapshot)
{
    const Trace t = importPytorchSnapshot(kGraphPoolSnapshot);
    // Apart: the graph pool's cached 20 MiB block is not for the default 8 MiB: a second segment,
    // peak 40 MiB, cudaMalloc 2. Merged: the 8 MiB is the best fit in that free block: peak 20 MiB,
    // cudaMalloc 1.
    const auto apart = run(t, "pytorch");
    EXPECT_EQ(apart.peakReserved.bytes, 40 * MiB);
    EXPECT_EQ(apart.deviceCounters.mallocCalls, 2u);
    ReplayOptions merge;
    merge.mergePools = true;
    const auto merged = run(t, "pytorch", merge);
    EXPECT_EQ(merged.peakReserved.bytes, 20 * MiB);
    EXPECT_EQ(merged.deviceCounters.mallocCalls, 1u);

    // On a 30 MiB device: apart, cudaMalloc of the second 20 MiB fails and release_cached_blocks may not
    // free the graph's pool (its graph is alive, use count > 0): one OOM. Merged: no OOM.
    ReplayOptions small;
    small.capacity = 30 * MiB;
    EXPECT_EQ(run(t, "pytorch", small).ooms, 1u);
    small.mergePools = true;
    EXPECT_EQ(run(t, "pytorch", small).ooms, 0u);
}

TEST(Pools, APolicyWithoutPoolsReplaysAsIfMerged)
{
    // rmm-pool has no private pools: both 8 MiB requests share its free list, like --merge-pools.
    const Trace t = data("mempool_release.jsonl");
    const auto apart = run(t, "rmm-pool:initial_pool_size:0");
    ReplayOptions merge;
    merge.mergePools = true;
    const auto merged = run(t, "rmm-pool:initial_pool_size:0", merge);
    EXPECT_EQ(apart.peakReserved.bytes, merged.peakReserved.bytes);
    EXPECT_EQ(apart.deviceCounters.mallocCalls, merged.deviceCounters.mallocCalls);
    EXPECT_TRUE(apart.pools.empty());
}

// empty_cache_burst.json (a snapshot's JSON twin): a 16 MiB block fills its own 16 MiB segment (>= 10 MiB:
// no 20 MiB segment, no rest); an 8 MiB block takes a 20 MiB segment and is freed; then one segment_free of
// that segment (the program's empty_cache(): release_cached_blocks frees the only wholly free segment)
// followed by the 16 MiB block's free, not by a retried cudaMalloc.
TEST(EmptyCache, ASnapshotReleaseBurstBecomesAnEmptyCacheEventAndFidelityStaysExact)
{
    const std::string path = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/snapshot/empty_cache_burst.json";
    const Trace t = importPytorchSnapshot(path);
    std::size_t calls = 0, at = 0;
    for (std::size_t i = 0; i < t.memory().count(); ++i)
        if (t.memory().kind[i] == EventKind::EmptyCache) {
            ++calls;
            at = i;
        }
    ASSERT_EQ(calls, 1u);
    ASSERT_LT(at + 1, t.memory().count());
    EXPECT_EQ(t.memory().kind[at + 1], EventKind::SegmentFree); // right before the burst
    const auto& rec = t.metadata().at("reconstruction").at(0);
    EXPECT_EQ(rec.at("empty_cache_calls"), 1);
    EXPECT_EQ(rec.at("oom_recovery_bursts"), 0);

    // Fidelity: the event releases the 20 MiB segment (the burst is not replayed a second time).
    const auto rep = checkFidelityFile(path, parsePolicySpec("pytorch"));
    EXPECT_TRUE(rep.exact()) << rep.matched << "/" << rep.recordedSegmentEvents;
    EXPECT_EQ(rep.emptyCacheCalls, 1u);
    EXPECT_EQ(rep.emptyCacheDirectives, 0u);
    EXPECT_EQ(rep.recordedPeakReserved, 36 * MiB);

    // What-if: kept, the replay ends with the 16 MiB segment alone; dropped, the 20 MiB one stays too.
    EXPECT_EQ(run(t, "pytorch").finalReserved, 16 * MiB);
    ReplayOptions drop;
    drop.emptyCache = EmptyCacheMode::Drop;
    EXPECT_EQ(run(t, "pytorch", drop).finalReserved, 36 * MiB);
}
