// A second shared object that uses NVTX, as cuBLAS or NCCL would: NVTX keeps one state per shared
// object, so the tracer's InitializeInjectionNvtx2 is called for it separately.
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void libraryWork(const char* domainName)
{
    nvtxDomainHandle_t domain = nvtxDomainCreateA(domainName);
    nvtxEventAttributes_t a {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtxDomainRegisterStringA(domain, "lib:gemm");
    nvtxDomainRangePushEx(domain, &a);
    nvtxRangePushA("lib:inner");
    nvtxRangePop();
    nvtxDomainRangePop(domain);
}
