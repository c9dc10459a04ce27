#include "replay/parallel_runs.h"

#include "core/event_source.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpumem::replay {

unsigned defaultJobs() { return std::max(1u, std::thread::hardware_concurrency()); }

void parallelFor(std::size_t count, unsigned jobs, const std::function<void(std::size_t)>& body)
{
    if (jobs == 0)
        jobs = defaultJobs();
    const std::size_t threads = std::min<std::size_t>(jobs, count);
    if (threads <= 1) {
        for (std::size_t i = 0; i < count; ++i)
            body(i);
        return;
    }
    std::atomic<std::size_t> next { 0 };
    std::atomic<bool> failed { false };
    std::exception_ptr first;
    std::mutex firstMutex;
    auto worker = [&] {
        for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < count;) {
            try {
                body(i);
            } catch (...) {
                std::lock_guard lock(firstMutex);
                if (!first)
                    first = std::current_exception();
                failed = true;
            }
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    for (std::size_t t = 1; t < threads; ++t)
        pool.emplace_back(worker);
    worker(); // the calling thread works too
    for (auto& t : pool)
        t.join();
    if (first)
        std::rethrow_exception(first);
}

void forEachOnSource(std::size_t count, unsigned jobs, const MemoryEventSource& source, const SourceOpener& reopen,
    const std::function<void(const MemoryEventSource& on, std::size_t)>& body)
{
    const unsigned threads = jobs ? jobs : defaultJobs();
    if (source.wholeTrace() || !reopen || threads == 1 || count < 2) {
        parallelFor(count, source.wholeTrace() ? threads : 1, [&](std::size_t i) { body(source, i); });
        return;
    }
    parallelFor(count, threads, [&](std::size_t i) {
        const std::unique_ptr<MemoryEventSource> own = reopen();
        body(*own, i);
    });
}

} // namespace gpumem::replay
