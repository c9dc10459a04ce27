// The tf-bfc, rmm-* and cuda-async policies on every public trace that records block addresses
// (SOURCES.md: the PyTorch snapshots, the Kineto traces with `Addr`, the XLA xplane): each replay
// runs without an out-of-memory on an unlimited device, holds the same requests as the lower bound,
// never reserves less than it at the peak, and ends with a state whose blocks add up to its stats.
#include "importers/importer_registry.h"
#include "replay/replayer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

using namespace gpumem;
using namespace gpumem::replay;

namespace {

const char* const kTraces[] = {
    "cs336-bcrafton/memory_snapshot.pickle",
    "cs336-magma27/memory_snapshot.pickle",
    "cs336-silmont2000/mem_snapshot.pickle",
    "cs336-silmont2000/memory_forward_bf16_128.pickle",
    "hta/df_index_resolver.json.gz",
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
    "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/mi300-normalization/normalization_layer_test.json.gz",
    "tracelens/mi300-vllm-graph-capture/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
    "tracelens/jax-xplane/jax_conv_minimal_legacy.xplane.pb",
};

const char* const kPolicies[] = { "tf-bfc", "tf-bfc:allow_growth:false", "rmm-pool", "rmm-arena", "rmm-binning",
    "cuda-async", "cuda-async:release_threshold:0" };

class PublicTracePolicies : public ::testing::TestWithParam<const char*> { };

std::string name(const ::testing::TestParamInfo<const char*>& info)
{
    std::string n = info.param;
    n = n.substr(0, n.find('.'));
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return n;
}

} // namespace

TEST_P(PublicTracePolicies, ReserveAtLeastTheLowerBoundWithoutRunningOutOfMemory)
{
    std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + GetParam();
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = loadTrace(path);
    ReplayOptions options;
    options.keepFinalState = true;
    // The lower bound at these policies' 256 B alignment (the default 512 B would round above them).
    ReplayResult ideal = Replayer(options).run(trace, parsePolicySpec("ideal:alignment:256"));
    ASSERT_GT(ideal.allocations, 0u);
    std::cout << GetParam() << ": ideal " << ideal.peakReserved.bytes;
    for (const char* spec : kPolicies) {
        SCOPED_TRACE(spec);
        ReplayResult r = Replayer(options).run(trace, parsePolicySpec(spec));
        EXPECT_EQ(r.ooms, 0u);
        EXPECT_EQ(r.allocations, ideal.allocations);
        EXPECT_EQ(r.peakRequested.bytes, ideal.peakRequested.bytes);
        EXPECT_GE(r.peakAllocated.bytes, r.peakRequested.bytes);
        EXPECT_GE(r.peakReserved.bytes, ideal.peakReserved.bytes);
        ASSERT_TRUE(r.finalState);
        Bytes allocated = 0, segments = 0;
        for (const auto& seg : r.finalState->segments) {
            segments += seg.size;
            Bytes covered = 0;
            for (const auto& b : seg.blocks) {
                covered += b.size;
                if (b.state == BlockState::Allocated)
                    allocated += b.size;
            }
            EXPECT_EQ(covered, seg.size) << "segment at " << seg.address << " is not tiled by its blocks";
        }
        EXPECT_EQ(allocated, r.finalAllocated);
        EXPECT_LE(segments, r.finalReserved);
        std::cout << ", " << spec << " " << r.peakReserved.bytes << " (" << r.deviceCalls() << " calls)";
    }
    std::cout << '\n';
}

INSTANTIATE_TEST_SUITE_P(Public, PublicTracePolicies, ::testing::ValuesIn(kTraces), name);
