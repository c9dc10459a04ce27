#include "analyze/steps.h"

#include "analyze/frame_folding.h"

#include "core/byte_total.h"
#include "core/error.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>
#include <unordered_map>

namespace gpumem::analyze {

std::string_view toString(StepSource source)
{
    switch (source) {
    case StepSource::None: return "none";
    case StepSource::ProfilerStep: return "ProfilerStep annotations";
    case StepSource::UserRange: return "user ranges";
    case StepSource::Marker: return "markers";
    case StepSource::Periodicity: return "periodicity";
    }
    return "?";
}

namespace {
    std::string lower(std::string_view s)
    {
        std::string r(s);
        for (auto& c : r)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return r;
    }
    bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

    bool isOptimizerName(std::string_view name)
    {
        return name.starts_with("Optimizer.") || contains(lower(name), "optimizer");
    }

    struct Range {
        TimeNs start, end;
        std::int64_t number;
    };

    std::vector<Range> profilerSteps(const Trace& trace)
    {
        std::vector<Range> r;
        for (const auto& a : trace.annotations()) {
            auto name = trace.str(a.name);
            if (a.kind != AnnotationKind::Step && !name.starts_with("ProfilerStep#"))
                continue;
            std::int64_t number = static_cast<std::int64_t>(r.size());
            if (auto hash = name.rfind('#'); hash != std::string_view::npos) {
                std::int64_t v = 0;
                auto [p, ec] = std::from_chars(name.data() + hash + 1, name.data() + name.size(), v);
                if (ec == std::errc() && p == name.data() + name.size())
                    number = v;
            }
            r.push_back({ a.start, a.end, number });
        }
        return r;
    }

    // Share of the device's memory events that fall inside the ranges (sorted, non-overlapping).
    double coverage(const DeviceTimeline& dev, const std::vector<Range>& ranges)
    {
        if (dev.size() == 0)
            return 0;
        std::size_t inside = 0;
        for (const auto& r : ranges) {
            auto lo = std::lower_bound(dev.time.begin(), dev.time.end(), r.start);
            auto hi = std::lower_bound(dev.time.begin(), dev.time.end(), r.end);
            inside += static_cast<std::size_t>(hi - lo);
        }
        return static_cast<double>(inside) / static_cast<double>(dev.size());
    }

    // Ranges named like iterations that hold at least half of the device's memory events (a data
    // loader's "enumerate(DataLoader)#…__next__" ranges repeat too, but hold little).
    std::pair<std::string, std::vector<Range>> userRangeSteps(
        const Trace& trace, const std::function<double(const std::vector<Range>&)>& coverageOf)
    {
        std::map<StringId, std::vector<Range>> byName;
        for (const auto& a : trace.annotations()) {
            if (a.kind != AnnotationKind::Range || a.end <= a.start)
                continue;
            auto name = trace.str(a.name);
            const auto l = lower(name);
            if (isOptimizerName(name) || !(contains(l, "step") || contains(l, "iter") || contains(l, "batch")))
                continue;
            byName[a.name].push_back({ a.start, a.end, 0 });
        }
        std::pair<std::string, std::vector<Range>> best;
        for (auto& [name, ranges] : byName) {
            if (ranges.size() < 2 || ranges.size() <= best.second.size())
                continue;
            std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
            bool overlap = false;
            for (std::size_t i = 1; i < ranges.size(); ++i)
                overlap |= ranges[i].start < ranges[i - 1].end;
            if (overlap || coverageOf(ranges) < 0.5)
                continue;
            for (std::size_t i = 0; i < ranges.size(); ++i)
                ranges[i].number = static_cast<std::int64_t>(i);
            best = { std::string(trace.str(name)), ranges };
        }
        return best;
    }

    // A step between successive marker events (of distinct times).
    std::vector<Range> markerRanges(std::span<const TimeNs> marks)
    {
        std::vector<Range> r;
        for (std::size_t i = 1; i < marks.size(); ++i)
            if (marks[i] > marks[i - 1])
                r.push_back({ marks[i - 1], marks[i], static_cast<std::int64_t>(r.size()) });
        return r;
    }

    std::vector<Range> markerSteps(const Trace& trace, const DeviceTimeline& dev)
    {
        const auto& m = trace.memory();
        std::vector<TimeNs> marks;
        for (std::size_t p = 0; p < dev.size(); ++p)
            if (dev.eventIndex[p] != kNoIndex && m.kind[dev.eventIndex[p]] == EventKind::Marker)
                marks.push_back(dev.time[p]);
        return markerRanges(marks);
    }

    // Why a period is not a training loop's, "" when it is: it is one only when its steps hold most of the trace and last alike: a layer
    // stack repeats too (bcrafton's snapshot: 3 "steps" of 130 allocs, 2.4, 2.2 and 27.9 ms, inside one
    // 50 ms train step, the repeated transformer layers). Rule: the steps × the period hold ≥ 50 % of the
    // device's allocs (the last step's end is the trace's, so a time span would overstate it), and of the steps between the first (warm-up) and the
    // last (which runs to the trace's end), the longest lasts at most twice the shortest.
    std::string periodRejection(std::size_t period, const std::vector<std::size_t>& points, const std::vector<Range>& r)
    {
        if (r.size() < 2)
            return {}; // too few repeats: no steps either way
        const std::string what = "a period of " + std::to_string(period) + " allocs";
        if (r.size() * period * 2 < points.size())
            return what + " that repeats " + std::to_string(r.size()) + " times in " + std::to_string(points.size())
                + " allocs (too little of the trace for a loop: repeated layers?)";
        // Whole steps only: the first is warm-up and the last runs to the trace's end.
        if (r.size() < 4)
            return {};
        TimeNs shortest = r[1].end - r[1].start, longest = shortest;
        for (std::size_t k = 1; k + 1 < r.size(); ++k) {
            shortest = std::min(shortest, r[k].end - r[k].start);
            longest = std::max(longest, r[k].end - r[k].start);
        }
        if (longest > 2 * shortest)
            return what + " whose repeats last from " + std::to_string(shortest / 1000) + " to " + std::to_string(longest / 1000)
                + " us (steps last alike)";
        return {};
    }

    // "Qwen2DecoderLayer" for "Qwen2DecoderLayer_12" (the PyTorch profiler numbers module instances).
    std::string_view moduleClass(std::string_view name)
    {
        auto end = name.size();
        while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1])))
            --end;
        return end > 0 && end < name.size() && name[end - 1] == '_' ? name.substr(0, end - 1) : name;
    }

    // Why the repeats are layers, "" when nothing says so: below the module scope that holds all the repeats'
    // allocs, each repeat runs in its own instance of one module class (Qwen2DecoderLayer_0, _1, …), each
    // instance within at most 2 successive repeats (a boundary may cut one). A training loop's repeats run
    // through the same module instances every step.
    std::string layerRejection(const Trace& trace, const DeviceTimeline& dev, const std::vector<std::size_t>& points,
        const std::vector<Range>& r, std::size_t period)
    {
        const auto& m = trace.memory();
        const auto scopes = trace.scopes();
        auto chain = [&](ScopeId s) {
            std::vector<ScopeId> c;
            for (std::size_t guard = 0; s != 0 && s < scopes.size() && guard < scopes.size(); ++guard, s = scopes[s].parent)
                if (scopes[s].kind == ScopeKind::Module)
                    c.push_back(s);
            std::reverse(c.begin(), c.end());
            return c;
        };
        std::vector<std::pair<std::size_t, std::vector<ScopeId>>> chains; // (repeat, module chain root first)
        std::size_t inRepeats = 0;
        for (auto p : points) {
            const TimeNs t = dev.time[p];
            if (t < r.front().start || t >= r.back().end)
                continue;
            ++inRepeats;
            auto c = chain(m.scope[dev.eventIndex[p]]);
            if (c.empty())
                continue;
            auto it = std::upper_bound(r.begin(), r.end(), t, [](TimeNs x, const Range& q) { return x < q.start; });
            chains.emplace_back(static_cast<std::size_t>(it - r.begin()) - 1, std::move(c));
        }
        if (chains.size() * 2 < inRepeats)
            return {}; // too few allocs under modules to tell
        std::size_t level = chains.front().second.size(); // below the module scope common to every chain
        for (const auto& [k, c] : chains) {
            std::size_t i = 0;
            while (i < level && i < c.size() && c[i] == chains.front().second[i])
                ++i;
            level = i;
        }
        // Walk down through the module that runs in the most repeats (a model, its encoder…) until a level
        // whose modules each run in at most 2 successive repeats.
        std::vector<const std::vector<ScopeId>*> subset;
        for (const auto& [k, c] : chains)
            subset.push_back(&c);
        std::vector<std::size_t> repeatOf;
        for (const auto& [k, c] : chains)
            repeatOf.push_back(k);
        for (;;) {
            std::map<ScopeId, std::vector<std::size_t>> repeatsOf; // module at this level → repeats it runs in
            std::vector<std::size_t> kept;
            for (std::size_t i = 0; i < subset.size(); ++i)
                if (subset[i]->size() > level) {
                    auto& v = repeatsOf[(*subset[i])[level]];
                    if (std::find(v.begin(), v.end(), repeatOf[i]) == v.end())
                        v.push_back(repeatOf[i]);
                }
            if (repeatsOf.empty())
                return {};
            auto spread = [](const std::vector<std::size_t>& v) { return v.size() > 2 || (v.size() == 2 && v[1] != v[0] + 1); };
            const auto widest = std::max_element(repeatsOf.begin(), repeatsOf.end(), [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
            if (spread(widest->second)) { // descend into it
                const ScopeId into = widest->first;
                std::vector<const std::vector<ScopeId>*> next;
                std::vector<std::size_t> nextRepeat;
                for (std::size_t i = 0; i < subset.size(); ++i)
                    if (subset[i]->size() > level && (*subset[i])[level] == into) {
                        next.push_back(subset[i]);
                        nextRepeat.push_back(repeatOf[i]);
                    }
                subset = std::move(next);
                repeatOf = std::move(nextRepeat);
                ++level;
                continue;
            }
            std::map<std::string_view, std::size_t> instances; // class → instances
            for (const auto& [child, repeats] : repeatsOf)
                ++instances[moduleClass(trace.str(scopes[child].name))];
            const auto top = std::max_element(instances.begin(), instances.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
            if (top->second < 2 || top->second * 2 < repeatsOf.size())
                return {};
            return "a period of " + std::to_string(period) + " allocs whose " + std::to_string(r.size()) + " repeats run in successive "
                + std::string(top->first) + "_N modules (" + std::to_string(top->second) + " instances: layers, not steps)";
        }
    }

} // namespace

namespace {
    template <typename Size> std::size_t periodOf(std::span<const Size> sizes)
    {
        const std::size_t n = sizes.size(), L = kSignatureLength;
        if (n < 3 * L)
            return 0;
        // Rolling polynomial hash of every window of L sizes, computed as it rolls (not stored: 8 bytes an alloc
        // for a trace of millions of allocs; issue 22).
        constexpr std::uint64_t kBase = 1000003ULL;
        std::uint64_t pow = 1;
        for (std::size_t i = 0; i < L; ++i)
            pow *= kBase;
        auto mix = [](std::uint64_t s) { return (s ^ (s >> 29)) * 0x9E3779B97F4A7C15ULL + 1; };
        const std::size_t windows = n - L + 1;
        // Calls visit(q, hash of sizes[q, q + L)) for every window q in order.
        static_assert((kSignatureLength & (kSignatureLength - 1)) == 0, "the ring of mixed sizes is indexed by a mask");
        auto rollHashes = [&](auto&& visit) {
            std::uint64_t h = 0, ring[kSignatureLength] = {}; // the mixed sizes of the window, each computed once
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint64_t m = mix(sizes[i]);
                h = h * kBase + m;
                if (i >= L)
                    h -= pow * ring[i & (L - 1)];
                ring[i & (L - 1)] = m;
                if (i + 1 >= L)
                    visit(i + 1 - L, h);
            }
        };
        // The candidate periods of each anchor: the distances to the other windows equal to the anchor's, the 32
        // smallest distinct ones. All three anchors in one scan, keeping only the last 32 matches before an anchor
        // and the first 32 after it (the smallest distances on each side), not every match: a trace of one size
        // throughout matches at every window (issue 22: one scan where there were three, no list of n matches).
        constexpr std::size_t kCandidates = 32;
        const std::array<std::size_t, 3> anchors { std::min(n / 3, windows - 1), std::min(n / 2, windows - 1), std::size_t(0) };
        struct Matches {
            std::uint64_t target = 0;
            std::array<std::size_t, kCandidates> before {}; // a ring of the last matches before the anchor
            std::size_t beforeCount = 0;
            std::vector<std::size_t> after;
        };
        std::array<Matches, 3> matches;
        for (std::size_t k = 0; k < anchors.size(); ++k)
            for (std::size_t i = anchors[k]; i < anchors[k] + L; ++i)
                matches[k].target = matches[k].target * kBase + mix(sizes[i]);
        rollHashes([&](std::size_t q, std::uint64_t h) {
            for (std::size_t k = 0; k < anchors.size(); ++k) {
                auto& mk = matches[k];
                if (h != mk.target || q == anchors[k] || (q > anchors[k] && mk.after.size() == kCandidates)
                    || !std::equal(sizes.begin() + q, sizes.begin() + q + L, sizes.begin() + anchors[k]))
                    continue;
                if (q < anchors[k])
                    mk.before[mk.beforeCount++ % kCandidates] = anchors[k] - q;
                else
                    mk.after.push_back(q - anchors[k]);
            }
        });
        auto candidatesOf = [&](std::size_t k) {
            const auto& mk = matches[k];
            std::vector<std::size_t> c(mk.after.begin(), mk.after.end());
            c.insert(c.end(), mk.before.begin(), mk.before.begin() + std::min(mk.beforeCount, kCandidates));
            std::sort(c.begin(), c.end());
            c.erase(std::unique(c.begin(), c.end()), c.end());
            if (c.size() > kCandidates)
                c.resize(kCandidates);
            return c;
        };
        // Match share of S[i] == S[i + P], sampled on at most 200k positions.
        auto matchShare = [&](std::size_t P) {
            const std::size_t span = n - P;
            const std::size_t stride = std::max<std::size_t>(1, span / 200000);
            std::size_t same = 0, total = 0;
            for (std::size_t i = 0; i < span; i += stride, ++total)
                same += sizes[i] == sizes[i + P];
            return total ? static_cast<double>(same) / static_cast<double>(total) : 0.0;
        };
        std::size_t period = 0;
        double bestShare = 0.5; // below this, nothing repeats
        for (std::size_t k = 0; k < anchors.size(); ++k) {
            const auto candidates = candidatesOf(k);
            // P = 1 competes too: a sequence that repeats every single alloc (one size throughout)
            // repeats every 2, 3, … allocs as well, and the old minimum of 2 made that "every 2 allocs".
            for (auto P : candidates) {
                if (P * 2 > n)
                    continue;
                const double share = matchShare(P);
                if (share > bestShare + 1e-9) {
                    bestShare = share;
                    period = P;
                }
            }
            if (period)
                break;
        }
        return period;
    }
} // namespace

std::size_t allocSizePeriod(std::span<const Bytes> sizes) { return periodOf(sizes); }
std::size_t allocSizePeriod(std::span<const std::uint32_t> sizeCodes) { return periodOf(sizeCodes); }

std::uint32_t AllocSizeCodes::largeCode(Bytes size)
{
    const auto [it, added] = m_large.try_emplace(size, static_cast<std::uint32_t>(kOwnCode + m_large.size()));
    if (added && m_large.size() > kOwnCode)
        throw FormatError("more than 2^31 distinct alloc sizes of 2 GiB or more on one device: alloc-size periodicity "
                          "cannot code them; split the trace");
    return it->second;
}

namespace {
    // Periodicity of the alloc-size sequence (see the header). Returns steps and the period in allocs.
    struct Periodic {
        std::size_t period = 0;
        std::vector<Range> steps;
        std::string rejected; // periodRejection(), when the period was found but is no loop's
    };
    Periodic periodicSteps(const Trace& trace, const DeviceTimeline& dev)
    {
        const auto& m = trace.memory();
        std::vector<std::size_t> points; // timeline points of alloc events
        std::vector<Bytes> sizes;
        for (std::size_t p = 0; p < dev.size(); ++p) {
            const auto e = dev.eventIndex[p];
            if (e != kNoIndex && m.kind[e] == EventKind::Alloc) {
                points.push_back(p);
                sizes.push_back(m.size[e]);
            }
        }
        const std::size_t n = sizes.size(), L = kSignatureLength;
        const std::size_t period = allocSizePeriod(sizes);
        // A period of one alloc has no step boundary to find: the sizes carry no structure.
        if (period < 2)
            return {};
        // Move the boundary to the first alloc after the lowest allocated point of one period.
        const std::size_t from = n / 3 + period <= n ? n / 3 : 0;
        std::size_t lowPoint = points[from];
        for (std::size_t p = points[from]; p < points[std::min(n - 1, from + period)]; ++p)
            if (dev.allocated[p] < dev.allocated[lowPoint])
                lowPoint = p;
        std::size_t anchor = static_cast<std::size_t>(std::upper_bound(points.begin(), points.end(), lowPoint) - points.begin());
        // Recurrences of the W allocs from the boundary (W ≤ period, so the last whole step has one).
        const std::size_t W = std::min(L, period);
        anchor = std::min(anchor, n - W);
        std::vector<std::size_t> starts;
        for (std::size_t q = 0; q + W <= n; ++q)
            if ((starts.empty() || q >= starts.back() + period * 3 / 4)
                && std::equal(sizes.begin() + q, sizes.begin() + q + W, sizes.begin() + anchor))
                starts.push_back(q);
        std::vector<Range> r;
        for (std::size_t k = 0; k < starts.size(); ++k) {
            const TimeNs start = dev.time[points[starts[k]]];
            TimeNs end;
            if (k + 1 < starts.size())
                end = dev.time[points[starts[k + 1]]];
            else if (n - starts[k] >= period * 9 / 10)
                end = dev.time.back() + 1;
            else
                break; // the trace ends inside this step
            if (end > start)
                r.push_back({ start, end, static_cast<std::int64_t>(r.size()) });
        }
        if (auto why = periodRejection(period, points, r); !why.empty())
            return { period, {}, why };
        if (r.size() >= 3) // with 2 repeats, a loop's modules also run in at most 2
            if (auto why = layerRejection(trace, dev, points, r, period); !why.empty())
                return { period, {}, why };
        return { period, r, {} };
    }

    Bytes valueBefore(const DeviceTimeline& dev, TimeNs t)
    {
        auto it = std::lower_bound(dev.time.begin(), dev.time.end(), t);
        return it == dev.time.begin() ? 0 : dev.allocated[static_cast<std::size_t>(it - dev.time.begin()) - 1];
    }

    // Where no annotation marks the backward pass: it starts at the turn of the step's transient
    // bytes — blocks allocated in the step (before the optimizer phase) and freed before that phase,
    // i.e. activations and temporaries. Activations pile up through the forward pass and are released
    // through the backward pass, so their sum turns at the boundary; blocks that outlive the phase
    // (gradients, optimizer state) are left out because they would hide the turn.
    // Op-local blocks (allocsBeforeEachEvent: made and dropped inside one op) are left out too: a
    // backward op's scratch buffer is a spike, not a turn. On HTA's memory_timeline.raw.gz a 128 MiB
    // block live for 0.5 ms at +98.4 ms of step 0 put the turn there, while the activations turn at
    // +80 ms, where the first gradient is made, so every gradient (PyTorch's rule,
    // torch/profiler/_memory_profiler.py: tensors made by backward that persist to the optimizer
    // step) made before +98 ms read as activation (7.4 % of gradient bytes agreed). An op-local
    // block made after the turn and before the next event that is not op-local (a free, or the
    // alloc of a block that outlives the phase) is the forward's last op and stays in the forward
    // phase: the backward phase starts after it.
    void placeBackwardStarts(const Trace& trace, const DeviceTimeline& dev, std::vector<Step>& steps)
    {
        const auto& m = trace.memory();
        const auto allocsBefore = allocsBeforeEachEvent(trace);
        std::vector<std::vector<std::pair<std::uint64_t, std::int64_t>>> deltas(steps.size()); // (event, ±bytes)
        std::vector<std::vector<std::uint64_t>> opLocal(steps.size()); // alloc events of op-local blocks
        for (const auto& a : trace.allocations()) {
            if (a.allocEvent == kNoIndex || a.freeEvent == kNoIndex || m.device[a.allocEvent] != dev.device)
                continue;
            const TimeNs t = m.time[a.allocEvent];
            auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs x, const Step& s) { return x < s.start; });
            if (it == steps.begin())
                continue;
            const auto k = static_cast<std::size_t>(it - steps.begin()) - 1;
            const Step& s = steps[k];
            if (s.phasesAnnotated || t >= s.end)
                continue;
            const TimeNs limit = s.optimizerStart ? *s.optimizerStart : s.end;
            if (t >= limit)
                continue;
            if (allocsBefore[a.freeEvent] == allocsBefore[a.allocEvent] + 1) {
                opLocal[k].push_back(a.allocEvent);
                continue;
            }
            if (m.time[a.freeEvent] >= limit) { // not counted, but it bounds the turn (below)
                deltas[k].emplace_back(a.allocEvent, 0);
                continue;
            }
            const auto size = static_cast<std::int64_t>(m.size[a.allocEvent]);
            deltas[k].emplace_back(a.allocEvent, size);
            deltas[k].emplace_back(a.freeEvent, -size);
        }
        for (std::size_t k = 0; k < steps.size(); ++k) {
            Step& s = steps[k];
            if (s.phasesAnnotated)
                continue;
            auto& d = deltas[k];
            std::sort(d.begin(), d.end());
            std::int64_t live = 0, best = 0;
            TimeNs turn = s.peakTime;
            std::size_t turnIndex = d.size();
            for (std::size_t i = 0; i < d.size(); ++i) {
                live += d[i].second;
                if (live > best) {
                    best = live;
                    turn = m.time[d[i].first];
                    turnIndex = i;
                }
            }
            // Op-local blocks made after the turn, before the next event counted, are the forward's
            // last ops (the sum is still at its maximum): backward starts after the last of them.
            const std::uint64_t bound = turnIndex + 1 < d.size() ? d[turnIndex + 1].first : m.count();
            const std::uint64_t from = turnIndex < d.size() ? d[turnIndex].first : 0;
            for (auto e : opLocal[k])
                if (turnIndex < d.size() && e > from && e < bound)
                    turn = std::max(turn, m.time[e]);
            s.backwardStart = turn + 1;
        }
        // Without an optimizer annotation, the backward pass ends where the last block made in the
        // step's forward phase is freed (the activations are released through backward); the rest
        // of the step is taken for the optimizer phase, so a block made in backward that is still
        // live then persists to the optimizer step: a gradient (PyTorch's rule), and one freed before
        // it autograd_detail. HTA step 0: autograd_detail freed by +186.8 ms, the last activation at
        // +187.3 ms, the gradients at +192.7 ms (zero_grad), just before the next step. Frees after
        // the step's last alloc do not count: zero_grad frees the gradients together there, the
        // loss's gradient among them, made just before the turn (HTA: +79.96 ms).
        std::vector<TimeNs> lastAlloc(steps.size(), 0);
        for (std::size_t i = 0; i < m.count(); ++i) {
            if (m.kind[i] != EventKind::Alloc || m.device[i] != dev.device)
                continue;
            auto it = std::upper_bound(steps.begin(), steps.end(), m.time[i], [](TimeNs x, const Step& s) { return x < s.start; });
            if (it == steps.begin() || m.time[i] >= it[-1].end)
                continue;
            auto& last = lastAlloc[static_cast<std::size_t>(it - steps.begin()) - 1];
            last = std::max(last, m.time[i]);
        }
        std::vector<std::optional<TimeNs>> lastForwardFree(steps.size());
        for (const auto& a : trace.allocations()) {
            if (a.allocEvent == kNoIndex || a.freeEvent == kNoIndex || m.device[a.allocEvent] != dev.device)
                continue;
            const TimeNs t = m.time[a.allocEvent], f = m.time[a.freeEvent];
            auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs x, const Step& s) { return x < s.start; });
            if (it == steps.begin())
                continue;
            const auto k = static_cast<std::size_t>(it - steps.begin()) - 1;
            const Step& s = steps[k];
            if (s.phasesAnnotated || s.optimizerStart || t >= s.backwardStart || f >= lastAlloc[k])
                continue;
            if (!lastForwardFree[k] || f > *lastForwardFree[k])
                lastForwardFree[k] = f;
        }
        for (std::size_t k = 0; k < steps.size(); ++k)
            if (lastForwardFree[k] && *lastForwardFree[k] >= steps[k].backwardStart && *lastForwardFree[k] + 1 < steps[k].end)
                steps[k].optimizerStart = *lastForwardFree[k] + 1;
    }
} // namespace

std::vector<std::uint32_t> allocsBeforeEachEvent(const Trace& trace)
{
    const auto& m = trace.memory();
    std::vector<std::uint32_t> out(m.count());
    std::vector<std::uint32_t> count(trace.devices().size() + 1, 0);
    for (std::size_t i = 0; i < m.count(); ++i) {
        if (m.device[i] >= count.size())
            count.resize(m.device[i] + 1u, 0);
        out[i] = count[m.device[i]];
        if (m.kind[i] == EventKind::Alloc)
            ++count[m.device[i]];
    }
    return out;
}

std::string_view backwardSource(const StepSet& set, const Step& step)
{
    if (step.phasesAnnotated)
        return "annotation";
    return set.autogradEvidence.empty() ? "no autograd" : "transient peak";
}

std::string phaseNote(const StepSet& set)
{
    if (set.steps.empty())
        return {};
    const bool allAnnotated = std::all_of(set.steps.begin(), set.steps.end(), [](const Step& s) { return s.phasesAnnotated; });
    if (allAnnotated)
        return "backward phase from annotations";
    if (set.autogradEvidence.empty())
        return "no backward phase: no autograd evidence (no backward op or scope, autograd engine frame or optimizer step), "
               "so no gradient or autograd_detail";
    return "backward phase guessed from each step's transient peak (autograd ran: " + set.autogradEvidence + ")";
}

std::string autogradEvidenceInTables(const Trace& trace)
{
    auto named = [](std::string_view name) {
        const auto l = lower(name);
        return contains(l, "backward") || contains(l, "autograd::engine") || isOptimizerName(name);
    };
    for (const auto& a : trace.annotations())
        if (named(trace.str(a.name)))
            return "annotation \"" + std::string(trace.str(a.name)) + "\"";
    const auto scopes = trace.scopes();
    for (ScopeId s = 1; s < scopes.size(); ++s)
        if (named(trace.str(scopes[s].name)))
            return "scope \"" + std::string(trace.str(scopes[s].name)) + "\"";
    for (const auto& f : trace.frames()) {
        const auto name = trace.str(f.name);
        std::string file(trace.str(f.file));
        std::replace(file.begin(), file.end(), '\\', '/');
        if (contains(lower(name), "backward") || contains(name, "autograd::Engine") || contains(file, "torch/optim/"))
            return "frame " + std::string(name.substr(0, 80)) + (file.empty() ? "" : " (" + file.substr(file.find_last_of('/') + 1) + ")");
    }
    return {};
}

bool isAutogradCategory(Category c)
{
    return c == Category::Gradient || c == Category::AutogradDetail || c == Category::OptimizerState;
}

std::string autogradEvidence(const Trace& trace)
{
    if (auto named = autogradEvidenceInTables(trace); !named.empty())
        return named;
    // PyTorch's own categories (a memory-timeline export has no names or stacks) say so too.
    const auto& m = trace.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.kind[i] == EventKind::Alloc && isAutogradCategory(m.category[i]))
            return "recorded category " + std::string(toString(m.category[i]));
    return {};
}

std::vector<std::pair<TimeNs, bool>> annotationPhaseMarks(const Trace& trace)
{
    std::vector<std::pair<TimeNs, bool>> marks;
    for (const auto& a : trace.annotations()) {
        auto name = trace.str(a.name);
        if (isOptimizerName(name))
            marks.emplace_back(a.start, true);
        else if (contains(lower(name), "backward"))
            marks.emplace_back(a.start, false);
    }
    return marks;
}

std::vector<std::uint8_t> scopePhaseFlags(const Trace& trace)
{
    const auto scopes = trace.scopes();
    std::vector<std::uint8_t> flags(scopes.size(), 0);
    for (ScopeId s = 1; s < scopes.size(); ++s) {
        auto name = trace.str(scopes[s].name);
        std::uint8_t f = isOptimizerName(name) ? 1 : contains(lower(name), "backward") ? 2 : 0;
        const ScopeId parent = scopes[s].parent;
        if (!f && parent < s)
            f = flags[parent];
        flags[s] = f;
    }
    return flags;
}

StepRanges findStepRanges(const Trace& trace, std::span<const TimeNs> markerTimes, std::span<const std::uint32_t> allocSizeCodes)
{
    StepRanges out;
    StepSet& set = out.set;
    set.search.searched = true;
    std::vector<Range> ranges = profilerSteps(trace);
    set.search.profilerSteps = ranges.size();
    bool coverageAsked = false;
    if (ranges.size() >= 2) {
        set.source = StepSource::ProfilerStep;
        set.detail = "ProfilerStep#N";
    } else if (userRangeSteps(trace, [&](const std::vector<Range>&) { coverageAsked = true; return 0.0; }); coverageAsked) {
        out.unresolved = "step-like user ranges, whose share of the device's events the pass does not count";
        return out;
    } else if (auto marks = markerRanges(markerTimes); (set.search.markerSteps = marks.size()) >= 2) {
        ranges = std::move(marks);
        set.source = StepSource::Marker;
        set.detail = "marker events";
    } else if (const auto period = allocSizePeriod(allocSizeCodes); period >= 2) {
        out.unresolved = "an alloc-size period of " + std::to_string(period) + " allocs, whose step boundaries need the timeline";
        return out;
    } else
        return out;
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.start < b.start; });
    for (const auto& r : ranges) {
        Step s;
        s.number = r.number;
        s.start = r.start;
        s.end = std::max(r.end, r.start + 1);
        s.backwardStart = s.end;
        set.steps.push_back(s);
    }
    return out;
}

StepSet detectSteps(const Trace& trace, const DeviceTimeline& dev)
{
    StepSet set;
    set.search.searched = true;
    set.autogradEvidence = autogradEvidence(trace);
    std::vector<Range> ranges = profilerSteps(trace);
    set.search.profilerSteps = ranges.size();
    if (ranges.size() >= 2) {
        set.source = StepSource::ProfilerStep;
        set.detail = "ProfilerStep#N";
    } else if (auto [name, user] = userRangeSteps(trace, [&](const std::vector<Range>& r) { return coverage(dev, r); });
               (set.search.userRanges = user.size()) >= 2) {
        ranges = std::move(user);
        set.source = StepSource::UserRange;
        set.detail = name;
    } else if (auto marks = markerSteps(trace, dev); (set.search.markerSteps = marks.size()) >= 2) {
        ranges = std::move(marks);
        set.source = StepSource::Marker;
        set.detail = "marker events";
    } else if (auto periodic = periodicSteps(trace, dev); periodic.steps.size() >= 2) {
        ranges = std::move(periodic.steps);
        set.source = StepSource::Periodicity;
        set.detail = "alloc-size sequence repeats every " + std::to_string(periodic.period) + " allocs";
    } else {
        set.search.periodRejected = periodic.rejected;
        return set;
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.start < b.start; });

    // Phase marks: annotations, and memory events whose scope (or an ancestor) names the phase
    // (Kineto's "Optimizer.step#Adam.step" and "autograd::engine::evaluate_function: …Backward0").
    std::vector<std::pair<TimeNs, bool>> phaseMarks = annotationPhaseMarks(trace); // (start, isOptimizer); else backward
    const auto scopes = trace.scopes();
    const std::vector<std::uint8_t> scopeFlag = scopePhaseFlags(trace); // 1 optimizer, 2 backward
    const auto& m = trace.memory();
    bool anyScopeFlag = std::any_of(scopeFlag.begin(), scopeFlag.end(), [](std::uint8_t f) { return f != 0; });
    if (anyScopeFlag) {
        for (auto e : dev.eventIndex) {
            if (e == kNoIndex || m.scope[e] >= scopes.size() || !scopeFlag[m.scope[e]])
                continue;
            phaseMarks.emplace_back(m.time[e], scopeFlag[m.scope[e]] == 1);
        }
    }
    std::sort(phaseMarks.begin(), phaseMarks.end());

    for (const auto& r : ranges) {
        Step s;
        s.number = r.number;
        s.start = r.start;
        s.end = std::max(r.end, r.start + 1);
        s.allocatedAtStart = valueBefore(dev, s.start);
        s.allocatedAtEnd = valueBefore(dev, s.end);
        s.peakAllocated = s.allocatedAtStart;
        s.peakTime = s.start;
        auto lo = std::lower_bound(dev.time.begin(), dev.time.end(), s.start) - dev.time.begin();
        for (auto p = static_cast<std::size_t>(lo); p < dev.size() && dev.time[p] < s.end; ++p)
            if (dev.allocated[p] > s.peakAllocated) {
                s.peakAllocated = dev.allocated[p];
                s.peakTime = dev.time[p];
            }
        s.backwardStart = s.end;
        auto it = std::lower_bound(phaseMarks.begin(), phaseMarks.end(), std::make_pair(s.start, false));
        bool haveBackward = false;
        for (; it != phaseMarks.end() && it->first < s.end; ++it) {
            if (it->second) {
                if (!s.optimizerStart)
                    s.optimizerStart = it->first;
            } else if (!haveBackward) {
                haveBackward = true;
                s.backwardStart = it->first;
            }
        }
        s.phasesAnnotated = haveBackward;
        set.steps.push_back(s);
    }
    // Without autograd evidence (an inference run) an unannotated step stays forward to its end: the
    // transient peak of a forward pass is not the start of a backward one.
    if (!set.steps.empty() && !set.autogradEvidence.empty())
        placeBackwardStarts(trace, dev, set.steps);
    return set;
}

std::string stepSearchNote(const StepSet& set)
{
    const auto& q = set.search;
    auto plural = [](std::size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
    auto join = [](const std::vector<std::string>& parts, const char* last) {
        std::string out;
        for (std::size_t i = 0; i < parts.size(); ++i)
            out += (i == 0 ? "" : i + 1 == parts.size() ? last : ", ") + parts[i];
        return out;
    };
    // Sources tried before the one that won (all of them when none did) that held something, and those that held nothing.
    std::vector<std::string> few, none;
    const int tried = set.source == StepSource::None ? 4 : static_cast<int>(set.source) - 1;
    if (tried >= 1)
        (q.profilerSteps ? few : none).push_back(q.profilerSteps ? plural(q.profilerSteps, "ProfilerStep# range", "ProfilerStep# ranges") : "ProfilerStep#");
    if (tried >= 2)
        (q.userRanges ? few : none).push_back(q.userRanges ? plural(q.userRanges, "step range", "step ranges") : "step ranges");
    if (tried >= 3)
        (q.markerSteps ? few : none).push_back(q.markerSteps ? plural(q.markerSteps, "interval between markers", "intervals between markers") : "markers");
    if (tried >= 4 && !q.periodRejected.empty())
        return "no training steps found: " + (few.empty() ? std::string() : join(few, " and ") + " (steps need at least 2); ")
            + (none.empty() ? std::string() : "no " + join(none, " or ") + "; ") + "not steps: " + q.periodRejected;
    if (tried >= 4)
        none.push_back("period");
    if (set.source != StepSource::None)
        return few.empty() ? std::string() : "passed over " + join(few, " and ") + " (steps need at least 2)";
    std::string s = "no training steps found";
    if (!few.empty())
        s += ": " + join(few, " and ") + " (steps need at least 2); no " + join(none, " or ");
    else
        s += " (no " + join(none, " or ") + ")";
    return s;
}

namespace {
    // "bmm" from "<built-in method bmm of type object>"; "" for other frames.
    std::string builtinName(std::string_view name)
    {
        constexpr std::string_view prefix = "<built-in method ";
        if (!name.starts_with(prefix))
            return {};
        name.remove_prefix(prefix.size());
        return std::string(name.substr(0, name.find(' ')));
    }
} // namespace

namespace {
    // Library code, whichever separator the recording machine used: torch's own files ("torch/…",
    // "…/torch/…", "D:\\…\\torch\\functional.py") and installed packages ("…/site-packages/…",
    // "…/dist-packages/…": einops' "_backends.py" is not the program that called einsum).
    bool isLibraryFile(std::string_view file)
    {
        std::string f(file);
        std::replace(f.begin(), f.end(), '\\', '/');
        return f.starts_with("torch/") || f.find("/torch/") != std::string::npos || f.find("/site-packages/") != std::string::npos
            || f.find("/dist-packages/") != std::string::npos;
    }
} // namespace

namespace {
    // The last "::" part at template depth 0: "at::cuda::getNewWorkspace" → "getNewWorkspace".
    std::string unqualified(std::string_view q)
    {
        int depth = 0;
        std::size_t start = 0;
        for (std::size_t i = 0; i + 1 < q.size(); ++i) {
            if (q[i] == '<')
                ++depth;
            else if (q[i] == '>' && depth > 0)
                --depth;
            else if (depth == 0 && q[i] == ':' && q[i + 1] == ':')
                start = i + 2;
        }
        return std::string(q.substr(start));
    }
    // "torch::autograd::generated::MmBackward0::apply" → "MmBackward0": the autograd node running the op.
    std::string autogradNode(std::string_view q)
    {
        constexpr std::string_view kPrefix = "torch::autograd::generated::", kApply = "::apply";
        if (!q.starts_with(kPrefix) || !q.ends_with(kApply))
            return {};
        q = q.substr(kPrefix.size(), q.size() - kPrefix.size() - kApply.size());
        return q.find("::") == std::string_view::npos ? std::string(q) : std::string();
    }
    // "at::_ops::bmm::call" / "at::_ops::div_Tensor::redispatch" → "bmm" / "div_Tensor": the ATen operator
    // (its overload as the generated struct names it).
    std::string atenOp(std::string_view q)
    {
        constexpr std::string_view kPrefix = "at::_ops::";
        if (!q.starts_with(kPrefix))
            return {};
        q.remove_prefix(kPrefix.size());
        const auto sep = q.find("::");
        if (sep == std::string_view::npos || (q.substr(sep) != "::call" && q.substr(sep) != "::redispatch"))
            return {};
        return std::string(q.substr(0, sep));
    }
    // Frames that say nothing about who allocated: the recorder and unwinder, the caching allocator and
    // the rest of c10, ATen's dispatcher and tensor-creation plumbing, the autograd engine, the standard
    // library, and thread start-up and CPython interpreter frames.
    bool isInternalFrame(std::string_view q)
    {
        static constexpr std::string_view kPrefixes[] = { "c10::", "std::", "__gnu_cxx::", "at::_ops::", "at::detail::",
            "at::TensorIteratorBase::", "at::TensorIterator::", "at::meta::", "at::(anonymous namespace)::create_out",
            "at::(anonymous namespace)::wrapper_", "at::empty", "at::native::empty", "at::native::resize_", "torch::autograd::Engine::",
            "torch::autograd::Node::", "torch::autograd::VariableType::", "torch::autograd::python::", "torch::unwind::",
            "torch::CapturedTraceback::", "torch::cuda::(anonymous namespace)::gather", "_PyEval_", "PyEval_", "PyObject_",
            "_PyObject_", "_PyFunction_", "PyVectorcall_", "_Py", "Py_", "start_thread", "pthread_",
            "execute_native_thread_routine", "__libc_start", "_start" };
        if (q == "clone" || q.find("set_output_raw_strided") != std::string_view::npos)
            return true;
        for (auto p : kPrefixes)
            if (q.starts_with(p))
                return true;
        return false;
    }
    // A C++-only stack (an autograd thread's: no Python frame at all) named by what ran, innermost first:
    // "<helper> in <op> in <node>", e.g. "mul_Tensor in DivBackward0" or "getNewWorkspace in bmm in
    // BmmBackward0", from the innermost ATen operator (at::_ops::X::call), the innermost autograd node
    // (torch::autograd::generated::N::apply) and the innermost non-internal frame below that operator;
    // "" when the stack has neither an operator nor a node.
    std::string cppOnlyLabel(const Trace& trace, std::span<const FrameId> frames)
    {
        std::string op, node, helper;
        std::size_t opIndex = frames.size();
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const std::string q = qualifiedFunction(cleanFrameName(trace.str(trace.frames()[frames[i]].name)));
            if (op.empty()) {
                if (auto o = atenOp(q); !o.empty()) {
                    op = o;
                    opIndex = i;
                }
            }
            if (node.empty())
                node = autogradNode(q);
        }
        if (op.empty() && node.empty())
            return {};
        for (std::size_t i = 0; i < opIndex && helper.empty(); ++i) {
            const std::string q = qualifiedFunction(cleanFrameName(trace.str(trace.frames()[frames[i]].name)));
            if (!q.empty() && !isInternalFrame(q) && autogradNode(q).empty())
                helper = unqualified(q);
        }
        std::string label;
        for (const auto* part : { &helper, &op, &node })
            if (!part->empty())
                label += (label.empty() ? "" : " in ") + *part;
        return label;
    }
} // namespace

std::string siteLabel(const Trace& trace, SiteId site, std::size_t callers)
{
    if (site == 0 || site >= trace.siteCount())
        return {};
    auto frames = trace.siteFrames(site);
    if (frames.empty())
        return {};
    // The innermost frame of the program's own code (not torch, an installed package or a built-in),
    // prefixed by the built-in op it called when the innermost frame is one: "bmm in forward
    // (…/modeling_owlv2.py:410)". A stack with Python frames is labelled by Python: a snapshot's stacks
    // start with the C++ frames of the allocator and the unwinder that recorded them (memory_snapshot.cpp's
    // gather_with_cpp, the same for every block), which say nothing about who allocated.
    const auto& inner = trace.frames()[frames.front()];
    auto isPython = [&](const Frame& f) { return trace.str(f.file).ends_with(".py"); };
    const bool hasPython = std::any_of(frames.begin(), frames.end(), [&](auto fid) { return isPython(trace.frames()[fid]); });
    // Without Python, the recorder's own frames (the same for every block) are skipped too.
    auto recorder = [&](std::string_view file) { return file.ends_with("memory_snapshot.cpp") || file.ends_with("CUDACachingAllocator.cpp"); };
    auto eligible = [&](const Frame& f, bool library) {
        auto file = trace.str(f.file);
        return !file.empty() && file != "??" && (library || !isLibraryFile(file)) && (hasPython ? isPython(f) : !recorder(file));
    };
    // The chosen frame, then up to `callers` further eligible frames outward: " ← train (train.py:80)".
    auto from = [&](std::size_t i, bool library, std::string label) {
        for (std::size_t k = i + 1, added = 0; k < frames.size() && added < callers; ++k)
            if (eligible(trace.frames()[frames[k]], library)) {
                label += " ← " + frameText(trace, trace.frames()[frames[k]]);
                ++added;
            }
        return label;
    };
    // C++ only (an autograd thread's stack): the operator and autograd node that allocated; else the first
    // frame with a file that is not allocator, dispatcher, engine, standard library or interpreter internals.
    if (!hasPython)
        if (auto label = cppOnlyLabel(trace, frames); !label.empty())
            return label;
    for (std::size_t i = 0; i < frames.size(); ++i) {
        const auto& f = trace.frames()[frames[i]];
        if (!eligible(f, false) || (!hasPython && isInternalFrame(qualifiedFunction(cleanFrameName(trace.str(f.name))))))
            continue;
        const auto op = builtinName(trace.str(inner.name));
        return from(i, false, (op.empty() || i == 0 ? "" : op + " in ") + frameText(trace, f));
    }
    if (hasPython) // only library Python: its innermost frame
        for (std::size_t i = 0; i < frames.size(); ++i)
            if (isPython(trace.frames()[frames[i]]))
                return from(i, true, frameText(trace, trace.frames()[frames[i]]));
    // C++ only, no ATen operator or autograd node: the first frame past the recorder's.
    for (std::size_t i = 0; i < frames.size(); ++i)
        if (const auto& f = trace.frames()[frames[i]]; eligible(f, true) && !isInternalFrame(qualifiedFunction(cleanFrameName(trace.str(f.name)))))
            return from(i, true, frameText(trace, f));
    for (std::size_t i = 0; i < frames.size(); ++i)
        if (eligible(trace.frames()[frames[i]], true))
            return from(i, true, frameText(trace, trace.frames()[frames[i]]));
    return from(0, true, frameText(trace, inner));
}

std::string siteKey(const Trace& trace, SiteId site)
{
    if (site == 0 || site >= trace.siteCount())
        return {};
    std::string s;
    for (auto fid : trace.siteFrames(site)) {
        const auto& f = trace.frames()[fid];
        if (!s.empty())
            s += " < ";
        s += cleanFrameName(trace.str(f.name)) + "@" + std::string(trace.str(f.file)) + ":" + std::to_string(f.line);
    }
    return s;
}

std::string scopePath(const Trace& trace, ScopeId scope)
{
    std::vector<std::string_view> names;
    const auto scopes = trace.scopes();
    for (std::size_t guard = 0; scope != 0 && scope < scopes.size() && guard < scopes.size(); ++guard) {
        names.push_back(trace.str(scopes[scope].name));
        scope = scopes[scope].parent;
    }
    std::string s;
    for (auto it = names.rbegin(); it != names.rend(); ++it)
        s += (s.empty() ? "" : "/") + std::string(*it);
    return s;
}

bool leakTrend(const StepSet& set, LeakReport& report)
{
    const auto& steps = set.steps;
    if (steps.size() < 3) {
        report.reason = "fewer than 3 steps: leaks need live bytes at the same phase of at least 3 steps";
        for (const auto& s : steps)
            report.liveAtStepStart.push_back(s.allocatedAtStart);
        if (!steps.empty())
            report.liveAtStepStart.push_back(steps.back().allocatedAtEnd);
        return false;
    }
    for (const auto& s : steps)
        report.liveAtStepStart.push_back(s.allocatedAtStart);
    report.liveAtStepStart.push_back(steps.back().allocatedAtEnd);
    // Compare from step 1 (step 0 is warm-up: optimizer state and caches appear there).
    const auto& v = report.liveAtStepStart;
    bool increasing = true;
    for (std::size_t i = 2; i < v.size(); ++i)
        increasing &= v[i] > v[i - 1];
    const std::size_t compared = v.size() - 1; // values from index 1
    report.growthPerStep = (static_cast<double>(v.back()) - static_cast<double>(v[1])) / static_cast<double>(compared - 1);
    if (!increasing) {
        report.reason = "live bytes at step start do not grow at every step after the first";
        return false;
    }

    return true;
}

LeakReport detectLeaks(const Trace& trace, const DeviceTimeline& dev, const StepSet& set)
{
    LeakReport report;
    if (!leakTrend(set, report))
        return report;
    const auto& steps = set.steps;
    // Sites whose blocks from ≥ 2 distinct earlier steps survive the end of the last step.
    const auto& m = trace.memory();
    const TimeNs lastEnd = steps.back().end;
    const TimeNs firstStart = steps.front().start;
    std::vector<LeakSurvivor> survivors;
    for (const auto& a : trace.allocations()) {
        if (a.allocEvent == kNoIndex || m.device[a.allocEvent] != dev.device)
            continue;
        const TimeNs t = m.time[a.allocEvent];
        if (t < firstStart || t >= lastEnd)
            continue;
        if (a.freeEvent != kNoIndex && m.time[a.freeEvent] < lastEnd)
            continue;
        survivors.push_back({ m.site[a.allocEvent], m.scope[a.allocEvent], m.size[a.allocEvent], t });
    }
    nameLeakSites(trace, set, survivors, report);
    return report;
}

void nameLeakSites(const Trace& trace, const StepSet& set, std::span<const LeakSurvivor> survivors, LeakReport& report)
{
    const auto& steps = set.steps;
    const std::size_t compared = report.liveAtStepStart.size() - 1;
    struct Acc {
        Bytes bytes = 0;
        std::uint64_t blocks = 0;
        std::vector<std::uint32_t> stepsSeen;
    };
    std::map<std::pair<SiteId, ScopeId>, Acc> acc;
    for (const auto& b : survivors) {
        auto it = std::upper_bound(steps.begin(), steps.end(), b.allocTime, [](TimeNs x, const Step& s) { return x < s.start; });
        const auto stepIndex = static_cast<std::uint32_t>((it - steps.begin()) - 1);
        auto& e = acc[{ b.site, b.scope }];
        e.bytes = addSaturated(e.bytes, b.size);
        ++e.blocks;
        if (stepIndex + 1 < steps.size() && std::find(e.stepsSeen.begin(), e.stepsSeen.end(), stepIndex) == e.stepsSeen.end())
            e.stepsSeen.push_back(stepIndex);
    }
    for (const auto& [key, e] : acc) {
        if (e.stepsSeen.size() < 2)
            continue;
        LeakSite s;
        s.site = key.first;
        s.scope = key.second;
        s.label = siteLabel(trace, s.site);
        if (s.label.empty())
            s.label = scopePath(trace, s.scope);
        if (s.label.empty())
            s.label = "(unknown site)";
        s.bytes = e.bytes;
        s.blocks = e.blocks;
        s.stepsWithSurvivors = static_cast<std::uint32_t>(e.stepsSeen.size());
        report.sites.push_back(std::move(s));
    }
    std::sort(report.sites.begin(), report.sites.end(), [](const LeakSite& a, const LeakSite& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.label < b.label;
    });
    report.leaking = true;
    report.reason = "live bytes at step start grew at every one of the last " + std::to_string(compared - 1) + " steps";
}

} // namespace gpumem::analyze
