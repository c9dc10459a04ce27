#include "tracer/range_recorder.h"

#include <atomic>
#include <ctime>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpumem::tracer {

TimeNs realtimeNs()
{
    timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return TimeNs(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::uint64_t currentThreadId()
{
    thread_local const auto tid = static_cast<std::uint64_t>(::syscall(SYS_gettid));
    return tid;
}

namespace {
    std::atomic<std::uint64_t> g_nextRecorderId { 1 };

    ScopeKind kindOf(std::string_view name)
    {
        return name.starts_with("fwd:mod:") || name.starts_with("bwd:mod:") ? ScopeKind::Module : ScopeKind::Range;
    }
} // namespace

// (parent scope, range name) → (scope, name id), looked up without building a string.
struct ScopeKey {
    ScopeId parent;
    std::string name;
};
struct ScopeKeyView {
    ScopeId parent;
    std::string_view name;
};
struct ScopeKeyHash {
    using is_transparent = void;
    std::size_t operator()(const ScopeKeyView& k) const { return std::hash<std::string_view>()(k.name) * 31 + k.parent; }
    std::size_t operator()(const ScopeKey& k) const { return (*this)(ScopeKeyView { k.parent, k.name }); }
};
struct ScopeKeyEqual {
    using is_transparent = void;
    static ScopeKeyView view(const ScopeKey& k) { return { k.parent, k.name }; }
    static ScopeKeyView view(const ScopeKeyView& k) { return k; }
    template <typename A, typename B> bool operator()(const A& a, const B& b) const
    {
        return view(a).parent == view(b).parent && view(a).name == view(b).name;
    }
};

struct RangeRecorder::ThreadState {
    std::uint64_t recorder = 0;
    std::vector<Open> stack;
    std::unordered_map<ScopeKey, std::pair<ScopeId, StringId>, ScopeKeyHash, ScopeKeyEqual> scopes;
};

RangeRecorder::RangeRecorder(TraceSink& sink, Clock clock)
    : m_sink(sink)
    , m_clock(std::move(clock))
    , m_id(g_nextRecorderId.fetch_add(1))
{
}

RangeRecorder::ThreadState& RangeRecorder::state() const
{
    thread_local ThreadState t;
    if (t.recorder != m_id) {
        t.stack.clear();
        t.scopes.clear();
        t.recorder = m_id;
    }
    return t;
}

int RangeRecorder::push(std::string_view name, std::uint64_t domain)
{
    const TimeNs now = m_clock();
    ThreadState& t = state();
    const ScopeId parent = t.stack.empty() ? 0 : t.stack.back().scope;
    auto it = t.scopes.find(ScopeKeyView { parent, name });
    if (it == t.scopes.end()) {
        auto ids = m_sink.update([&](SinkTables& tables, PendingEvents&) {
            return std::make_pair(tables.scope(parent, name, kindOf(name)), tables.intern(name));
        });
        it = t.scopes.emplace(ScopeKey { parent, std::string(name) }, ids).first;
    }
    t.stack.push_back(Open { it->second.first, it->second.second, domain, now });
    return static_cast<int>(t.stack.size()) - 1;
}

int RangeRecorder::pop(std::uint64_t domain)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    auto& stack = state().stack;
    // The innermost range of this domain; ranges of other domains opened inside it stay open and
    // keep the scope path they were opened under.
    for (std::size_t i = stack.size(); i-- > 0;) {
        if (stack[i].domain != domain)
            continue;
        Open open = stack[i];
        stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
        close(open, now, thread);
        return static_cast<int>(i);
    }
    m_sink.update([&](SinkTables&, PendingEvents& p) {
        p.stats.add("nvtx_unbalanced_pop", Severity::Warning,
            "thread " + std::to_string(thread) + " popped an NVTX range it had not pushed; the pop was ignored");
    });
    return -1;
}

void RangeRecorder::close(const Open& open, TimeNs end, std::uint64_t thread)
{
    m_sink.update([&](SinkTables&, PendingEvents& p) {
        if (p.admit())
            p.annotations.push_back(Annotation { open.start, end, open.name, AnnotationKind::Range, kNoDevice, thread });
    });
}

std::uint64_t RangeRecorder::start(std::string_view name)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    StringId nameId = m_sink.update([&](SinkTables& t, PendingEvents&) { return t.intern(name); });
    std::lock_guard lock(m_mutex);
    const std::uint64_t id = m_nextRangeId++;
    m_started.emplace(id, Started { nameId, now, thread });
    return id;
}

void RangeRecorder::end(std::uint64_t id)
{
    const TimeNs now = m_clock();
    std::lock_guard lock(m_mutex);
    auto it = m_started.find(id);
    if (it == m_started.end()) {
        m_sink.update([&](SinkTables&, PendingEvents& p) {
            p.stats.add("nvtx_unknown_range_end", Severity::Warning,
                "nvtxRangeEnd with id " + std::to_string(id) + " that no nvtxRangeStart returned; ignored");
        });
        return;
    }
    const Started s = it->second;
    m_started.erase(it);
    m_sink.update([&](SinkTables&, PendingEvents& p) {
        if (p.admit())
            p.annotations.push_back(Annotation { s.start, now, s.name, AnnotationKind::Range, kNoDevice, s.thread });
    });
}

void RangeRecorder::mark(std::string_view name)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    m_sink.update([&](SinkTables& t, PendingEvents& p) {
        if (p.admit())
            p.annotations.push_back(Annotation { now, now, t.intern(name), AnnotationKind::Instant, kNoDevice, thread });
    });
}

ScopeId RangeRecorder::currentScope() const
{
    const auto& stack = state().stack;
    return stack.empty() ? 0 : stack.back().scope;
}

std::size_t RangeRecorder::depth() const { return state().stack.size(); }

} // namespace gpumem::tracer
