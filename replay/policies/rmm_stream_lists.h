#pragma once
// The per-stream free lists of RMM's stream_ordered_memory_resource (allocators.md §3.1), shared by
// rmm-pool (coalescing lists) and the fixed-size bins of rmm-binning (FIFO lists). One list per
// stream, in the order the streams first appeared [choice: RMM iterates them in the order of their
// CUDA event handles, which is effectively arbitrary]; a list merged into another is deleted and a
// later one for its stream goes to the end. Not thread-safe.
#include "replay/simulated_device.h"

#include <list>
#include <optional>
#include <utility>

namespace gpumem::replay::detail {

// List must provide: bool empty() const; void absorb(List&& other) (merges other's blocks in).
template <typename List> class StreamFreeLists {
public:
    // The list of `stream`, created (empty, at the end) when missing.
    List& of(StreamKey stream)
    {
        if (List* l = find(stream))
            return *l;
        return m_lists.emplace_back(stream, List {}).second;
    }
    List* find(StreamKey stream)
    {
        for (auto& [s, l] : m_lists)
            if (s == stream)
                return &l;
        return nullptr;
    }
    // "get_block" in the 4-step order: (1) `take` from the stream's own list; (2) for each other list
    // in order, `take` from that list alone (the remainder stays in it); (3) for each other list in
    // order, merge it into the stream's list (deleting it) and `take` again; (4) `expand` the stream's
    // list. take(List&) → optional<Address>; expand(List&) → optional<Address>.
    template <typename Take, typename Expand>
    std::optional<Address> getBlock(StreamKey stream, Take&& take, Expand&& expand)
    {
        if (List* own = find(stream))
            if (auto a = take(*own))
                return a;
        List& own = of(stream);
        for (auto& [s, l] : m_lists)
            if (s != stream)
                if (auto a = take(l))
                    return a;
        for (auto it = m_lists.begin(); it != m_lists.end();) {
            if (it->first == stream) {
                ++it;
                continue;
            }
            own.absorb(std::move(it->second));
            it = m_lists.erase(it);
            if (auto a = take(own))
                return a;
        }
        return expand(own);
    }
    template <typename F> void forEach(F&& f)
    {
        for (auto& [s, l] : m_lists)
            f(s, l);
    }
    template <typename F> void forEach(F&& f) const
    {
        for (const auto& [s, l] : m_lists)
            f(s, l);
    }

private:
    std::list<std::pair<StreamKey, List>> m_lists;
};

} // namespace gpumem::replay::detail
