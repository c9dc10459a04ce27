// How a call stack is named in the site breakdowns (analyze/steps.h siteLabel).
#include "analyze/analysis.h"
#include "analyze/steps.h"
#include "importers/importer_registry.h"
#include "core/trace_builder.h"
#include "tests/analyze/public_trace_support.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <vector>

using namespace gpumem;

namespace {
std::string labelOf(const std::vector<std::array<const char*, 2>>& frames)
{
    TraceBuilder b;
    std::vector<FrameId> ids;
    for (const auto& [name, file] : frames)
        ids.push_back(b.frame(name, file, 7));
    const SiteId site = b.site(ids);
    Trace t = b.build();
    return analyze::siteLabel(t, site);
}
} // namespace

// Review finding: every block of a PyTorch snapshot was labelled by the recorder's own C++ frame,
// "torch::cuda::(anonymous namespace)::gather_with_cpp() (memory_snapshot.cpp)", whatever allocated it.
TEST(SiteLabel, ASnapshotStackIsNamedByItsPythonFrameNotTheRecordersCpp)
{
    EXPECT_EQ(labelOf({ { "torch::unwind::unwind()", "??" },
                  { "torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp" },
                  { "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "CUDACachingAllocator.cpp" },
                  { "step", "/home/u/project/optimizer.py" }, { "train", "/home/u/project/train.py" } }),
        "step (optimizer.py:7)");
    // Only torch's own Python: its innermost frame, still not the C++ one.
    EXPECT_EQ(labelOf({ { "torch::unwind::unwind()", "??" },
                  { "torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp" },
                  { "zero_grad", "/usr/lib/python3/site-packages/torch/optim/optimizer.py" } }),
        "zero_grad (optimizer.py:7)");
    // A stack of C++ frames only keeps the first frame with a file.
    EXPECT_EQ(labelOf({ { "ncclCommInit", "nccl.cc" } }), "ncclCommInit (nccl.cc:7)");
}

namespace {
// The frames every snapshot stack of an autograd thread starts with: unwinder, recorder, caching allocator,
// tensor creation (cs336-silmont2000/mem_snapshot.pickle, files as recorded: "??", "" or a .cpp).
std::vector<std::array<const char*, 2>> allocatorFrames()
{
    return { { "torch::unwind::unwind()", "??" }, { "torch::CapturedTraceback::gather(bool, bool, bool)", "??" },
        { "torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp" },
        { "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
            "CUDACachingAllocator.cpp" },
        { "at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*)", "" },
        { "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)", "RegisterCUDA.cpp" } };
}
// The allocator's frames, then `rest`, then `outer`.
std::vector<std::array<const char*, 2>> withAllocator(
    const std::vector<std::array<const char*, 2>>& rest, const std::vector<std::array<const char*, 2>>& outer = {})
{
    auto frames = allocatorFrames();
    frames.insert(frames.end(), rest.begin(), rest.end());
    frames.insert(frames.end(), outer.begin(), outer.end());
    return frames;
}
// The outer end of an autograd thread: node call, engine, thread start-up, libc.
const std::vector<std::array<const char*, 2>> kEngine = {
    { "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "" },
    { "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??" },
    { "execute_native_thread_routine", "thread48.o" }, { "clone", "??" } };
} // namespace

// Review finding: C++-only stacks (autograd threads) were labelled by the first C++ frame with a file,
// "at::(anonymous namespace)::create_out(c10::ArrayRef<long>, …) (RegisterCUDA.cpp)", which every tensor
// creation shares and which the tables cut to one text: "at::(anonym...me>) (RegisterCUDA.cpp)".
TEST(SiteLabel, ACppOnlyStackIsNamedByItsOperatorAndAutogradNode)
{
    EXPECT_EQ(labelOf(withAllocator({ { "at::(anonymous namespace)::structured_mm_out_cuda_functional::set_output_raw_strided(long)", "RegisterCUDA.cpp" },
                          { "at::(anonymous namespace)::wrapper_CUDA_mm(at::Tensor const&, at::Tensor const&)", "RegisterCUDA.cpp" },
                          { "at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", "??" },
                          { "torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet, at::Tensor const&)", "VariableType_3.cpp" },
                          { "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "??" },
                          { "torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&)", "??" },
                          { "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??" } },
                  kEngine)),
        "mm in MmBackward0");
    // A helper below the operator that is not tensor-creation plumbing names the block too (a cuBLAS
    // workspace), so it stays apart from the operator's output.
    EXPECT_EQ(labelOf(withAllocator({ { "at::cuda::getNewWorkspace()", "" }, { "at::cuda::getCurrentCUDABlasHandle()", "??" },
                          { "void at::cuda::blas::bgemm<float>(char, char, long)", "??" },
                          { "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)", "??" },
                          { "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??" } },
                  kEngine)),
        "getNewWorkspace in bmm in BmmBackward0");
    // An operator outside autograd: the operator alone.
    EXPECT_EQ(labelOf(withAllocator({ { "at::_ops::empty_like::call(at::Tensor const&)", "??" }, { "main", "??" } })), "empty_like");
    // Neither: the first frame with a file that is not allocator, dispatcher, std:: or interpreter internals.
    EXPECT_EQ(labelOf({ { "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc()", "CUDACachingAllocator.cpp" },
                  { "std::function<void ()>::operator()() const", "std_function.h" }, { "_PyEval_EvalFrameDefault", "ceval.c" },
                  { "ncclCommInit", "nccl.cc" } }),
        "ncclCommInit (nccl.cc:7)");
}

TEST(SiteLabel, MemSnapshotTopSitesAreAutogradOperatorsWithDistinctLabels)
{
    const auto path = test::publicTrace("cs336-silmont2000/mem_snapshot.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    const Trace t = loadTrace(path);
    const auto a = analyze::analyzeTrace(t);
    ASSERT_FALSE(a.breakdowns.empty());
    const auto& rows = a.breakdowns.at(0).by(analyze::GroupBy::Site); // at peak allocated, by bytes
    ASSERT_GE(rows.size(), 3u);
    EXPECT_EQ(rows[0].label, "div_Tensor in DivBackward0");
    EXPECT_EQ(rows[0].totalBytes, 1073741824u);
    EXPECT_EQ(rows[1].label, "bmm in BmmBackward0");
    EXPECT_EQ(rows[1].totalBytes, 538968064u);
    EXPECT_EQ(rows[2].label, "custom_softmax (trace_peak_memory.py:7)");
    EXPECT_EQ(rows[2].totalBytes, 536870912u);
    std::set<std::string> seen;
    for (const auto& r : rows)
        EXPECT_TRUE(seen.insert(r.label).second) << "twice: " << r.label;
}
