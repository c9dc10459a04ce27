// The classic policies (first/next/best/worst fit, buddy, size-class, gmlake) replay every public
// trace with addresses to the end without a failed request, and none reserves less than the `ideal`
// lower bound (allocators.md §6.1: every policy's peak reserved ≥ max live bytes). The figures are
// printed for docs/policies.md.
#include "importers/importer_registry.h"
#include "core/units.h"
#include "replay/replayer.h"
#include "replay_test_support.h"

#include <filesystem>
#include <iomanip>
#include <iostream>

using namespace gpumem;
using namespace gpumem::replay;
using gpumem::replay::testing::paramName;

namespace {

const char* const kTraces[] = {
    "cs336-bcrafton/memory_snapshot.pickle",
    "cs336-magma27/memory_snapshot.pickle",
    "cs336-silmont2000/mem_snapshot.pickle",
    "cs336-silmont2000/memory_forward_bf16_128.pickle",
    "flexgen-llm-inference/1.3b_snapshot.pickle",
    "hta/df_index_resolver.json.gz",
    "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
};

const char* const kPolicies[] = {
    "pytorch@2.0",
    "first-fit",
    "next-fit",
    "best-fit",
    "worst-fit",
    "best-fit:segments:true",
    "buddy",
    "size-class",
    "gmlake",
    "gmlake:frag_limit_mb:2",
};

class ClassicPoliciesOnPublicTraces : public ::testing::TestWithParam<const char*> { };

} // namespace

TEST_P(ClassicPoliciesOnPublicTraces, NeverReserveLessThanTheIdealPeak)
{
    std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + GetParam();
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = loadTrace(path);
    Replayer replayer;
    ReplayResult ideal = replayer.run(trace, parsePolicySpec("ideal"));
    ASSERT_GT(ideal.allocations, 0u);
    ASSERT_GT(ideal.peakReserved.bytes, 0u);
    std::cout << GetParam() << ": ideal " << formatBytes(ideal.peakReserved.bytes) << " ("
              << ideal.allocations << " allocations)\n";
    for (const char* spec : kPolicies) {
        ReplayResult r = replayer.run(trace, parsePolicySpec(spec));
        EXPECT_EQ(r.ooms, 0u) << spec;
        EXPECT_EQ(r.allocations, ideal.allocations) << spec;
        EXPECT_GE(r.peakReserved.bytes, ideal.peakReserved.bytes) << spec;
        // ideal.peakAllocated, not its reserved: a block pending a free is occupied but not allocated.
        EXPECT_GE(r.peakAllocated.bytes, ideal.peakAllocated.bytes) << spec << ": blocks are at least 512 B multiples";
        EXPECT_EQ(r.peakRequested.bytes, ideal.peakRequested.bytes) << spec;
        std::cout << "  " << std::left << std::setw(24) << spec << std::right << std::setw(12)
                  << formatBytes(r.peakReserved.bytes) << "  x" << std::fixed << std::setprecision(3)
                  << double(r.peakReserved.bytes) / double(ideal.peakReserved.bytes) << "  device calls "
                  << r.deviceCalls() << '\n';
    }
}

INSTANTIATE_TEST_SUITE_P(Public, ClassicPoliciesOnPublicTraces, ::testing::ValuesIn(kTraces), paramName);
