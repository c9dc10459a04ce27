// The pending-free rule, one for every policy (replay/adaptors/pending_free_adaptor.h; PyTorch
// CUDACachingAllocator.cpp free(): requested and allocated bytes drop at the user's free, the block's
// memory stays occupied until free_completed): a hand-made trace fed step by step to three policies (every policy:
// policy_conformance_test.cpp), and the flexgen snapshot whose pre-window state holds a block pending a free.
#include "importers/importer_registry.h"
#include "replay_test_support.h"

#include <filesystem>
#include <vector>

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

constexpr Bytes kSmallSegment = 2 << 20; // PyTorch's small-pool segment (allocators.md §1.4)

} // namespace

TEST(PendingFreeRule, FeederSeesTheFreeRequestedThatIsNotFollowedByItsCompletion)
{
    EXPECT_TRUE(RequestFeeder::requestsFrees(readJsonlText(kPendingFreeJsonl, "pending_free.jsonl"), 0));
    // The same trace without A's early free: every free is completed at once, no adaptor is needed.
    std::string adjacent = R"({"format":"gpumem-jsonl","version":1}
{"type":"device","id":0,"kind":"cuda","ordinal":0}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"mem","t":1,"kind":"alloc","addr":4096,"size":1024,"requested":1000}
{"type":"mem","t":2,"kind":"free","addr":4096,"size":1024,"requested":1000}
{"type":"mem","t":3,"kind":"free_completed","addr":4096,"size":1024,"requested":1000}
)";
    EXPECT_FALSE(RequestFeeder::requestsFrees(readJsonlText(adjacent, "adjacent.jsonl"), 0));
}

TEST(PendingFreeRule, RequestedAndAllocatedDropAtTheFreeRequestedForEveryPolicy)
{
    Trace trace = readJsonlText(kPendingFreeJsonl, "pending_free.jsonl");
    // ideal: reserved = the bytes of live blocks, pending ones included (their memory is still occupied).
    EXPECT_EQ(feedPendingFreeSteps(trace, "ideal"),
        (std::vector<PendingFreeStep> { { 1000, 1024, 1024 }, { 4000, 4096, 4096 }, { 3000, 3072, 4096 },
            { 3500, 3584, 4608 }, { 3500, 3584, 3584 }, { 3500, 3584, 3584 }, { 500, 512, 512 }, { 0, 0, 0 } }));
    // direct: one cudaMalloc per block, freed at the free_completed.
    EXPECT_EQ(feedPendingFreeSteps(trace, "direct"),
        (std::vector<PendingFreeStep> { { 1000, 1024, 1024 }, { 4000, 4096, 4096 }, { 3000, 3072, 4096 },
            { 3500, 3584, 4608 }, { 3500, 3584, 3584 }, { 3500, 3584, 3584 }, { 500, 512, 512 }, { 0, 0, 0 } }));
    // pytorch applies the rule itself (releaseAccounting at free()); its one small segment stays reserved.
    EXPECT_EQ(feedPendingFreeSteps(trace, "pytorch"),
        (std::vector<PendingFreeStep> { { 1000, 1024, kSmallSegment }, { 4000, 4096, kSmallSegment },
            { 3000, 3072, kSmallSegment }, { 3500, 3584, kSmallSegment }, { 3500, 3584, kSmallSegment },
            { 3500, 3584, kSmallSegment }, { 500, 512, kSmallSegment }, { 0, 0, kSmallSegment } }));
}

TEST(PendingFreeRule, FlexgenPeakAllocatedExcludesTheBlockPendingBeforeTheTrace)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/flexgen-llm-inference/1.3b_snapshot.pickle";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = loadTrace(path);
    Replayer replayer;
    // PyTorch's allocated_size summed over the snapshot's `segments` (the pending block is not allocated).
    constexpr Bytes kSegmentsAllocated = 5683450880;
    ReplayResult ideal = replayer.run(trace, parsePolicySpec("ideal"));
    EXPECT_EQ(ideal.peakAllocated.bytes, kSegmentsAllocated);
    // ...while its memory is occupied until the trace's one free_completed: 8,896,512 B more reserved.
    EXPECT_EQ(ideal.peakReserved.bytes, 5692347392u);
    EXPECT_EQ(ideal.peakRequested.bytes, 5683449864u);
    for (const char* spec : { "pytorch", "direct", "best-fit", "tf-bfc", "rmm-pool" }) {
        ReplayResult r = replayer.run(trace, parsePolicySpec(spec));
        const std::string name = spec;
        if (name != "tf-bfc" && name != "rmm-pool") { // the others round blocks their own way
            EXPECT_EQ(r.peakAllocated.bytes, kSegmentsAllocated) << spec;
        }
        EXPECT_EQ(r.peakRequested.bytes, ideal.peakRequested.bytes) << spec;
        EXPECT_EQ(r.ooms, 0u) << spec;
    }
}
