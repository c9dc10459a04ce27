#pragma once
// An ordered set of Block pointers that keeps each block's sort key inside the tree node, so a search
// compares keys without dereferencing blocks (one cache miss per tree level instead of two), and takes
// its nodes from a free list instead of the heap. Iterators yield the Block pointer. The key of a block
// must not change while it is in the set (erase it first). Not thread-safe.
#include "core/types.h"

#include <cstddef>
#include <iterator>
#include <memory>
#include <set>
#include <vector>

namespace gpumem::replay::detail {

// Fixed-size node recycling for node-based containers: every allocation of one object comes from a
// free list that grows in chunks; arrays go to the heap.
class NodeArena {
public:
    void* allocate(std::size_t bytes)
    {
        if (bytes > kNodeBytes)
            return ::operator new(bytes);
        if (!m_free) {
            auto chunk = std::make_unique<Node[]>(kChunk);
            for (std::size_t i = 0; i < kChunk; ++i) {
                chunk[i].next = m_free;
                m_free = &chunk[i];
            }
            m_chunks.push_back(std::move(chunk));
        }
        Node* n = m_free;
        m_free = n->next;
        return n;
    }
    void deallocate(void* p, std::size_t bytes)
    {
        if (bytes > kNodeBytes) {
            ::operator delete(p);
            return;
        }
        Node* n = static_cast<Node*>(p);
        n->next = m_free;
        m_free = n;
    }

private:
    static constexpr std::size_t kNodeBytes = 96;
    static constexpr std::size_t kChunk = 1024;
    union Node {
        Node* next;
        alignas(std::max_align_t) std::byte bytes[kNodeBytes];
    };
    Node* m_free = nullptr;
    std::vector<std::unique_ptr<Node[]>> m_chunks;
};

template <typename T> struct ArenaAllocator {
    using value_type = T;
    NodeArena* arena;
    explicit ArenaAllocator(NodeArena* a)
        : arena(a)
    {
    }
    template <typename U>
    ArenaAllocator(const ArenaAllocator<U>& o)
        : arena(o.arena)
    {
    }
    T* allocate(std::size_t n) { return static_cast<T*>(arena->allocate(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) { arena->deallocate(p, n * sizeof(T)); }
    template <typename U> bool operator==(const ArenaAllocator<U>& o) const { return arena == o.arena; }
};

// Block must have fields `stream`, `size` and `ptr`. BySize: key (stream, size, ptr); otherwise
// (stream, ptr).
template <typename Block, bool BySize> class KeyedBlockSet {
    struct Entry {
        std::uint64_t stream;
        Bytes size;
        Address ptr;
        Block* block;
        bool operator<(const Entry& o) const
        {
            if (stream != o.stream)
                return stream < o.stream;
            if constexpr (BySize)
                if (size != o.size)
                    return size < o.size;
            return ptr < o.ptr;
        }
    };
    using Tree = std::set<Entry, std::less<Entry>, ArenaAllocator<Entry>>;
    static Entry keyOf(const Block* b) { return Entry { b->stream, b->size, b->ptr, const_cast<Block*>(b) }; }

public:
    class iterator {
    public:
        using iterator_category = std::bidirectional_iterator_tag;
        using value_type = Block*;
        using difference_type = std::ptrdiff_t;
        using pointer = Block* const*;
        using reference = Block*;
        iterator() = default;
        explicit iterator(typename Tree::const_iterator it)
            : m_it(it)
        {
        }
        Block* operator*() const { return m_it->block; }
        iterator& operator++()
        {
            ++m_it;
            return *this;
        }
        iterator operator++(int)
        {
            iterator t = *this;
            ++m_it;
            return t;
        }
        iterator& operator--()
        {
            --m_it;
            return *this;
        }
        bool operator==(const iterator& o) const { return m_it == o.m_it; }
        typename Tree::const_iterator base() const { return m_it; }

    private:
        typename Tree::const_iterator m_it;
    };

    explicit KeyedBlockSet(NodeArena* arena)
        : m_tree(ArenaAllocator<Entry>(arena))
    {
    }
    iterator begin() const { return iterator(m_tree.begin()); }
    iterator end() const { return iterator(m_tree.end()); }
    bool insert(const Block* b) { return m_tree.insert(keyOf(b)).second; }
    std::size_t erase(const Block* b) { return m_tree.erase(keyOf(b)); }
    void erase(iterator it) { m_tree.erase(it.base()); }
    // The first block whose key is not less than `key`'s.
    iterator lower_bound(const Block* key) const { return iterator(m_tree.lower_bound(keyOf(key))); }
    std::size_t size() const { return m_tree.size(); }

private:
    Tree m_tree;
};

} // namespace gpumem::replay::detail
