#include "replay/offset_planner.h"

#include <algorithm>
#include <numeric>

namespace gpumem::replay {

namespace {

    // Disjoint, non-touching address ranges [lo, hi) in address order; inserting coalesces, so the
    // union of many packed blocks stays a handful of ranges.
    class RangeSet {
    public:
        void insert(Bytes lo, Bytes hi)
        {
            // First range that ends at or after lo (touching counts) and first that starts after hi.
            auto i = std::partition_point(m_r.begin(), m_r.end(), [&](const auto& r) { return r.second < lo; });
            auto j = std::partition_point(i, m_r.end(), [&](const auto& r) { return r.first <= hi; });
            if (i == j) {
                m_r.insert(i, { lo, hi });
                return;
            }
            i->first = std::min(lo, i->first);
            i->second = std::max(hi, std::prev(j)->second);
            m_r.erase(std::next(i), j);
        }
        const std::vector<std::pair<Bytes, Bytes>>& ranges() const { return m_r; }

    private:
        std::vector<std::pair<Bytes, Bytes>> m_r;
    };

    // Segment tree over compressed time. A block stored at the canonical nodes Q of its interval goes
    // into covering(q) for q in Q and into below(a) for every strict ancestor a of Q. The blocks that
    // overlap an interval with canonical nodes Q and ancestors A are then exactly
    // covering(Q) ∪ below(Q) ∪ covering(A): O(log n) sets, each a coalesced union.
    class TimeTree {
    public:
        explicit TimeTree(std::size_t leaves)
        {
            m_base = 1;
            while (m_base < leaves)
                m_base <<= 1;
            m_covering.assign(2 * m_base, 0);
            m_below.assign(2 * m_base, 0);
            m_stamp.assign(2 * m_base, 0);
            m_sets.emplace_back(); // index 0 = no set
        }

        // The offset greedy-by-size gives a block of `size` live on compressed [lo, hi), recorded.
        Bytes place(std::size_t lo, std::size_t hi, Bytes size)
        {
            nodesOf(lo, hi);
            m_cursors.clear();
            for (std::size_t q : m_canonical) {
                addCursor(m_covering[q]);
                addCursor(m_below[q]);
            }
            for (std::size_t a : m_ancestors)
                addCursor(m_covering[a]);
            // allocators.md §6.2 step 3–4 over the ranges in address order (a k-way merge of the sorted
            // sets): the smallest gap that fits, else after the highest end.
            Bytes prevEnd = 0;
            Bytes best = 0, bestGap = ~Bytes(0);
            bool found = false;
            auto visit = [&](Bytes o, Bytes e) {
                if (o >= prevEnd && o - prevEnd >= size && o - prevEnd < bestGap) {
                    bestGap = o - prevEnd;
                    best = prevEnd;
                    found = true;
                }
                prevEnd = std::max(prevEnd, e);
            };
            auto later = [](const Cursor& x, const Cursor& y) { return x.at->first > y.at->first; };
            std::make_heap(m_cursors.begin(), m_cursors.end(), later);
            while (!m_cursors.empty()) {
                std::pop_heap(m_cursors.begin(), m_cursors.end(), later);
                Cursor& c = m_cursors.back();
                // Take this set's ranges while they stay below the next set's first start.
                const Bytes limit = m_cursors.size() > 1 ? m_cursors.front().at->first : ~Bytes(0);
                do {
                    visit(c.at->first, c.at->second);
                    ++c.at;
                } while (c.at != c.end && c.at->first <= limit);
                if (c.at == c.end)
                    m_cursors.pop_back();
                else
                    std::push_heap(m_cursors.begin(), m_cursors.end(), later);
            }
            Bytes offset = found ? best : prevEnd;
            if (size > 0) {
                for (std::size_t q : m_canonical)
                    set(m_covering, q).insert(offset, offset + size);
                for (std::size_t a : m_ancestors)
                    set(m_below, a).insert(offset, offset + size);
            }
            return offset;
        }

    private:
        void nodesOf(std::size_t lo, std::size_t hi)
        {
            m_canonical.clear();
            m_ancestors.clear();
            ++m_round;
            for (std::size_t l = lo + m_base, r = hi + m_base; l < r; l >>= 1, r >>= 1) {
                if (l & 1)
                    m_canonical.push_back(l++);
                if (r & 1)
                    m_canonical.push_back(--r);
            }
            for (std::size_t q : m_canonical)
                for (std::size_t a = q >> 1; a >= 1 && m_stamp[a] != m_round; a >>= 1) {
                    m_stamp[a] = m_round;
                    m_ancestors.push_back(a);
                }
        }
        using RangeIt = std::vector<std::pair<Bytes, Bytes>>::const_iterator;
        struct Cursor {
            RangeIt at, end;
        };
        void addCursor(std::uint32_t index)
        {
            if (index != 0 && !m_sets[index].ranges().empty())
                m_cursors.push_back({ m_sets[index].ranges().begin(), m_sets[index].ranges().end() });
        }
        RangeSet& set(std::vector<std::uint32_t>& slots, std::size_t node)
        {
            if (slots[node] == 0) {
                slots[node] = std::uint32_t(m_sets.size());
                m_sets.emplace_back();
            }
            return m_sets[slots[node]];
        }
        std::size_t m_base = 1;
        std::vector<std::uint32_t> m_covering, m_below, m_stamp;
        std::uint32_t m_round = 0;
        std::vector<RangeSet> m_sets;
        std::vector<std::size_t> m_canonical, m_ancestors;
        std::vector<Cursor> m_cursors;
    };

} // namespace

std::vector<std::uint32_t> placementOrder(std::span<const PlanBlock> blocks, PlanOrder by)
{
    // Area = size × lifetime, a block live to the end counting to one past the last time of the set.
    std::uint64_t horizon = 0;
    for (const auto& b : blocks)
        horizon = std::max(horizon, b.end != ~std::uint64_t(0) ? b.end : b.start + 1);
    std::vector<double> area(by == PlanOrder::Area ? blocks.size() : 0);
    for (std::size_t i = 0; i < area.size(); ++i)
        area[i] = double(blocks[i].size) * double(std::min(blocks[i].end, horizon) - blocks[i].start);
    std::vector<std::uint32_t> order(blocks.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        const PlanBlock& x = blocks[a];
        const PlanBlock& y = blocks[b];
        if (x.first != y.first)
            return x.first;
        if (by == PlanOrder::Area && area[a] != area[b])
            return area[a] > area[b];
        if (x.size != y.size)
            return x.size > y.size;
        if (x.start != y.start)
            return x.start < y.start;
        return a < b;
    });
    return order;
}

OffsetPlan planOffsets(std::span<const PlanBlock> blocks, PlanOrder by)
{
    OffsetPlan plan;
    plan.offsets.assign(blocks.size(), 0);
    if (blocks.empty())
        return plan;
    // Compress time to the start points: [s, e) becomes [rank(s), #starts < e), which keeps every
    // overlap (a start is < e exactly when its rank is < #starts < e).
    std::vector<std::uint64_t> starts(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i)
        starts[i] = blocks[i].start;
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());

    const std::vector<std::uint32_t> order = placementOrder(blocks, by);
    TimeTree tree(starts.size());
    for (std::uint32_t i : order) {
        const PlanBlock& b = blocks[i];
        auto lo = std::size_t(std::lower_bound(starts.begin(), starts.end(), b.start) - starts.begin());
        auto hi = std::size_t(std::lower_bound(starts.begin(), starts.end(), b.end) - starts.begin());
        hi = std::max(hi, lo + 1); // a malformed end <= start still occupies its start
        Bytes offset = tree.place(lo, hi, b.size);
        plan.offsets[i] = offset;
        plan.arena = std::max(plan.arena, offset + b.size);
    }
    return plan;
}

OffsetPlan planOffsetsBest(std::span<const PlanBlock> blocks)
{
    OffsetPlan bySize = planOffsets(blocks, PlanOrder::Size);
    OffsetPlan byArea = planOffsets(blocks, PlanOrder::Area);
    return byArea.arena < bySize.arena ? byArea : bySize;
}

OffsetPlan planOffsetsByScan(std::span<const PlanBlock> blocks, PlanOrder by)
{
    const std::vector<std::uint32_t> order = placementOrder(blocks, by);
    OffsetPlan plan;
    plan.offsets.assign(blocks.size(), 0);
    std::vector<std::uint32_t> placed; // by offset
    for (std::uint32_t r : order) {
        Bytes prevEnd = 0, best = 0, bestGap = ~Bytes(0);
        bool found = false;
        for (std::uint32_t p : placed) {
            if (!(blocks[p].start < blocks[r].end && blocks[r].start < blocks[p].end))
                continue;
            Bytes o = plan.offsets[p];
            if (o >= prevEnd && o - prevEnd >= blocks[r].size && o - prevEnd < bestGap) {
                bestGap = o - prevEnd;
                best = prevEnd;
                found = true;
            }
            prevEnd = std::max(prevEnd, o + blocks[p].size);
        }
        plan.offsets[r] = found ? best : prevEnd;
        plan.arena = std::max(plan.arena, plan.offsets[r] + blocks[r].size);
        auto at = std::upper_bound(placed.begin(), placed.end(), plan.offsets[r],
            [&](Bytes off, std::uint32_t p) { return off < plan.offsets[p]; });
        placed.insert(at, r);
    }
    return plan;
}

Bytes maxLiveBytes(std::span<const PlanBlock> blocks)
{
    // (time, +size at start / −size at end); ends sort first at equal times since lifetimes are [start, end).
    std::vector<std::pair<std::uint64_t, std::int64_t>> edges;
    edges.reserve(2 * blocks.size());
    for (const auto& b : blocks) {
        edges.emplace_back(b.start, std::int64_t(b.size));
        if (b.end != ~std::uint64_t(0))
            edges.emplace_back(b.end, -std::int64_t(b.size));
    }
    std::sort(edges.begin(), edges.end());
    std::int64_t live = 0, peak = 0;
    for (const auto& [t, d] : edges) {
        live += d;
        peak = std::max(peak, live);
    }
    return Bytes(peak);
}

} // namespace gpumem::replay
