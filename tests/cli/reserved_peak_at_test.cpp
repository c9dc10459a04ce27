// Task "lim" item 3: --at reserved-peak on a trace with no reserved series (no segment events, no
// reserved counter) said "the first trace has no memory events" (diff) or printed no Live-at section
// (analyze); both now say the trace has no reserved peak and exit 2.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

using gpumem::test::runCli;

namespace {
const std::string kNoSegments = "tests/data/two_hip_devices.jsonl"; // alloc/free only, busiest device hip:1
}

TEST(ReservedPeakAt, AnalyzeAndDiffSayTheTraceHasNoReservedPeak)
{
    const auto analyze = runCli("analyze --at reserved-peak " + kNoSegments);
    EXPECT_EQ(analyze.exitCode, 2);
    EXPECT_EQ(analyze.err, "gpumem analyze: --at 'reserved-peak': the trace has no reserved peak on hip:1 (no segment "
                           "events or reserved counter); give --at peak or a time\n");
    const auto diff = runCli("diff --at reserved-peak " + kNoSegments + " " + kNoSegments);
    EXPECT_EQ(diff.exitCode, 2);
    EXPECT_EQ(diff.err, "gpumem diff: A (" + kNoSegments + "): --at 'reserved-peak': the trace has no reserved peak on "
                        "hip:1 (no segment events or reserved counter); give --at peak or a time\n");
    // The allocated peak still works on the same trace.
    EXPECT_EQ(runCli("analyze --at peak " + kNoSegments).exitCode, 0);
}
