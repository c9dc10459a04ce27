// One limit for what a replay hands out (kMaxDeviceBytes, 4 EiB, simulated_device.h): the opening
// allocation and the requests are refused by the same rule above a 4 EiB capacity, and the policies that
// round requests themselves (alignedRequest) serve everything below it on a device that large.
#include "replay_test_support.h"

using namespace gpumem;
using namespace gpumem::replay;
using namespace gpumem::replay::testing;

namespace {

std::string oneAlloc(Bytes size)
{
    return std::string("{\"format\":\"gpumem-jsonl\",\"version\":1}\n")
        + "{\"type\":\"device\",\"id\":0,\"kind\":\"cuda\",\"ordinal\":0}\n"
        + "{\"type\":\"stream\",\"id\":0,\"device\":0,\"handle\":0}\n"
        + "{\"type\":\"mem\",\"t\":1,\"kind\":\"alloc\",\"addr\":4096,\"size\":" + std::to_string(size) + "}\n";
}

constexpr Bytes kFiveEiB = Bytes(5) << 60;

} // namespace

TEST(DeviceLimit, ACapacityAbove4EiBIsCappedAtKMaxDeviceBytes)
{
    EXPECT_EQ(SimulatedDevice(kFiveEiB).limit(), kMaxDeviceBytes);
    EXPECT_EQ(SimulatedDevice(kMaxDeviceBytes).limit(), kMaxDeviceBytes);
    EXPECT_EQ(SimulatedDevice(0).limit(), kMaxDeviceBytes);
    EXPECT_EQ(SimulatedDevice(Bytes(80) << 30).limit(), Bytes(80) << 30);
}

TEST(DeviceLimit, OpeningAllocationAndRequestsAreRefusedByTheSameLimitAboveA4EiBCapacity)
{
    ReplayOptions options;
    options.capacity = kFiveEiB;
    const Trace small = readJsonlText(oneAlloc(512), "small.jsonl");
    for (const char* spec : { "ideal", "direct", "pytorch" }) {
        // A request of 4 EiB + 512 B: one OOM, nothing allocated.
        ReplayResult request
            = Replayer(options).run(readJsonlText(oneAlloc(kMaxDeviceBytes + 512), "big.jsonl"), parsePolicySpec(spec));
        EXPECT_EQ(request.ooms, 1u) << spec;
        EXPECT_EQ(request.allocations, 0u) << spec;
        // The same bytes as the opening allocation: refused the same way (it was handed to the policy, the
        // replayer's limit being the 5 EiB capacity). Since issue 16 memory from before the window that does
        // not fit means the run cannot start: a before-window failure, and the window is not replayed.
        ReplayOptions opening = options;
        opening.openingAllocated = kMaxDeviceBytes + 512;
        ReplayResult r = Replayer(opening).run(small, parsePolicySpec(spec));
        EXPECT_EQ(r.ooms, 1u) << spec;
        EXPECT_EQ(r.allocations, 0u) << spec;
        ASSERT_EQ(r.failures.size(), 1u) << spec;
        EXPECT_TRUE(r.failures[0].beforeWindow) << spec;
        EXPECT_EQ(r.failures[0].size, kMaxDeviceBytes + 512) << spec;
        EXPECT_TRUE(r.stopped) << spec;
    }
    // Exactly 4 EiB opening bytes are held (and then no room is left for the 512 B request).
    ReplayOptions opening = options;
    opening.openingAllocated = kMaxDeviceBytes;
    ReplayResult r = Replayer(opening).run(small, parsePolicySpec("ideal"));
    EXPECT_EQ(r.peakAllocated.bytes, kMaxDeviceBytes);
    EXPECT_EQ(r.ooms, 1u);
    EXPECT_EQ(r.failures.at(0).size, 512u);
}

TEST(DeviceLimit, PoolPoliciesServeA1point5EiBRequestOnA4EiBDevice)
{
    // No capacity, total memory 4 EiB: the pools size from the device, and no policy has a smaller limit of
    // its own (alignedRequest refused everything above 256 TiB).
    ReplayOptions options;
    options.totalMemory = kMaxDeviceBytes;
    const Bytes request = Bytes(3) << 59;
    const Trace trace = readJsonlText(oneAlloc(request), "one_and_a_half_eib.jsonl");
    for (const char* spec : { "tf-bfc", "rmm-pool", "rmm-binning", "rmm-arena", "cuda-async", "pytorch",
             "pytorch:expandable_segments:True", "direct", "ideal" }) {
        ReplayResult r = Replayer(options).run(trace, parsePolicySpec(spec));
        EXPECT_EQ(r.ooms, 0u) << spec;
        EXPECT_EQ(r.allocations, 1u) << spec;
        EXPECT_EQ(r.peakRequested.bytes, request) << spec;
        EXPECT_LE(r.peakReserved.bytes, kMaxDeviceBytes) << spec;
    }
    // At the boundary: exactly 4 EiB is served, one byte more is one OOM for every policy.
    for (const char* spec : { "tf-bfc", "rmm-pool", "cuda-async", "direct", "ideal" }) {
        ReplayResult at
            = Replayer(options).run(readJsonlText(oneAlloc(kMaxDeviceBytes), "at.jsonl"), parsePolicySpec(spec));
        EXPECT_EQ(at.ooms, 0u) << spec;
        EXPECT_EQ(at.peakRequested.bytes, kMaxDeviceBytes) << spec;
        ReplayResult above
            = Replayer(options).run(readJsonlText(oneAlloc(kMaxDeviceBytes + 1), "above.jsonl"), parsePolicySpec(spec));
        EXPECT_EQ(above.ooms, 1u) << spec;
        EXPECT_EQ(above.peakReserved.bytes, 0u) << spec;
    }
}
