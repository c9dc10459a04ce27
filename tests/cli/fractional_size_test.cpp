// Task "lim" item 4: a fraction of a byte in a size option is refused quoting the input (exit 2), not
// rounded (--capacity 0.1B became "--capacity 0: give the GPU's memory"; fit --step 1.5 was 2 B).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

using gpumem::test::runCli;

TEST(FractionalSize, CapacityAndStepRefuseAFractionOfAByte)
{
    const std::string tail = "' is not a whole number of bytes; give whole bytes (e.g. 2B) or a unit that makes the "
                             "fraction whole (1.5KiB = 1536 B)\n";
    const auto cap = runCli("replay --capacity 0.1B tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(cap.exitCode, 2);
    EXPECT_EQ(cap.err, "gpumem replay: --capacity: '0.1B" + tail);
    const auto step = runCli("fit --step 1.5 tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(step.exitCode, 2);
    EXPECT_EQ(step.err, "gpumem fit: --step: '1.5" + tail);
    EXPECT_EQ(runCli("replay --capacity 1.5KiB --format csv tests/data/tiny_alloc_free.jsonl").exitCode, 0);
}
