#pragma once
// Memory events of one trace, chunk by chunk, for the verbs that must not hold a trace whole
// (issue 22; docs/streaming.md). A source is the trace's skeleton (every table and record but the
// memory events, and for a .gmt file the kernels) plus passes over its memory events in trace
// order: the order of Trace::memory(), (time, sequence). Two sources exist: a whole in-memory
// trace cut into slices (tests prove with tiny slices that chunk boundaries change no answer) and
// a mapped .gmt file decoded one chunk at a time (core/gmt_format.h).
//
// Pairing across chunks is each consumer's business: keep a table of live blocks keyed by
// (device, address) and follow the rules of Trace::allocations() (core/trace.cpp), so that a
// figure computed from a source equals the in-memory one.
#include "core/error.h"
#include "core/importer.h"
#include "core/trace.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace gpumem {

class MemoryEventSource {
public:
    virtual ~MemoryEventSource() = default;
    // The trace without its memory events: metadata, strings, devices, streams, frames, sites,
    // scopes, pools, annotations, counter series and samples, importStats(). memory() and
    // allocations() are empty; skeleton().stats() holds the import anomalies only (pairing
    // anomalies are the consumer's, see above). Kernels: may be empty — openGmtSource leaves them
    // out, since a trace may hold as many kernels as memory events; kernelCount() gives their
    // number and forEachKernelChunk() visits them.
    virtual const Trace& skeleton() const = 0;
    virtual std::uint64_t eventCount() const = 0;
    virtual std::uint64_t kernelCount() const = 0;
    // Calls visit(chunk, firstIndex) for each chunk in order: chunk holds events
    // [firstIndex, firstIndex + chunk.count()) of the trace; it is valid only during the call.
    // Chunks are at most a few MiB (≤ kGmtMaxEventsPerChunk events). Throws what the reader throws
    // (FormatError naming the file and offset); a pass that throws — or whose visitor throws —
    // leaves the source usable for another pass. Any number of passes; not thread-safe (one pass
    // at a time per source).
    virtual void forEachChunk(
        const std::function<void(const MemoryEventColumns& chunk, std::uint64_t firstIndex)>& visit) const = 0;
    // Calls visit for each run of kernels, kernelCount() in all, in no promised order (a .gmt file
    // gives its KERN chunks in file order; Trace::kernels() is sorted by start). The default visits
    // skeleton().kernels() in one run.
    virtual void forEachKernelChunk(const std::function<void(std::span<const Kernel> kernels)>& visit) const;
    // The times of the first and the last memory event (nullopt without events): what a verb needs
    // for the trace's span before its pass. The default makes a pass; a .gmt source decodes only the
    // first and last chunks.
    virtual std::optional<std::pair<TimeNs, TimeNs>> firstAndLastTime() const;
    // The trace itself when the source serves a whole in-memory trace as one chunk (traceView): a
    // consumer may then use what the trace has computed once (its pairing, Trace::allocations()).
    // nullptr for every other source (memorySource's slices too: they stand for a streamed file).
    virtual const Trace* wholeTrace() const { return nullptr; }
};

// A whole in-memory trace as a source, in slices of `chunkEvents` (at least 1) events. The
// skeleton keeps the kernels. Memory: the trace, plus one slice.
std::unique_ptr<MemoryEventSource> memorySource(Trace trace, std::size_t chunkEvents = 65536);

// An in-memory trace as a source without a copy: its events as one chunk, its skeleton the trace
// itself (so skeleton().memory() is not empty: a consumer reads only the tables from it). For code that
// has one engine over sources and is handed a whole Trace; `trace` must outlive the source.
std::unique_ptr<MemoryEventSource> traceView(const Trace& trace);

// A .gmt file as a source (core/gmt_format.h): the file is mapped; opening reads every non-event
// chunk whole into the skeleton, checks every chunk's checksum and decodes each MEMV (+MEVX) and
// KERN chunk once to check it (one pass), keeping only an index of the MEMV chunks; each pass of
// forEachChunk decodes one chunk at a time into reused columns. Errors and anomalies are those of
// readGmt (FormatError or IoError naming the path; "truncated", "corrupt_chunk", … in
// skeleton().importStats()). A file whose memory events are out of (time, sequence) order cannot
// be streamed in trace order: it is read whole with readGmt (the "unsorted_input" anomaly says
// so) and served as memorySource. Memory: the skeleton, the index (~48 bytes per MEMV chunk) and
// one decoded chunk; the mapped pages are the kernel's page cache.
//
// With GmtChecks::InFirstPass the opening reads the tables, the kernels and the chunk headers but not the
// MEMV and MEVX chunks: their checksums, payloads and event order are checked by the first pass that
// reaches each (the opening pass was a tenth to a fifth of `gpumem analyze` on a 10 M-event file; issue 22).
// A chunk that fails a check there throws DeferredCheckFailed — from the opening itself where its header
// already shows it — and the file is then to be opened again with GmtChecks::AtOpen, which reads it as
// readGmt does (dropping the damaged chunk and what follows it, or reading an unsorted file whole):
// withGmtSource() does both. eventCount() counts the events the chunk headers announce (on a sound file,
// the events).
enum class GmtChecks { AtOpen, InFirstPass };
std::unique_ptr<MemoryEventSource> openGmtSource(
    const std::string& path, const LoadOptions& options = {}, GmtChecks checks = GmtChecks::AtOpen);

// Thrown by a .gmt source opened with GmtChecks::InFirstPass when a deferred check fails. Not a
// gpumem::Error (nothing may catch it as bad input and go on): the caller opens the file again with the
// checks at open. what(): a sentence saying so, for a caller that lets it escape.
class DeferredCheckFailed : public std::exception {
public:
    const char* what() const noexcept override
    {
        return "a .gmt chunk failed a check deferred to the first pass; open the file with GmtChecks::AtOpen";
    }
};

// f(*open(GmtChecks::InFirstPass)) and, when a deferred check fails, once more f(*open(GmtChecks::AtOpen));
// returns what f returns. `open` returns a pointer-like owner of what f reads (a source, a verb's input).
// A FormatError of the deferred opening is not the answer either (the checked opening, which may stop
// earlier, gives the error or the anomalies readGmt would): the file is opened again. f must write nothing
// before its first full pass is done (a retry would write it twice) and must not keep what it was given.
template <typename Open, typename F> decltype(auto) withDeferredChecks(Open&& open, F&& f)
{
    decltype(open(GmtChecks::AtOpen)) deferred;
    try {
        deferred = open(GmtChecks::InFirstPass);
    } catch (const DeferredCheckFailed&) {
    } catch (const FormatError&) {
    }
    if (deferred) {
        try {
            return f(std::as_const(*deferred));
        } catch (const DeferredCheckFailed&) {
        }
        deferred.reset();
    }
    const auto checked = open(GmtChecks::AtOpen);
    return f(std::as_const(*checked));
}

// withDeferredChecks over openGmtSource(path, options, checks): f(const MemoryEventSource&).
template <typename F> decltype(auto) withGmtSource(const std::string& path, const LoadOptions& options, F&& f)
{
    return withDeferredChecks([&](GmtChecks checks) { return openGmtSource(path, options, checks); }, f);
}

// Opens a source again (a .gmt: openGmtSource of its path, with the checks the first opening had): what a verb's
// replays in parallel read, one source each (replay::forEachOnSource).
using SourceOpener = std::function<std::unique_ptr<MemoryEventSource>()>;
// withGmtSource, with f(source, reopen) also given an opener of the same file with the checks `source` was opened
// with (explain's candidates, analyze's verdict).
template <typename F> decltype(auto) withReopenableGmtSource(const std::string& path, const LoadOptions& options, F&& f)
{
    GmtChecks opened = GmtChecks::InFirstPass;
    auto open = [&](GmtChecks checks) {
        opened = checks;
        return openGmtSource(path, options, checks);
    };
    return withDeferredChecks(open, [&](const MemoryEventSource& source) {
        return f(source, SourceOpener([path, options, opened] { return openGmtSource(path, options, opened); }));
    });
}

} // namespace gpumem
