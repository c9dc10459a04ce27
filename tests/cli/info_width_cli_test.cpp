// `gpumem info` fits 100 display columns on every trace of tests/data (the house rule for text output):
// the saturated peak of live_bytes_past_2pow64.jsonl printed a 102-column line ("≥ 16 EiB (saturated: the
// trace's byte total is at least 2^64 - 1 B) at +0.000000 s") until it said "saturated at 2^64 - 1 B".
#include "cli_runner.h"

#include "core/display_width.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

using gpumem::test::runCli;

TEST(InfoWidthCli, EveryLineOfInfoFitsOneHundredColumns)
{
    std::size_t traces = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(GPUMEM_SOURCE_DIR) / "tests/data")) {
        if (entry.path().extension() != ".jsonl")
            continue;
        const auto r = runCli("info '" + entry.path().string() + "'");
        if (r.exitCode != 0)
            continue; // the traces that are bad input on purpose
        ++traces;
        std::istringstream lines(r.out);
        for (std::string line; std::getline(lines, line);)
            EXPECT_LE(gpumem::displayWidth(line), 100u) << entry.path() << ": " << line;
    }
    EXPECT_GE(traces, 20u);
}
