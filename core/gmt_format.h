#pragma once
// The native binary format `.gmt` (docs/trace-format.md is the complete specification): a header
// (magic, version, JSON metadata) followed by self-describing, checksummed chunks. Chunks are
// independent (delta coding restarts in each), so a file cut anywhere reads up to its last whole
// chunk, and a writer that dies mid-run leaves a readable file.
#include "core/importer.h"
#include "core/trace.h"

#include <cstdio>
#include <memory>
#include <string>

namespace gpumem {

class GmtChunkSpool;

inline constexpr std::uint16_t kGmtMajorVersion = 1;
inline constexpr std::uint16_t kGmtMinorVersion = 1; // 1.1: pools (POOL) and the MEVX columns (spec §5.1)
inline constexpr char kGmtMagic[8] = { '\x89', 'G', 'M', 'T', '\r', '\n', '\x1a', '\n' };
// The most memory events one MEMV chunk may hold. Constant and linear columns cost a few bytes
// whatever the count, so readers need this bound to refuse a tiny hostile chunk that claims 4e9
// events; writers split longer runs into several chunks.
inline constexpr std::uint32_t kGmtMaxEventsPerChunk = 1u << 20;

// Appends chunks to a .gmt file. Each append* call writes one whole chunk with a single write(2),
// so readers never see a half-written chunk except at a crash. Tables must be appended before the
// events that refer to them. Not thread-safe: one writer thread (the tracer uses a background one).
class GmtWriter {
public:
    // Creates (truncates) `path` and writes the header. Throws IoError.
    GmtWriter(const std::string& path, const nlohmann::json& metadata);
    ~GmtWriter(); // finishes if finish() was not called; never throws
    GmtWriter(const GmtWriter&) = delete;
    GmtWriter& operator=(const GmtWriter&) = delete;

    // Strings with ids [first, first + count) of `table`; ids continue those already written (the
    // empty string, id 0, is implicit). Throws Error if `first` is not the next id.
    void appendStrings(const StringTable& table, StringId first, std::size_t count);
    void appendDevices(std::span<const Device> devices);
    void appendStreams(std::span<const Stream> streams);
    void appendFrames(std::span<const Frame> frames);          // ids continue from 1 (frame 0 implicit)
    void appendSites(const Trace& trace, SiteId first, std::size_t count); // from a Trace's site table
    void appendSite(std::span<const FrameId> frames);          // one site (ids continue from 1)
    void appendScopes(std::span<const Scope> scopes);          // ids continue from 1 (scope 0 implicit)
    void appendCounterSeries(std::span<const CounterSeries> series);
    void appendPools(std::span<const MemoryPool> pools);        // ids continue from 1 (pool 0 implicit)
    // Memory events [begin, end) of `columns`, as one chunk (several if longer than kGmtMaxEventsPerChunk).
    // A chunk with an event of a pool other than 0 or an empty_cache event is followed by its MEVX
    // chunk (spec §5.1): the MEMV chunk stores empty_cache as a marker, so 1.0 readers still read it.
    void appendMemoryEvents(const MemoryEventColumns& columns, std::size_t begin, std::size_t end);
    void appendKernels(std::span<const Kernel> kernels);
    void appendAnnotations(std::span<const Annotation> annotations);
    void appendCounterSamples(std::span<const CounterSample> samples);
    void appendStats(const ImportStats& stats);
    // A JSON merge patch (RFC 7396) applied to the header's metadata by readers.
    void appendMetadataPatch(const nlohmann::json& patch);
    // What writeGmt writes of `trace` before its memory events: every table (strings, devices, streams,
    // frames, sites, scopes, counter series, pools), one chunk each. Strings must not have been appended yet.
    void appendTables(const Trace& trace);
    // What writeGmt writes after the kernels: the annotations and counter samples in chunks of
    // `perChunk` (1 to kGmtMaxEventsPerChunk) and the import anomalies.
    void appendRecordsAfterKernels(const Trace& trace, std::size_t perChunk);
    // The chunks written to `spool` so far, copied here as they are (copy_file_range, else read and
    // write); its memory events count toward the end chunk's total. Throws IoError.
    void appendSpool(GmtChunkSpool& spool);
    // Writes the end chunk and closes. Throws IoError.
    void finish();

    std::uint64_t bytesWritten() const { return m_bytesWritten; }

private:
    friend class GmtChunkSpool;
    struct Headerless {};
    GmtWriter(int fd, const std::string& name, Headerless); // a spool's writer: chunks only, no header, no end chunk
    void writeChunk(std::uint32_t type, std::uint32_t records, std::string_view payload);
    void writeAll(const char* data, std::size_t size, const char* more = nullptr, std::size_t moreSize = 0);
    int m_fd = -1;
    bool m_headerless = false;
    std::string m_path;
    std::uint64_t m_bytesWritten = 0;
    std::uint64_t m_memoryEvents = 0;
    StringId m_nextString = 1;
    std::unique_ptr<char[]> m_payload; // memory-event chunks are encoded here, reused between chunks
    std::size_t m_payloadCapacity = 0;
};

// Chunks written ahead of the chunks that must come before them in the file, then copied into a
// GmtWriter's file with appendSpool. `gpumem convert X.jsonl` knows the tables (all strings among
// them) only at the end of its input, so its memory events and kernels are encoded here as they are
// read: a chunk's bytes do not depend on where it lies in the file, so the copy is what writeGmt would
// have written. The spool is an unnamed temporary file (O_TMPFILE, else a name removed at once) in
// `folder`: nothing of it outlives the process, whatever ends it. Its pages are the kernel's page
// cache, not the process's memory. Not thread-safe.
class GmtChunkSpool {
public:
    explicit GmtChunkSpool(const std::string& folder); // throws IoError naming the folder
    ~GmtChunkSpool();
    GmtChunkSpool(const GmtChunkSpool&) = delete;
    GmtChunkSpool& operator=(const GmtChunkSpool&) = delete;

    // Appends chunks (appendMemoryEvents, appendKernels, …) to the spool; tables do not belong here.
    GmtWriter& writer() { return *m_writer; }
    std::uint64_t bytes() const { return m_writer->bytesWritten(); }

private:
    friend class GmtWriter;
    std::unique_ptr<GmtWriter> m_writer;
};

// Writes a whole trace (tables, then events in chunks of `eventsPerChunk`). Throws IoError.
void writeGmt(const Trace& trace, const std::string& path, std::size_t eventsPerChunk = 65536);

// Reads a .gmt file (memory-mapped). An empty file, bad magic, a newer major version or a cut or
// corrupt file header: FormatError naming the path and offset. A cut chunk (or a missing end chunk)
// stops the read after the last whole chunk and is recorded as the "truncated" anomaly; a chunk
// whose checksum or content is bad, as "corrupt_chunk" (both severity error). Such a stop is a
// FormatError instead when nothing would be kept: before the first whole chunk, or before the first
// memory event of a file that shows it holds some (the chunk is a MEMV chunk, a whole MEMV chunk
// follows, or the end chunk counts events; docs/trace-format.md §8). Reports progress
// (fraction of bytes) through options.progress at most ~1000 times; cancelling throws Cancelled.
Trace readGmt(const std::string& path, const LoadOptions& options = {});

// The same from bytes in memory; `name` stands for the file in messages (fuzzing, pipes, tests).
Trace readGmtBytes(std::string_view bytes, std::string_view name, const LoadOptions& options = {});

} // namespace gpumem
