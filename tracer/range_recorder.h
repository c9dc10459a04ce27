#pragma once
// RangeRecorder: the NVTX range bookkeeping of the tracer. Push/pop ranges are per thread (NVTX's
// definition): each thread has a stack whose top is a node of the scope tree (SinkTables::scope),
// so "the NVTX range stack of the thread" is one ScopeId, read when the thread calls a CUDA
// allocation API (api_callbacks.h) and attached to the allocation. Start/end ranges are not
// thread-bound and only become annotations. Every closed range and every mark becomes an
// Annotation (host time, thread). One stack per thread is shared by all NVTX domains and all
// libraries that use NVTX, so ranges from a library nest inside the application's; a pop from a
// domain removes that domain's innermost range. Names beginning with "fwd:mod:" or "bwd:mod:"
// (the Python module helper, tracer/python) make Module scopes; all others make Range scopes.
// Thread-safe. A thread's stack and its cache of scope ids live in thread-local storage, so a push
// whose range path was seen before takes no lock, and a pop takes the sink's mutex once (to add
// the annotation); only start/end ranges share a map under a mutex.
#include "tracer/trace_sink.h"

#include <functional>
#include <unordered_map>

namespace gpumem::tracer {

// Nanoseconds on CUPTI's default clock (CLOCK_REALTIME on Linux; cupti.md §5.1).
TimeNs realtimeNs();
// The calling thread's kernel thread id (gettid), the id CUPTI reports with
// CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM.
std::uint64_t currentThreadId();

class RangeRecorder {
public:
    using Clock = std::function<TimeNs()>;
    explicit RangeRecorder(TraceSink& sink, Clock clock = realtimeNs);

    // Opens a range on the calling thread. `domain` is 0 for NVTX's default domain, otherwise any
    // value naming the domain. Returns the nesting level of the new range (0 for outermost), as
    // nvtxRangePush does.
    int push(std::string_view name, std::uint64_t domain = 0);
    // Closes the innermost range of `domain` on the calling thread. Returns the level it had, or
    // -1 (and counts "nvtx_unbalanced_pop") when the thread has none.
    int pop(std::uint64_t domain = 0);
    // A start/end range (may end on another thread). Returns its id (never 0).
    std::uint64_t start(std::string_view name);
    // Ends a start/end range; an unknown id counts "nvtx_unknown_range_end".
    void end(std::uint64_t id);
    // An instant.
    void mark(std::string_view name);

    // The innermost scope of the calling thread's stack (0 when it has no open range).
    ScopeId currentScope() const;
    // Depth of the calling thread's stack.
    std::size_t depth() const;

private:
    struct Open {
        ScopeId scope;
        StringId name;
        std::uint64_t domain;
        TimeNs start;
    };
    struct Started {
        StringId name;
        TimeNs start;
        std::uint64_t thread;
    };
    struct ThreadState;
    ThreadState& state() const; // the calling thread's, reset when another recorder used it before
    void close(const Open& open, TimeNs end, std::uint64_t thread);

    TraceSink& m_sink;
    Clock m_clock;
    const std::uint64_t m_id; // never reused, so a thread's state cannot be mistaken for another recorder's
    std::mutex m_mutex;       // guards m_started
    std::unordered_map<std::uint64_t, Started> m_started;
    std::uint64_t m_nextRangeId = 1;
};

} // namespace gpumem::tracer
