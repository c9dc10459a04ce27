#include "replay/policies/rmm_binning_policy.h"

#include "core/error.h"
#include "replay/detail/free_ranges.h"

#include <algorithm>

// Section numbers refer to allocators.md §3.4; names in quotes are RMM's.

namespace gpumem::replay {

// "fixed_size_free_list": FIFO, freed blocks at the back, allocations from the front.
struct RmmBinningPolicy::FifoList {
    std::deque<Address> blocks;
    bool empty() const { return blocks.empty(); }
    void absorb(FifoList&& other)
    {
        blocks.insert(blocks.end(), other.blocks.begin(), other.blocks.end());
        other.blocks.clear();
    }
    std::optional<Address> takeFront()
    {
        if (blocks.empty())
            return std::nullopt;
        Address a = blocks.front();
        blocks.pop_front();
        return a;
    }
};

// One "fixed_size_memory_resource".
struct RmmBinningPolicy::Bin {
    Bytes blockSize = 0;
    detail::StreamFreeLists<FifoList> lists;
    std::map<Address, std::size_t> chunks; // chunk → allocated blocks in it
    std::vector<Address> order; // chunks in the order taken
    Bytes chunkSize() const { return blockSize * kBlocksPerChunk; }
};

RmmBinningPolicy::RmmBinningPolicy(SimulatedDevice& device, RmmBinningConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
    , m_pool(device, config.pool)
{
    if (config.minExp > config.maxExp || config.minExp < 8 || config.maxExp > 40)
        throw UsageError("rmm-binning: need 8 <= min_exp <= max_exp <= 40 (bins of 2^min_exp … 2^max_exp bytes)");
    // "binning_memory_resource(upstream, min_exp, max_exp)" adds the bins in ascending order, and each
    // "fixed_size_memory_resource" constructor takes its first chunk at once into the default stream's
    // list. [choice] A bin whose first chunk the device refuses starts empty (RMM would throw).
    for (unsigned e = config.minExp; e <= config.maxExp; ++e) {
        auto bin = std::make_unique<Bin>();
        bin->blockSize = Bytes(1) << e;
        grabChunk(*bin, 0, bin->lists.of(0));
        m_bins.push_back(std::move(bin));
    }
    updateStats();
}

// "fixed_size_memory_resource::blocks_from_upstream": a chunk from the pool, cut into equal blocks
// appended to `into`.
bool RmmBinningPolicy::grabChunk(Bin& bin, StreamKey stream, FifoList& into)
{
    auto chunk = m_pool.allocateBlock(bin.chunkSize(), stream, bin.chunkSize());
    if (!chunk)
        return false;
    bin.chunks.emplace(*chunk, 0);
    bin.order.push_back(*chunk);
    for (std::size_t i = 0; i < kBlocksPerChunk; ++i)
        into.blocks.push_back(*chunk + i * bin.blockSize);
    return true;
}

RmmBinningPolicy::~RmmBinningPolicy() = default;

std::string RmmBinningPolicy::name() const
{
    std::string opts;
    auto add = [&](const std::string& s) { opts += (opts.empty() ? ":" : ",") + s; };
    if (m_config.minExp != 18)
        add("min_exp:" + std::to_string(m_config.minExp));
    if (m_config.maxExp != 22)
        add("max_exp:" + std::to_string(m_config.maxExp));
    if (m_config.pool.initialPoolSize)
        add("initial_pool_size:" + std::to_string(*m_config.pool.initialPoolSize));
    if (m_config.pool.maximumPoolSize)
        add("maximum_pool_size:" + std::to_string(*m_config.pool.maximumPoolSize));
    return "rmm-binning" + opts;
}

// "binning_memory_resource::get_resource": the smallest bin whose size is at least the request.
Bytes RmmBinningPolicy::binFor(Bytes n) const
{
    for (const auto& b : m_bins)
        if (b->blockSize >= n)
            return b->blockSize;
    return 0;
}

std::vector<Address> RmmBinningPolicy::chunksOf(Bytes blockSize) const
{
    for (const auto& b : m_bins)
        if (b->blockSize == blockSize)
            return b->order;
    return {};
}

// Every upstream allocation goes through the pool: reserved is its pool_size() (RMM's count, not the
// simulated device's 512 B-rounded one).
void RmmBinningPolicy::updateStats() { m_stats.reserved = m_pool.poolSize(); }

std::optional<Address> RmmBinningPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    Bytes n = std::max<Bytes>(bytes, 1);
    auto bin = std::find_if(m_bins.begin(), m_bins.end(), [n](const auto& b) { return b->blockSize >= n; });
    std::optional<Address> a;
    Bytes size = 0;
    if (bin == m_bins.end()) {
        size = detail::alignedRequest(bytes, RmmPoolPolicy::kAlignment);
        if (size != 0)
            a = m_pool.allocateBlock(size, stream, bytes);
    } else {
        Bin& b = **bin;
        size = b.blockSize;
        auto take = [](FifoList& l) { return l.takeFront(); };
        // "fixed_size_memory_resource::expand_pool".
        auto expand = [&](FifoList& own) -> std::optional<Address> {
            return grabChunk(b, stream, own) ? own.takeFront() : std::nullopt;
        };
        a = b.lists.getBlock(stream, take, expand);
        if (a)
            ++std::prev(b.chunks.upper_bound(*a))->second;
    }
    updateStats();
    return m_live.settle(a, size, bytes, stream, m_stats, device(), bin == m_bins.end() ? nullptr : bin->get());
}

void RmmBinningPolicy::doDeallocate(Address address, Bytes, StreamKey stream)
{
    if (Bin* b = m_live.release(address, m_stats, "rmm-binning").tag) {
        --std::prev(b->chunks.upper_bound(address))->second;
        b->lists.of(stream).blocks.push_back(address);
    } else {
        m_pool.deallocateBlock(address, stream);
    }
}

void RmmBinningPolicy::doReleaseCached()
{
    for (auto& b : m_bins) {
        for (auto c = b->chunks.begin(); c != b->chunks.end();) {
            if (c->second != 0) {
                ++c;
                continue;
            }
            Address lo = c->first;
            Address hi = lo + b->chunkSize();
            b->lists.forEach(
                [&](StreamKey, FifoList& l) { std::erase_if(l.blocks, [&](Address a) { return a >= lo && a < hi; }); });
            std::erase(b->order, lo);
            m_pool.deallocateBlock(lo, 0);
            c = b->chunks.erase(c);
        }
    }
    m_pool.releaseCached();
    updateStats();
}

// The pool's upstream allocations; a bin's chunk shows as its fixed-size blocks.
PolicyState RmmBinningPolicy::describeState() const
{
    PolicyState state = m_pool.describeState();
    for (auto& seg : state.segments) {
        std::vector<BlockInfo> blocks;
        for (const auto& blk : seg.blocks) {
            const Bin* owner = nullptr;
            if (blk.state == BlockState::Allocated)
                for (const auto& b : m_bins)
                    if (b->chunks.count(blk.address))
                        owner = b.get();
            if (!owner) {
                blocks.push_back(blk);
                continue;
            }
            for (std::size_t i = 0; i < kBlocksPerChunk; ++i) {
                Address a = blk.address + i * owner->blockSize;
                const auto* live = m_live.find(a);
                blocks.push_back(BlockInfo { a, owner->blockSize, live ? live->requested : 0,
                    live ? BlockState::Allocated : BlockState::Free });
            }
        }
        seg.blocks = std::move(blocks);
    }
    return state;
}

} // namespace gpumem::replay
