#pragma once
// The active-memory timeline (issue #18 item 6, PyTorch memory_viz's "Active Memory Timeline"): the
// blocks allocated on a device over time as stacked bands. The N largest blocks (MemoryMapIndex
// blocks, by rounded size; ties by allocation order) are drawn one by one, stacked in allocation
// order, so a band drops when a block below it is freed; every other block is summed into one
// summarized band at the bottom. No widgets (design.md §7).
//
// ActiveMemoryIndex is built per (trace, N) on a worker thread: the chosen bands and the live bytes of
// all blocks as a step series (after each alloc and free) with maxima per 64 and 4096 points.
// computeActiveMemoryFrame() turns it into one frame for a visible range and width: each pixel column
// shows the state at the moment the live bytes peak inside it (found through those maxima, so a
// column costs O(64 + points in it / 4096)), the bands live then stacked in allocation order on the
// summarized band (the live bytes minus the bands'). A column's stack is thus one real state of the
// allocator and its top the column's peak, as the Timeline's allocated envelope; a block that lives
// and dies between two columns' peaks shows once zoomed in. Stacking costs O(N + width) per frame
// (forEachStacked: O(Σ band widths)), independent of the number of events, so 10 M events stay as
// smooth as the Timeline page (bench/gui_paint_bench). Values are plain and immutable, safe to read
// from any thread; ActiveMemoryModel lives on the UI thread.
#include "gui/models/memory_map_model.h"
#include "gui/models/timeline_frame.h"

#include <QObject>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

namespace gpumem::gui {

struct ActiveMemoryIndex {
    std::size_t topCount = 0;          // N asked for
    std::vector<std::uint32_t> bands;  // indexes into MemoryMapIndex::blocks, in allocation (blocks) order
    std::uint64_t restBlocks = 0;      // blocks in the summarized band
    // The live bytes of all blocks after each change (one point per distinct time), by time, and the
    // maxima of its blocks of kFine and kCoarse points.
    std::vector<TimeNs> liveTime;
    std::vector<Bytes> liveBytes;
    std::vector<Bytes> fineMax, coarseMax;
    static constexpr std::size_t kFine = 64, kCoarse = 4096;
};

inline constexpr std::size_t kDefaultBandCount = 500;

// The N = `topCount` largest blocks of `index` as bands, the rest summarized. O(blocks · log blocks).
std::shared_ptr<const ActiveMemoryIndex> buildActiveMemoryIndex(const MemoryMapIndex& index, std::size_t topCount);

struct ActiveBand {
    std::uint32_t block = 0;  // into MemoryMapIndex::blocks
    std::uint32_t rank = 0;   // its position in ActiveMemoryIndex::bands (the colour)
    int col0 = 0, col1 = 0;   // pixel columns [col0, col1] its lifetime touches
    Bytes size = 0;
};

struct ActiveMemoryFrame {
    TimeRange range;
    int width = 0;
    std::vector<PixelBucket> rest; // the summarized band per column (at the column's peak moment)
    std::vector<TimeNs> moment;    // per column: that moment (the first time the live bytes peak in it)
    std::vector<ActiveBand> bands; // those touching the range, in stacking order (bottom first)
    double maxValue = 0;           // the top of the highest stack in the range (bytes)
    std::uint64_t restBlocks = 0;
    std::size_t topCount = 0;
};

// The pure computation (tests call it directly). `width` ≥ 1.
ActiveMemoryFrame computeActiveMemoryFrame(const MemoryMapIndex& index, const ActiveMemoryIndex& active, TimeRange range, int width);

// Calls f(bandPosition, column, bottomBytes, topBytes) for each band of `frame` and each column it
// spans, bands in stacking order, each band starting on the summarized band's maximum plus the bands
// below it in that column. What the view paints and bandAt() hit-tests.
template <typename F> void forEachStacked(const ActiveMemoryFrame& frame, F&& f)
{
    std::vector<double> base(frame.rest.size(), 0.0);
    for (std::size_t c = 0; c < base.size(); ++c)
        base[c] = frame.rest[c].valid ? frame.rest[c].max : 0.0;
    for (std::size_t i = 0; i < frame.bands.size(); ++i) {
        const ActiveBand& b = frame.bands[i];
        for (int c = b.col0; c <= b.col1 && c < int(base.size()); ++c) {
            const double bottom = base[std::size_t(c)];
            base[std::size_t(c)] = bottom + double(b.size);
            f(i, c, bottom, base[std::size_t(c)]);
        }
    }
}

// What lies at (`column`, `bytes` up from 0) of a frame: a band (its position in frame.bands), the
// summarized band (nullopt band, summarized true) or nothing.
struct ActiveHit {
    std::optional<std::size_t> band;
    bool summarized = false;
};
ActiveHit bandAt(const ActiveMemoryFrame& frame, int column, double bytes);

// The hover text of the summarized band at a column: "412 other blocks (summarized): up to 1.20 GiB live here".
QString summarizedText(const ActiveMemoryFrame& frame, int column);

class ActiveMemoryModel : public QObject {
    Q_OBJECT
public:
    explicit ActiveMemoryModel(QObject* parent = nullptr);
    // A new trace: its bands are chosen on a worker thread (ready() follows), with the N set now.
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    // N, the number of blocks drawn one by one (≥ 1); rebuilds the index on a worker thread.
    void setTopCount(std::size_t n);
    std::size_t topCount() const { return m_topCount; }
    const std::shared_ptr<const LoadedTrace>& trace() const { return m_trace; }
    const std::shared_ptr<const ActiveMemoryIndex>& index() const { return m_index; }

public slots:
    void request(gpumem::gui::TimeRange range, int width);

signals:
    void ready(); // index() is the one for the current trace and N: views ask for frames again
    void frameReady(std::shared_ptr<const gpumem::gui::ActiveMemoryFrame> frame);

private:
    void rebuild();
    std::shared_ptr<const LoadedTrace> m_trace;
    std::shared_ptr<const ActiveMemoryIndex> m_index;
    std::size_t m_topCount = kDefaultBandCount;
    std::shared_ptr<std::atomic<std::uint64_t>> m_indexGeneration = std::make_shared<std::atomic<std::uint64_t>>(0);
    std::shared_ptr<std::atomic<std::uint64_t>> m_generation = std::make_shared<std::atomic<std::uint64_t>>(0);
};

} // namespace gpumem::gui
