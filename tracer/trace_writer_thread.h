#pragma once
// TraceWriterThread: the tracer's only writer. A background thread that drains a TraceSink into a
// .gmt file every `period` (and once more on stop()), one whole chunk per table or batch, so the
// application never waits on the disk and a process killed at any moment leaves a file that reads
// up to its last whole chunk. Write errors switch the writer off (one line on stderr) instead of
// reaching the program. Thread-safe: stop() and flushNow() may be called from any thread.
#include "tracer/trace_sink.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>

namespace gpumem::tracer {

// The trace file name for this process: "<dir>/gpumem.<host>.<pid>[.rank<RANK>][.local<LOCAL_RANK>].gmt",
// with RANK and LOCAL_RANK read through `getenv` (torchrun sets them; cupti.md §1.5). A name that
// exists already gets ".1", ".2", … before ".gmt" (pids repeat across elastic restarts).
std::string traceFileName(const std::string& dir, long pid, std::string_view host,
    const std::function<const char*(const char*)>& getenv);

// Header metadata of a tracer file: tool, version, pid, ppid, host, command line, the torchrun
// variables present, CUDA_VISIBLE_DEVICES, and the clock ("CLOCK_REALTIME ns", cupti.md §5.1).
nlohmann::json processMetadata();

class TraceWriterThread {
public:
    // Creates the file (header) and starts the thread. Throws IoError when the file cannot be made.
    TraceWriterThread(TraceSink& sink, const std::string& path, const nlohmann::json& metadata,
        std::chrono::milliseconds period = std::chrono::milliseconds(500));
    ~TraceWriterThread(); // stop()
    TraceWriterThread(const TraceWriterThread&) = delete;
    TraceWriterThread& operator=(const TraceWriterThread&) = delete;

    // Asks for a drain now (returns without waiting).
    void flushNow();
    // Final drain, then `trailer` as a metadata patch, the end chunk and close. Idempotent; waits
    // for the writer thread (the caller bounds the wait where that matters). Never throws.
    void stop(const nlohmann::json& trailer = nlohmann::json::object());
    bool failed() const { return m_failed.load(); }
    const std::string& path() const { return m_path; }

private:
    void run();
    bool drainOnce(); // false after a write error

    TraceSink& m_sink;
    std::string m_path;
    std::unique_ptr<GmtWriter> m_writer;
    std::chrono::milliseconds m_period;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopRequested = false;
    bool m_flushRequested = false;
    std::mutex m_stopMutex; // serialises stop()
    bool m_stopped = false;
    std::atomic<bool> m_failed { false };
    std::thread m_thread;
};

} // namespace gpumem::tracer
