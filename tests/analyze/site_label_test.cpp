// How a call stack is named in the site breakdowns (analyze/steps.h siteLabel).
#include "analyze/steps.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>

#include <array>
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
