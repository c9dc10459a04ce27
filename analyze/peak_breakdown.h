#pragma once
// What was live at one instant and who put it there (design.md §6): the blocks allocated and not yet
// freed after a given memory event, grouped by module tree (self and total bytes per scope), by
// category, by call site, by size class and by stream. Every grouping sums exactly to liveBytes,
// which equals the Timeline's allocated series at that point. A Breakdown is an immutable value; the
// GUI shows it in a tree model, the CLI and the HTML report print it.
#include "analyze/timeline.h"

#include <array>
#include <span>
#include <string>
#include <vector>

namespace gpumem::analyze {

enum class GroupBy : std::uint8_t { Module, Category, Site, SizeClass, Stream };
inline constexpr int kGroupByCount = 5;
std::string_view toString(GroupBy by);
std::optional<GroupBy> groupByFromString(std::string_view name);

// Which instant to look at. Time is absolute (ns, the trace's clock).
struct InstantSpec {
    enum class Kind : std::uint8_t { PeakAllocated, PeakReserved, Time } kind = Kind::PeakAllocated;
    TimeNs time = 0;
    // "peak", "reserved-peak", or a time relative to the trace start: "1.5s", "250ms", "40us",
    // "1200ns" (a unit is needed, except for 0), optionally with a leading '+' and one blank before the
    // unit, as every verb prints it ("+0.001937 s"); "@<ns>" (or "@<ns>ns", "@-<ns>") is absolute.
    // Decimal and exact: the fraction rounds half up to whole ns. Throws UsageError otherwise, or for a
    // time beyond int64 ns.
    static InstantSpec parse(std::string_view text, TimeNs traceStart);
};

struct Instant {
    std::string label; // "peak allocated", "peak reserved", "t=+1.500000 s"
    DeviceId device = 0;
    std::size_t point = 0;            // index into the DeviceTimeline
    std::uint64_t eventIndex = kNoIndex; // the memory event the state follows
    TimeNs time = 0; // the point's event time; for a --at time, that time itself (≥ the point's)
    Bytes allocated = 0, active = 0;
    std::optional<Bytes> reserved;
};

// Resolves a spec on one device's timeline; nullopt when the device has no points (or, for
// PeakReserved, no reserved series; for Time, no point at or before the time).
std::optional<Instant> resolveInstant(const DeviceTimeline& device, const InstantSpec& spec);

struct GroupRow {
    std::string key;   // what diff matches on: scope path, stack frames, category name, size class, stream
    std::string label; // what a person reads
    std::uint32_t depth = 0; // module tree only
    Bytes selfBytes = 0, totalBytes = 0; // equal except in the module tree (total includes children)
    std::uint64_t selfBlocks = 0, totalBlocks = 0;
    SiteId site = 0; // site rows: the stack (for showing it folded, analyze/frame_folding.h); 0 for merged rows
};

// One block live at an instant, what breakdownOf() groups: the fields of its alloc event.
struct LiveBlock {
    std::size_t allocation = 0; // index into trace.allocations()
    Bytes size = 0;
    ScopeId scope = 0;
    SiteId site = 0;
    StreamId stream = 0;
    Category category = Category::Unknown; // recorded or inferred, as the breakdown shows it
    bool beforeWindow = false; // among the events a snapshot importer rebuilt from before the window
    bool siteFromFree = false; // its later free has the same (nonzero) site: the importer took the stack from it
};
struct Breakdown {
    Instant instant;
    Bytes liveBytes = 0;
    std::uint64_t liveBlocks = 0;
    bool categoriesInferred = false;
    // Module rows are a pre-order walk of the scope tree (children by total bytes, descending;
    // "(no scope)" at depth 0 for blocks without one). Site and stream rows by bytes descending;
    // category rows by bytes descending; size classes in ascending size.
    std::array<std::vector<GroupRow>, kGroupByCount> groups;
    const std::vector<GroupRow>& by(GroupBy g) const { return groups[static_cast<std::size_t>(g)]; }
    // Indices into trace.allocations() of the live blocks.
    std::vector<std::size_t> liveAllocations;
    // The live blocks themselves, kept by the bounded analysis (analyze/bounded_analysis.h), whose skeleton has
    // no allocations to look the indices up in: what the report's flame graph is built from. Else empty.
    std::vector<LiveBlock> blocks;
};

// `categories` has one entry per trace.allocations() (recorded or inferred). O(allocations + scopes).
Breakdown breakdownAt(const Trace& trace, const Instant& instant, std::span<const Category> categories, bool categoriesInferred);

// The breakdown of `live` (in trace.allocations() order) at `instant`, as breakdownAt() groups it; reads
// only the trace's tables (scopes, sites, frames, streams), so a source's skeleton will do
// (analyze/bounded_analysis.h).
Breakdown breakdownOf(const Trace& trace, const Instant& instant, std::span<const LiveBlock> live, bool categoriesInferred);

// "[1.00 MiB, 2.00 MiB)" for the power-of-two class holding `size`.
std::string sizeClassLabel(Bytes size);

} // namespace gpumem::analyze
