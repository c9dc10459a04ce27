// The code tree and frame folding (issue 18, docs/stacks.md): on the hand-written stacks of
// tests/data/stacks/line_trace.jsonl and on every public snapshot.
#include "analyze/analysis.h"
#include "analyze/code_tree.h"
#include "analyze/source_lines.h"
#include "importers/importer_registry.h"
#include "tests/analyze/public_trace_support.h"
#include "tests/public_snapshots.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace gpumem;
using namespace gpumem::analyze;

namespace {
const std::string kLineTrace = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/stacks/line_trace.jsonl";

// Checks the tree's invariants and returns the live bytes at its root.
void expectConsistent(const CodeTree& tree, const std::string& what)
{
    for (CodeNodeId id = 0; id < tree.size(); ++id) {
        const auto& n = tree.node(id);
        Bytes children = 0;
        std::uint64_t blocks = 0;
        for (auto c : n.children) {
            children += tree.node(c).totalBytes;
            blocks += tree.node(c).totalBlocks;
            EXPECT_EQ(tree.node(c).parent, id) << what;
            EXPECT_EQ(tree.node(c).depth, n.depth + 1) << what;
        }
        EXPECT_EQ(n.totalBytes, n.selfBytes + children) << what << " node " << n.label;
        EXPECT_EQ(n.totalBlocks, n.selfBlocks + blocks) << what << " node " << n.label;
        for (std::size_t k = 1; k < n.children.size(); ++k)
            EXPECT_GE(tree.node(n.children[k - 1]).totalBytes, tree.node(n.children[k]).totalBytes) << what;
    }
}

// Along every root-to-node path: no C++ frame above a Python frame, and no frame a folding rule names.
void expectPythonFirst(const Trace& trace, const CodeTree& tree, const std::string& what)
{
    for (CodeNodeId id = 1; id < tree.size(); ++id) {
        const auto& n = tree.node(id);
        if (n.frame == kNoFrame)
            continue;
        const Frame& f = trace.frames()[n.frame];
        EXPECT_EQ(foldRuleFor(trace, f), nullptr) << what << ": folded frame kept: " << n.label;
        if (!isPythonFrame(trace, f))
            continue;
        for (CodeNodeId up = n.parent; up != 0; up = tree.node(up).parent)
            if (tree.node(up).frame != kNoFrame) {
                EXPECT_TRUE(isPythonFrame(trace, trace.frames()[tree.node(up).frame]))
                    << what << ": C++ frame " << tree.node(up).label << " above Python frame " << n.label;
            }
    }
}
} // namespace

TEST(FrameFolding, GlobMatchesWholeTextWithStars)
{
    EXPECT_TRUE(globMatch("c10::cuda::CUDACachingAllocator::*", "c10::cuda::CUDACachingAllocator::Native::malloc"));
    EXPECT_TRUE(globMatch("*gather_with_cpp*", "torch::cuda::(anonymous namespace)::gather_with_cpp"));
    EXPECT_TRUE(globMatch("at::_ops::*::redispatch", "at::_ops::mm::redispatch"));
    EXPECT_FALSE(globMatch("at::_ops::*::redispatch", "at::_ops::mm::call"));
    EXPECT_FALSE(globMatch("_start", "_start_thread"));
    EXPECT_TRUE(globMatch("", ""));
    EXPECT_FALSE(globMatch("", "x"));
}

TEST(FrameFolding, SnapshotStackKeepsPythonFramesThenTheKernelBelowThem)
{
    const Trace trace = loadTrace(kLineTrace);
    // Site 2: unwinder, allocator, at::native::relu, at::_ops::relu::call, THPVariable_relu, interpreter,
    // forward (model.py:6), nn.Module._call_impl, interpreter, train, interpreter, <module> (innermost first).
    std::vector<std::string> labels;
    for (FrameId f : foldStack(trace, trace.siteFrames(2)))
        labels.push_back(stackFrameLabel(trace, trace.frames()[f]));
    EXPECT_EQ(labels, (std::vector<std::string> { "<module> (run.py:3)", "train (model.py:11)", "forward (model.py:6)",
                          "at::_ops::relu::call", "at::native::relu (Activation.cpp)" }));
    // --all-frames: all twelve, outermost first.
    FoldOptions all;
    all.allFrames = true;
    const auto every = foldStack(trace, trace.siteFrames(2), all);
    ASSERT_EQ(every.size(), 12u);
    EXPECT_EQ(stackFrameLabel(trace, trace.frames()[every.back()]), "torch::unwind::unwind");
}

TEST(FrameFolding, AutogradThreadStackWithoutPythonKeepsItsNodeAndOperator)
{
    const Trace trace = loadTrace(kLineTrace);
    std::vector<std::string> labels;
    for (FrameId f : foldStack(trace, trace.siteFrames(3)))
        labels.push_back(stackFrameLabel(trace, trace.frames()[f]));
    EXPECT_EQ(labels, (std::vector<std::string> { "torch::autograd::generated::MmBackward0::apply", "at::_ops::mm::call" }));
    // The site label (the breakdown's row) stays the autograd thread's.
    EXPECT_EQ(siteLabel(trace, 3), "mm in MmBackward0");
}

TEST(CodeTree, HandWrittenStacksSumToTheLiveBytesWithSelfAndTotalPerFrame)
{
    const Trace trace = loadTrace(kLineTrace);
    const auto analysis = analyzeTrace(trace);
    ASSERT_FALSE(analysis.breakdowns.empty());
    const auto& b = analysis.breakdowns.front();
    EXPECT_EQ(b.liveBytes, 8126976u); // 1 MiB + 2 MiB + 4 MiB + 512 KiB + 256 KiB + 512 B
    const CodeTree tree = buildCodeTree(trace, b.liveAllocations);
    expectConsistent(tree, "line_trace");
    expectPythonFirst(trace, tree, "line_trace");
    EXPECT_EQ(tree.liveBytes(), b.liveBytes);
    EXPECT_EQ(tree.liveBlocks(), 6u);
    // Root children by total: the autograd thread (4 MiB), <module> (3.75 MiB), (no stack) (512 B).
    const auto& root = tree.root();
    ASSERT_EQ(root.children.size(), 3u);
    EXPECT_EQ(tree.node(root.children[0]).label, "torch::autograd::generated::MmBackward0::apply");
    const auto& module = tree.node(root.children[1]);
    EXPECT_EQ(module.label, "<module> (run.py:3)");
    EXPECT_EQ(module.totalBytes, 3932160u);
    EXPECT_EQ(module.selfBytes, 0u);
    EXPECT_EQ(tree.node(root.children[2]).label, kNoStackLabel);
    EXPECT_EQ(tree.node(root.children[2]).selfBytes, 512u);
    const auto& train = tree.node(module.children.at(0));
    EXPECT_EQ(train.label, "train (model.py:11)");
    EXPECT_EQ(train.selfBytes, 524288u);
    EXPECT_EQ(train.totalBytes, 3932160u);
    EXPECT_EQ(tree.location(module.children.at(0)), "/home/u/proj/model.py:11");
    EXPECT_EQ(tree.location(0), std::nullopt);
    const auto& forward6 = tree.node(train.children.at(0));
    EXPECT_EQ(forward6.label, "forward (model.py:6)");
    EXPECT_EQ(forward6.totalBytes, 3145728u);
    EXPECT_EQ(forward6.totalBlocks, 2u);
}

TEST(CodeTree, FoldedLinesSumToTheLiveBytes)
{
    const Trace trace = loadTrace(kLineTrace);
    const auto analysis = analyzeTrace(trace);
    const CodeTree tree = buildCodeTree(trace, analysis.breakdowns.front().liveAllocations);
    std::ostringstream out;
    writeFoldedStacks(tree, out);
    EXPECT_EQ(out.str(),
        "torch::autograd::generated::MmBackward0::apply;at::_ops::mm::call 4194304\n"
        "<module> (run.py:3);train (model.py:11) 524288\n"
        "<module> (run.py:3);train (model.py:11);forward (model.py:6);at::_ops::relu::call;at::native::relu (Activation.cpp) 2097152\n"
        "<module> (run.py:3);train (model.py:11);forward (model.py:6);linear (functional.py:100) 1048576\n"
        "<module> (run.py:3);train (model.py:11);forward (model.py:7);linear (functional.py:100) 262144\n"
        "(no stack) 512\n");
}

TEST(SourceLines, InnermostFrameInTheFileTakesTheBytes)
{
    const Trace trace = loadTrace(kLineTrace);
    const auto analysis = analyzeTrace(trace);
    const auto& b = analysis.breakdowns.front();
    // The recorded path is /home/u/proj/model.py: "proj/model.py" matches by suffix, the bundled copy's
    // path by its base name (the one recorded model.py).
    for (const std::string& path : { std::string("proj/model.py"), std::string(GPUMEM_SOURCE_DIR) + "/tests/data/stacks/model.py" }) {
        const auto s = attributeSourceLines(trace, b.liveAllocations, path);
        ASSERT_EQ(s.recordedFiles, std::vector<std::string> { "/home/u/proj/model.py" }) << path;
        ASSERT_EQ(s.lines.size(), 3u) << path;
        EXPECT_EQ(s.lines.at(6).bytes, 3145728u); // linear and relu under forward (model.py:6)
        EXPECT_EQ(s.lines.at(6).blocks, 2u);
        EXPECT_EQ(s.lines.at(7).bytes, 262144u);
        EXPECT_EQ(s.lines.at(11).bytes, 524288u); // the block train itself made; the others are inner lines'
        EXPECT_EQ(s.attributedBytes, 3932160u);
        EXPECT_EQ(s.liveBytes, b.liveBytes);
    }
    EXPECT_TRUE(sameSourceFile("D:\\Dev\\proj\\model.py", "proj/model.py"));
    EXPECT_FALSE(sameSourceFile("/home/u/proj/model.py", "other/model.py"));
    EXPECT_TRUE(attributeSourceLines(trace, b.liveAllocations, "train.py").recordedFiles.empty());
}

TEST(CodeTree, EveryPublicSnapshotSumsToTheLiveBytesAtThePeakWithPythonFramesFirst)
{
    const auto snapshots = test::presentPublicSnapshots();
    if (snapshots.empty())
        GTEST_SKIP() << "no public snapshots under " << GPUMEM_PUBLIC_TRACES;
    for (const auto& s : snapshots) {
        const Trace trace = loadTrace(s.path);
        const auto analysis = analyzeTrace(trace);
        ASSERT_FALSE(analysis.breakdowns.empty()) << s.rel;
        const auto& b = analysis.breakdowns.front();
        ASSERT_EQ(b.instant.label, "peak allocated") << s.rel;
        const CodeTree tree = buildCodeTree(trace, b.liveAllocations);
        EXPECT_EQ(tree.liveBytes(), b.liveBytes) << s.rel;
        EXPECT_EQ(tree.liveBytes(), b.instant.allocated) << s.rel; // the timeline's allocated series at the peak
        EXPECT_EQ(tree.liveBlocks(), b.liveBlocks) << s.rel;
        expectConsistent(tree, s.rel);
        expectPythonFirst(trace, tree, s.rel);
    }
}

TEST(CodeTree, Magma27PeakHangsUnderTheBenchmarkScriptByModelLine)
{
    const std::string path = test::publicTrace("cs336-magma27/memory_snapshot.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    const Trace trace = loadTrace(path);
    const auto analysis = analyzeTrace(trace);
    const CodeTree tree = buildCodeTree(trace, analysis.breakdowns.front().liveAllocations);
    EXPECT_EQ(tree.liveBytes(), 13927832064u); // 12.97 GiB, the peak breakdown's one "(no scope)" row
    const auto& top = tree.node(tree.root().children.at(0));
    EXPECT_EQ(top.label, "<module> (benchmarking_script.py:65)");
    EXPECT_EQ(top.totalBlocks, 269u);
    // nn.Module._call_impl frames are folded: the model's forward lines follow each other.
    const auto& forward = tree.node(top.children.at(0));
    EXPECT_EQ(forward.label, "forward (model.py:253)");
    EXPECT_EQ(tree.node(forward.children.at(0)).label, "forward (model.py:386)");
}
