// compaction:INNER (spec syntax: policy_spec_test.cpp; passes on random churn: the conformance suite) — compaction points, the address remapping after a pass, and the
// peak it saves on hand-made traces (tests/data/compaction_*.jsonl) where the saving is known exactly.
#include "replay_test_support.h"

#include "importers/importer_registry.h"
#include "core/jsonl_format.h"
#include "replay/replayer.h"

#include <filesystem>


using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

Trace data(const std::string& name) { return readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/" + name); }


} // namespace

TEST(Compaction, MovingTheBlockLeftBetweenTwoHolesSavesTheSecondSegment)
{
    Trace trace = data("compaction_saves.jsonl");
    ReplayResult alone = Replayer().run(trace, parsePolicySpec("pytorch"));
    ReplayResult r = Replayer().run(trace, parsePolicySpec("compaction:pytorch"));
    EXPECT_EQ(alone.peakReserved.bytes, 196 * MiB);
    EXPECT_EQ(r.policy, "compaction:pytorch");
    EXPECT_EQ(r.peakReserved.bytes, 100 * MiB);
    ASSERT_TRUE(r.peakReservedWithoutCompaction);
    EXPECT_EQ(*r.peakReservedWithoutCompaction, 196 * MiB);
    EXPECT_EQ(r.compactionSaving(), std::int64_t(96 * MiB));
    // Boundaries at 1000 (before the first event, nothing live), 2000 (end of step 1 = start of step 2,
    // one pass), 3000 (after the last event: none).
    EXPECT_EQ(r.compactions, 2u);
    EXPECT_EQ(r.blocksMoved, 1u);
    EXPECT_EQ(r.bytesMoved, 4 * MiB);
    // S's free at its trace address found the moved block; nothing leaks.
    EXPECT_EQ(r.finalAllocated, 0u);
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_EQ(r.deviceCounters.mallocCalls, 1u); // the 100 MiB segment only
    EXPECT_EQ(alone.deviceCounters.mallocCalls, 2u);

    // Every 7 request events: one pass, before the 8th (the 96 MiB request): the same saving.
    ReplayResult every = Replayer().run(trace, parsePolicySpec("compaction[every=7]:pytorch"));
    EXPECT_EQ(every.compactions, 1u);
    EXPECT_EQ(every.bytesMoved, 4 * MiB);
    EXPECT_EQ(every.peakReserved.bytes, 100 * MiB);
    // A pattern no annotation matches: no pass, nothing saved.
    ReplayResult none = Replayer().run(trace, parsePolicySpec("compaction[at=Optimizer*]:pytorch"));
    EXPECT_EQ(none.compactions, 0u);
    EXPECT_EQ(none.peakReserved.bytes, 196 * MiB);
    EXPECT_EQ(none.compactionSaving(), 0);
}

TEST(Compaction, WorksWithExpandableSegments)
{
    Trace trace = data("compaction_saves.jsonl");
    ReplayResult r = Replayer().run(trace, parsePolicySpec("compaction:pytorch:expandable_segments:True"));
    ASSERT_TRUE(r.peakReservedWithoutCompaction);
    // Expandable segments already grow the segment behind B instead of a second cudaMalloc (pages of
    // 20 MiB: 100 MiB mapped, then 48 MiB more → 160 MiB); compacting moves S down and maps nothing.
    EXPECT_EQ(*r.peakReservedWithoutCompaction, 160 * MiB);
    EXPECT_EQ(r.peakReserved.bytes, 100 * MiB);
    EXPECT_EQ(r.bytesMoved, 4 * MiB);
    EXPECT_EQ(r.finalAllocated, 0u);
}

TEST(Compaction, MovesNothingAndSavesNothingWithoutHoles)
{
    Trace trace = data("compaction_no_holes.jsonl");
    for (const char* spec : { "compaction:pytorch", "compaction:pytorch:expandable_segments:True" }) {
        ReplayResult r = Replayer().run(trace, parsePolicySpec(spec));
        EXPECT_EQ(r.compactions, 2u) << spec;
        EXPECT_EQ(r.bytesMoved, 0u) << spec;
        EXPECT_EQ(r.blocksMoved, 0u) << spec;
        EXPECT_EQ(r.compactionSaving(), 0) << spec;
        EXPECT_EQ(r.peakReserved.bytes, 20 * MiB) << spec;
    }
}

TEST(CompactionSpec, GlobMatchesStarsAndQuestionMarks)
{
    EXPECT_TRUE(globMatch("ProfilerStep*", "ProfilerStep#12"));
    EXPECT_TRUE(globMatch("ProfilerStep*", "ProfilerStep"));
    EXPECT_FALSE(globMatch("ProfilerStep*", "Optimizer.step#Adam.step"));
    EXPECT_TRUE(globMatch("*step*", "Optimizer.step#Adam.step"));
    EXPECT_TRUE(globMatch("nccl:all_?educe", "nccl:all_reduce"));
    EXPECT_FALSE(globMatch("nccl:all_?educe", "nccl:all_gather"));
    EXPECT_TRUE(globMatch("a*b*c", "aXXbYYbZc"));
    EXPECT_FALSE(globMatch("a*b*c", "aXXbYYbZ"));
    EXPECT_TRUE(globMatch("*", ""));
    EXPECT_FALSE(globMatch("", "x"));
}

// On a snapshot whose pre-window state pytorch adopts at the recorded addresses, compaction:pytorch
// adopts it too, so that pytorch alone is its baseline: with no compaction point (snapshots carry no
// ProfilerStep annotations) the replay is pytorch's, to the byte.
TEST(Compaction, AdoptsThePreWindowStateLikeItsInnerPolicy)
{
    std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/cs336-bcrafton/memory_snapshot.pickle";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = loadTrace(path);
    ReplayResult alone = Replayer().run(trace, parsePolicySpec("pytorch"));
    ReplayResult r = Replayer().run(trace, parsePolicySpec("compaction:pytorch"));
    EXPECT_EQ(r.compactions, 0u);
    EXPECT_TRUE(r.initialAdopted);
    EXPECT_EQ(r.initialBlocks, alone.initialBlocks);
    EXPECT_EQ(r.peakReserved.bytes, alone.peakReserved.bytes);
    EXPECT_EQ(r.peakReserved.bytes, 4238344192u); // the recorded peak (SnapshotFidelity)
    EXPECT_EQ(r.compactionSaving(), 0);
    // Every 500 request events: passes move blocks, but the peak is the adopted state itself (reserved
    // before the window, before any pass), so nothing is saved.
    ReplayResult every = Replayer().run(trace, parsePolicySpec("compaction[every=500]:pytorch"));
    EXPECT_EQ(every.compactions, 12u); // 6,486 request events, less the pre-window ones
    EXPECT_GT(every.bytesMoved, 0u);
    EXPECT_EQ(*every.peakReservedWithoutCompaction, alone.peakReserved.bytes);
    EXPECT_EQ(every.peakReserved.bytes, alone.peakReserved.bytes);
    EXPECT_EQ(every.compactionSaving(), 0);
    EXPECT_EQ(every.ooms, 0u);
}
