#pragma once
// Shared helpers for the replay tests: a policy on its own simulated device with every device call
// recorded.
#include "core/jsonl_format.h"
#include "replay/adaptors/pending_free_adaptor.h"
#include "replay/policies/pytorch_policy.h"
#include "replay/policy_registry.h"
#include "replay/replayer.h"
#include "replay/request_feeder.h"

#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

namespace gpumem::replay::testing {

inline constexpr Bytes MiB = Bytes(1) << 20;

struct CallLog final : DeviceObserver {
    std::vector<DeviceCall> calls;
    void onDeviceCall(const DeviceCall& c) override { calls.push_back(c); }
    std::size_t count(EventKind kind) const
    {
        std::size_t n = 0;
        for (const auto& c : calls)
            n += c.kind == kind;
        return n;
    }
    std::vector<Bytes> sizes(EventKind kind) const
    {
        std::vector<Bytes> out;
        for (const auto& c : calls)
            if (c.kind == kind)
                out.push_back(c.size);
        return out;
    }
};

// A policy built from a spec string on a device with the given capacity.
struct Rig {
    explicit Rig(const std::string& spec = "pytorch", Bytes capacity = 0, Bytes totalMemory = Bytes(80) << 30)
        : device(capacity, 512, totalMemory)
    {
        device.setObserver(&log);
        policy = makePolicy(parsePolicySpec(spec), device);
    }
    Address alloc(Bytes n, StreamKey stream = 0)
    {
        auto a = policy->allocate(n, stream);
        EXPECT_TRUE(a.has_value()) << "allocate(" << n << ") failed";
        return a.value_or(0);
    }
    void free(Address a, StreamKey stream = 0) { policy->deallocate(a, 0, stream); }
    PyTorchPolicy& pytorch() { return dynamic_cast<PyTorchPolicy&>(*policy); }
    // The block at address a in describeState().
    BlockInfo block(Address a) const
    {
        for (const auto& s : policy->describeState().segments)
            for (const auto& b : s.blocks)
                if (b.address == a)
                    return b;
        ADD_FAILURE() << "no block at " << a;
        return {};
    }
    SegmentInfo segmentOf(Address a) const
    {
        for (const auto& s : policy->describeState().segments)
            if (a >= s.address && a < s.address + s.size)
                return s;
        ADD_FAILURE() << "no segment holds " << a;
        return {};
    }
    SimulatedDevice device;
    CallLog log;
    std::unique_ptr<AllocatorPolicy> policy;
};

// A test-parameter name from a spec or a path: every character but letters and digits becomes '_'.
inline std::string paramName(const ::testing::TestParamInfo<const char*>& param)
{
    std::string n = param.param;
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return n;
}

// A request near 2^64 or the live bytes above kMaxDeviceBytes are refused by the replay engine
// (RequestFeeder) before any policy rounds them, so every policy gives the same answer and no counter
// wraps. Run by the typed conformance suite and for `optimal`
// (tests/replay/optimal_policy_test.cpp).
inline void checkHugeRequests(const char* spec)
{
    const std::string head = "{\"format\":\"gpumem-jsonl\",\"version\":1}\n"
                             "{\"type\":\"device\",\"id\":0,\"kind\":\"cuda\",\"ordinal\":0}\n"
                             "{\"type\":\"stream\",\"id\":0,\"device\":0,\"handle\":0}\n";
    auto mem = [](int t, const char* kind, Address addr, Bytes size) {
        return "{\"type\":\"mem\",\"t\":" + std::to_string(t) + ",\"kind\":\"" + kind
            + "\",\"addr\":" + std::to_string(addr) + ",\"size\":" + std::to_string(size) + "}\n";
    };
    ReplayOptions o80;
    o80.capacity = Bytes(80) << 30;
    // What the policy reserves with no request at all (rmm-arena, rmm-binning and tf-bfc reserve up front).
    Trace none = readJsonlText(head + mem(1, "free", 4096, 512), "none.jsonl");
    const Bytes upFront80 = Replayer(o80).run(none, parsePolicySpec(spec)).peakReserved.bytes;
    const Bytes upFront = Replayer().run(none, parsePolicySpec(spec)).peakReserved.bytes;
    // One request of 2^64 - 616 B, freed: one OOM at 80 GiB, nothing reserved for it.
    Trace wraps = readJsonlText(
        head + mem(1, "alloc", 4096, 18446744073709551000u) + mem(2, "free", 4096, 18446744073709551000u),
        "wraps.jsonl");
    ReplayResult r = Replayer(o80).run(wraps, parsePolicySpec(spec));
    EXPECT_EQ(r.ooms, 1u);
    EXPECT_EQ(r.allocations, 0u);
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures[0].size, 18446744073709551000u);
    EXPECT_EQ(r.peakReserved.bytes, upFront80);
    EXPECT_EQ(r.peakAllocated.bytes, 0u);
    // 2^64 - 1 never freed, unlimited device: refused too.
    Trace max = readJsonlText(head + mem(1, "alloc", 4096, ~Bytes(0)), "max.jsonl");
    r = Replayer().run(max, parsePolicySpec(spec));
    EXPECT_EQ(r.ooms, 1u);
    EXPECT_EQ(r.peakReserved.bytes, upFront);
    EXPECT_EQ(r.peakAllocated.bytes, 0u);
    EXPECT_EQ(r.finalReserved, upFront);
    // Three live 1.5 EiB blocks on an unlimited device of kMaxDeviceBytes: at most two fit (the third would
    // take the live bytes to 4.5 EiB), and no counter wraps.
    const Bytes big = Bytes(3) << 59;
    Trace three = readJsonlText(
        head + mem(1, "alloc", 4096, big) + mem(2, "alloc", Bytes(1) << 62, big) + mem(3, "alloc", Bytes(1) << 63, big),
        "three.jsonl");
    ReplayOptions huge;
    huge.totalMemory = kMaxDeviceBytes;
    r = Replayer(huge).run(three, parsePolicySpec(spec));
    EXPECT_LE(r.allocations, 2u);
    EXPECT_EQ(r.ooms, 3 - r.allocations);
    EXPECT_EQ(r.peakRequested.bytes, r.allocations * big);
    EXPECT_GE(r.peakAllocated.bytes, r.peakRequested.bytes);
    EXPECT_GE(r.peakReserved.bytes, r.peakAllocated.bytes);
    EXPECT_LE(r.peakReserved.bytes, kMaxDeviceBytes);
}

// The pending-free rule (replay/adaptors/pending_free_adaptor.h) on a hand-made trace: A (1000 B) and
// B (3000 B) allocated; A freed while still in use on another stream (free_requested), C (500 B)
// allocated while A is pending; A's free completes; B freed with its free_completed at once; C freed.
inline constexpr const char* kPendingFreeJsonl = R"({"format":"gpumem-jsonl","version":1}
{"type":"device","id":0,"kind":"cuda","ordinal":0}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"mem","t":1,"kind":"alloc","addr":4096,"size":1024,"requested":1000}
{"type":"mem","t":2,"kind":"alloc","addr":8192,"size":3072,"requested":3000}
{"type":"mem","t":3,"kind":"free","addr":4096,"size":1024,"requested":1000}
{"type":"mem","t":4,"kind":"alloc","addr":16384,"size":512,"requested":500}
{"type":"mem","t":5,"kind":"free_completed","addr":4096,"size":1024,"requested":1000}
{"type":"mem","t":6,"kind":"free","addr":8192,"size":3072,"requested":3000}
{"type":"mem","t":7,"kind":"free_completed","addr":8192,"size":3072,"requested":3000}
{"type":"mem","t":8,"kind":"free","addr":16384,"size":512,"requested":500}
)";

struct PendingFreeStep {
    Bytes requested, allocated, reserved;
    friend bool operator==(const PendingFreeStep&, const PendingFreeStep&) = default;
};
inline void PrintTo(const PendingFreeStep& s, std::ostream* os)
{
    *os << "{requested " << s.requested << ", allocated " << s.allocated << ", reserved " << s.reserved << "}";
}

// The stats after each event of `trace` (device 0) for the policy `spec`, fed as the Replayer feeds
// them (RequestFeeder above withPendingFreeRule).
inline std::vector<PendingFreeStep> feedPendingFreeSteps(const Trace& trace, const char* spec)
{
    SimulatedDevice device;
    auto policy = makePolicy(parsePolicySpec(spec), device);
    std::unique_ptr<PendingFreeAdaptor> holder;
    AllocatorPolicy& top = withPendingFreeRule(*policy, RequestFeeder::requestsFrees(trace, 0), holder);
    RequestFeeder feeder(trace, 0, top);
    std::vector<PendingFreeStep> out;
    for (std::size_t i = 0; i < trace.memory().count(); ++i) {
        feeder.feed(i);
        out.push_back({ top.stats().requested, top.stats().allocated, top.stats().reserved });
    }
    return out;
}

} // namespace gpumem::replay::testing
