// libgpumem_tracer.so: the thin injection layer (docs/tracer.md). The CUDA driver loads it through
// CUDA_INJECTION64_PATH and calls InitializeInjection on the thread that runs cuInit; every shared
// object that uses NVTX loads it through NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2.
// InitializeInjectionNvtxExtension takes NVTX extension modules (the payload extension). Those three
// functions are the only exported symbols (exports.map). Everything here runs inside
// the traced program: no exception leaves this file, no call waits on the disk (the writer is a
// background thread), and when CUPTI refuses to start the tracer prints one line and turns off.
#include "tracer/activity_converter.h"
#include "tracer/api_callbacks.h"
#include "tracer/caller_library.h"
#include "tracer/nvtx_handlers.h"
#include "tracer/range_recorder.h"
#include "tracer/trace_writer_thread.h"

#include <cupti.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <unistd.h>

#include <vector>

#define GPUMEM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpumem::tracer {
namespace {

    constexpr std::size_t kBufferSize = std::size_t(8) << 20; // NVIDIA's samples use 8 MiB (cupti.md §5.2)

    std::size_t envSize(const char* name, std::size_t fallback)
    {
        const char* v = std::getenv(name);
        if (v == nullptr || *v == '\0')
            return fallback;
        char* end = nullptr;
        unsigned long long n = std::strtoull(v, &end, 10);
        return end && *end == '\0' ? static_cast<std::size_t>(n) : fallback;
    }
    bool envOff(const char* name)
    {
        const char* v = std::getenv(name);
        return v != nullptr && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
    }

    struct Session {
        TraceSink sink;
        RangeRecorder ranges { sink };
        CorrelationMap correlations;
        ActivityConverter converter { sink, correlations };
        ApiCallbacks api { sink, ranges, correlations };
        std::unique_ptr<TraceWriterThread> writer;
        pid_t pid = ::getpid();
        std::atomic<bool> on { true };
        std::atomic<bool> cuptiActive { false };
        std::atomic<bool> finished { false };
        CUpti_SubscriberHandle subscriber = nullptr;
        std::atomic<std::size_t> bufferBytes { 0 };
        std::size_t maxBufferBytes = envSize("GPUMEM_TRACER_MAX_BUFFER_MB", 1024) << 20;
        sem_t rescueRequest {};
        sem_t rescueDone {};
        std::atomic<int> fatalSignal { 0 };
    };

    std::mutex g_initMutex;
    Session* g_session = nullptr; // leaked on purpose: CUPTI and NVTX may call in until the process ends
    bool g_sessionFailed = false;
    std::once_flag g_cuptiOnce;

    bool verbose() { return std::getenv("GPUMEM_TRACER_VERBOSE") != nullptr; }

    // Ends the session: a bounded forced CUPTI flush, the final drain and the end chunk. Runs once,
    // only in the process that started the session (not in a fork child).
    void finishSession(const nlohmann::json& trailer, std::chrono::seconds flushTimeout)
    {
        Session* s = g_session;
        if (s == nullptr || ::getpid() != s->pid || s->finished.exchange(true))
            return;
        if (s->cuptiActive.load()) {
            // A forced flush can hang after a fatal CUDA error (cupti.md §1.4): wait a bounded time.
            struct Flush {
                std::mutex m;
                std::condition_variable cv;
                bool done = false;
            };
            auto flush = std::make_shared<Flush>();
            try {
                std::thread([flush] {
                    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
                    std::lock_guard lock(flush->m);
                    flush->done = true;
                    flush->cv.notify_all();
                }).detach();
                std::unique_lock lock(flush->m);
                if (!flush->cv.wait_for(lock, flushTimeout, [&] { return flush->done; }))
                    std::fprintf(stderr, "gpumem tracer: CUPTI did not flush within %llds; the last records are lost\n",
                        static_cast<long long>(flushTimeout.count()));
            } catch (...) {
            }
        }
        s->on.store(false);
        setNvtxRecorder(nullptr);
        if (s->writer)
            s->writer->stop(trailer);
        if (verbose() && s->writer)
            std::fprintf(stderr, "gpumem tracer: wrote %s (%llu events)\n", s->writer->path().c_str(),
                static_cast<unsigned long long>(s->sink.eventsWritten()));
    }

    void onExit()
    {
        try {
            finishSession({ { "exit", "normal" } }, std::chrono::seconds(5));
        } catch (...) {
        }
    }

    // Fatal signals: wake the rescue thread (sem_post is async-signal-safe), give it a few seconds to
    // flush, then die as the signal intended. Installed only where the disposition was SIG_DFL, so
    // the program's own handlers are never replaced.
    constexpr int kFatalSignals[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };

    void onFatalSignal(int sig)
    {
        Session* s = g_session;
        int expected = 0;
        if (s != nullptr && ::getpid() == s->pid && s->fatalSignal.compare_exchange_strong(expected, sig)) {
            ::sem_post(&s->rescueRequest);
            timespec deadline {};
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += 3;
            while (::sem_timedwait(&s->rescueDone, &deadline) == -1 && errno == EINTR) {
            }
        }
        ::signal(sig, SIG_DFL);
        ::raise(sig);
    }

    void rescueLoop(Session* s)
    {
        while (::sem_wait(&s->rescueRequest) == -1 && errno == EINTR) {
        }
        try {
            const int sig = s->fatalSignal.load();
            finishSession({ { "exit", "signal" }, { "signal", sig }, { "signal_name", strsignal(sig) } }, std::chrono::seconds(2));
        } catch (...) {
        }
        ::sem_post(&s->rescueDone);
    }

    std::vector<int> g_installedSignals; // the signals whose handler is ours (guarded by g_initMutex)

    void installSignalHandlers()
    {
        for (int sig : kFatalSignals) {
            struct sigaction old {};
            if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
                continue;
            struct sigaction act {};
            act.sa_handler = onFatalSignal;
            sigemptyset(&act.sa_mask);
            act.sa_flags = SA_RESTART;
            if (::sigaction(sig, &act, nullptr) == 0)
                g_installedSignals.push_back(sig);
        }
    }

    // Gives the default action back to the signals we took (only where our handler is still there).
    void removeSignalHandlers()
    {
        std::lock_guard lock(g_initMutex);
        for (int sig : g_installedSignals) {
            struct sigaction current {};
            if (::sigaction(sig, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) && current.sa_handler == onFatalSignal)
                ::signal(sig, SIG_DFL);
        }
        g_installedSignals.clear();
    }

    void onForkChild()
    {
        // A child of fork() has our memory but no writer thread and no CUPTI: stay silent in it.
        if (g_session != nullptr) {
            g_session->on.store(false);
            g_session->finished.store(true);
        }
        setNvtxRecorder(nullptr);
    }

    Session* ensureSession()
    {
        std::lock_guard lock(g_initMutex);
        if (g_session != nullptr || g_sessionFailed)
            return g_session;
        try {
            auto s = std::make_unique<Session>();
            const char* dir = std::getenv("GPUMEM_TRACE_DIR");
            char host[256] = {};
            ::gethostname(host, sizeof host - 1);
            const std::string path = traceFileName(dir ? dir : ".", static_cast<long>(s->pid), host, [](const char* n) { return std::getenv(n); });
            s->writer = std::make_unique<TraceWriterThread>(s->sink, path, processMetadata(),
                std::chrono::milliseconds(envSize("GPUMEM_TRACER_FLUSH_MS", 500)));
            ::sem_init(&s->rescueRequest, 0, 0);
            ::sem_init(&s->rescueDone, 0, 0);
            std::thread(rescueLoop, s.get()).detach();
            g_session = s.release();
            setNvtxRecorder(&g_session->ranges);
            ::pthread_atfork(nullptr, nullptr, onForkChild);
            std::atexit(onExit);
            installSignalHandlers();
            if (verbose())
                std::fprintf(stderr, "gpumem tracer: recording to %s\n", path.c_str());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "gpumem tracer: cannot start (%s); tracing is off for this process\n", e.what());
            g_sessionFailed = true;
        } catch (...) {
            std::fprintf(stderr, "gpumem tracer: cannot start; tracing is off for this process\n");
            g_sessionFailed = true;
        }
        return g_session;
    }

    // --------------------------------------------------------------------------------- CUPTI side

    void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
    {
        *buffer = nullptr;
        *size = 0;
        *maxNumRecords = 0;
        Session* s = g_session;
        if (s == nullptr || !s->on.load())
            return;
        // Returning no buffer makes CUPTI drop records and count them (cupti.md §5.3); the count
        // lands in the trace as "dropped_records".
        if (s->bufferBytes.fetch_add(kBufferSize) + kBufferSize > s->maxBufferBytes) {
            s->bufferBytes.fetch_sub(kBufferSize);
            return;
        }
        void* p = std::aligned_alloc(8, kBufferSize);
        if (p == nullptr) {
            s->bufferBytes.fetch_sub(kBufferSize);
            return;
        }
        *buffer = static_cast<uint8_t*>(p);
        *size = kBufferSize;
    }

    void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize)
    {
        Session* s = g_session;
        if (s != nullptr && s->on.load()) {
            try {
                s->converter.convertBuffer(buffer, validSize, cuptiActivityGetNextRecord);
                size_t dropped = 0;
                if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
                    s->converter.addDroppedRecords(dropped);
            } catch (...) {
            }
        }
        std::free(buffer);
        if (s != nullptr && buffer != nullptr)
            s->bufferBytes.fetch_sub(kBufferSize);
    }

    void CUPTIAPI onCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data)
    {
        Session* s = g_session;
        if (s == nullptr || !s->on.load() || data == nullptr)
            return;
        if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
            return;
        try {
            s->api.onApi(domain, cbid, *static_cast<const CUpti_CallbackData*>(data));
        } catch (...) {
        }
    }

    std::string cuptiError(CUptiResult r)
    {
        const char* text = nullptr;
        if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr)
            return "CUPTI error " + std::to_string(int(r));
        return text;
    }

    // Turns the tracer off after a CUPTI failure: one line on stderr, CUPTI released, the file
    // finished (and removed when it holds no event).
    void switchOff(Session* s, const std::string& what, CUptiResult r)
    {
        const std::string reason = what + " failed: " + cuptiError(r);
        std::fprintf(stderr, "gpumem tracer: %s; tracing is off for this process\n", reason.c_str());
        s->on.store(false);
        setNvtxRecorder(nullptr);
        for (auto kind : { CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL })
            cuptiActivityDisable(kind);
        if (s->subscriber != nullptr) {
            cuptiUnsubscribe(s->subscriber);
            s->subscriber = nullptr;
        }
        cuptiGetLastError(); // clears CUPTI's sticky error (cupti.md §1.3)
        removeSignalHandlers();
        if (s->finished.exchange(true) || !s->writer)
            return;
        s->writer->stop({ { "tracer_disabled", reason } });
        if (s->sink.eventsWritten() == 0)
            ::unlink(s->writer->path().c_str());
    }

    void startCupti(Session* s)
    {
        uint32_t version = 0;
        cuptiGetVersion(&version);
        s->converter.setOptions(ConverterOptions { version >= 130000 });
        nlohmann::json info { { "cupti_runtime_version", version }, { "cupti_api_version", CUPTI_API_VERSION } };
        Dl_info dl {};
        if (::dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &dl) != 0 && dl.dli_fname != nullptr)
            info["libcupti"] = dl.dli_fname;

        CUptiResult r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        if (r != CUPTI_SUCCESS)
            return switchOff(s, "cuptiActivityRegisterCallbacks", r);

        // The first stack walk loads the unwinder (glibc's backtrace dlopens libgcc_s): done here, before
        // any callback, so no cuMemMap callback opens a library while the driver holds its locks.
        (void)callingLibrary();

        using SubscribeV2 = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*);
        char other[256] = {};
        if (auto v2 = reinterpret_cast<SubscribeV2>(::dlsym(RTLD_DEFAULT, "cuptiSubscribe_v2"))) {
            CUpti_SubscriberParams params {};
            params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
            params.subscriberName = "gpumem";
            params.oldSubscriberName = other;
            params.oldSubscriberSize = sizeof other;
            r = v2(&s->subscriber, onCallback, nullptr, &params);
        } else {
            r = cuptiSubscribe(&s->subscriber, onCallback, nullptr);
        }
        if (r != CUPTI_SUCCESS) {
            s->subscriber = nullptr;
            std::string what = "cuptiSubscribe";
            if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
                what += other[0] ? " (another CUPTI tool is attached: " + std::string(other) + ")" : " (another CUPTI tool is attached)";
            return switchOff(s, what, r);
        }
        for (auto cbid : ApiCallbacks::runtimeCallbackIds())
            if ((r = cuptiEnableCallback(1, s->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid)) != CUPTI_SUCCESS)
                return switchOff(s, "cuptiEnableCallback(runtime " + std::to_string(cbid) + ")", r);
        for (auto cbid : ApiCallbacks::driverCallbackIds())
            if ((r = cuptiEnableCallback(1, s->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid)) != CUPTI_SUCCESS)
                return switchOff(s, "cuptiEnableCallback(driver " + std::to_string(cbid) + ")", r);

        const bool source = !envOff("GPUMEM_TRACER_ALLOCATION_SOURCE");
        if (source) {
            using EnableSource = CUptiResult (*)(uint8_t);
            if (auto enable = reinterpret_cast<EnableSource>(::dlsym(RTLD_DEFAULT, "cuptiActivityEnableAllocationSource")))
                info["allocation_source"] = enable(1) == CUPTI_SUCCESS;
        }
        for (auto kind : { CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL })
            if ((r = cuptiActivityEnable(kind)) != CUPTI_SUCCESS)
                return switchOff(s, "cuptiActivityEnable(" + std::to_string(int(kind)) + ")", r);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE); // names and sizes only: not worth switching off for
        if (!envOff("GPUMEM_TRACER_KERNELS") && (r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS)
            return switchOff(s, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
        cuptiActivityFlushPeriod(static_cast<uint32_t>(envSize("GPUMEM_TRACER_FLUSH_MS", 500)));
        s->cuptiActive.store(true);
        s->sink.update([&](SinkTables&, PendingEvents& p) {
            p.metadataPatch.merge_patch(info);
            return 0;
        });
        if (verbose())
            std::fprintf(stderr, "gpumem tracer: CUPTI %u attached (%s)\n", version, dl.dli_fname ? dl.dli_fname : "libcupti");
    }

} // namespace
} // namespace gpumem::tracer

using namespace gpumem::tracer;

GPUMEM_EXPORT int InitializeInjection(void)
{
    try {
        Session* s = ensureSession();
        if (s == nullptr)
            return 1;
        std::call_once(g_cuptiOnce, [s] {
            try {
                startCupti(s);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "gpumem tracer: %s; tracing is off for this process\n", e.what());
                s->on.store(false);
                setNvtxRecorder(nullptr);
            }
        });
    } catch (...) {
    }
    // NVIDIA's samples return 1; the driver carries on either way.
    return 1;
}

GPUMEM_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable)
{
    try {
        Session* s = ensureSession();
        if (s == nullptr || !s->on.load())
            return 0; // NVTX calls stay no-ops
        return installNvtxHandlers(getExportTable);
    } catch (...) {
        return 0;
    }
}

// NVTX extension modules (the payload extension's nvtxRangePopPayload, which NCCL uses) reach the
// tool here, once per shared object and module (nvtx3/nvtxDetail/nvtxExtInit.h).
GPUMEM_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module)
{
    try {
        Session* s = ensureSession();
        if (s == nullptr || !s->on.load())
            return 0; // the module's calls stay no-ops
        return installNvtxExtension(module);
    } catch (...) {
        return 0;
    }
}
