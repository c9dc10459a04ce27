// Step detection and category inference on inputs where a first heuristic misled a reviewer (review 5):
// one ProfilerStep#, inference-only traces, repeated layers inside one step.
#include "analyze/analysis.h"
#include "analyze/analysis_report.h"
#include "analyze/trace_summary.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"
#include "micro_traces.h"
#include "tests/analyze/public_trace_support.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

using namespace gpumem;
using namespace gpumem::analyze;
using gpumem::test::buildMicroLoop;
using gpumem::test::publicTrace;

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

namespace {
std::map<Category, Bytes> bytesByCategory(const Trace& t, const Analysis& a)
{
    std::map<Category, Bytes> out;
    const auto& m = t.memory();
    auto allocations = t.allocations();
    for (std::size_t i = 0; i < allocations.size(); ++i)
        if (allocations[i].allocEvent != kNoIndex)
            out[a.inferred[i]] += m.size[allocations[i].allocEvent];
    return out;
}
} // namespace

// The same loop with its last phase under a scope that names no optimizer and nothing else showing autograd:
// nothing is a gradient or autograd_detail, and the report says the phase is absent, not guessed.
TEST(CategoryInference, NoAutogradEvidenceMeansNoBackwardCategories)
{
    Trace t = buildMicroLoop({ .steps = 5, .optimizerScope = "postprocess", .recordCategories = false });
    auto a = analyzeTrace(t);
    EXPECT_EQ(a.steps.autogradEvidence, "");
    ASSERT_EQ(a.steps.steps.size(), 5u);
    for (const auto& s : a.steps.steps) {
        EXPECT_EQ(s.backwardStart, s.end);
        EXPECT_EQ(backwardSource(a.steps, s), "no autograd");
    }
    // Per step: the 8 MiB activation and the 2 + 4 MiB former "gradients" are activations; the 1 MiB, 0.5 MiB and
    // the 6 MiB (freed before the next alloc) blocks are op-local temporaries.
    const auto byCat = bytesByCategory(t, a);
    EXPECT_EQ(byCat, (std::map<Category, Bytes> { { Category::Parameter, 6 * MiB }, { Category::Activation, 5 * 14 * MiB },
                         { Category::Temporary, 5 * (7 * MiB + MiB / 2) } }));
    EXPECT_EQ(phaseNote(a.steps), "no backward phase: no autograd evidence (no backward op or scope, autograd engine frame or optimizer "
                                  "step), so no gradient or autograd_detail");

    Trace training = buildMicroLoop({ .steps = 5, .recordCategories = false });
    auto b = analyzeTrace(training);
    EXPECT_EQ(b.steps.autogradEvidence, "scope \"Optimizer.step#SGD.step\"");
    EXPECT_EQ(phaseNote(b.steps), "backward phase guessed from each step's transient peak (autograd ran: scope \"Optimizer.step#SGD.step\")");
    EXPECT_EQ(bytesByCategory(training, b).at(Category::Gradient), 5 * 6 * MiB);
}

// OWLv2 (bf16 inference, review 5): "autograd_detail 82.8 %" at +0.2 s came from a guessed backward phase.
TEST(CategoryInference, Owlv2InferenceHasNoBackwardCategories)
{
    const auto path = publicTrace("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    AnalysisOptions options;
    options.instants = { InstantSpec::parse("0.2s", traceSpan(t).start), InstantSpec { InstantSpec::Kind::PeakAllocated, 0 } };
    auto a = analyzeTrace(t, options);
    EXPECT_EQ(a.steps.autogradEvidence, "");
    ASSERT_EQ(a.breakdowns.size(), 2u);
    const auto& at = a.breakdowns[0].by(GroupBy::Category);
    ASSERT_EQ(at.size(), 1u);
    EXPECT_EQ(at[0].key, "activation");
    EXPECT_EQ(at[0].totalBytes, 35467776u); // 100 %: 18 blocks
    EXPECT_EQ(a.breakdowns[0].liveBytes, 35467776u);
    const auto byCat = bytesByCategory(t, a);
    EXPECT_EQ(byCat.count(Category::Gradient), 0u);
    EXPECT_EQ(byCat.count(Category::AutogradDetail), 0u);
    EXPECT_EQ(byCat.count(Category::OptimizerState), 0u);
}

// bcrafton's snapshot is one 50 ms train step under torch.compile; its alloc sizes repeat every 130 allocs 3 times
// (the transformer layers: the same forward@model.py frames per layer), which periodicity took for 3 steps of
// 2.4, 2.2 and 27.9 ms and then gave a "no leak" verdict from them. Now: no steps, and no verdict resting on them.
TEST(StepSearch, RepeatedLayersInsideOneStepAreNotSteps)
{
    const auto path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    Trace t = loadTrace(path);
    auto a = analyzeTrace(t);
    EXPECT_EQ(a.steps.source, StepSource::None);
    EXPECT_TRUE(a.steps.steps.empty());
    EXPECT_EQ(stepSearchNote(a.steps), "no training steps found: no ProfilerStep#, step ranges or markers; not steps: a period of 130 allocs "
                                       "that repeats 3 times in 2609 allocs (too little of the trace for a loop: repeated layers?)");
    EXPECT_FALSE(a.leaks.leaking);
    EXPECT_EQ(a.leaks.reason, "fewer than 3 steps: leaks need live bytes at the same phase of at least 3 steps");
    EXPECT_TRUE(a.leaks.liveAtStepStart.empty());
}

namespace {
// `repeats` times the same 20 allocs (512 B … 10 KiB, each freed at once), 1 us apart (repeat 3: `slowGap` apart). With
// `perLayerScopes`, repeat i runs in module Layer_i under Model_0 (one forward pass through a layer stack); else
// every block is under Model_0 alone (a loop over one module).
Trace buildRepeats(int repeats, TimeNs slowGap, bool perLayerScopes)
{
    TraceBuilder b;
    b.metadata()["source_format"] = "test";
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    const ScopeId model = b.scope(0, "Model_0", ScopeKind::Module);
    TimeNs t = 0;
    for (int s = 0; s < repeats; ++s) {
        const ScopeId scope = perLayerScopes ? b.scope(model, "Layer_" + std::to_string(s), ScopeKind::Module) : model;
        for (Bytes k = 1; k <= 20; ++k)
            for (auto kind : { EventKind::Alloc, EventKind::Free }) {
                MemoryEvent e;
                e.time = t += (s == 3 ? slowGap : 1000);
                e.kind = kind;
                e.device = dev;
                e.stream = stream;
                e.address = 0x10000000 + k * 0x100000;
                e.size = 512 * k;
                e.requestedSize = kind == EventKind::Alloc ? e.size : 0;
                e.scope = scope;
                b.add(e);
            }
    }
    return b.build();
}
} // namespace

// A loop whose steps last alike is found by periodicity; the same alloc sequence with one repeat (not the first or
// last) lasting 10 times longer is not taken for steps, and the note says why.
TEST(StepSearch, PeriodicityNeedsStepsThatLastAlike)
{
    Trace loop = buildMicroLoop({ .steps = 10, .annotateSteps = false });
    EXPECT_EQ(analyzeTrace(loop).steps.steps.size(), 10u);
    Trace even = buildRepeats(8, 1000, false);
    auto a = analyzeTrace(even);
    EXPECT_EQ(a.steps.source, StepSource::Periodicity);
    EXPECT_EQ(a.steps.steps.size(), 7u); // the boundary moves past the first repeat's opening allocs: 7 whole steps
    Trace uneven = buildRepeats(8, 10000, false);
    auto b = analyzeTrace(uneven);
    EXPECT_TRUE(b.steps.steps.empty());
    EXPECT_EQ(b.steps.search.periodRejected, "a period of 20 allocs whose repeats last from 40 to 301 us (steps last alike)");
}


// Qwen1.5-0.5B and BERT-small (inference, review 5 follow-up): each periodic "step" ran in its own decoder layer.
TEST(StepSearch, RepeatsInSuccessiveLayerModulesAreNotSteps)
{
    Trace layered = buildRepeats(6, 1000, true);
    auto a = analyzeTrace(layered);
    EXPECT_TRUE(a.steps.steps.empty());
    EXPECT_EQ(a.steps.search.periodRejected, "a period of 20 allocs whose 6 repeats run in successive Layer_N modules (6 instances: layers, not steps)");
    Trace loop = buildRepeats(6, 1000, false);
    auto b = analyzeTrace(loop);
    EXPECT_EQ(b.steps.source, StepSource::Periodicity);
    EXPECT_EQ(b.steps.steps.size(), 6u);
}

TEST(StepSearch, QwenAndBertLayersAreNotSteps)
{
    for (const auto& [file, why] : { std::pair<std::string, std::string> { "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
                                         "a period of 53 allocs whose 24 repeats run in successive Qwen2DecoderLayer_N modules (24 instances: layers, not steps)" },
             { "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
                 "a period of 23 allocs whose 4 repeats run in successive BertLayer_N modules (4 instances: layers, not steps)" } }) {
        const auto path = publicTrace(file);
        REQUIRE_PUBLIC_TRACE(path);
        Trace t = loadTrace(path);
        auto a = analyzeTrace(t);
        EXPECT_TRUE(a.steps.steps.empty()) << file;
        EXPECT_EQ(a.steps.search.periodRejected, why);
    }
    // OWLv2 runs the whole model 5 times: its repeats stay steps.
    const auto owl = publicTrace("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    Trace t = loadTrace(owl);
    EXPECT_EQ(analyzeTrace(t).steps.steps.size(), 5u);
}

// The smallest input of the HTA memory-timeline miss (issue 18, gradients 7.4 %): no phase annotations,
// autograd shown by a backward frame. Per step: activations a1 (8 MiB) and a2 (4 MiB); backward frees a1,
// makes gradient g1 (1 MiB), a 16 MiB scratch block freed before any other alloc (op-local), gradient
// g2 (2 MiB), frees a2; the optimizer bumps the parameter in place (freed and made again at one instant,
// as the memory-timeline importer does); zero_grad frees g1 and g2. The scratch block made the transient
// peak, so g1 read as activation and g2, with no optimizer phase, as autograd_detail.
TEST(CategoryInference, AnOpLocalBackwardSpikeIsNotTheTurnAndGradientsOutliveTheBackward)
{
    constexpr Bytes MiB = 1 << 20;
    TraceBuilder b;
    b.metadata()["source_format"] = "test";
    const DeviceId dev = b.device(DeviceType::Cuda, 0);
    const StreamId stream = b.stream(dev, 0);
    const FrameId node = b.frame("torch::autograd::generated::MmBackward0::apply", "", 0);
    const FrameId stack[] = { node };
    const SiteId backwardSite = b.site(stack);
    TimeNs t = 1'000'000;
    Address next = 0x7f0000000000;
    auto ev = [&](EventKind kind, Address addr, Bytes size, SiteId site, bool advance = true) {
        MemoryEvent e;
        e.time = t;
        e.kind = kind;
        e.device = dev;
        e.stream = stream;
        e.address = addr;
        e.size = size;
        e.requestedSize = kind == EventKind::Alloc ? size : 0;
        e.site = site;
        b.add(e);
        if (advance)
            t += 1000;
    };
    auto alloc = [&](Bytes size, SiteId site = 0) {
        const Address a = next;
        next += size + MiB;
        ev(EventKind::Alloc, a, size, site);
        return a;
    };
    const Address p = alloc(4 * MiB);
    std::vector<TimeNs> a2Times;
    for (int s = 0; s < 2; ++s) {
        const TimeNs start = t;
        const Address a1 = alloc(8 * MiB);
        a2Times.push_back(t);
        const Address a2 = alloc(4 * MiB);
        ev(EventKind::Free, a1, 8 * MiB, 0);
        const Address g1 = alloc(1 * MiB, backwardSite);
        const Address spike = alloc(16 * MiB, backwardSite);
        ev(EventKind::Free, spike, 16 * MiB, 0);
        const Address g2 = alloc(2 * MiB, backwardSite);
        ev(EventKind::Free, a2, 4 * MiB, 0);
        ev(EventKind::Free, p, 4 * MiB, 0, false); // the optimizer's in-place update
        ev(EventKind::Alloc, p, 4 * MiB, 0);
        ev(EventKind::Free, g1, 1 * MiB, 0);
        ev(EventKind::Free, g2, 2 * MiB, 0);
        Annotation an;
        an.start = start;
        an.end = t;
        an.name = b.intern("ProfilerStep#" + std::to_string(s));
        an.kind = AnnotationKind::Range;
        b.add(an);
        t += 1000;
    }
    const Trace trace = b.build();
    const auto a = analyzeTrace(trace);
    ASSERT_EQ(a.steps.steps.size(), 2u);
    EXPECT_NE(a.steps.autogradEvidence, "");
    for (std::size_t k = 0; k < 2; ++k) {
        EXPECT_FALSE(a.steps.steps[k].phasesAnnotated);
        EXPECT_EQ(a.steps.steps[k].backwardStart, a2Times[k] + 1) << "right after a2, the turn";
        EXPECT_TRUE(a.steps.steps[k].optimizerStart.has_value()) << "guessed after the free of a2";
    }
    const auto& m = trace.memory();
    std::map<Bytes, std::set<Category>> bySize;
    const auto allocations = trace.allocations();
    for (std::size_t i = 0; i < allocations.size(); ++i)
        if (allocations[i].allocEvent != kNoIndex)
            bySize[m.size[allocations[i].allocEvent]].insert(a.inferred[i]);
    EXPECT_EQ(bySize[8 * MiB], std::set<Category> { Category::Activation });
    EXPECT_EQ(bySize[4 * MiB], (std::set<Category> { Category::Parameter, Category::Activation }));
    EXPECT_EQ(bySize[1 * MiB], std::set<Category> { Category::Gradient });
    EXPECT_EQ(bySize[2 * MiB], std::set<Category> { Category::Gradient });
    EXPECT_EQ(bySize[16 * MiB], std::set<Category> { Category::AutogradDetail });
}
