#pragma once
// Internal to analyze: the address layout of one device's segments (free ranges, inactive split,
// largest free range) that Timeline::build and the bounded-memory analysis (analyze/bounded_analysis.h)
// keep while they walk the memory events in trace order. Value type; not thread-safe.
#include "core/byte_total.h"
#include "core/types.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <memory_resource>

namespace gpumem::analyze::detail {

// The address layout of one device's segments: which ranges are free, for inactive_split and
// largest_free. Free ranges never span two segments (PyTorch never merges blocks across segments).
class SegmentLayout {
public:
    void addSegment(Address a, Bytes size)
    {
        if (size == 0 || m_segments.count(a))
            return;
        m_segments[a] = Seg { size, ByteTotal() };
        insertFree(a, size);
    }
    void removeSegment(Address a)
    {
        auto it = m_segments.find(a);
        if (it == m_segments.end())
            return;
        uncount(it->second);
        const Address end = a + it->second.size;
        for (auto f = m_free.lower_bound(a); f != m_free.end() && f->first < end;) {
            dropSize(f->second);
            f = m_free.erase(f);
        }
        m_segments.erase(it);
    }
    void allocate(Address a, Bytes size)
    {
        if (m_segments.empty()) // a device without segment events: every alloc and free of the trace comes here
            return;
        auto seg = segmentOf(a);
        if (seg == m_segments.end())
            return;
        uncount(seg->second);
        seg->second.allocated += size;
        count(seg->second);
        auto f = m_free.upper_bound(a);
        if (f == m_free.begin())
            return;
        --f;
        const Address fs = f->first, fe = f->first + f->second;
        if (a + size > fe)
            return; // not inside a free range: the trace and our layout disagree; keep the counts only
        dropSize(f->second);
        m_free.erase(f);
        if (a > fs)
            insertFree(fs, a - fs);
        if (a + size < fe)
            insertFree(a + size, fe - (a + size));
    }
    void release(Address a, Bytes size)
    {
        if (m_segments.empty())
            return;
        auto seg = segmentOf(a);
        if (seg == m_segments.end())
            return;
        uncount(seg->second);
        seg->second.allocated -= size;
        count(seg->second);
        const Address segStart = seg->first, segEnd = seg->first + seg->second.size;
        Address s = a, e = std::min(a + size, segEnd);
        auto next = m_free.lower_bound(s);
        if (next != m_free.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second > s)
                return; // already free: a double free the importer counted; ignore
            if (prev->first >= segStart && prev->first + prev->second == s) {
                s = prev->first;
                dropSize(prev->second);
                m_free.erase(prev);
            }
        }
        next = m_free.lower_bound(e);
        if (next != m_free.end() && next->first == e && next->first < segEnd) {
            e += next->second;
            dropSize(next->second);
            m_free.erase(next);
        }
        insertFree(s, e - s);
    }
    Bytes inactiveSplit() const { return m_inactiveSplit.value(); }
    Bytes largestFree() const { return m_sizes.empty() ? 0 : m_sizes.rbegin()->first; }

private:
    struct Seg {
        Bytes size = 0;
        ByteTotal allocated; // blocks a hostile trace places in one segment may add up past 2^64
    };
    std::pmr::map<Address, Seg>::iterator segmentOf(Address a)
    {
        auto it = m_segments.upper_bound(a);
        if (it == m_segments.begin())
            return m_segments.end();
        --it;
        return a < it->first + it->second.size ? it : m_segments.end();
    }
    void count(const Seg& s)
    {
        if (s.allocated.value() > 0 && s.allocated.value() < s.size)
            m_inactiveSplit += s.size - s.allocated.value();
    }
    void uncount(const Seg& s)
    {
        if (s.allocated.value() > 0 && s.allocated.value() < s.size)
            m_inactiveSplit -= s.size - s.allocated.value();
    }
    void insertFree(Address a, Bytes size)
    {
        m_free[a] = size;
        ++m_sizes[size];
    }
    void dropSize(Bytes size)
    {
        auto it = m_sizes.find(size);
        if (it != m_sizes.end() && --it->second == 0)
            m_sizes.erase(it);
    }
    // The free ranges change at every alloc and free inside a segment: their nodes come from a pool, not
    // malloc (a third of a 10 M-event analysis went to allocating and freeing map nodes). On the heap, so
    // a layout moves without moving the pool its maps point to.
    std::unique_ptr<std::pmr::unsynchronized_pool_resource> m_pool = std::make_unique<std::pmr::unsynchronized_pool_resource>();
    std::pmr::map<Address, Seg> m_segments { m_pool.get() };
    std::pmr::map<Address, Bytes> m_free { m_pool.get() };
    std::pmr::map<Bytes, std::uint32_t> m_sizes { m_pool.get() };
    ByteTotal m_inactiveSplit;
};

} // namespace gpumem::analyze::detail
