#include "replay/detail/free_list_heap.h"

#include "core/error.h"
#include "replay/detail/address_map.h"
#include "replay/detail/keyed_block_set.h"
#include "replay/detail/round_to_multiple.h"
#include "replay/policies/pytorch_config.h"

#include <algorithm>
#include <deque>
#include <limits>

namespace gpumem::replay::detail {

namespace {

    // Virtual address space of one heap [choice]: far above any trace's peak, far below the 2^64 the
    // simulated device can hand out.
    constexpr Bytes kHeapSpan = Bytes(1) << 40;

    struct Region;

    struct HeapBlock {
        Address ptr = 0;
        Bytes size = 0;
        Bytes requested = 0;
        StreamKey stream = 0;
        HeapBlock* prev = nullptr;
        HeapBlock* next = nullptr;
        Region* region = nullptr;
        bool free = true;
    };

    // A heap (heap mode) or a cudaMalloc segment (segment mode).
    struct Region {
        Address base = 0;
        Bytes size = 0; // mapped (heap) or allocated (segment) bytes
        StreamKey stream = 0;
        HeapBlock* first = nullptr;
        HeapBlock* last = nullptr;
    };

} // namespace

std::string_view toString(FitRule rule)
{
    switch (rule) {
    case FitRule::First:
        return "first-fit";
    case FitRule::Next:
        return "next-fit";
    case FitRule::Best:
        return "best-fit";
    case FitRule::Worst:
        return "worst-fit";
    }
    return "fit";
}

std::string FreeListConfig::toString() const
{
    FreeListConfig d;
    std::string out;
    auto add = [&](const std::string& s) { out += (out.empty() ? "" : ",") + s; };
    if (alignment != d.alignment)
        add("alignment:" + std::to_string(alignment));
    if (growthChunk != d.growthChunk)
        add("growth_chunk:" + std::to_string(growthChunk));
    if (minBlock != alignment)
        add("min_block:" + std::to_string(minBlock));
    if (segments)
        add("segments:true");
    return out;
}

struct FreeListHeap::Impl {
    Impl(SimulatedDevice& dev, const FreeListConfig& cfg)
        : device(dev)
        , config(cfg)
        , bySize(&memory)
        , byAddress(&memory)
    {
    }

    SimulatedDevice& device;
    const FreeListConfig& config;
    NodeArena memory;
    KeyedBlockSet<HeapBlock, true> bySize; // free blocks by (stream, size, address)
    KeyedBlockSet<HeapBlock, false> byAddress; // free blocks by (stream, address): first and next fit only
    AddressMap<HeapBlock*> live;
    std::deque<HeapBlock> store;
    std::vector<HeapBlock*> spare;
    std::deque<Region> regionStore;
    std::vector<Region*> spareRegions;
    std::map<Address, Region*> regions; // every heap and segment by base address
    std::map<StreamKey, Region*> heaps; // heap mode: the heap of each stream
    std::map<StreamKey, Address> rover; // next fit: where the next search starts

    HeapBlock* newBlock(Region* r, Address ptr, Bytes size)
    {
        HeapBlock* b;
        if (!spare.empty()) {
            b = spare.back();
            spare.pop_back();
            *b = HeapBlock {};
        } else {
            b = &store.emplace_back();
        }
        b->region = r;
        b->stream = r->stream;
        b->ptr = ptr;
        b->size = size;
        return b;
    }

    // Only first and next fit search by address; best and worst fit keep one tree.
    bool addressOrdered() const { return config.rule == FitRule::First || config.rule == FitRule::Next; }
    void insertFree(HeapBlock* b)
    {
        b->free = true;
        bySize.insert(b);
        if (addressOrdered())
            byAddress.insert(b);
    }
    void eraseFree(HeapBlock* b)
    {
        bySize.erase(b);
        if (addressOrdered())
            byAddress.erase(b);
    }

    static HeapBlock key(StreamKey stream, Bytes size, Address ptr)
    {
        HeapBlock k;
        k.stream = stream;
        k.size = size;
        k.ptr = ptr;
        return k;
    }

    // The free block the rule picks for `rounded` bytes on `stream`, or nullptr.
    HeapBlock* find(Bytes rounded, StreamKey stream)
    {
        switch (config.rule) {
        case FitRule::Best: {
            HeapBlock k = key(stream, rounded, 0);
            auto it = bySize.lower_bound(&k);
            return it != bySize.end() && (*it)->stream == stream ? *it : nullptr;
        }
        case FitRule::Worst: {
            HeapBlock k = key(stream, std::numeric_limits<Bytes>::max(), 0);
            auto it = bySize.lower_bound(&k);
            if (it == bySize.begin())
                return nullptr;
            --it;
            if ((*it)->stream != stream || (*it)->size < rounded)
                return nullptr;
            HeapBlock lowest = key(stream, (*it)->size, 0); // lowest address among the largest
            return *bySize.lower_bound(&lowest);
        }
        case FitRule::First:
            return scan(stream, 0, std::numeric_limits<Address>::max(), rounded);
        case FitRule::Next: {
            auto r = rover.find(stream);
            Address start = r == rover.end() ? 0 : r->second;
            if (HeapBlock* b = scan(stream, start, std::numeric_limits<Address>::max(), rounded))
                return b;
            return scan(stream, 0, start, rounded); // wrap around once
        }
        }
        return nullptr;
    }

    // The first free block of `stream` at an address in [from, to) with room for `rounded`.
    HeapBlock* scan(StreamKey stream, Address from, Address to, Bytes rounded)
    {
        HeapBlock k = key(stream, 0, from);
        for (auto it = byAddress.lower_bound(&k); it != byAddress.end(); ++it) {
            HeapBlock* b = *it;
            if (b->stream != stream || b->ptr >= to)
                return nullptr;
            if (b->size >= rounded)
                return b;
        }
        return nullptr;
    }

    Region* newRegion(Address base, Bytes size, StreamKey stream)
    {
        Region* r;
        if (!spareRegions.empty()) {
            r = spareRegions.back();
            spareRegions.pop_back();
            *r = Region {};
        } else {
            r = &regionStore.emplace_back();
        }
        r->base = base;
        r->size = size;
        r->stream = stream;
        regions[base] = r;
        return r;
    }

    // New memory for `rounded` bytes: a free block that fits, or nullptr.
    HeapBlock* grow(Bytes rounded, StreamKey stream)
    {
        if (config.segments) {
            PyTorchConfig pytorchDefaults;
            Bytes size = pytorchDefaults.allocationSize(rounded);
            auto ptr = device.malloc(size, stream);
            if (!ptr)
                return nullptr;
            Region* r = newRegion(*ptr, size, stream);
            HeapBlock* b = newBlock(r, *ptr, size);
            r->first = r->last = b;
            insertFree(b);
            return b;
        }
        Region*& heap = heaps[stream];
        if (!heap)
            heap = newRegion(device.reserveVirtual(kHeapSpan), 0, stream);
        HeapBlock* tail = heap->last && heap->last->free ? heap->last : nullptr;
        Bytes need = rounded - (tail ? tail->size : 0);
        Bytes extension = roundUpToMultiple(std::max(need, config.growthChunk), config.alignment);
        Address top = heap->base + heap->size;
        if (heap->size + extension > kHeapSpan || !device.map(top, extension, stream)) {
            // Short of capacity: a heap that cannot take a whole chunk still takes what the request needs.
            extension = roundUpToMultiple(need, config.alignment);
            if (heap->size + extension > kHeapSpan || !device.map(top, extension, stream))
                return nullptr;
        }
        heap->size += extension;
        if (tail) {
            eraseFree(tail);
            tail->size += extension;
            insertFree(tail);
            return tail;
        }
        HeapBlock* b = newBlock(heap, top, extension);
        b->prev = heap->last;
        if (heap->last)
            heap->last->next = b;
        else
            heap->first = b;
        heap->last = b;
        insertFree(b);
        return b;
    }

    // Hands out the lower `rounded` bytes of free block b.
    HeapBlock* take(HeapBlock* b, Bytes rounded, Bytes requested)
    {
        eraseFree(b);
        if (b->size - rounded >= std::max<Bytes>(config.minBlock, 1)) {
            HeapBlock* rest = newBlock(b->region, b->ptr + rounded, b->size - rounded);
            rest->next = b->next;
            if (rest->next)
                rest->next->prev = rest;
            else
                b->region->last = rest;
            rest->prev = b;
            b->next = rest;
            b->size = rounded;
            insertFree(rest);
        }
        b->free = false;
        b->requested = requested;
        live.insert(b->ptr, b);
        rover[b->stream] = b->ptr + b->size;
        return b;
    }

    // Absorbs free neighbour `src` into `dst` (boundary-tag coalescing).
    void absorb(HeapBlock* dst, HeapBlock* src)
    {
        eraseFree(src);
        Region* r = dst->region;
        if (src == dst->prev) {
            dst->ptr = src->ptr;
            dst->prev = src->prev;
            if (dst->prev)
                dst->prev->next = dst;
            else
                r->first = dst;
        } else {
            dst->next = src->next;
            if (dst->next)
                dst->next->prev = dst;
            else
                r->last = dst;
        }
        dst->size += src->size;
        spare.push_back(src);
    }

    void unlink(HeapBlock* b)
    {
        Region* r = b->region;
        (b->prev ? b->prev->next : r->first) = b->next;
        (b->next ? b->next->prev : r->last) = b->prev;
        spare.push_back(b);
    }

    void release()
    {
        if (config.segments) {
            for (auto it = regions.begin(); it != regions.end();) {
                Region* r = it->second;
                if (r->first == r->last && r->first->free) {
                    eraseFree(r->first);
                    spare.push_back(r->first);
                    device.free(r->base, r->stream);
                    spareRegions.push_back(r);
                    it = regions.erase(it);
                } else {
                    ++it;
                }
            }
            return;
        }
        for (auto& [stream, heap] : heaps) {
            HeapBlock* tail = heap->last;
            if (!tail || !tail->free)
                continue;
            eraseFree(tail);
            device.unmap(tail->ptr, tail->size, stream);
            heap->size -= tail->size;
            unlink(tail);
        }
    }
};

FreeListHeap::FreeListHeap(SimulatedDevice& device, FreeListConfig config)
    : m_config(config)
    , m_impl(std::make_unique<Impl>(device, m_config))
{
}

FreeListHeap::~FreeListHeap() = default;

Bytes FreeListHeap::roundSize(Bytes bytes) const { return roundUpToMultiple(std::max<Bytes>(bytes, 1), m_config.alignment); }

std::optional<FreeListHeap::Grant> FreeListHeap::allocate(Bytes rounded, Bytes requested, StreamKey stream)
{
    Impl& m = *m_impl;
    HeapBlock* b = m.find(rounded, stream);
    if (!b)
        b = m.grow(rounded, stream);
    if (!b) {
        ++m_retries;
        m.release();
        b = m.grow(rounded, stream);
    }
    if (!b)
        return std::nullopt;
    b = m.take(b, rounded, requested);
    return Grant { b->ptr, b->size };
}

std::optional<Address> FreeListHeap::allocateFor(Bytes bytes, StreamKey stream, PolicyStats& stats)
{
    Bytes rounded = roundSize(bytes);
    std::uint64_t retriesBefore = m_retries;
    auto grant = allocate(rounded, bytes, stream);
    stats.allocRetries += m_retries - retriesBefore;
    stats.reserved = m_impl->device.counters().reserved;
    if (!grant) {
        ++stats.ooms;
        m_impl->device.reportOom(rounded, stream);
        return std::nullopt;
    }
    stats.allocated += grant->size;
    stats.requested += bytes;
    return grant->address;
}

void FreeListHeap::freeFor(Address address, PolicyStats& stats)
{
    auto [size, requested] = free(address);
    stats.allocated -= size;
    stats.requested -= requested;
}


std::pair<Bytes, Bytes> FreeListHeap::free(Address address)
{
    Impl& m = *m_impl;
    HeapBlock** found = m.live.find(address);
    if (!found)
        throw Error(std::string(toString(m_config.rule)) + " policy: free of address " + std::to_string(address)
            + " that is not allocated");
    HeapBlock* b = *found;
    m.live.erase(address);
    std::pair<Bytes, Bytes> out { b->size, b->requested };
    b->requested = 0;
    if (b->prev && b->prev->free)
        m.absorb(b, b->prev);
    if (b->next && b->next->free)
        m.absorb(b, b->next);
    m.insertFree(b);
    return out;
}

void FreeListHeap::release() { m_impl->release(); }

void FreeListHeap::describe(PolicyState& state) const
{
    for (const auto& [base, r] : m_impl->regions) {
        if (r->size == 0)
            continue;
        SegmentInfo seg { r->base, r->size, r->stream, false, false, {} };
        for (const HeapBlock* b = r->first; b; b = b->next)
            seg.blocks.push_back(BlockInfo {
                b->ptr, b->size, b->requested, b->free ? BlockState::Free : BlockState::Allocated });
        state.segments.push_back(std::move(seg));
    }
}

void FreeListHeap::addFree(FragmentationSample& sample) const
{
    for (const HeapBlock* b : m_impl->bySize) {
        sample.freeBytes += b->size;
        sample.largestFree = std::max(sample.largestFree, b->size);
        if (b->prev || b->next)
            sample.inactiveSplit += b->size;
    }
}

} // namespace gpumem::replay::detail
