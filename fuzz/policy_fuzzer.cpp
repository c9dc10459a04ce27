// libFuzzer harness for the replay engine: the first line is a policy spec (parsePolicySpec +
// makePolicy), the rest a request stream driven through that policy on a 256 MiB device. A bad spec
// must be a UsageError; allocations go to the default pool or one of two private pools, released at
// times and always before the end; anything else thrown, a crash, a sanitizer report or a broken invariant
// (allocated > reserved, overlapping live blocks, memory not returned at the end) is a bug. For a
// compaction:INNER spec the release step also runs a compaction pass and checks its moves.
#include "core/error.h"
#include "replay/policies/pytorch_policy.h"
#include "replay/policy_registry.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace gpumem;
using namespace gpumem::replay;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string input(reinterpret_cast<const char*>(data), size);
    std::size_t eol = input.find('\n');
    std::string specText = input.substr(0, std::min(eol, std::size_t(200)));
    SimulatedDevice device(Bytes(256) << 20, 512, Bytes(256) << 20);
    std::unique_ptr<AllocatorPolicy> policy;
    try {
        policy = makePolicy(parsePolicySpec(specText), device);
    } catch (const UsageError&) {
        return 0;
    }
    // What a policy takes up front (size-class reserve pools, the RMM arena, an RMM initial pool) is
    // either kept for good (size-class) or given back by the final releaseCached with everything else
    // (rmm-arena/-pool/-binning: the release stands for the resource's destruction, allocators.md
    // §3.2-3.4, as the conformance suite's EverythingGoesBackToTheDeviceAtTheEnd checks). Nothing
    // beyond it may stay.
    const Bytes upFront = device.counters().reserved;
    if (policy->needsPlan())
        return 0; // optimal serves only a plan made before the run (tests/replay/optimal_policy_test.cpp)
    std::map<Address, std::pair<Bytes, StreamKey>> live;
    std::vector<Address> pending;
    auto* pytorch = dynamic_cast<PyTorchPolicy*>(policy.get());
    const bool caching = pytorch != nullptr;
    std::uint64_t syncs = 0;
    // release_cached_blocks (empty_cache, or an OOM recovery inside allocate) completes every pending
    // free; their recorded free_completed arrives next and must be ignored by the policy.
    auto completePending = [&] {
        for (Address a : pending) {
            policy->deallocate(a, live[a].first, live[a].second);
            live.erase(a);
        }
        pending.clear();
    };
    const std::uint8_t* p = data + (eol == std::string::npos ? size : eol + 1);
    const std::uint8_t* end = data + size;
    while (end - p >= 4) {
        std::uint32_t word
            = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
        p += 4;
        StreamKey stream = (word >> 2) & 1;
        switch (word & 3) {
        case 0:
        case 1: {
            Bytes n = 1 + ((word >> 3) & 1 ? (word >> 4) % (Bytes(80) << 20) : (word >> 4) % (Bytes(2) << 20));
            // Bits 28-29: the pool (0 default, 1 and 2 private pools; 3 the default too).
            policy->selectPool(((word >> 28) & 3) % 3);
            auto a = policy->allocate(n, stream);
            if (pytorch && pytorch->counters().numSyncAllStreams != syncs) {
                syncs = pytorch->counters().numSyncAllStreams;
                completePending();
            }
            if (a) {
                auto next = live.lower_bound(*a);
                if ((next != live.end() && next->first < *a + n)
                    || (next != live.begin() && std::prev(next)->first + std::prev(next)->second.first > *a))
                    std::abort(); // overlapping live blocks
                live[*a] = { n, stream };
            }
            break;
        }
        case 2:
            if (caching && (word >> 30) & 1 && !pending.empty()) {
                // A recorded free_completed of a block freed with record_stream.
                Address a = pending.front();
                pending.erase(pending.begin());
                policy->deallocate(a, live[a].first, live[a].second);
                live.erase(a);
            } else if (!live.empty()) {
                auto it = std::next(live.begin(), std::ptrdiff_t((word >> 3) % live.size()));
                if (caching && (word >> 31) & 1) {
                    if (std::find(pending.begin(), pending.end(), it->first) == pending.end()) {
                        policy->requestFree(it->first); // reusable only at its free_completed
                        pending.push_back(it->first);
                    }
                } else if (std::find(pending.begin(), pending.end(), it->first) == pending.end()) {
                    policy->deallocate(it->first, it->second.first, it->second.second);
                    live.erase(it);
                }
            }
            break;
        default:
            if ((word >> 29) & 1)
                policy->releasePool(1 + ((word >> 3) & 1)); // a private pool's last user releases it
            else
                policy->releaseCached();
            if (pytorch) {
                syncs = pytorch->counters().numSyncAllStreams;
                completePending();
            }
            if (policy->compactionSchedule()) {
                // compaction:INNER — a pass moves live blocks; a block it could not place again is lost.
                CompactionPass pass = policy->compact();
                auto moved = live;
                for (const BlockMove& m : pass.moves)
                    if (moved.erase(m.from) != 1)
                        std::abort(); // a move of a block that was not live
                for (const BlockMove& m : pass.moves)
                    if (m.to != 0 && !moved.emplace(m.to, std::pair(m.requested, m.stream)).second)
                        std::abort(); // two blocks moved to one address
                live = std::move(moved);
                Address top = 0;
                for (const auto& [a, info] : live) {
                    if (a < top)
                        std::abort(); // overlapping live blocks after a pass
                    top = a + info.first;
                }
            }
            break;
        }
        if (policy->stats().allocated > policy->stats().reserved)
            std::abort();
    }
    for (Address a : pending) {
        policy->deallocate(a, live[a].first, live[a].second);
        live.erase(a);
    }
    for (const auto& [a, info] : live)
        policy->deallocate(a, info.first, info.second);
    policy->releasePool(1); // private pools go back only once released
    policy->releasePool(2);
    policy->releaseCached();
    const Bytes kept = policy->stats().reserved;
    if ((kept != 0 && kept != upFront) || device.counters().reserved != kept)
        std::abort(); // memory not given back
    return 0;
}
