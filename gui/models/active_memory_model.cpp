#include "gui/models/active_memory_model.h"

#include "gui/models/byte_text.h"
#include "gui/models/latest_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gpumem::gui {

std::shared_ptr<const ActiveMemoryIndex> buildActiveMemoryIndex(const MemoryMapIndex& index, std::size_t topCount)
{
    auto active = std::make_shared<ActiveMemoryIndex>();
    active->topCount = topCount;
    const auto& blocks = index.blocks;
    const std::size_t n = blocks.size();
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    const std::size_t top = std::min(topCount, n);
    // Largest first; equal sizes: the earlier allocation (memory_viz keeps the largest max_entries).
    auto larger = [&](std::uint32_t x, std::uint32_t y) { return blocks[x].size != blocks[y].size ? blocks[x].size > blocks[y].size : x < y; };
    if (top < n)
        std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(top), order.end(), larger);
    active->bands.assign(order.begin(), order.begin() + std::ptrdiff_t(top));
    std::sort(active->bands.begin(), active->bands.end());
    active->restBlocks = n - top;

    // The live bytes of all blocks: allocs in blocks order (by allocTime), frees sorted by freeTime,
    // merged; one point per distinct time, the value after all of that time's changes.
    std::vector<std::uint32_t> frees;
    for (std::uint32_t i = 0; i < n; ++i)
        if (blocks[i].freeTime != kNeverFreed)
            frees.push_back(i);
    std::sort(frees.begin(), frees.end(), [&](std::uint32_t x, std::uint32_t y) { return blocks[x].freeTime < blocks[y].freeTime; });
    Bytes live = 0;
    std::size_t a = 0, f = 0;
    while (a < n || f < frees.size()) {
        const TimeNs t = f == frees.size() ? blocks[a].allocTime
            : a == n                       ? blocks[frees[f]].freeTime
                                           : std::min(blocks[a].allocTime, blocks[frees[f]].freeTime);
        for (; a < n && blocks[a].allocTime == t; ++a)
            live += blocks[a].size;
        for (; f < frees.size() && blocks[frees[f]].freeTime == t; ++f)
            live -= std::min(live, blocks[frees[f]].size);
        active->liveTime.push_back(t);
        active->liveBytes.push_back(live);
    }
    const auto& v = active->liveBytes;
    for (std::size_t b = 0; (b + 1) * ActiveMemoryIndex::kFine <= v.size(); ++b)
        active->fineMax.push_back(*std::max_element(v.begin() + std::ptrdiff_t(b * ActiveMemoryIndex::kFine),
            v.begin() + std::ptrdiff_t((b + 1) * ActiveMemoryIndex::kFine)));
    constexpr std::size_t kPerCoarse = ActiveMemoryIndex::kCoarse / ActiveMemoryIndex::kFine;
    for (std::size_t b = 0; (b + 1) * kPerCoarse <= active->fineMax.size(); ++b)
        active->coarseMax.push_back(*std::max_element(active->fineMax.begin() + std::ptrdiff_t(b * kPerCoarse),
            active->fineMax.begin() + std::ptrdiff_t((b + 1) * kPerCoarse)));
    return active;
}

namespace {
    constexpr TimeNs kNoMoment = std::numeric_limits<TimeNs>::min();

    // Per bucket of n equal ones over [begin, end) (DeviceTimeline::buckets' bounds): the first time the
    // series reaches its maximum in the bucket (the value holding at the bucket's start counts, at that
    // start) and that maximum; kNoMoment before the series' first point. Whole blocks of points inside
    // a bucket count by their maxima; the block holding the maximum is then searched for its point.
    void peakMoments(const ActiveMemoryIndex& s, TimeNs begin, TimeNs end, std::size_t n, std::vector<TimeNs>& moment,
        std::vector<Bytes>& value)
    {
        constexpr std::size_t kFine = ActiveMemoryIndex::kFine, kCoarse = ActiveMemoryIndex::kCoarse;
        moment.assign(n, kNoMoment);
        value.assign(n, 0);
        const auto& time = s.liveTime;
        const auto& bytes = s.liveBytes;
        const std::size_t count = bytes.size();
        const double width = double(end - begin) / double(n);
        std::size_t i = std::size_t(std::lower_bound(time.begin(), time.end(), begin) - time.begin());
        for (std::size_t b = 0; b < n; ++b) {
            const TimeNs kb = begin + TimeNs(width * double(b));
            const TimeNs ke = b + 1 == n ? end : begin + TimeNs(width * double(b + 1));
            // The value holding at the bucket's start is the state just before it (at kb − 1: a point at
            // kb itself changes it), so the moment's blocks match its bytes.
            bool have = i > 0;
            Bytes best = have ? bytes[i - 1] : 0;
            TimeNs at = kb - 1;
            // Where the best lies: a point, or a fine or coarse block to search.
            std::size_t from = 0, level = 0; // level 0: none/point found; 1: fine block at from; 2: coarse block at from
            while (i < count && time[i] < ke) {
                if (i % kCoarse == 0 && i / kCoarse < s.coarseMax.size() && time[i + kCoarse - 1] < ke) {
                    if (!have || s.coarseMax[i / kCoarse] > best)
                        best = s.coarseMax[i / kCoarse], from = i, level = 2, have = true;
                    i += kCoarse;
                } else if (i % kFine == 0 && i / kFine < s.fineMax.size() && time[i + kFine - 1] < ke) {
                    if (!have || s.fineMax[i / kFine] > best)
                        best = s.fineMax[i / kFine], from = i, level = 1, have = true;
                    i += kFine;
                } else {
                    if (!have || bytes[i] > best)
                        best = bytes[i], at = time[i], level = 0, have = true;
                    ++i;
                }
            }
            if (level == 2) // the first fine block of the coarse one holding the maximum
                for (std::size_t k = from; k < from + kCoarse; k += kFine)
                    if (s.fineMax[k / kFine] == best) {
                        from = k, level = 1;
                        break;
                    }
            if (level == 1)
                for (std::size_t k = from; k < from + kFine; ++k)
                    if (bytes[k] == best) {
                        at = time[k];
                        break;
                    }
            if (have)
                moment[b] = at, value[b] = best;
        }
    }
} // namespace

ActiveMemoryFrame computeActiveMemoryFrame(const MemoryMapIndex& index, const ActiveMemoryIndex& active, TimeRange range, int width)
{
    ActiveMemoryFrame frame;
    frame.range = range;
    frame.width = std::max(1, width);
    frame.restBlocks = active.restBlocks;
    frame.topCount = active.topCount;
    if (range.end <= range.start)
        return frame;
    const std::size_t w = std::size_t(frame.width);
    std::vector<Bytes> live;
    peakMoments(active, range.start, range.end, w, frame.moment, live);
    // The bands live at each column's moment: a contiguous run of columns (the moments ascend).
    std::vector<Bytes> banded(w + 1, 0); // differences, then the bytes of the bands per column
    for (std::uint32_t rank = 0; rank < active.bands.size(); ++rank) {
        const MemoryMapBlock& b = index.blocks[active.bands[rank]];
        const auto first = std::lower_bound(frame.moment.begin(), frame.moment.end(), b.allocTime);
        const auto last = std::lower_bound(first, frame.moment.end(), b.freeTime); // kNeverFreed: to the end
        if (first == last)
            continue;
        ActiveBand band;
        band.block = active.bands[rank];
        band.rank = rank;
        band.size = b.size;
        band.col0 = int(first - frame.moment.begin());
        band.col1 = int(last - frame.moment.begin()) - 1;
        banded[std::size_t(band.col0)] += b.size;
        banded[std::size_t(band.col1) + 1] -= b.size;
        frame.bands.push_back(band);
    }
    frame.rest.resize(w);
    Bytes running = 0;
    for (std::size_t c = 0; c < w; ++c) {
        running += banded[c];
        if (frame.moment[c] == kNoMoment)
            continue;
        const double rest = double(live[c] - std::min(live[c], running));
        frame.rest[c] = PixelBucket { rest, rest, rest, true };
        frame.maxValue = std::max(frame.maxValue, double(live[c]));
    }
    return frame;
}

ActiveHit bandAt(const ActiveMemoryFrame& frame, int column, double bytes)
{
    ActiveHit hit;
    if (column < 0 || column >= int(frame.rest.size()) || bytes < 0)
        return hit;
    const PixelBucket& rest = frame.rest[std::size_t(column)];
    if (rest.valid && bytes < rest.max) {
        hit.summarized = true;
        return hit;
    }
    // The stack of this column only: the bands spanning it, in order.
    double base = rest.valid ? rest.max : 0.0;
    for (std::size_t i = 0; i < frame.bands.size(); ++i) {
        const ActiveBand& b = frame.bands[i];
        if (column < b.col0 || column > b.col1)
            continue;
        if (bytes >= base && bytes < base + double(b.size)) {
            hit.band = i;
            return hit;
        }
        base += double(b.size);
    }
    return hit;
}

QString summarizedText(const ActiveMemoryFrame& frame, int column)
{
    const double bytes = column >= 0 && column < int(frame.rest.size()) && frame.rest[std::size_t(column)].valid
        ? frame.rest[std::size_t(column)].max
        : 0.0;
    return QString("%1 other blocks (summarized: all but the %2 largest): up to %3 live here")
        .arg(frame.restBlocks)
        .arg(frame.topCount)
        .arg(bytesText(Bytes(bytes)));
}

ActiveMemoryModel::ActiveMemoryModel(QObject* parent)
    : QObject(parent)
{
}

void ActiveMemoryModel::setTrace(std::shared_ptr<const LoadedTrace> trace)
{
    m_trace = std::move(trace);
    m_index.reset();
    rebuild();
}

void ActiveMemoryModel::setTopCount(std::size_t n)
{
    n = std::max<std::size_t>(1, n);
    if (n == m_topCount)
        return;
    m_topCount = n;
    rebuild();
}

void ActiveMemoryModel::rebuild()
{
    ++*m_generation; // frames of the former index are stale
    if (!m_trace || !m_trace->memoryMap || m_trace->memoryMap->empty())
        return;
    const std::uint64_t generation = ++*m_indexGeneration;
    auto trace = m_trace;
    const std::size_t n = m_topCount;
    runLatest(
        this, m_indexGeneration, generation, [=] { return buildActiveMemoryIndex(*trace->memoryMap, n); },
        [](ActiveMemoryModel* self, std::shared_ptr<const ActiveMemoryIndex> index) {
            self->m_index = std::move(index);
            emit self->ready();
        });
}

void ActiveMemoryModel::request(TimeRange range, int width)
{
    if (!m_trace || !m_index || !m_trace->memoryMap)
        return;
    const std::uint64_t generation = ++*m_generation;
    auto trace = m_trace;
    auto index = m_index;
    runLatest(
        this, m_generation, generation,
        [=] { return std::make_shared<const ActiveMemoryFrame>(computeActiveMemoryFrame(*trace->memoryMap, *index, range, width)); },
        [](ActiveMemoryModel* self, std::shared_ptr<const ActiveMemoryFrame> frame) { emit self->frameReady(std::move(frame)); });
}

} // namespace gpumem::gui
