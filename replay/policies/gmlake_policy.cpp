#include "replay/policies/gmlake_policy.h"

#include "core/error.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>
#include <sstream>

namespace gpumem::replay {

namespace {
    constexpr Bytes kChunk = Bytes(2) << 20; // GMLake's VMM physical granularity (allocators.md §0)
}

GmlakePolicy::GmlakePolicy(SimulatedDevice& device, GmlakeConfig config)
    : AllocatorPolicy(device)
    , m_config(std::move(config))
    , m_pytorch(device, m_config.pytorch)
{
}

std::string GmlakePolicy::name() const
{
    std::string options = m_config.pytorch.toString();
    auto add = [&](const std::string& s) { options += (options.empty() ? "" : ",") + s; };
    if (m_config.fragLimit != (Bytes(512) << 20))
        add("frag_limit:" + std::to_string(m_config.fragLimit));
    if (m_config.reuseLimit != 10.0) {
        std::ostringstream os;
        os << m_config.reuseLimit;
        add("reuse_limit:" + os.str());
    }
    return options.empty() ? "gmlake" : "gmlake:" + options;
}

void GmlakePolicy::sync()
{
    const PolicyStats& inner = m_pytorch.stats();
    m_stats.allocated = inner.allocated;
    m_stats.reserved = device().counters().reserved;
    m_stats.allocRetries = inner.allocRetries;
}

bool GmlakePolicy::claim(const std::vector<Part>& parts, StreamKey stream)
{
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (!m_pytorch.adoptBlock(parts[i].address, parts[i].size, parts[i].size, stream)) {
            for (std::size_t j = 0; j < i; ++j) // roll back: the ranges merge back as they were
                m_pytorch.deallocate(parts[j].address, 0, stream);
            return false;
        }
    }
    return true;
}

std::optional<Address> GmlakePolicy::reuseStitched(Bytes size, StreamKey stream)
{
    for (;;) {
        auto best = m_stitched.end();
        for (auto it = m_stitched.begin(); it != m_stitched.end(); ++it) {
            const Stitched& s = it->second;
            if (s.allocated || s.stream != stream || s.size < size
                || double(s.size) > double(size) * m_config.reuseLimit)
                continue;
            if (best == m_stitched.end() || s.size < best->second.size)
                best = it;
        }
        if (best == m_stitched.end())
            return std::nullopt;
        if (claim(best->second.parts, stream)) {
            best->second.allocated = true;
            ++m_counters.stitchReuses;
            return best->first;
        }
        // A primitive range was handed to another request since: this stitched block is gone.
        m_stitched.erase(best);
        ++m_counters.stitchedDropped;
    }
}

std::optional<Address> GmlakePolicy::stitch(Bytes size, StreamKey stream)
{
    std::vector<Part> free;
    for (const auto& seg : m_pytorch.describeState().segments) {
        if (seg.smallPool || seg.stream != stream)
            continue;
        for (const auto& b : seg.blocks)
            if (b.state == BlockState::Free)
                free.push_back({ b.address, b.size });
    }
    std::sort(free.begin(), free.end(),
        [](const Part& a, const Part& b) { return a.size != b.size ? a.size > b.size : a.address < b.address; });
    std::vector<Part> parts;
    Bytes sum = 0;
    for (const Part& p : free) {
        if (sum >= size)
            break;
        parts.push_back(p);
        sum += p.size;
    }
    // Stitching needs two free blocks at least and enough bytes between them (glake
    // get_fused_fragmented_blocks).
    if (free.size() < 2 || sum < size)
        return std::nullopt;
    Bytes overshoot = sum - size;
    if (overshoot >= kChunk) { // split the last block: take only the chunks still needed
        const Bytes unneeded = detail::roundDownToMultiple(overshoot, kChunk);
        parts.back().size -= unneeded;
        sum -= unneeded;
    }
    if (!claim(parts, stream))
        throw Error("gmlake policy: a free block listed by the PyTorch state could not be claimed");
    Address va = device().reserveVirtual(sum);
    m_stitched[va] = Stitched { sum, stream, std::move(parts), true };
    ++m_counters.stitches;
    return va;
}

std::optional<Address> GmlakePolicy::allocateLarge(Bytes size, StreamKey stream)
{
    if (auto a = m_pytorch.allocateCached(size, stream))
        return a;
    if (auto a = reuseStitched(size, stream))
        return a;
    if (size >= m_config.fragLimit)
        if (auto a = stitch(size, stream))
            return a;
    return m_pytorch.allocate(size, stream);
}

std::optional<Address> GmlakePolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes rounded = m_pytorch.roundSize(bytes);
    std::optional<Address> a;
    if (PyTorchConfig::isSmall(rounded)) {
        a = m_pytorch.allocate(bytes, stream);
    } else {
        // GMLake's round_size: a large size is rounded to whole 2 MiB chunks unless power-2 divisions
        // apply to it (glake GMLake/src/CUDACachingAllocator.cpp, round_size).
        std::uint64_t d = m_config.pytorch.divisionsFor(bytes);
        bool divisions = d > 0 && bytes > kMinBlockSize * d;
        a = allocateLarge(divisions ? rounded : detail::roundUpToMultiple(rounded, kChunk), stream);
    }
    sync();
    if (!a) {
        ++m_stats.ooms; // the PyTorch policy reported it to the device
        return std::nullopt;
    }
    m_live.insert(*a, Live { bytes, false });
    m_stats.requested += bytes;
    return a;
}

void GmlakePolicy::doRequestFree(Address address)
{
    Live* live = m_live.find(address);
    if (!live)
        throw Error("gmlake policy: free of address " + std::to_string(address) + " that is not allocated");
    if (live->pending)
        return;
    live->pending = true;
    m_stats.requested -= live->requested;
    auto s = m_stitched.find(address);
    if (s != m_stitched.end())
        for (const Part& p : s->second.parts)
            m_pytorch.requestFree(p.address);
    else
        m_pytorch.requestFree(address);
    sync();
}

void GmlakePolicy::doDeallocate(Address address, Bytes, StreamKey stream)
{
    Live* live = m_live.find(address);
    if (!live)
        throw Error("gmlake policy: free of address " + std::to_string(address) + " that is not allocated");
    if (!live->pending)
        m_stats.requested -= live->requested;
    m_live.erase(address);
    auto s = m_stitched.find(address);
    if (s != m_stitched.end()) {
        // The primitive ranges are free again; the stitched mapping stays cached for reuse.
        for (const Part& p : s->second.parts)
            m_pytorch.deallocate(p.address, 0, stream);
        s->second.allocated = false;
    } else {
        m_pytorch.deallocate(address, 0, stream);
    }
    sync();
}

void GmlakePolicy::doReleaseCached()
{
    for (auto it = m_stitched.begin(); it != m_stitched.end();) {
        if (it->second.allocated) {
            ++it;
        } else {
            it = m_stitched.erase(it);
            ++m_counters.stitchedDropped;
        }
    }
    m_pytorch.releaseCached();
    sync();
}

} // namespace gpumem::replay
