// Step detection and category inference on inputs where a first heuristic misled a reviewer (review 5):
// one ProfilerStep#, inference-only traces, repeated layers inside one step.
#include "analyze/analysis.h"
#include "analyze/analysis_report.h"
#include "micro_traces.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::buildMicroLoop;

namespace {
constexpr Bytes MiB = 1 << 20;
} // namespace

// xss.json (review 5): one ProfilerStep#1 and nothing else to find steps by; the report said "no ProfilerStep#".
TEST(StepSearch, OneProfilerStepIsNamedWhenNoStepsAreFound)
{
    Trace t = buildMicroLoop({ .steps = 1 });
    auto a = analyzeTrace(t);
    EXPECT_TRUE(a.steps.steps.empty());
    EXPECT_EQ(a.steps.search.profilerSteps, 1u);
    EXPECT_EQ(stepSearchNote(a.steps), "no training steps found: 1 ProfilerStep# range (steps need at least 2); no step ranges, markers or period");
}

TEST(StepSearch, NothingAtAllKeepsTheShortSentence)
{
    Trace t = buildMicroLoop({ .steps = 1, .annotateSteps = false });
    auto a = analyzeTrace(t);
    EXPECT_EQ(stepSearchNote(a.steps), "no training steps found (no ProfilerStep#, step ranges, markers or period)");
}

// OWLv2 has one ProfilerStep#6 and repeats: the next source (periodicity) gives the steps, and the note says
// what was passed over.
TEST(StepSearch, OneProfilerStepFallsBackToPeriodicityAndSaysSo)
{
    Trace t = buildMicroLoop({ .steps = 10, .annotatedSteps = 1 });
    auto a = analyzeTrace(t);
    EXPECT_EQ(a.steps.source, StepSource::Periodicity);
    EXPECT_EQ(a.steps.steps.size(), 10u);
    EXPECT_EQ(stepSearchNote(a.steps), "passed over 1 ProfilerStep# range (steps need at least 2)");
    Trace all = buildMicroLoop({ .steps = 10 });
    EXPECT_EQ(stepSearchNote(analyzeTrace(all).steps), "");
}

TEST(StepSearch, TheTextReportPrintsTheNote)
{
    Trace t = buildMicroLoop({ .steps = 1 });
    auto a = analyzeTrace(t);
    std::ostringstream out;
    writeAnalysisText(t, a, "one-step", {}, out);
    EXPECT_NE(out.str().find("| no training steps found: 1 ProfilerStep# range (steps need at least 2); no|\n"
                             "|   step ranges, markers or period"),
        std::string::npos)
        << out.str();
}
