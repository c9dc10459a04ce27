#pragma once
// GMLake (Guo et al., "GMLake: Efficient and Transparent GPU Memory Defragmentation for Large-scale
// DNN Training with Virtual Memory Stitching", ASPLOS 2024; code intelligent-machine-learning/glake
// @ 0274a9c5), as allocators.md §5.1 describes it: PyTorch 2.0's caching allocator with virtual memory
// stitching in the large pool.
//
// Built by composition on a PyTorchPolicy with the 2.0 rules (it owns one, on the same device):
// - small requests (rounded ≤ 1 MiB) are PyTorch 2.0's, unchanged;
// - large requests are rounded up to whole 2 MiB physical chunks (GMLake's round_size; so PyTorch's
//   segment-size rule sees the rounded size: an 8.2 MiB request gets a 10 MiB segment, not 20 MiB) and
//   go through GMLake's order:
//   1. best fit among the primitive blocks (PyTorchPolicy::allocateCached);
//   2. reuse a cached free stitched block of the stream whose size is ≥ the request and ≤ request ×
//      reuse_limit (the smallest such), if all its primitive ranges are still free;
//   3. if the request ≥ frag_limit and the stream has two free large blocks or more: stitch free
//      large blocks of the stream, taken from the largest downward until their sum ≥ the request (the
//      last one split when the overshoot is ≥ 2 MiB), into one new virtual range: no new physical
//      memory, no device call (glake get_fused_fragmented_blocks);
//   4. new physical memory and PyTorch 2.0's recovery chain (release oversize cached blocks, release
//      all cached blocks, retry), else out of memory.
// Reserved = physical bytes (the primitive segments). A stitched block's primitive ranges show in
// describeState() as allocated blocks of their segments; the stitched virtual range itself holds no
// memory and is not listed.
// Approximated: physical memory of a primitive segment is one device allocation (GMLake creates it
// in 2 MiB cuMemCreate chunks); the stitch attempts GMLake repeats between the recovery steps are
// not repeated (recovery only removes free blocks, so they cannot succeed where step 3 failed,
// except for pending cross-stream frees completed by the recovery); stitched blocks are dropped on
// releaseCached() or when a primitive range was reused, instead of GMLake's LRU StitchFree/autoGC.
// Owns its blocks; uses the SimulatedDevice it was given. Not thread-safe.
#include "replay/detail/address_map.h"
#include "replay/policies/pytorch_policy.h"

#include <map>

namespace gpumem::replay {

struct GmlakeConfig {
    PyTorchConfig pytorch { .version = PyTorchVersion::V2_0 }; // the 2.0 settings underneath
    Bytes fragLimit = Bytes(512) << 20; // fragLimit: smallest request that may be stitched
    double reuseLimit = 10.0; // reuseLimit: a cached stitched block ≤ request × this is reused
};

struct GmlakeCounters {
    std::uint64_t stitches = 0; // stitched blocks created
    std::uint64_t stitchReuses = 0; // cached stitched blocks reused
    std::uint64_t stitchedDropped = 0; // cached stitched blocks dropped (a range was reused, or released)
};

class GmlakePolicy final : public AllocatorPolicy {
public:
    GmlakePolicy(SimulatedDevice& device, GmlakeConfig config);

    std::string name() const override;
    PolicyState describeState() const override { return m_pytorch.describeState(); }
    FragmentationSample fragmentation() const override { return m_pytorch.fragmentation(); }
    const GmlakeCounters& counters() const { return m_counters; }
    const GmlakeConfig& config() const { return m_config; }

private:
    std::optional<Address> doAllocate(Bytes bytes, StreamKey stream) override;
    void doDeallocate(Address address, Bytes bytes, StreamKey stream) override;
    void doRequestFree(Address address) override;
    bool doCountsPendingFrees() const override { return true; } // requested here, allocated in its PyTorch policy
    void doReleaseCached() override;

    struct Part {
        Address address;
        Bytes size;
    };
    struct Stitched {
        Bytes size = 0;
        StreamKey stream = 0;
        std::vector<Part> parts;
        bool allocated = false;
    };
    struct Live {
        Bytes requested = 0;
        bool pending = false; // requestFree came, deallocate not yet
    };
    std::optional<Address> allocateLarge(Bytes size, StreamKey stream);
    std::optional<Address> reuseStitched(Bytes size, StreamKey stream);
    std::optional<Address> stitch(Bytes size, StreamKey stream);
    bool claim(const std::vector<Part>& parts, StreamKey stream);
    void sync();

    GmlakeConfig m_config;
    PyTorchPolicy m_pytorch;
    std::map<Address, Stitched> m_stitched; // by virtual address
    detail::AddressMap<Live> m_live;
    GmlakeCounters m_counters;
};

} // namespace gpumem::replay
