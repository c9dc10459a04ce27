// Run by tracer_injection_test with NVTX_INJECTION64_PATH=libgpumem_tracer.so: nested NVTX push/pop
// ranges on two threads, a range pushed here and continued in a second shared object, a
// start/end range that ends on another thread, and a mark.
#include <nvtx3/nvToolsExt.h>

#include <thread>

extern "C" void libraryWork(const char* domainName);

int main()
{
    nvtxRangeId_t span = nvtxRangeStartA("app:span");
    nvtxRangePushA("app:main");
    nvtxRangePushA("app:step");
    libraryWork("mylib");
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
