#include "tracer/range_recorder.h"

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
    ScopeKind kindOf(std::string_view name)
    {
        return name.starts_with("fwd:mod:") || name.starts_with("bwd:mod:") ? ScopeKind::Module : ScopeKind::Range;
    }
} // namespace

RangeRecorder::RangeRecorder(TraceSink& sink, Clock clock)
    : m_sink(sink)
    , m_clock(std::move(clock))
{
}

int RangeRecorder::push(std::string_view name, std::uint64_t domain)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    std::lock_guard lock(m_mutex);
    auto& stack = m_stacks[thread];
    const ScopeId parent = stack.empty() ? 0 : stack.back().scope;
    auto [scope, nameId] = m_sink.update([&](SinkTables& t, PendingEvents&) {
        return std::make_pair(t.scope(parent, name, kindOf(name)), t.intern(name));
    });
    stack.push_back(Open { scope, nameId, domain, now });
    return static_cast<int>(stack.size()) - 1;
}

int RangeRecorder::pop(std::uint64_t domain)
{
    const TimeNs now = m_clock();
    const std::uint64_t thread = currentThreadId();
    std::lock_guard lock(m_mutex);
    auto& stack = m_stacks[thread];
    // The innermost range of this domain; ranges of other domains opened inside it stay open but
    // are re-parented implicitly (their scope ids keep the path they were opened under).
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

ScopeId RangeRecorder::currentScope(std::uint64_t thread) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_stacks.find(thread);
    return it == m_stacks.end() || it->second.empty() ? 0 : it->second.back().scope;
}

std::size_t RangeRecorder::depth(std::uint64_t thread) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_stacks.find(thread);
    return it == m_stacks.end() ? 0 : it->second.size();
}

} // namespace gpumem::tracer
