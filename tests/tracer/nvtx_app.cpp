// Run by tracer_injection_test with NVTX_INJECTION64_PATH=libgpumem_tracer.so: nested NVTX push/pop
// ranges on two threads, a range pushed here and continued in a second shared object, a
// start/end range that ends on another thread, and a mark.
#include <nvtx3/nvToolsExt.h>

#include <csignal>
#include <cstring>
#include <thread>

extern "C" void libraryWork(const char* domainName);

int main(int argc, char** argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--die-by-sigterm") == 0) {
        // Ranges, then a termination signal with its default action (the tracer flushes first).
        nvtxRangePushA("before:signal");
        nvtxMarkA("about to die");
        std::raise(SIGTERM);
        return 0; // not reached
    }
    nvtxRangeId_t span = nvtxRangeStartA("app:span");
    nvtxRangePushA("app:main");
    nvtxRangePushA("app:step");
    libraryWork("mylib");
    nvtxRangePushA("app:after"); // at app:step again: the library closed both its ranges
    nvtxRangePop();
    nvtxRangePop();
    std::thread worker([span] {
        nvtxRangePushA("worker:outer");
        nvtxRangePushA("worker:inner");
        nvtxMarkA("worker:mark");
        nvtxRangePop();
        nvtxRangePop();
        nvtxRangeEnd(span);
    });
    worker.join();
    nvtxRangePop();
    return 0;
}
