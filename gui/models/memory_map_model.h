#pragma once
// The memory map (issue #7 item 3): a device's blocks and segments placed on an address axis over
// time, like PyTorch memory_viz's allocator-state view. No widgets (design.md §7).
//
// MemoryMapIndex is built once per loaded trace on TraceSession's worker thread (LoadedTrace) from
// the recorded addresses: blocks are Trace::allocations() of the device (alloc → free →
// free_completed), segments are the segment_alloc/segment_map … segment_free/segment_unmap pairs
// (PyTorch snapshots; none in profiler traces, whose blocks are drawn without segments). The address
// axis is compressed: the union of every segment's and block's address range over the whole trace is
// cut into disjoint ranges laid end to end ("packed"), so gaps between segments take no pixels.
// Traces without real addresses (the memory-timeline export, 2021 Kineto files) get an empty index
// whose emptyReason says why.
//
// rasterizeMemoryMap() draws the index per pixel into images (one pass over the blocks, each block
// one filled pixel rectangle, O(blocks + pixels)); MemoryMapModel runs it on a worker thread and
// drops requests overtaken by newer ones, like TimelineModel. MemoryMapIndex and MemoryMapFrame are
// immutable values, safe to read from any thread; MemoryMapModel and SegmentTableModel live on the
// UI thread.
#include "gui/models/time_axis.h"
#include "gui/models/trace_session.h"

#include <QAbstractTableModel>
#include <QColor>
#include <QImage>
#include <QObject>

#include <atomic>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpumem::gui {

inline constexpr TimeNs kNeverFreed = std::numeric_limits<TimeNs>::max();

struct MemoryMapBlock {
    Address address = 0;
    Bytes offset = 0;  // position on the packed address axis
    Bytes size = 0;    // the block's bytes (as the allocator rounded them)
    Bytes requested = 0; // the program's bytes; 0 if unknown
    TimeNs allocTime = 0; // the trace start for a block allocated before the window
    TimeNs freeTime = kNeverFreed;      // free (free_requested); kNeverFreed if never freed
    TimeNs freeCompletedTime = kNeverFreed; // free_completed; == freeTime where not recorded
    std::uint32_t allocation = 0; // index into trace.allocations()
    bool allocatedBeforeWindow = false;
    bool allocatedAt(TimeNs t) const { return allocTime <= t && t < freeTime; }
    bool pendingAt(TimeNs t) const { return freeTime <= t && t < freeCompletedTime; }
};

struct MemoryMapSegment {
    Address address = 0;
    Bytes offset = 0;
    Bytes size = 0;
    TimeNs start = 0;
    TimeNs end = kNeverFreed;
    bool liveAt(TimeNs t) const { return start <= t && t < end; }
};

// A disjoint range of the packed address axis.
struct AddressRange {
    Address begin = 0, end = 0; // [begin, end)
    Bytes offset = 0;           // where `begin` lies on the packed axis
};

enum class MapColouring : std::uint8_t { State, Module, Category };
inline constexpr int kMapColouringCount = 3;
QString toString(MapColouring colouring);

struct LegendEntry {
    QColor colour;
    QString label;
};

struct MemoryMapIndex {
    DeviceId device = 0;
    QString deviceLabel;
    // Empty when the map can be drawn; otherwise one sentence for the page (no addresses, no events).
    QString emptyReason;
    bool hasSegments = false;
    TimeRange time;                       // the device's first to last memory event (+1 ns)
    std::vector<MemoryMapBlock> blocks;   // by allocTime, then address
    std::vector<MemoryMapSegment> segments; // by start
    std::vector<AddressRange> ranges;     // by address; offsets ascending
    Bytes axisBytes = 0;                  // total length of the packed axis
    // Per allocation: its block's index in `blocks`, or -1 (another device, no address).
    std::vector<std::int32_t> blockOfAllocation;
    // Colouring: per block the palette slot for Module (the innermost nn.Module scope holding the
    // block, ranked by the bytes allocated in it over the trace; the 10 largest get their own colour,
    // the rest share "other") and Category.
    std::vector<std::uint8_t> moduleSlot, categorySlot;
    std::vector<LegendEntry> moduleLegend; // slot order; the last entry is "other modules"

    bool empty() const { return !emptyReason.isEmpty(); }
    // The packed-axis offset of an address; nullopt outside every range.
    std::optional<Bytes> offsetOf(Address address) const;
    std::vector<LegendEntry> legend(MapColouring colouring) const;
};

// Builds the index for `device` (`categories`: one per trace.allocations(), recorded or inferred;
// may be empty). Thread-safe for a shared Trace. O(events + blocks · log blocks).
MemoryMapIndex buildMemoryMapIndex(const Trace& trace, DeviceId device, std::span<const Category> categories);

// One row of the instant's segment table: a segment live at the instant, or (traces without
// segment events) a packed address range holding at least one allocated block.
struct SegmentRow {
    Address address = 0;
    Bytes size = 0;
    Bytes allocated = 0;   // bytes of blocks allocated at the instant
    std::uint32_t blocks = 0;
    Bytes largestFree = 0; // the largest gap between allocated blocks inside it
};

struct MemoryMapState {
    TimeNs time = 0;
    std::vector<SegmentRow> segments; // by address
    Bytes allocated = 0;
    std::uint64_t blocks = 0;
    // Freed blocks not yet reusable (free_requested, free_completed later: cross-stream use).
    Bytes pending = 0;
    std::uint64_t pendingBlocks = 0;
    // Rounding waste: Σ (size − requested) over the allocated blocks whose requested size is known
    // (PyTorch rounds requests up, round_size in c10/cuda/CUDACachingAllocator.cpp; allocators.md §5).
    Bytes roundingWaste = 0;
    // The largest block allocated at the instant, preferring those allocated after the window start.
    std::optional<std::size_t> largestBlock;
};
// The state at time t (blocks with allocTime ≤ t < freeTime). O(blocks).
MemoryMapState memoryMapStateAt(const MemoryMapIndex& index, TimeNs t);

// The block drawn at (time, packed offset), with tolerances of half a pixel each way
// (`nsTolerance`, `bytesTolerance`); among several, the smallest. nullopt when none.
std::optional<std::size_t> blockAt(const MemoryMapIndex& index, TimeNs t, Bytes offset, TimeNs nsTolerance, Bytes bytesTolerance);

// A multi-line description of a block: size, requested size, lifetime (alloc/free times relative
// to the trace start), stream, module path, category and the frames of its site, folded to read like
// Python and outermost first (analyze::foldStack, docs/stacks.md).
QString describeBlock(const LoadedTrace& trace, const MemoryMapIndex& index, std::size_t block);

// The visible part [lo, hi) of the packed address axis; hi == 0 means all of it.
struct OffsetWindow {
    Bytes lo = 0, hi = 0;
    OffsetWindow resolved(Bytes axisBytes) const { return hi > lo ? *this : OffsetWindow { 0, std::max<Bytes>(axisBytes, 1) }; }
    Bytes length() const { return hi - lo; }
    bool operator==(const OffsetWindow&) const = default;
};

struct MemoryMapFrame {
    std::uint64_t generation = 0;
    TimeRange range;
    QSize size;            // of `overTime`
    MapColouring colouring = MapColouring::State;
    std::optional<TimeNs> instant;
    OffsetWindow window;
    QImage overTime;       // x: time over `range`, y: packed address over `window`, low offsets at the bottom
    QImage atInstant;      // 1 pixel wide, same rows: the state at `instant` (null without one)
    MemoryMapState state;  // at `instant` (empty without one)
};

// The pure computation (tests call it directly). `size` ≥ 1×1.
MemoryMapFrame rasterizeMemoryMap(const MemoryMapIndex& index, TimeRange range, QSize size,
    MapColouring colouring, std::optional<TimeNs> instant, OffsetWindow window = {});

class MemoryMapModel : public QObject {
    Q_OBJECT
public:
    explicit MemoryMapModel(QObject* parent = nullptr);
    void setTrace(std::shared_ptr<const LoadedTrace> trace);
    const std::shared_ptr<const LoadedTrace>& trace() const { return m_trace; }

public slots:
    // Starts a rasterization on a worker thread; frameReady() follows unless a newer request came.
    void request(gpumem::gui::TimeRange range, QSize size, gpumem::gui::MapColouring colouring,
        std::optional<gpumem::TimeNs> instant, gpumem::gui::OffsetWindow window);

signals:
    void frameReady(std::shared_ptr<const gpumem::gui::MemoryMapFrame> frame);

private:
    std::shared_ptr<const LoadedTrace> m_trace;
    std::shared_ptr<std::atomic<std::uint64_t>> m_generation = std::make_shared<std::atomic<std::uint64_t>>(0);
};

// The segments (or address ranges) at the picked instant: Address, Size, Allocated, Blocks,
// Largest free. Sizes are shown formatted; Qt::UserRole holds the raw value.
class SegmentTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void setRows(std::vector<SegmentRow> rows, bool segments);
    const std::vector<SegmentRow>& rows() const { return m_rows; }
    // Addresses of the blocks a Diagnosis finding names: rows holding one get a magenta background
    // (Qt::BackgroundRole) and marked() true. Kept across setRows(); {} clears.
    void setMarkedBlocks(std::vector<Address> addresses);
    bool marked(int row) const;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<SegmentRow> m_rows;
    std::vector<Address> m_marked;
    bool m_segments = true;
};

} // namespace gpumem::gui
