#pragma once
// Shared helpers for the replay tests: a policy on its own simulated device with every device call
// recorded.
#include "replay/policies/pytorch_policy.h"
#include "replay/policy_registry.h"

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

} // namespace gpumem::replay::testing
