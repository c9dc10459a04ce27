#include "tracer/trace_writer_thread.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumem::tracer {

namespace {
    std::string sanitize(std::string_view s)
    {
        std::string out;
        for (char c : s)
            out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
        return out;
    }
    bool exists(const std::string& path)
    {
        struct stat st {};
        return ::stat(path.c_str(), &st) == 0;
    }
} // namespace

std::string traceFileName(const std::string& dir, long pid, std::string_view host,
    const std::function<const char*(const char*)>& getenv)
{
    std::string stem = (dir.empty() ? std::string(".") : dir) + "/gpumem." + sanitize(host.empty() ? "host" : host) + "."
        + std::to_string(pid);
    if (const char* rank = getenv("RANK"); rank && *rank)
        stem += ".rank" + sanitize(rank);
    if (const char* local = getenv("LOCAL_RANK"); local && *local)
        stem += ".local" + sanitize(local);
    std::string path = stem + ".gmt";
    for (int i = 1; exists(path) && i < 1000; ++i)
        path = stem + "." + std::to_string(i) + ".gmt";
    return path;
}

nlohmann::json processMetadata()
{
    nlohmann::json m;
    m["source_format"] = "gmt";
    m["tool"] = "gpumem-tracer";
    m["tool_version"] = GPUMEM_VERSION;
    m["pid"] = ::getpid();
    m["ppid"] = ::getppid();
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0)
        m["host"] = host;
    m["clock"] = "CLOCK_REALTIME ns (CUPTI default on Linux)";
    std::ifstream cmd("/proc/self/cmdline", std::ios::binary);
    std::string arg;
    nlohmann::json argv = nlohmann::json::array();
    while (std::getline(cmd, arg, '\0'))
        argv.push_back(arg);
    m["command"] = argv;
    nlohmann::json env = nlohmann::json::object();
    for (const char* name : { "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
             "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
             "PYTORCH_ALLOC_CONF" })
        if (const char* v = std::getenv(name))
            env[name] = v;
    m["environment"] = env;
    return m;
}

TraceWriterThread::TraceWriterThread(TraceSink& sink, const std::string& path, const nlohmann::json& metadata,
    std::chrono::milliseconds period)
    : m_sink(sink)
    , m_path(path)
    , m_writer(std::make_unique<GmtWriter>(path, metadata))
    , m_period(period)
{
    m_thread = std::thread([this] { run(); });
}

TraceWriterThread::~TraceWriterThread() { stop(); }

void TraceWriterThread::flushNow()
{
    {
        std::lock_guard lock(m_mutex);
        m_flushRequested = true;
    }
    m_wake.notify_one();
}

bool TraceWriterThread::drainOnce()
{
    if (m_failed.load())
        return false;
    try {
        m_sink.drainTo(*m_writer);
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpumem tracer: cannot write %s (%s); tracing continues without writing\n", m_path.c_str(), e.what());
    } catch (...) {
        std::fprintf(stderr, "gpumem tracer: cannot write %s; tracing continues without writing\n", m_path.c_str());
    }
    m_failed.store(true);
    return false;
}

void TraceWriterThread::run()
{
    std::unique_lock lock(m_mutex);
    while (!m_stopRequested) {
        m_wake.wait_for(lock, m_period, [&] { return m_stopRequested || m_flushRequested; });
        if (m_stopRequested)
            break;
        m_flushRequested = false;
        lock.unlock();
        drainOnce();
        lock.lock();
    }
}

void TraceWriterThread::stop(const nlohmann::json& trailer)
{
    std::lock_guard stopLock(m_stopMutex);
    if (m_stopped)
        return;
    m_stopped = true;
    {
        std::lock_guard lock(m_mutex);
        m_stopRequested = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable()) {
        if (m_thread.get_id() == std::this_thread::get_id())
            m_thread.detach();
        else
            m_thread.join();
    }
    if (!drainOnce())
        return;
    try {
        nlohmann::json patch = trailer.is_object() ? trailer : nlohmann::json::object();
        patch["events_written"] = m_sink.eventsWritten();
        m_writer->appendMetadataPatch(patch);
        m_writer->finish();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpumem tracer: cannot finish %s (%s)\n", m_path.c_str(), e.what());
        m_failed.store(true);
    }
}

} // namespace gpumem::tracer
