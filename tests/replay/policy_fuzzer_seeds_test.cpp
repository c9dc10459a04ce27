// The request streams of fuzz/seeds/policy_fuzzer/rmm-arena.txt and rmm-binning.txt, decoded as
// fuzz/policy_fuzzer.cpp decodes them (first line a spec, then 4-byte words: bits 0-1 the operation
// — 0/1 allocate, 2 free, 3 releaseCached —, bit 2 the stream, bits 3.. the size or the block), on
// the harness's 256 MiB device. Both policies take memory at construction (the arena, the bins' pool)
// and, after every block is freed, the final releaseCached gives all of it back (the release stands
// for the resource's destruction, allocators.md §3.3-3.4): the harness once required the up-front
// reservation to stay and aborted with "memory not given back" on its own seeds.
#include "replay/policy_registry.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <string>

using namespace gpumem;
using namespace gpumem::replay;

namespace {
struct SeedRun {
    Bytes upFront = 0;
    Bytes reservedAtEnd = 0;
    Bytes deviceReservedAtEnd = 0;
    std::size_t allocations = 0;
    std::size_t releases = 0;
};

SeedRun runSeed(const std::string& name)
{
    std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/fuzz/seeds/policy_fuzzer/" + name, std::ios::binary);
    EXPECT_TRUE(in) << name;
    std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t eol = input.find('\n');
    SimulatedDevice device(Bytes(256) << 20, 512, Bytes(256) << 20);
    auto policy = makePolicy(parsePolicySpec(input.substr(0, eol)), device);
    SeedRun run;
    run.upFront = device.counters().reserved;
    std::map<Address, std::pair<Bytes, StreamKey>> live;
    const auto* p = reinterpret_cast<const unsigned char*>(input.data()) + (eol == std::string::npos ? input.size() : eol + 1);
    const auto* end = reinterpret_cast<const unsigned char*>(input.data()) + input.size();
    for (; end - p >= 4; p += 4) {
        std::uint32_t word = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
        StreamKey stream = (word >> 2) & 1;
        switch (word & 3) {
        case 0:
        case 1: {
            Bytes n = 1 + ((word >> 3) & 1 ? (word >> 4) % (Bytes(80) << 20) : (word >> 4) % (Bytes(2) << 20));
            if (auto a = policy->allocate(n, stream)) {
                live[*a] = { n, stream };
                ++run.allocations;
            }
            break;
        }
        case 2:
            if (!live.empty()) {
                auto it = std::next(live.begin(), std::ptrdiff_t((word >> 3) % live.size()));
                policy->deallocate(it->first, it->second.first, it->second.second);
                live.erase(it);
            }
            break;
        default:
            policy->releaseCached();
            ++run.releases;
        }
        EXPECT_LE(policy->stats().allocated, policy->stats().reserved);
    }
    for (const auto& [a, info] : live)
        policy->deallocate(a, info.first, info.second);
    policy->releaseCached();
    run.reservedAtEnd = policy->stats().reserved;
    run.deviceReservedAtEnd = device.counters().reserved;
    return run;
}
} // namespace

TEST(PolicyFuzzerSeeds, RmmArenaSeedGivesItsArenaBackAtTheEnd)
{
    SeedRun run = runSeed("rmm-arena.txt");
    EXPECT_EQ(run.upFront, Bytes(64) << 20); // arena_size:64MiB, taken at construction
    EXPECT_GT(run.allocations, 0u);
    EXPECT_EQ(run.reservedAtEnd, 0u);
    EXPECT_EQ(run.deviceReservedAtEnd, 0u);
}

TEST(PolicyFuzzerSeeds, RmmBinningSeedGivesItsPoolBackAtTheEnd)
{
    SeedRun run = runSeed("rmm-binning.txt");
    EXPECT_GT(run.upFront, 0u); // the pool under the bins
    EXPECT_GT(run.allocations, 0u);
    EXPECT_EQ(run.reservedAtEnd, 0u);
    EXPECT_EQ(run.deviceReservedAtEnd, 0u);
}

// The reserve pools of size-class are the one up-front reservation a policy keeps at the end.
TEST(PolicyFuzzerSeeds, SizeClassSeedKeepsItsReservePools)
{
    SeedRun run = runSeed("size_class.txt");
    EXPECT_EQ(run.upFront, Bytes(16) << 20); // reserve:[4MiB:4]
    EXPECT_EQ(run.reservedAtEnd, run.upFront);
    EXPECT_EQ(run.deviceReservedAtEnd, run.upFront);
}
