// The HTML report of the public PyTorch 1.9 trace (kineto-tb-plugin ResNet-50: [memory] events with Bytes only,
// 4,110 CUDA allocs and 4,110 frees): the recorded counter of cuda:0 instead of "No memory events".
#include "analyze/analysis.h"
#include "analyze/html_report.h"
#include "importers/importer_registry.h"
#include "tests/analyze/public_trace_support.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::publicTrace;

TEST(CountersOnlyHtml, TheLegacyResNetTraceShowsItsCudaCounter)
{
    const auto path = publicTrace("kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    auto a = analyzeTrace(t);
    EXPECT_TRUE(a.countersOnly);
    EXPECT_TRUE(a.empty);
    EXPECT_EQ(a.deviceLabel, "cuda:0");
    HtmlReportInput in { "worker0", &t, &a };
    std::ostringstream out;
    writeHtmlReport({ &in, 1 }, {}, {}, out);
    const std::string page = out.str();
    EXPECT_NE(page.find("<h2>worker0 — cuda:0</h2>"), std::string::npos);
    // One sample per alloc and per free: 2 × 4,110.
    EXPECT_NE(page.find("<tr><td>Allocated (sum of Bytes)</td><td class='n'>8220</td><td class='n'>2.60 GiB</td><td class='n'>+0.121962 s</td></tr>"),
        std::string::npos)
        << page.substr(page.find("<table>"), 400);
    EXPECT_EQ(page.find("No memory events on this device"), std::string::npos);
    // Only the analyzed device's counters: the CPU's own "Allocated (sum of Bytes)" series is not drawn.
    ASSERT_EQ(t.counterSeries().size(), 2u);
    std::size_t lines = 0;
    for (auto at = page.find("<polyline"); at != std::string::npos; at = page.find("<polyline", at + 1))
        ++lines;
    EXPECT_EQ(lines, 1u);
}
