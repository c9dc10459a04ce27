// A second shared object that uses NVTX, as cuBLAS or NCCL would: NVTX keeps one state per shared
// object, so the tracer's InitializeInjectionNvtx2 is called for it separately. Its second range
// ends as NCCL 2.2x ends ncclCommInitAll's (src/include/nvtx.h, ncclOptionalNvtxPayloadRange):
// pushed with nvtxDomainRangePushEx, popped with the payload extension's nvtxRangePopPayload, which
// reaches the tool through InitializeInjectionNvtxExtension.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstdint>

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

    a.message.registered = nvtxDomainRegisterStringA(domain, "lib:init");
    nvtxDomainRangePushEx(domain, &a);
    const std::uint64_t result[2] = { 0x5eed, 1 }; // NCCL's (commHash, ndev)
    const nvtxPayloadData_t payload { NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 1, sizeof(result), result };
    nvtxRangePopPayload(domain, &payload, 1);
}
