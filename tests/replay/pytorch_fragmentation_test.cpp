// The pytorch policy's fragmentation sample (free bytes, largest free block, inactive-split bytes) comes
// from running totals kept as blocks enter and leave its free sets (issue 22: the walk over every free
// block at every new peak made a replay quadratic on traces that never free). Checked after every call,
// on every public snapshot, against the same figures computed from scratch from describeState(), with
// the settings that take the other paths: expandable segments, max_split_size (oversize release), a
// capacity that forces the OOM recovery, garbage collection, and empty_cache every 500 events.
#include "../public_snapshots.h"
#include "importers/importer_registry.h"
#include "replay/adaptors/policy_adaptor.h"
#include "replay/policy_registry.h"
#include "replay/replayer.h"
#include "replay/request_feeder.h"

#include <gtest/gtest.h>

using namespace gpumem;
using namespace gpumem::replay;

namespace {
// Compares the policy's own sample with the one computed from its state after every call.
class FragmentationCheck final : public PolicyAdaptor {
public:
    explicit FragmentationCheck(AllocatorPolicy& upstream)
        : PolicyAdaptor(upstream)
    {
    }
    std::uint64_t checks = 0;
    std::uint64_t mismatches = 0;
    Bytes mostFree = 0;

private:
    void afterCall(PolicyCall, bool) override
    {
        const FragmentationSample own = upstream().fragmentation();
        const FragmentationSample walked = fragmentationOf(upstream().describeState(), upstream().stats());
        ++checks;
        mostFree = std::max(mostFree, own.freeBytes);
        if (own.freeBytes != walked.freeBytes || own.largestFree != walked.largestFree
            || own.inactiveSplit != walked.inactiveSplit || own.reserved != walked.reserved
            || own.allocated != walked.allocated)
            ++mismatches;
    }
};
} // namespace

TEST(PyTorchFragmentation, RunningTotalsEqualTheStateAfterEveryCallOnEveryPublicSnapshot)
{
    const auto snapshots = test::presentPublicSnapshots();
    if (snapshots.empty())
        GTEST_SKIP() << "no public snapshots under " << GPUMEM_PUBLIC_TRACES;
    const char* specs[] = { "pytorch", "pytorch:expandable_segments:True", "pytorch:max_split_size_mb:64",
        "pytorch@2.0", "pytorch:garbage_collection_threshold:0.6,per_process_memory_fraction:0.9" };
    for (const auto& snap : snapshots) {
        const Trace trace = loadTrace(snap.path);
        const DeviceId dev = defaultReplayDevice(trace).value_or(0);
        for (const char* spec : specs)
            for (const Bytes capacity : { Bytes(0), Bytes(512) << 20 }) {
                SimulatedDevice sim(capacity, 512, capacity != 0 ? capacity : trace.devices()[dev].totalMemory);
                auto policy = makePolicy(parsePolicySpec(spec), sim, policyContextOf(trace.metadata()));
                FragmentationCheck check(*policy);
                RequestFeeder feeder(trace, dev, check);
                const auto& m = trace.memory();
                std::uint64_t fed = 0;
                for (std::size_t i = 0; i < m.count(); ++i) {
                    if (m.device[i] != dev)
                        continue;
                    feeder.feed(i);
                    if (++fed % 500 == 0)
                        check.releaseCached();
                }
                SCOPED_TRACE(std::string(snap.rel) + " " + spec + " capacity " + std::to_string(capacity));
                EXPECT_GT(check.checks, 40u); // the smallest snapshot has 47 calls
                EXPECT_GT(check.mostFree, 0u); // free blocks were there to count
                EXPECT_EQ(check.mismatches, 0u);
            }
    }
}
