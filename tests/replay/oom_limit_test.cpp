// Task "lim" item 2: a failed request names the limit that refused it (FailedRequest::refusedBy): the
// device capacity, the simulator's 4 EiB device limit, or the policy's own limit by name, not a
// "device free unlimited" that did not refuse anything. Inputs: one allocation (the verifier's
// /tmp/v5/r100g.jsonl and r1_5e.jsonl).
#include "core/jsonl_format.h"
#include "replay/replayer.h"

#include <gtest/gtest.h>

#include <string>

using namespace gpumem;
using namespace gpumem::replay;

namespace {
Trace oneAlloc(Bytes size)
{
    const std::string s = std::to_string(size);
    return readJsonlText(R"({"format":"gpumem-jsonl","version":1}
{"type":"device","id":0,"kind":"cuda","ordinal":0}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"mem","t":1,"kind":"alloc","addr":4096,"size":)"
            + s + R"(,"requested":)" + s + "}\n",
        "one_alloc.jsonl");
}

FailedRequest firstFailure(const Trace& t, const std::string& spec, Bytes capacity = 0)
{
    ReplayOptions o;
    o.capacity = capacity;
    const ReplayResult r = Replayer(o).run(t, parsePolicySpec(spec));
    EXPECT_EQ(r.ooms, 1u) << spec;
    return r.failures.empty() ? FailedRequest {} : r.failures.front();
}

constexpr Bytes k100GiB = Bytes(100) << 30;
constexpr Bytes k1_5EiB = Bytes(3) << 59;
} // namespace

TEST(OomLimit, PolicySizedFromAnAssumedDeviceSizeSaysSo)
{
    const FailedRequest f = firstFailure(oneAlloc(k100GiB), "pytorch:expandable_segments:True");
    EXPECT_EQ(f.refusedBy, "pytorch's own limit, sized from the device's total memory, 80.00 GiB (assumed: the trace "
                           "records no memory size and no capacity was given)");
    EXPECT_EQ(f.deviceFree, Bytes(1) << 62); // the simulator's limit, not 2^64 - 1
    EXPECT_EQ(firstFailure(oneAlloc(k1_5EiB), "tf-bfc").refusedBy,
        "tf-bfc's own limit, sized from the device's total memory, 80.00 GiB (assumed: the trace records no memory "
        "size and no capacity was given)");
    EXPECT_EQ(firstFailure(oneAlloc(k1_5EiB), "tf-bfc", Bytes(1) << 60).refusedBy, "the device capacity, 1.00 EiB");
}

TEST(OomLimit, HeapPoliciesNameTheirPerStreamHeap)
{
    for (const char* policy : { "best-fit", "first-fit", "size-class" }) {
        const FailedRequest f = firstFailure(oneAlloc(k1_5EiB), policy, Bytes(4) << 60);
        EXPECT_EQ(f.refusedBy, std::string(policy) + "'s own limit, 1.00 TiB of address space per stream heap");
        EXPECT_EQ(f.deviceFree, Bytes(4) << 60);
    }
}

TEST(OomLimit, TheDeviceNamesItsCapacityOrTheSimulatorsLimit)
{
    EXPECT_EQ(firstFailure(oneAlloc(k100GiB), "direct", Bytes(1) << 30).refusedBy, "the device capacity, 1.00 GiB");
    EXPECT_EQ(firstFailure(oneAlloc(Bytes(5) << 60), "direct").refusedBy, "the simulator's device limit, 4.00 EiB");
    EXPECT_EQ(firstFailure(oneAlloc(Bytes(5) << 60), "direct", Bytes(15) << 60).refusedBy,
        "the simulator's device limit, 4.00 EiB");
}
