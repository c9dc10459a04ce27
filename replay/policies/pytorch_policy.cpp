#include "replay/policies/pytorch_policy.h"

#include "core/error.h"
#include "replay/detail/address_map.h"
#include "replay/detail/best_fit_block_set.h"
#include "replay/detail/keyed_block_set.h"
#include "replay/detail/round_to_multiple.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>

// Section numbers below refer to allocators.md; function names in quotes are those of
// c10/cuda/CUDACachingAllocator.cpp whose behaviour the code reproduces.

namespace gpumem::replay {

namespace {

    struct Pool;
    struct ExpandableSegment;

    struct Block {
        Address ptr = 0;
        Bytes size = 0;
        Bytes requested = 0;
        StreamKey stream = 0;
        Pool* pool = nullptr;
        Block* prev = nullptr;
        Block* next = nullptr;
        ExpandableSegment* es = nullptr;
        std::uint64_t gcCountBase = 0;
        bool allocated = false;
        bool pendingFree = false; // freed by the program, events outstanding (§1.7 step 2)
        bool mapped = true;
        bool splitFree = false; // counted in its pool's inactiveSplitBytes while in the free set
        bool isSplit() const { return prev != nullptr || next != nullptr; }
    };

    // Free-set key (stream, size, address) and unmapped-set key (stream, address), §1.1. The free sets
    // change on nearly every request: size buckets per stream (BestFitBlockSet), whose iterators any insert or erase
    // invalidates, so the walks that release blocks collect them first.
    using BlockSet = detail::BestFitBlockSet<Block>;
    using UnmappedSet = detail::KeyedBlockSet<Block, false>;

    struct Pool {
        Pool(bool small, detail::NodeArena* mr, PoolId ownerPool = 0)
            : unmapped(mr)
            , isSmall(small)
            , owner(ownerPool)
        {
        }
        BlockSet blocks;
        UnmappedSet unmapped;
        bool isSmall;
        PoolId owner; // 0: the default pools; else the private pool (trace pool index) it belongs to
        std::uint64_t getFreeBlocksCallCount = 0; // the GC clock (§1.9)
        // Free bytes and inactive-split bytes (free blocks of split, non-expandable segments) of the free
        // set, kept as blocks enter and leave it, so that a fragmentation sample (taken at every new peak)
        // costs no walk over the blocks. A block's split state does not change while it is in the set:
        // splits and merges take a block out first, and relinking a neighbour keeps it linked.
        Bytes freeBytes = 0;
        Bytes inactiveSplitBytes = 0;
        void insertFree(Block* b)
        {
            b->gcCountBase = getFreeBlocksCallCount;
            if (blocks.insert(b)) {
                freeBytes += b->size;
                b->splitFree = b->isSplit() && !b->es;
                if (b->splitFree)
                    inactiveSplitBytes += b->size;
            }
        }
        void eraseFree(BlockSet::iterator it)
        {
            const Block* b = *it;
            blocks.erase(it);
            uncount(b);
        }
        void eraseFree(const Block* b)
        {
            if (blocks.erase(b))
                uncount(b);
        }
        void uncount(const Block* b)
        {
            freeBytes -= b->size;
            if (b->splitFree)
                inactiveSplitBytes -= b->size;
        }
    };

    // "PrivatePool": a CUDA-graph pool or MemPool with its own small and large free sets, so that no
    // block is shared with the default pools (CUDACachingAllocator.cpp: "BlockComparator is
    // performance-critical though, I'd rather not add more logic to it"). freeable: its use count fell to
    // 0 (releasePool moved it to graph_pools_freeable); only then may release_cached_blocks free its
    // segments.
    struct PrivatePool {
        PrivatePool(detail::NodeArena* mr, PoolId id)
            : small(true, mr, id)
            , large(false, mr, id)
        {
        }
        Pool small;
        Pool large;
        bool freeable = false;
        bool useOnOom = false;
    };

    // One expandable segment: a VA reservation of whole pages, each mapped or not (§1.11).
    struct ExpandableSegment {
        Address base = 0;
        Bytes pageSize = 0;
        std::size_t pages = 0;
        StreamKey stream = 0;
        Bytes bytes() const { return pageSize * pages; }
    };

    // Links `fresh` into the address list right before / after `b`.
    void linkBefore(Block* fresh, Block* b)
    {
        fresh->prev = b->prev;
        if (fresh->prev)
            fresh->prev->next = fresh;
        fresh->next = b;
        b->prev = fresh;
    }
    void linkAfter(Block* fresh, Block* b)
    {
        fresh->next = b->next;
        if (fresh->next)
            fresh->next->prev = fresh;
        fresh->prev = b;
        b->next = fresh;
    }

} // namespace

struct PyTorchPolicy::Impl {
    Impl(SimulatedDevice& dev, const PyTorchConfig& cfg, PolicyStats& st)
        : device(dev)
        , config(cfg)
        , stats(st)
        , smallPool(true, &memory)
        , largePool(false, &memory)
    {
        allowedMaximum
            = config.fractionSet ? Bytes(config.perProcessMemoryFraction * double(device.totalMemory())) : kUnlimited;
        plainRounding = std::all_of(
            config.roundupDivisions.begin(), config.roundupDivisions.end(), [](std::uint64_t d) { return d == 0; });
    }

    SimulatedDevice& device;
    const PyTorchConfig& config;
    PolicyStats& stats;
    detail::NodeArena memory;
    Pool smallPool;
    Pool largePool;
    std::deque<Block> store;
    Block* spare = nullptr; // recycled blocks, linked through `next` (newest first)
    detail::AddressMap<Block*> active; // allocated and pending-free blocks by address
    detail::AddressMap<std::uint32_t> forced; // pending frees completed early by release_cached_blocks
    std::deque<ExpandableSegment> segments; // expandable segments (stable addresses)
    std::vector<ExpandableSegment*> spareSegments;
    Bytes allowedMaximum = kUnlimited;
    // No roundup_power2_divisions: round_size is a round-up to 512 B in both rule sets (the common case,
    // decided once instead of per request).
    bool plainRounding = true;
    PyTorchCounters counters;
    std::map<PoolId, std::unique_ptr<PrivatePool>> privatePools; // by trace pool index
    PoolId current = 0; // the pool allocations go to (beginAllocateToPool)
    std::map<PoolId, PoolMemory> poolBytes; // reserved per pool, pool 0 included

    PrivatePool& privatePool(PoolId id)
    {
        auto& p = privatePools[id];
        if (!p)
            p = std::make_unique<PrivatePool>(&memory, id);
        return *p;
    }
    // "get_pool" (§1.4): the small or large set of the pool allocations go to.
    Pool& poolFor(PoolId id, bool small)
    {
        if (id == 0)
            return small ? smallPool : largePool;
        PrivatePool& p = privatePool(id);
        return small ? p.small : p.large;
    }
    // Reserved bytes of a pool change by `delta` (a cudaMalloc, map, cudaFree or unmap of its memory).
    void charge(PoolId id, Bytes bytes, bool add)
    {
        PoolMemory& m = poolBytes[id];
        m.pool = id;
        m.reserved = add ? m.reserved + bytes : m.reserved - std::min(m.reserved, bytes);
        m.peakReserved = std::max(m.peakReserved, m.reserved);
    }
    std::vector<Pool*> allPools()
    {
        std::vector<Pool*> out { &smallPool, &largePool };
        for (auto& [id, p] : privatePools) {
            out.push_back(&p->small);
            out.push_back(&p->large);
        }
        return out;
    }
    std::vector<const Pool*> allPools() const
    {
        std::vector<const Pool*> out { &smallPool, &largePool };
        for (const auto& [id, p] : privatePools) {
            out.push_back(&p->small);
            out.push_back(&p->large);
        }
        return out;
    }

    Block* newBlock(Pool* pool, StreamKey stream, Address ptr, Bytes size)
    {
        Block* b;
        if (spare) {
            b = spare;
            spare = b->next;
        } else {
            b = &store.emplace_back();
        }
        // A copy of a fresh block kept in memory: `*b = Block {}` built one on the stack and copied it with
        // 16-byte loads across the byte store of `mapped`, a store-forwarding stall on every split.
        static const Block fresh {};
        *b = fresh;
        b->pool = pool;
        b->stream = stream;
        b->ptr = ptr;
        b->size = size;
        return b;
    }
    void deleteBlock(Block* b)
    {
        b->next = spare;
        spare = b;
    }

    Bytes reserved() const { return device.counters().reserved; }
    bool expandable() const { return config.expandableSegments && config.version == PyTorchVersion::Main; }

    // "should_split" (§1.6).
    bool shouldSplit(const Block* b, Bytes rounded) const
    {
        Bytes remaining = b->size - rounded;
        if (b->pool->isSmall || expandable())
            return remaining >= kMinBlockSize;
        return rounded < config.maxSplitSize && remaining > kSmallSize;
    }

    // "get_free_block" (§1.5).
    Block* getFreeBlock(Pool& pool, StreamKey stream, Bytes rounded)
    {
        if (config.gcEnabled())
            ++pool.getFreeBlocksCallCount;
        auto it = pool.blocks.lower_bound(stream, rounded, 0);
        if (it == pool.blocks.end() || (*it)->stream != stream)
            return nullptr;
        if ((*it)->es) {
            if (expandable()) {
                // A block followed by unmapped space counts at the size it can grow to.
                auto grown = [](const Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
                auto next = std::next(it);
                while ((*it)->es && next != pool.blocks.end() && (*next)->stream == stream && grown(*next) < grown(*it))
                    it = next++;
            } else {
                do
                    ++it;
                while (it != pool.blocks.end() && (*it)->es && (*it)->stream == stream);
                if (it == pool.blocks.end() || (*it)->stream != stream)
                    return nullptr;
            }
        }
        // An oversize cached block is never handed to a normal request, and a request above
        // max_split_size takes a cached block only within max_non_split_rounding of its size.
        if (rounded < config.maxSplitSize && (*it)->size >= config.maxSplitSize)
            return nullptr;
        if (rounded >= config.maxSplitSize && (*it)->size >= rounded + config.maxNonSplitRounding)
            return nullptr;
        Block* b = *it;
        pool.eraseFree(it);
        return b;
    }

    // "try_merge_blocks" (§1.7 step 3): merges src into dst when src is free and of the same mapped state.
    // The test is inlined in the callers: most neighbours are absent or in use.
    [[gnu::always_inline]] Bytes tryMerge(Block* dst, Block* src, Pool& pool)
    {
        if (!src || src->allocated || src->pendingFree || dst->mapped != src->mapped)
            return 0;
        return merge(dst, src, pool);
    }
    Bytes merge(Block* dst, Block* src, Pool& pool)
    {
        if (dst->prev == src) {
            dst->ptr = src->ptr;
            dst->prev = src->prev;
            if (dst->prev)
                dst->prev->next = dst;
        } else {
            dst->next = src->next;
            if (dst->next)
                dst->next->prev = dst;
        }
        Bytes subsumed = src->size;
        dst->size += subsumed;
        if (src->mapped)
            pool.eraseFree(src);
        else
            pool.unmapped.erase(src);
        deleteBlock(src);
        return subsumed;
    }

    // "free_block": merge with prev then next, back into the free set (§1.7 step 3).
    void freeBlock(Block* b)
    {
        Pool& pool = *b->pool;
        b->pendingFree = false;
        b->allocated = false;
        tryMerge(b, b->prev, pool);
        tryMerge(b, b->next, pool);
        pool.insertFree(b);
    }

    // "release_block": cudaFree of a whole free segment.
    void releaseBlock(Block* b)
    {
        b->pool->eraseFree(b);
        charge(b->pool->owner, b->size, false);
        device.free(b->ptr, b->stream);
        ++counters.numDeviceFree;
        deleteBlock(b);
    }

    // "unmap_block" (§1.10, §1.11): unmaps the whole pages inside a free expandable block.
    void unmapBlock(Block* b)
    {
        ExpandableSegment& es = *b->es;
        Bytes begin = detail::roundUpToMultiple(b->ptr - es.base, es.pageSize);
        Bytes end = detail::roundDownToMultiple(b->ptr + b->size - es.base, es.pageSize);
        if (begin >= end)
            return;
        Pool& pool = *b->pool;
        pool.eraseFree(b);
        Address unmappedPtr = es.base + begin;
        Bytes unmappedSize = end - begin;
        Bytes before = unmappedPtr - b->ptr;
        if (before > 0) {
            Block* f = newBlock(&pool, b->stream, b->ptr, before);
            f->es = b->es;
            linkBefore(f, b);
            pool.insertFree(f);
        }
        Bytes after = b->size - before - unmappedSize;
        if (after > 0) {
            Block* f = newBlock(&pool, b->stream, unmappedPtr + unmappedSize, after);
            f->es = b->es;
            linkAfter(f, b);
            pool.insertFree(f);
        }
        b->ptr = unmappedPtr;
        b->size = unmappedSize;
        b->mapped = false;
        tryMerge(b, b->prev, pool);
        tryMerge(b, b->next, pool);
        pool.unmapped.insert(b);
        charge(pool.owner, unmappedSize, false);
        device.unmap(unmappedPtr, unmappedSize, b->stream);
        ++counters.numDeviceFree;
    }

    // "release_blocks": every whole free segment of a pool; expandable free blocks lose their pages.
    void releaseBlocks(Pool& pool)
    {
        std::vector<Block*> toRelease;
        std::vector<Block*> toUnmap;
        for (Block* b : pool.blocks) {
            if (b->es)
                toUnmap.push_back(b);
            else if (!b->isSplit())
                toRelease.push_back(b);
        }
        for (Block* b : toRelease) // in key order, as the walk met them
            releaseBlock(b);
        for (Block* b : toUnmap) {
            unmapBlock(b);
            if (!b->isSplit() && !b->mapped) {
                // "release_expandable_segment": the VA reservation goes; no trace event.
                b->pool->unmapped.erase(b);
                spareSegments.push_back(b->es);
                deleteBlock(b);
            }
        }
    }

    // "synchronize_and_free_events": every pending free completes now (with a private pool given: only
    // that pool's, as release_cached_blocks(mempool_id) does).
    void synchronizeAndFreeEvents(std::optional<PoolId> only = std::nullopt)
    {
        std::vector<Block*> pending;
        active.forEach([&](Address, Block* b) {
            if (b->pendingFree && (!only || b->pool->owner == *only))
                pending.push_back(b);
        });
        std::sort(pending.begin(), pending.end(), [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
        for (Block* b : pending) {
            active.erase(b->ptr);
            Address a = b->ptr;
            freeBlock(b);
            auto* n = forced.find(a);
            forced.insert(a, n ? *n + 1 : 1);
        }
        ++counters.numSyncAllStreams;
    }

    // "release_cached_blocks" (§1.10): empty_cache() and the last OOM retry: the default pools, then the
    // private pools no user holds (graph_pools_freeable), small before large as PyTorch walks them.
    void releaseCachedBlocks()
    {
        synchronizeAndFreeEvents();
        releaseBlocks(largePool);
        releaseBlocks(smallPool);
        for (auto& [id, p] : privatePools)
            if (p->freeable) {
                releaseBlocks(p->small);
                releaseBlocks(p->large);
            }
    }

    // "releasePool" then "release_cached_blocks(context, mempool_id)": the pool's use count falls to 0
    // and only its own cached segments are released (~MemPool calls emptyCache(id_)).
    void releasePool(PoolId id)
    {
        if (id == 0)
            return;
        PrivatePool& p = privatePool(id);
        p.freeable = true;
        synchronizeAndFreeEvents(id);
        releaseBlocks(p.small);
        releaseBlocks(p.large);
    }

    // "release_available_cached_blocks" (§1.10): only with max_split_size set.
    bool releaseAvailableCachedBlocks(Pool& pool, StreamKey stream, Bytes rounded)
    {
        if (config.maxSplitSize == kUnlimited)
            return false;
        Block key;
        key.stream = stream;
        key.size = std::max(rounded, config.maxSplitSize);
        auto it = pool.blocks.lower_bound(&key);
        const bool skipExpandable = config.version == PyTorchVersion::Main;
        if (it == pool.blocks.end() || (*it)->stream != stream || (skipExpandable && (*it)->es)) {
            // No single block is large enough: free oversize blocks from the largest downwards.
            if (it == pool.blocks.begin())
                return false;
            Bytes released = 0;
            std::vector<Block*> toRelease; // largest first; released after the walk
            --it;
            while (released < key.size && (*it)->size >= config.maxSplitSize && (*it)->stream == stream) {
                Block* cur = *it;
                bool first = it == pool.blocks.begin();
                if (!first)
                    --it;
                if (!cur->es) {
                    released += cur->size;
                    toRelease.push_back(cur);
                }
                if (first)
                    break;
            }
            for (Block* b : toRelease)
                releaseBlock(b);
            return released >= key.size;
        }
        releaseBlock(*it);
        return true;
    }

    // "garbage_collect_cached_blocks" (§1.9).
    void garbageCollect()
    {
        Bytes threshold = Bytes(config.garbageCollectionThreshold * double(allowedMaximum));
        if (reserved() <= threshold)
            return;
        Bytes target = reserved() - threshold;
        Bytes reclaimed = 0;
        std::uint64_t totalAge = 0;
        std::uint64_t count = 0;
        const bool skipExpandable = config.version == PyTorchVersion::Main;
        auto freeable = [&](const Block* b) { return !b->isSplit() && !(skipExpandable && b->es); };
        auto age = [&](const Block* b) { return largePool.getFreeBlocksCallCount - b->gcCountBase; };
        for (Block* b : largePool.blocks)
            if (freeable(b)) {
                totalAge += age(b);
                ++count;
            }
        if (count == 0)
            return;
        bool freed = true;
        while (reclaimed < target && freed && count > 0) {
            double threshold_age = double(totalAge) / double(count);
            freed = false;
            std::vector<Block*> toRelease; // this pass's, in key order
            for (Block* b : largePool.blocks)
                if (freeable(b) && double(age(b)) >= threshold_age)
                    toRelease.push_back(b);
            for (Block* b : toRelease) {
                freed = true;
                reclaimed += b->size;
                totalAge -= age(b);
                --count;
                ++counters.gcSegmentFrees;
                releaseBlock(b);
            }
        }
    }

    // "map_block" (§1.11 step 2): maps whole pages at the start of an unmapped block.
    bool mapBlock(Block* b, Bytes size)
    {
        ExpandableSegment& es = *b->es;
        Bytes begin = detail::roundDownToMultiple(b->ptr - es.base, es.pageSize);
        Bytes end = detail::roundUpToMultiple(b->ptr + size - es.base, es.pageSize);
        Bytes bytes = end - begin;
        if (!device.map(es.base + begin, bytes, b->stream))
            return false;
        ++counters.numDeviceAlloc;
        Pool& pool = *b->pool;
        charge(pool.owner, bytes, true);
        pool.unmapped.erase(b);
        b->mapped = true;
        if (bytes < b->size) {
            Block* rest = newBlock(&pool, b->stream, b->ptr + bytes, b->size - bytes);
            rest->mapped = false;
            rest->es = b->es;
            linkAfter(rest, b);
            pool.unmapped.insert(rest);
            b->size = bytes;
        }
        tryMerge(b, b->prev, pool);
        tryMerge(b, b->next, pool);
        pool.insertFree(b);
        return true;
    }

    static bool allocatable(const Block* b) { return b && !b->allocated && !b->pendingFree; }

    // "find_expandable_block" (§1.11 step 1); nullptr when even a new segment cannot hold `size`.
    Block* findExpandableBlock(Pool& pool, StreamKey stream, Bytes size)
    {
        auto hasRoom = [&](const Block* b) {
            Bytes bytes = 0;
            while (bytes < size && allocatable(b)) {
                bytes += b->size;
                b = b->next;
            }
            return bytes >= size;
        };
        Block key;
        key.stream = stream;
        key.ptr = 0;
        for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
            Block* c = *it;
            if (allocatable(c->prev))
                c = c->prev;
            if (hasRoom(c))
                return c;
        }
        Bytes page = pool.isSmall ? kSmallBuffer : config.largeSegmentSize;
        Bytes total = device.totalMemory();
        std::size_t pages = std::size_t((total + total / 8 + page - 1) / page);
        // A request larger than a whole segment's address range (total memory × 9/8) can never be mapped:
        // refuse it before mapping anything, so that a failed request reserves nothing (it mapped every page
        // of the new segment before: 90 GiB for a 100 GiB request on the assumed 80 GiB device).
        if (size > page * pages)
            return nullptr;
        ExpandableSegment* es;
        if (!spareSegments.empty()) {
            es = spareSegments.back();
            spareSegments.pop_back();
        } else {
            es = &segments.emplace_back();
        }
        es->pageSize = page;
        es->pages = pages;
        es->stream = stream;
        es->base = device.reserveVirtual(es->bytes());
        Block* c = newBlock(&pool, stream, es->base, es->bytes());
        c->mapped = false;
        c->es = es;
        pool.unmapped.insert(c);
        return c;
    }

    // "try_allocate_expandable_block" (§1.11 steps 2-3).
    Block* tryAllocateExpandable(Pool& pool, StreamKey stream, Bytes size)
    {
        Block* c = findExpandableBlock(pool, stream, size);
        if (!c)
            return nullptr;
        if (!c->mapped && !mapBlock(c, std::min(c->size, size)))
            return nullptr;
        while (c->size < size) {
            Block* n = c->next;
            if (n == nullptr) // larger than the segment's whole address range (total memory × 9/8): OOM
                return nullptr;
            if (!mapBlock(n, std::min(size - c->size, n->size)))
                return nullptr;
            c = n; // mapBlock merged the free candidate into n
        }
        pool.eraseFree(c);
        return c;
    }

    // "alloc_block" (§1.8 step 4b).
    Block* allocBlock(Pool& pool, StreamKey stream, Bytes rounded, Bytes allocSize, bool isRetry)
    {
        if (isRetry)
            ++counters.numAllocRetries;
        if (config.fractionSet && reserved() + allocSize > allowedMaximum)
            return nullptr;
        if (expandable())
            return tryAllocateExpandable(pool, stream, rounded);
        auto ptr = device.malloc(allocSize, stream);
        if (!ptr)
            return nullptr;
        ++counters.numDeviceAlloc;
        charge(pool.owner, allocSize, true);
        return newBlock(&pool, stream, *ptr, allocSize);
    }

    // "malloc" (§1.8).
    std::optional<Address> malloc(Bytes n, StreamKey stream, bool cachedOnly = false)
    {
        const Bytes rounded = plainRounding ? (n < kMinBlockSize ? kMinBlockSize : detail::roundUpToMultiple(n, kMinBlockSize))
                                            : config.roundSize(n);
        Pool& pool = poolFor(current, PyTorchConfig::isSmall(rounded));
        if (current != 0)
            privatePools[current]->freeable = false; // a new user of a released pool [choice]
        Block* b = getFreeBlock(pool, stream, rounded);
        if (!b && cachedOnly)
            return std::nullopt;
        if (!b) {
            const Bytes allocSize = config.allocationSize(rounded); // only a miss asks the device
            if (config.gcEnabled())
                garbageCollect();
            b = allocBlock(pool, stream, rounded, allocSize, false);
            if (!b)
                b = tryMempoolFallback(pool, stream, rounded);
            bool hardLimit
                = config.throwOnCudaMallocOom && config.fractionSet && reserved() + allocSize > allowedMaximum;
            if (!b && !hardLimit && releaseAvailableCachedBlocks(pool, stream, rounded))
                b = allocBlock(pool, stream, rounded, allocSize, false);
            if (!b && !hardLimit) {
                releaseCachedBlocks();
                b = allocBlock(pool, stream, rounded, allocSize, true);
            }
        }
        if (!b) {
            ++counters.numOoms;
            ++stats.ooms;
            stats.allocRetries = counters.numAllocRetries; // the failed request's own retry counts, as in PyTorch's stats
            device.reportOom(rounded, stream);
            return std::nullopt;
        }
        // "alloc_found_block" (§1.6): the lower part is handed out, the remainder stays free (in the pool
        // the block came from: a use_on_oom fallback block stays its MemPool's).
        if (shouldSplit(b, rounded)) {
            Block* rest = b;
            Pool& owner = *rest->pool;
            b = newBlock(&owner, stream, rest->ptr, rounded);
            b->es = rest->es;
            linkBefore(b, rest);
            rest->ptr += rounded;
            rest->size -= rounded;
            owner.insertFree(rest);
        }
        b->allocated = true;
        b->requested = n;
        active.insert(b->ptr, b);
        stats.allocated += b->size;
        stats.requested += n;
        if (stats.allocRetries != counters.numAllocRetries) // no store when unchanged (see doAllocate)
            stats.allocRetries = counters.numAllocRetries;
        return b->ptr;
    }

    // "try_mempool_fallback" (§1.8 step 4c, newest only): a cached block of a MemPool created with
    // use_on_oom=True, found by the plain best fit, no new memory.
    Block* tryMempoolFallback(Pool& pool, StreamKey stream, Bytes rounded)
    {
        if (config.version != PyTorchVersion::Main)
            return nullptr;
        for (auto& [id, p] : privatePools) {
            if (!p->useOnOom || id == pool.owner)
                continue;
            if (Block* b = getFreeBlock(pool.isSmall ? p->small : p->large, stream, rounded))
                return b;
        }
        return nullptr;
    }

    [[noreturn]] static void notAllocated(Address address)
    {
        throw Error("pytorch policy: free of address " + std::to_string(address) + " that is not allocated");
    }
    Block* activeBlock(Address address)
    {
        Block** b = active.find(address);
        if (!b)
            notAllocated(address);
        return *b;
    }

    void releaseAccounting(Block* b)
    {
        stats.allocated -= b->size;
        stats.requested -= b->requested;
    }

    std::vector<const Block*> allBlocks() const
    {
        std::vector<const Block*> out;
        active.forEach([&](Address, Block* b) { out.push_back(b); });
        for (const Pool* p : allPools()) {
            out.insert(out.end(), p->blocks.begin(), p->blocks.end());
            out.insert(out.end(), p->unmapped.begin(), p->unmapped.end());
        }
        return out;
    }
};

PyTorchPolicy::PyTorchPolicy(SimulatedDevice& device, PyTorchConfig config)
    : AllocatorPolicy(device)
    , m_config(config)
    , m_impl(std::make_unique<Impl>(device, m_config, m_stats))
{
}

PyTorchPolicy::~PyTorchPolicy() = default;

std::string PyTorchPolicy::name() const
{
    std::string s = m_config.release.empty() ? "pytorch" : "pytorch@" + m_config.release;
    std::string conf = m_config.toString();
    return conf.empty() ? s : s + ":" + conf;
}

const PyTorchCounters& PyTorchPolicy::counters() const { return m_impl->counters; }

std::optional<Address> PyTorchPolicy::doAllocate(Bytes bytes, StreamKey stream)
{
    auto a = m_impl->malloc(bytes, stream);
    // Stored only when it changed (most requests are served from the cache): the adaptor above copies
    // the stats with 16-byte loads right after this returns, and a load across a fresh 8-byte store
    // waits until that store is written (a store-forwarding stall on nearly every request).
    if (const Bytes r = device().counters().reserved; m_stats.reserved != r)
        m_stats.reserved = r;
    return a;
}

std::optional<Address> PyTorchPolicy::allocateCached(Bytes bytes, StreamKey stream)
{
    return m_impl->malloc(bytes, stream, true);
}

void PyTorchPolicy::doRequestFree(Address address)
{
    Block* b = m_impl->activeBlock(address);
    if (b->pendingFree)
        return;
    b->pendingFree = true;
    b->allocated = false;
    m_impl->releaseAccounting(b);
}

void PyTorchPolicy::doDeallocate(Address address, Bytes, StreamKey)
{
    if (auto* n = m_impl->forced.size() ? m_impl->forced.find(address) : nullptr) {
        // Its free already completed in release_cached_blocks; this is the recorded free_completed.
        if (--*n == 0)
            m_impl->forced.erase(address);
        return;
    }
    std::optional<Block*> taken = m_impl->active.take(address);
    if (!taken)
        Impl::notAllocated(address);
    Block* b = *taken;
    if (!b->pendingFree)
        m_impl->releaseAccounting(b);
    m_impl->freeBlock(b);
}

void PyTorchPolicy::doReleaseCached()
{
    m_impl->releaseCachedBlocks();
    m_stats.reserved = device().counters().reserved;
}

void PyTorchPolicy::doDeclarePool(PoolId pool, bool useOnOom)
{
    if (pool != 0)
        m_impl->privatePool(pool).useOnOom = useOnOom;
}

void PyTorchPolicy::doSelectPool(PoolId pool) { m_impl->current = pool; }

void PyTorchPolicy::doReleasePool(PoolId pool)
{
    m_impl->releasePool(pool);
    m_stats.reserved = device().counters().reserved;
}

std::vector<PoolMemory> PyTorchPolicy::doPoolMemory() const
{
    // Only a replay that met a private pool reports pools: one without is the default pool alone.
    if (m_impl->privatePools.empty())
        return {};
    std::vector<PoolMemory> out;
    PoolMemory def = m_impl->poolBytes.count(0) ? m_impl->poolBytes.at(0) : PoolMemory {};
    out.push_back(def);
    for (const auto& [id, p] : m_impl->privatePools) {
        PoolMemory m = m_impl->poolBytes.count(id) ? m_impl->poolBytes.at(id) : PoolMemory {};
        m.pool = id;
        m.released = p->freeable;
        out.push_back(m);
    }
    return out;
}

bool PyTorchPolicy::doAdoptSegment(const SegmentInfo& segment)
{
    if (segment.expandable || segment.size == 0)
        return false;
    device().adopt(segment.address, segment.size);
    Pool& pool = m_impl->poolFor(segment.pool, segment.smallPool);
    m_impl->charge(segment.pool, segment.size, true);
    Block* b = m_impl->newBlock(&pool, segment.stream, segment.address, segment.size);
    pool.insertFree(b);
    m_stats.reserved = device().counters().reserved;
    return true;
}

bool PyTorchPolicy::doAdoptBlock(Address address, Bytes size, Bytes requested, StreamKey stream)
{
    Impl& m = *m_impl;
    for (Pool* pool : m.allPools()) {
        for (auto it = pool->blocks.begin(); it != pool->blocks.end(); ++it) {
            Block* f = *it;
            if (f->stream != stream || f->es || address < f->ptr || address + size > f->ptr + f->size)
                continue;
            pool->eraseFree(it);
            if (address > f->ptr) {
                Block* front = m.newBlock(pool, stream, f->ptr, address - f->ptr);
                linkBefore(front, f);
                f->ptr = address;
                f->size -= front->size;
                pool->insertFree(front);
            }
            if (f->size > size) {
                Block* back = m.newBlock(pool, stream, address + size, f->size - size);
                linkAfter(back, f);
                f->size = size;
                pool->insertFree(back);
            }
            f->allocated = true;
            f->requested = requested;
            m.active.insert(f->ptr, f);
            m_stats.allocated += f->size;
            m_stats.requested += requested;
            return true;
        }
    }
    return false;
}

PolicyState PyTorchPolicy::describeState() const
{
    PolicyState state;
    for (const Block* head : m_impl->allBlocks()) {
        if (head->prev)
            continue;
        SegmentInfo seg;
        auto flush = [&] {
            if (!seg.blocks.empty())
                state.segments.push_back(std::move(seg));
            seg = SegmentInfo {};
        };
        for (const Block* b = head; b; b = b->next) {
            if (b->es && !b->mapped) {
                flush(); // expandable: one segment per contiguous mapped range (§1.11)
                continue;
            }
            if (seg.blocks.empty()) {
                seg.address = b->ptr;
                seg.stream = b->stream;
                seg.smallPool = b->pool->isSmall;
                seg.expandable = b->es != nullptr;
                seg.pool = b->pool->owner;
            }
            BlockState st
                = b->allocated ? BlockState::Allocated : (b->pendingFree ? BlockState::PendingFree : BlockState::Free);
            seg.blocks.push_back(BlockInfo { b->ptr, b->size, st == BlockState::Free ? 0 : b->requested, st });
            seg.size += b->size;
        }
        flush();
    }
    std::sort(state.segments.begin(), state.segments.end(),
        [](const auto& a, const auto& b) { return a.address < b.address; });
    return state;
}

FragmentationSample PyTorchPolicy::fragmentation() const
{
    FragmentationSample s;
    s.reserved = device().counters().reserved;
    s.allocated = m_stats.allocated;
    for (const Pool* p : m_impl->allPools()) { // running totals: no walk over the blocks
        s.freeBytes += p->freeBytes;
        s.inactiveSplit += p->inactiveSplitBytes;
        s.largestFree = std::max(s.largestFree, p->blocks.largestSize());
    }
    return s;
}

} // namespace gpumem::replay
