// `gpumem report` on a PyTorch <= 1.9 profiler trace (sizes only, no addresses; review 5): the page names the
// device, draws the recorded counters, says why there is no block-level analysis, and has no policy rows.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <filesystem>

using gpumem::test::runCli;
using gpumem::test::slurp;

TEST(CountersOnlyReport, NamesTheDeviceDrawsTheCountersAndHasNoPolicyRows)
{
    const auto html = std::filesystem::temp_directory_path() / "gpumem_counters_only_report.html";
    auto r = runCli("report tests/data/kineto/legacy_counters_only.json --policy pytorch --policy ideal -o '" + html.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string page = slurp(html);
    std::filesystem::remove(html);
    EXPECT_NE(page.find("<h2>tests/data/kineto/legacy_counters_only.json — cuda:0</h2>"), std::string::npos) << page;
    EXPECT_NE(page.find("<p>Counters only: this trace predates the PyTorch profiler's <code>Addr</code> field"), std::string::npos);
    EXPECT_NE(page.find("There is no block-level analysis (breakdowns, steps, leaks, fragmentation) and no replay"), std::string::npos);
    EXPECT_NE(page.find("<title>Allocated (sum of Bytes)</title></polyline>"), std::string::npos);
    EXPECT_NE(page.find("<tr><td>Allocated (sum of Bytes)</td><td class='n'>6</td><td class='n'>5.00 MiB</td><td class='n'>+0.000040 s</td></tr>"),
        std::string::npos);
    EXPECT_EQ(page.find("No memory events on this device"), std::string::npos);
    EXPECT_EQ(page.find("<th>policy</th>"), std::string::npos); // no policy table, so no 0 B rows
    EXPECT_EQ(page.find("No policies were given"), std::string::npos);
    EXPECT_NE(page.find("<p class='muted'>tests/data/kineto/legacy_counters_only.json: no policy rows: it records memory counters only (no "
                        "addresses: a PyTorch &lt;= 1.9 profiler trace), so there is nothing to replay.</p>"),
        std::string::npos);
}
