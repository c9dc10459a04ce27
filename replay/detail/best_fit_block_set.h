#pragma once
// An ordered set of Block pointers by (stream, size, address) — the order of PyTorch's BlockComparator —
// built for the best-fit lookups that run on every request: one size index per stream, whose sizes fall
// in 5,472 buckets (512 B steps below 2 MiB, then 32 steps per power of two: TLSF's two-level split),
// each bucket a short array sorted by (size, address) and stored largest first, with a bitmap of the
// non-empty buckets. A lookup is one bucket plus, when that bucket holds nothing large enough, a
// find-first-set in the bitmap; an insert or erase touches one bucket, and taking a bucket's smallest
// block (what a best fit that lands above its size takes) moves nothing. Iteration visits streams, then
// buckets, then entries, in ascending order: exactly the order of std::set with that key, since the
// bucket of a size never decreases with the size.
// It replaces a red-black tree of the same keys (KeyedBlockSet) in the pytorch policy's free sets, whose
// descent was a chain of dependent loads and mispredicted three-field compares (issue 22).
// Unlike std::set, every insert or erase invalidates all iterators: collect what to erase while
// iterating, then erase. The key of a block must not change while it is in the set (erase it first).
// Not thread-safe.
#include "core/types.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace gpumem::replay::detail {

// Block must have fields `stream`, `size` and `ptr`.
template <typename Block> class BestFitBlockSet {
    struct Entry {
        Bytes size;
        Address ptr;
        Block* block;
    };
    __extension__ using U128 = unsigned __int128;
    static bool less(const Entry& a, Bytes size, Address ptr)
    {
        return ((U128(a.size) << 64) | a.ptr) < ((U128(size) << 64) | ptr);
    }
    // A bucket keeps its entries in descending order, so that the smallest — the one a best fit takes
    // when it lands on a bucket above its size — is erased from the back (no move). entryAt(v, p): the
    // entry at ascending position p.
    static const Entry* entryAt(const std::vector<Entry>& v, std::size_t p) { return &v[v.size() - 1 - p]; }
    // The ascending position of (size, ptr) in a bucket: how many of its entries are less. The ends are
    // tried first: a best fit takes, and a merged block often returns as, the smallest entry of its bucket,
    // and a bucket of many blocks of one size (whole 2 MiB segments) is mostly entered at an end. Between
    // them, a short bucket is counted whole (no branch to mispredict); a long one is searched by halving
    // without branches (a conditional move per step).
    [[gnu::always_inline]] static std::size_t positionIn(const std::vector<Entry>& v, Bytes size, Address ptr)
    {
        const std::size_t n = v.size();
        const Entry* e = v.data();
        if (n == 0 || !less(e[n - 1], size, ptr))
            return 0;
        if (less(e[0], size, ptr))
            return n;
        if (n > 16) { // descending: the entries not less come first; find the first that is less
            const Entry* base = e;
            std::size_t len = n;
            while (len > 1) {
                const std::size_t half = len / 2;
                base += less(base[half], size, ptr) ? 0 : half;
                len -= half;
            }
            return n - std::size_t(base - e) - (less(*base, size, ptr) ? 0 : 1);
        }
        std::size_t below = 1; // e[n - 1] is less
        for (std::size_t i = 1; i + 1 < n; ++i)
            below += less(e[i], size, ptr) ? 1 : 0;
        return below;
    }

    // Sizes below 2 MiB (4,096 × 512 B) have one bucket per 512 B, so that a bucket there holds blocks of
    // one size: the small pool's free blocks are all below 2 MiB, and many of nearly one size (segments
    // with one small block left, 2 MiB less a few KiB) made one TLSF bucket of a hundred or more, searched
    // and shifted on every split and merge. Above, 32 buckets per power of two.
    static constexpr std::size_t kLinearBits = 12;
    static constexpr std::size_t kLinear = std::size_t(1) << kLinearBits;
    static constexpr std::size_t kBuckets = kLinear + (55 - kLinearBits) * 32; // size >> 9 has at most 55 bits
    static constexpr std::size_t kWords = (kBuckets + 63) / 64;
    static constexpr std::size_t kSummaryWords = (kWords + 63) / 64;
    static constexpr std::size_t kNone = kBuckets;
    static std::size_t bucketOf(Bytes size)
    {
        const std::uint64_t v = size >> 9;
        if (v < kLinear)
            return std::size_t(v);
        const unsigned e = 63u - unsigned(std::countl_zero(v)); // >= kLinearBits
        return kLinear + std::size_t(e - kLinearBits) * 32 + std::size_t((v >> (e - 5)) & 31);
    }

    // The blocks of one stream.
    struct Index {
        explicit Index(std::uint64_t s)
            : stream(s)
        {
        }
        std::uint64_t stream;
        std::size_t count = 0;
        std::array<std::uint64_t, kWords> words {}; // bit b % 64 of words[b / 64]: bucket b is not empty
        std::array<std::uint64_t, kSummaryWords> summary {}; // bit w % 64 of summary[w / 64]: words[w] != 0
        std::array<std::vector<Entry>, kBuckets> buckets; // inline: one load less on every lookup

        bool holds(std::size_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
        void mark(std::size_t b)
        {
            const std::size_t w = b >> 6;
            words[w] |= std::uint64_t(1) << (b & 63);
            summary[w >> 6] |= std::uint64_t(1) << (w & 63);
        }
        void unmark(std::size_t b)
        {
            const std::size_t w = b >> 6;
            words[w] &= ~(std::uint64_t(1) << (b & 63));
            if (words[w] == 0)
                summary[w >> 6] &= ~(std::uint64_t(1) << (w & 63));
        }
        // The first non-empty bucket >= b, or kNone.
        std::size_t next(std::size_t b) const
        {
            if (b >= kBuckets)
                return kNone;
            const std::size_t w = b >> 6;
            if (const std::uint64_t bits = words[w] & (~std::uint64_t(0) << (b & 63)))
                return (w << 6) + std::size_t(std::countr_zero(bits));
            // The first non-empty word after w, from the summary.
            for (std::size_t from = w + 1, s = from >> 6; from < kWords && s < kSummaryWords; from = ++s << 6) {
                if (const std::uint64_t later = summary[s] & (~std::uint64_t(0) << (from & 63))) {
                    const std::size_t w2 = (s << 6) + std::size_t(std::countr_zero(later));
                    return (w2 << 6) + std::size_t(std::countr_zero(words[w2]));
                }
            }
            return kNone;
        }
        // The last non-empty bucket < b, or kNone.
        std::size_t prev(std::size_t b) const
        {
            if (b == 0)
                return kNone;
            const std::size_t last = b - 1, w = last >> 6;
            const std::uint64_t upTo = (last & 63) == 63 ? ~std::uint64_t(0) : (std::uint64_t(2) << (last & 63)) - 1;
            if (const std::uint64_t bits = words[w] & upTo)
                return (w << 6) + 63 - std::size_t(std::countl_zero(bits));
            // The last non-empty word before w, from the summary.
            for (std::size_t s = w >> 6, below = w & 63;; below = 64, --s) {
                const std::uint64_t mask = below == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << below) - 1;
                if (const std::uint64_t earlier = summary[s] & mask) {
                    const std::size_t w2 = (s << 6) + 63 - std::size_t(std::countl_zero(earlier));
                    return (w2 << 6) + 63 - std::size_t(std::countl_zero(words[w2]));
                }
                if (s == 0)
                    return kNone;
            }
        }
    };

public:
    class iterator {
    public:
        using iterator_category = std::bidirectional_iterator_tag;
        using value_type = Block*;
        using difference_type = std::ptrdiff_t;
        using pointer = Block* const*;
        using reference = Block*;
        iterator() = default;
        Block* operator*() const { return m_entry->block; }
        iterator& operator++()
        {
            const Index& x = *m_set->m_streams[m_stream];
            if (++m_pos < x.buckets[m_bucket].size()) {
                --m_entry; // descending storage
                return *this;
            }
            m_pos = 0;
            m_bucket = x.next(m_bucket + 1);
            if (m_bucket == kNone)
                *this = m_set->firstFrom(m_stream + 1);
            else
                m_entry = entryAt(x.buckets[m_bucket], 0);
            return *this;
        }
        iterator operator++(int)
        {
            iterator t = *this;
            ++*this;
            return t;
        }
        iterator& operator--()
        {
            if (m_pos > 0) {
                --m_pos;
                ++m_entry; // descending storage
                return *this;
            }
            if (m_stream < m_set->m_streams.size()) {
                const Index& x = *m_set->m_streams[m_stream];
                if (const std::size_t b = x.prev(m_bucket); b != kNone) {
                    m_bucket = b;
                    m_pos = x.buckets[b].size() - 1;
                    m_entry = entryAt(x.buckets[b], m_pos);
                    return *this;
                }
            }
            do
                --m_stream;
            while (m_set->m_streams[m_stream]->count == 0);
            const Index& x = *m_set->m_streams[m_stream];
            m_bucket = x.prev(kBuckets);
            m_pos = x.buckets[m_bucket].size() - 1;
            m_entry = entryAt(x.buckets[m_bucket], m_pos);
            return *this;
        }
        bool operator==(const iterator& o) const
        {
            return m_stream == o.m_stream && m_bucket == o.m_bucket && m_pos == o.m_pos;
        }

    private:
        friend class BestFitBlockSet;
        iterator(const BestFitBlockSet* set, std::size_t stream, std::size_t bucket, std::size_t pos)
            : m_set(set)
            , m_stream(stream)
            , m_bucket(bucket)
            , m_pos(pos)
            , m_entry(stream < set->m_streams.size() ? entryAt(set->m_streams[stream]->buckets[bucket], pos) : nullptr)
        {
        }
        iterator(
            const BestFitBlockSet* set, std::size_t stream, std::size_t bucket, std::size_t pos, const Entry* entry)
            : m_set(set)
            , m_stream(stream)
            , m_bucket(bucket)
            , m_pos(pos)
            , m_entry(entry)
        {
        }
        const BestFitBlockSet* m_set = nullptr;
        std::size_t m_stream = 0; // index into m_streams; m_streams.size() at the end
        std::size_t m_bucket = 0;
        std::size_t m_pos = 0; // ascending position in the bucket
        const Entry* m_entry = nullptr; // the entry at (m_stream, m_bucket, m_pos); nullptr at the end
    };

    BestFitBlockSet() = default;
    BestFitBlockSet(const BestFitBlockSet&) = delete;
    BestFitBlockSet& operator=(const BestFitBlockSet&) = delete;

    iterator begin() const { return firstFrom(0); }
    iterator end() const { return iterator(this, m_streams.size(), 0, 0); }
    std::size_t size() const { return m_size; }

    // False (and nothing changes) when a block with the same key is in the set.
    bool insert(const Block* b)
    {
        const Bytes size = b->size;
        const Address ptr = b->ptr;
        Index& x = indexFor(b->stream);
        const std::size_t k = bucketOf(size);
        std::vector<Entry>& v = x.buckets[k];
        const Entry e { size, ptr, const_cast<Block*>(b) };
        const std::size_t p = positionIn(v, size, ptr);
        if (p == 0) {
            if (!v.empty() && v.back().size == size && v.back().ptr == ptr)
                return false;
            v.push_back(e); // the new smallest (a bucket often holds one block): no move
            if (v.size() == 1)
                x.mark(k);
        } else {
            if (p < v.size() && entryAt(v, p)->size == size && entryAt(v, p)->ptr == ptr)
                return false;
            v.insert(v.begin() + std::ptrdiff_t(v.size() - p), e);
        }
        ++x.count;
        ++m_size;
        return true;
    }

    // 1 if a block with b's key was in the set (and is erased), else 0. One bucket is searched (a
    // lower_bound would also look for the next block when the key is absent).
    std::size_t erase(const Block* b)
    {
        Index* x = findIndex(b->stream);
        const Bytes size = b->size;
        const Address ptr = b->ptr;
        const std::size_t k = bucketOf(size);
        if (!x || !x->holds(k))
            return 0;
        std::vector<Entry>& v = x->buckets[k];
        const std::size_t p = positionIn(v, size, ptr);
        if (p == v.size() || entryAt(v, p)->size != size || entryAt(v, p)->ptr != ptr)
            return 0;
        eraseAt(*x, k, p);
        return 1;
    }
    void erase(iterator it) { eraseAt(*m_streams[it.m_stream], it.m_bucket, it.m_pos); }

    // The largest size in the set (over every stream), 0 when empty; O(streams).
    Bytes largestSize() const
    {
        Bytes largest = 0;
        for (const auto& x : m_streams)
            if (x->count > 0)
                largest = std::max(largest, x->buckets[x->prev(kBuckets)].front().size); // stored largest first
        return largest;
    }

    // The first block whose key (stream, size, ptr) is not less than `key`'s.
    iterator lower_bound(const Block* key) const { return lower_bound(key->stream, key->size, key->ptr); }
    iterator lower_bound(std::uint64_t stream, Bytes size, Address ptr) const
    {
        std::size_t si = 0; // most traces have one stream: the first index, no search
        if (!m_front || m_front->stream != stream) {
            si = std::size_t(streamAtOrAfter(stream) - m_streams.begin());
            if (si == m_streams.size() || m_streams[si]->stream != stream)
                return firstFrom(si);
        }
        const Index& x = *m_streams[si];
        const std::size_t k = bucketOf(size);
        if (x.holds(k)) { // the bitmap first: an empty bucket's header is not loaded (often out of the cache)
            const std::vector<Entry>& v = x.buckets[k];
            if (const std::size_t p = positionIn(v, size, ptr); p < v.size())
                return iterator(this, si, k, p, entryAt(v, p));
        }
        if (const std::size_t n = x.next(k + 1); n != kNone)
            return iterator(this, si, n, 0, entryAt(x.buckets[n], 0));
        return firstFrom(si + 1);
    }

private:
    using Streams = std::vector<std::unique_ptr<Index>>;
    // The index of the first stream >= `stream`.
    typename Streams::const_iterator streamAtOrAfter(std::uint64_t stream) const
    {
        return std::lower_bound(m_streams.begin(), m_streams.end(), stream,
            [](const std::unique_ptr<Index>& x, std::uint64_t k) { return x->stream < k; });
    }
    // The index of `stream`, or nullptr.
    Index* findIndex(std::uint64_t stream) const
    {
        if (m_front && m_front->stream == stream)
            return m_front;
        auto s = streamAtOrAfter(stream);
        return s != m_streams.end() && (*s)->stream == stream ? s->get() : nullptr;
    }
    // The index of `stream`, made when it has none.
    Index& indexFor(std::uint64_t stream)
    {
        if (m_front && m_front->stream == stream)
            return *m_front;
        return addIndex(stream);
    }
    [[gnu::noinline]] Index& addIndex(std::uint64_t stream)
    {
        auto c = streamAtOrAfter(stream);
        auto s = m_streams.begin() + (c - m_streams.cbegin());
        if (s == m_streams.end() || (*s)->stream != stream)
            s = m_streams.insert(s, std::make_unique<Index>(stream));
        m_front = m_streams.front().get();
        return **s;
    }
    // Erases the entry at ascending position p of bucket k.
    void eraseAt(Index& x, std::size_t k, std::size_t p)
    {
        std::vector<Entry>& v = x.buckets[k];
        if (p == 0)
            v.pop_back(); // the smallest: what a best fit usually takes
        else
            v.erase(v.begin() + std::ptrdiff_t(v.size() - 1 - p));
        if (v.empty())
            x.unmark(k);
        --x.count;
        --m_size;
    }

    // The first entry of the first non-empty stream index at or after si, or end().
    iterator firstFrom(std::size_t si) const
    {
        while (si < m_streams.size() && m_streams[si]->count == 0)
            ++si;
        if (si == m_streams.size())
            return end();
        return iterator(this, si, m_streams[si]->next(0), 0);
    }

    Streams m_streams; // by stream ascending; emptied ones stay
    Index* m_front = nullptr; // m_streams.front(): the one a single-stream trace uses, found without a search
    std::size_t m_size = 0;
};

} // namespace gpumem::replay::detail
