// Edges of the command-line options (brief tx items 2–5): size units and their limit, --at before the
// analyzed device's first event in diff, --device as a position or a label, singular wording.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

using gpumem::test::runCli;

namespace {
const std::string kTwoDevices = "tests/data/two_devices_streams.jsonl";
}

// Item 3: PiB and EiB were refused; above 2^64 − 1 B the option is named.
TEST(SizeOptions, AcceptPetaAndExaUnitsAndRefuseMoreThan64Bits)
{
    const auto pib = runCli("replay --capacity 1PiB --format csv tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(pib.exitCode, 0) << pib.err;
    const auto over = runCli("replay --capacity 16EiB tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(over.exitCode, 2);
    EXPECT_EQ(over.err, "gpumem replay: --capacity: '16EiB' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), "
                        "the largest size gpumem handles\n");
    const auto fit = runCli("fit --max-capacity 20EB tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(fit.exitCode, 2);
    EXPECT_EQ(fit.err, "gpumem fit: --max-capacity: '20EB' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), "
                       "the largest size gpumem handles\n");
}

// Item 4: diff compared an empty breakdown at a --at before the device's first memory event, silently.
// tests/data/two_devices_streams.jsonl: cuda:1 starts 200 ns after the trace start.
TEST(DiffAt, ATimeBeforeTheDevicesFirstEventIsRefusedAsAnalyzeRefusesIt)
{
    const std::string words = "--at '100ns' is before the first memory event of cuda:1, at +0.000000 s from the trace "
                              "start (@1732000000000000200); give a later time or --device\n";
    const auto analyze = runCli("analyze --at 100ns --device 1 " + kTwoDevices);
    EXPECT_EQ(analyze.exitCode, 2);
    EXPECT_EQ(analyze.err, "gpumem analyze: " + words);
    const auto diff = runCli("diff --at 100ns --device 1 " + kTwoDevices + " " + kTwoDevices);
    EXPECT_EQ(diff.exitCode, 2) << diff.out;
    EXPECT_EQ(diff.out, "");
    EXPECT_EQ(diff.err, "gpumem diff: " + words);
    EXPECT_EQ(runCli("diff --at 200ns --device 1 " + kTwoDevices + " " + kTwoDevices).exitCode, 0);
}
