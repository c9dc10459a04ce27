#pragma once
// Importer for PyTorch CUDA caching-allocator memory snapshots: the pickle written by
// `torch.cuda.memory._dump_snapshot()` (all four schema generations, SOURCES.md §C; allocators.md
// §1.15) and the same dict saved as JSON. Registered as "pytorch-snapshot".
//
// What the Trace holds:
// - one Device (CUDA, ordinal = index in `device_traces` / `segment.device`) per device that has
//   trace entries or segments; streams from the `stream` handles;
// - request-level events alloc / free (`free_requested`) / free_completed and segment-level events
//   segment_alloc / segment_free / segment_map / segment_unmap / oom, plus a marker per `snapshot`
//   entry (size = the allocated bytes then). `frames` (innermost first, as PyTorch lists them)
//   become the site. time = time_us × 1000; generations A and B have no time: entry i is placed at
//   i + 1 ns and the info anomaly "no_timestamps" is recorded. sequence = the entry index.
//   requestedSize = the entry's `size` (the caller's bytes, allocators.md §1.15.5); size = the block's
//   bytes, inferred by the rule below;
// - `external_annotations` START/END pairs as annotations (ranges);
// - metadata: "source_format":"pytorch-snapshot", "snapshot_generation" ("A".."D"),
//   "allocator_settings" (verbatim, when present), "segments_at_dump" (the recorded segments as
//   columns, one array per field, all of the same length, in `segments` order: device, address,
//   total_size, allocated_size, active_size, requested_size, stream, segment_type ("large"/"small"),
//   segment_pool_id ([a,b], or null in generation A), is_expandable, blocks (the block count)) and
//   "reconstruction" (an array, one object per device: what was rebuilt before the window, below).
//
// Block sizes. Trace entries carry the request, not the block. The importer replays the events
// through a SegmentBlockMap and applies PyTorch's rule (CUDACachingAllocator.cpp round_size and
// should_split; allocators.md §1.2, §1.6): an alloc at address X takes the free block starting at X;
// rounded = round_size(request) (with the snapshot's roundup_power2_divisions); the block is split
// (size = rounded) when the rest is ≥ 512 B in the small pool or an expandable segment, or > 1 MiB
// and rounded < max_split_size in the large pool; otherwise the whole free block is handed out
// (counted per device as "trace_allocs_unsplit" in "reconstruction").
//
// Reconstruction of the state before the window. The trace is a ring buffer, so it can start
// mid-run. The importer walks the trace backwards from the end state (`segments`), the way
// memory_viz (torch/utils/viz/MemoryViz.js, process_alloc_data) pairs frees with allocs:
// - segments: start from the recorded non-expandable segments; backwards, segment_alloc X removes X
//   and segment_free X adds X (size from the entry). Expandable segments are mapped ranges:
//   segment_map removes its range, segment_unmap adds it back. What remains existed before the
//   window and gets a segment_alloc (segment_map for expandable ranges) at the pre-window time;
// - blocks: start from the recorded active blocks (exact address, size, requested size, frames);
//   backwards, alloc X removes X, free_requested X makes X allocated, free_completed X makes X
//   pending. What remains was live before the window: blocks freed in the trace without an alloc,
//   plus recorded active blocks the trace never touches. Each gets an alloc (and a free, if it was
//   pending) at the pre-window time. A block known only from its free gets size round_size(request),
//   grown over a following free gap of ≤ 1 MiB in a large segment (such a gap cannot be a free
//   large-pool block, so the block was not split);
// - pre-window events have time = (first entry's time − 1 ns) and sequences 0, 1, … in the order
//   segments, blocks (by address), pending frees.
// What it cannot know: the history before the window (frees of blocks allocated and freed before it,
// inactive split blocks that existed then and were merged since, segments released before it), the
// frames and requested size of a pre-window block that the trace frees (its site is the free's
// frames where present), and cross-stream pending states the dump does not show. Inconsistencies
// between trace and end state (an alloc not live at the end, …) are counted as warning anomalies.
//
// Bounds: the work stays linear in the file size even for a hostile pickle that shares containers
// (a snapshot dict has at most 64 fields, segment dicts and blocks lists may not be shared, a
// frames list and a frame dict are resolved once per items identity, history search stops after 16
// entries; a trace entry whose keys repeat those of the entry before is read by position, in time
// linear in its keys); docs/pytorch-snapshot.md.
//
// Thread-safety: the functions are reentrant; they share no state.
#include "core/importer.h"
#include "importers/pickle_reader.h"
#include "importers/snapshot_state.h"

#include <span>

namespace gpumem {

// Parses a snapshot file, pickle or JSON (recognised by content; gzip is decompressed), into a
// document. Throws IoError / FormatError naming the path (and the opcode and byte offset for a
// refused pickle opcode).
PickleDocument readSnapshotDocument(const std::string& path);

// Imports a parsed snapshot. Throws FormatError naming doc.source() and the field when a required
// field is missing or has the wrong type (e.g. "segments[3].blocks[0]: 'size' is not an int").
Trace importPytorchSnapshot(const PickleDocument& doc, const LoadOptions& options = {});
Trace importPytorchSnapshot(const std::string& path, const LoadOptions& options = {});
// The same for a file's content (PickleDocument::readInput): JSON is read into a document; a pickle is
// parsed with its trace entries decoded as they are met (PickleDictSink), not kept in the document, so
// the import's peak memory is that of the document without them (issue 22). The Trace, errors and
// anomalies are those of importPytorchSnapshot(doc): an entry the fast decoding does not take is read
// from the document, and a pickle that refers to a taken entry again is parsed a second time, whole.
// `source` names the input in messages.
Trace importPytorchSnapshot(PickleDocument::Input input, std::string_view source, const LoadOptions& options = {});

// The recorded end state: every segment of `segments` with its blocks (generation A: addresses
// from tiling the segment). Throws like importPytorchSnapshot.
std::vector<SnapshotSegment> snapshotSegments(const PickleDocument& doc);

// PyTorch's round_size (CUDACachingAllocator.cpp; allocators.md §1.2): < 512 → 512; with
// d = divisions[clamp(floor(log2 n) − 20, 0, 15)] > 1 and n > 512·d → the next power-of-two
// division; else the next multiple of 512. `divisions` has 16 entries (empty = all 0).
Bytes pytorchRoundSize(Bytes n, std::span<const std::int64_t> divisions);

std::unique_ptr<Importer> makePytorchSnapshotImporter();

} // namespace gpumem
