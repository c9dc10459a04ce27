// Task "lim" item 1: one lower bound for analyze and fit (replay::livePeak). A block pending its free
// (free_requested seen, free_completed not yet) no longer counts in requested bytes (PyTorch's rule) but
// still holds its memory, so the bound counts it until free_completed; the figure is reachable.
#include "analyze/analysis.h"
#include "importers/importer_registry.h"
#include "core/jsonl_format.h"
#include "replay/capacity_fit.h"
#include "replay/replayer.h"
#include "tests/analyze/public_trace_support.h"
#include "tests/replay/replay_test_support.h"

#include <gtest/gtest.h>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::publicTrace;

namespace {
// kPendingFreeJsonl (replay_test_support.h): A (1000 B requested) is freed at t=3 but completes only at
// t=5; C (500 B) is allocated at t=4 while A is pending: 3000 + 500 + 1000 = 4500 B are held then, while
// the requested bytes peak at 4000 B (t=2).

replay::ReplayResult replayAt(const Trace& t, Bytes capacity, const std::string& spec)
{
    replay::ReplayOptions o;
    o.capacity = capacity;
    o.onOom = replay::OnOom::Stop;
    return replay::Replayer(o).run(t, replay::parsePolicySpec(spec));
}
} // namespace

TEST(OneLowerBound, CountsABlockPendingItsFreeUntilFreeCompleted)
{
    const Trace t = readJsonlText(replay::testing::kPendingFreeJsonl, "pending_free.jsonl");
    const Analysis a = analyzeTrace(t);
    EXPECT_EQ(a.fragmentation.peakRequested, 4000u); // requested bytes drop at free_requested
    EXPECT_EQ(a.fragmentation.lowerBound, 4500u);    // the memory is held until free_completed
    EXPECT_EQ(replay::livePeak(t), 4500u);
    EXPECT_EQ(replayAt(t, 4500, "ideal:alignment:1").ooms, 0u);
    EXPECT_EQ(replayAt(t, 4499, "ideal:alignment:1").ooms, 1u);
    // direct: every cudaMalloc is rounded to the simulated device's 512 B granularity (simulated_device.h),
    // whatever the policy's own alignment: 1024 + 3072 + 512 B.
    EXPECT_EQ(replayAt(t, 4608, "direct:alignment:1").ooms, 0u);
    EXPECT_EQ(replayAt(t, 4607, "direct:alignment:1").ooms, 1u);
}

TEST(OneLowerBound, FlexgenAnalyzeFitAndReplayAgreeAndTheBoundIsReachable)
{
    const std::string path = publicTrace("flexgen-llm-inference/1.3b_snapshot.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    const Trace t = loadTrace(path);
    const Analysis a = analyzeTrace(t);
    EXPECT_EQ(a.fragmentation.peakRequested, 5683449864u); // PyTorch's requested bytes: not reachable
    EXPECT_EQ(a.fragmentation.lowerBound, 5692346376u);
    EXPECT_EQ(replay::livePeak(t, a.device), a.fragmentation.lowerBound); // fit's live_peak
    replay::FitOptions fo;
    fo.step = Bytes(1) << 30;
    fo.device = a.device;
    EXPECT_EQ(replay::fitCapacity(t, replay::parsePolicySpec("direct:alignment:1"), fo).lowerBound,
        a.fragmentation.lowerBound);
    // The bound is reached exactly by ideal:alignment:1 and missed 1 B below; `direct` needs 1016 B
    // more, its blocks rounded to the device's 512 B cudaMalloc granularity (simulated_device.h).
    EXPECT_EQ(replayAt(t, 5692346376u, "ideal:alignment:1").ooms, 0u);
    EXPECT_EQ(replayAt(t, 5692346375u, "ideal:alignment:1").ooms, 1u);
    EXPECT_EQ(replayAt(t, 5692346376u, "direct").ooms, 1u);
    EXPECT_EQ(replayAt(t, 5692347392u, "direct").ooms, 0u);
    EXPECT_EQ(replayAt(t, 5692347391u, "direct").ooms, 1u);
}
