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
