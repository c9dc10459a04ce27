#pragma once
// A small thread pool for independent replays (design.md §5: a Replayer is single-threaded per run, so
// what-if verbs run many runs in parallel instead). parallelFor() hands indices 0..count-1 to up to
// `jobs` threads in index order; each index runs exactly once. Stateless; safe to call from any thread.
#include "core/event_source.h"

#include <cstddef>
#include <functional>
#include <memory>

namespace gpumem::replay {

// The default number of worker threads: std::thread::hardware_concurrency(), at least 1.
unsigned defaultJobs();

// Calls body(i) for every i in [0, count) on min(jobs, count) threads (jobs 0 = defaultJobs(); 1 = the
// calling thread only). The first exception a body throws stops the hand-out of further indices and is
// rethrown here after every thread has finished.
void parallelFor(std::size_t count, unsigned jobs, const std::function<void(std::size_t)>& body);

// Opens a source again (core/event_source.h).
using gpumem::SourceOpener;

// body(on, i) for every i in [0, count), as parallelFor. A whole trace's source (wholeTrace()) is shared by the
// threads. A streamed source serves one pass at a time: with `reopen`, where more than one body runs at once,
// each reads a source of its own (opened per body: its replay state and read window besides); without, the
// bodies run one after another on `source`. What replay, sweep, fit and explain run their replays with.
void forEachOnSource(std::size_t count, unsigned jobs, const MemoryEventSource& source, const SourceOpener& reopen,
    const std::function<void(const MemoryEventSource& on, std::size_t)>& body);

} // namespace gpumem::replay
