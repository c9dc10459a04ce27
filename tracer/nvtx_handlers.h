#pragma once
// The tracer as an NVTX tool (cupti.md §4.1, option B): installNvtxHandlers() is the body of
// InitializeInjectionNvtx2. NVTX calls it once per shared object that uses NVTX (each has its own
// NVTX state), handing over that object's callback tables; every table gets the same handlers,
// which forward to the RangeRecorder set by setNvtxRecorder(), so ranges pushed by different
// libraries land on one per-thread stack. Handled: Mark/RangeStart/RangeEnd/RangePush/RangePop
// (A, W and Ex forms) and the domain versions, DomainCreate and DomainRegisterString (ASCII,
// Unicode and registered messages). Ranges of a named domain are recorded as "[domain] message".
// Handlers never throw; with no recorder set (tracer off) they do nothing.
//
// The payload extension (nvtx3/nvToolsExtPayload.h) reaches the tool through a second entry point,
// InitializeInjectionNvtxExtension, once per shared object and extension module. Its range calls
// are handled as their core counterparts: nvtxRangePopPayload pops the innermost range of its
// domain, nvtxRangeEndPayload ends its range. NCCL 2.2x pushes each API range with
// nvtxDomainRangePushEx and pops the ones that carry a result (ncclCommInitAll, ncclCommInitRank…)
// with nvtxRangePopPayload (src/include/nvtx.h, ncclOptionalNvtxPayloadRange): without this handler
// such a range stayed open for the rest of the thread and every later range nested under it (seen
// on the first GPU run, traces/gpu_check_h200.gmt). A range opened by nvtxRangePushPayload,
// nvtxRangeStartPayload or nvtxMarkPayload has its message inside a registered payload schema,
// which the tracer does not decode: it is recorded as "[domain] (payload)" so that the pops still
// match. Payload schemas, enums, scopes and deferred events are left to NVTX's no-ops.
#ifndef NVTX_NO_IMPL
#define NVTX_NO_IMPL // the headers' mode for tools: declarations only, no loader (cupti.md §8)
#endif
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

namespace gpumem::tracer {

class RangeRecorder;

// The recorder the handlers feed; nullptr switches them off. The recorder must outlive its use
// (the injection library never destroys it).
void setNvtxRecorder(RangeRecorder* recorder);
RangeRecorder* nvtxRecorder();

// Fills the callback tables offered through `getExportTable`. Returns 1 (NVTX: the tool is
// attached) or 0 when the tables cannot be obtained (NVTX calls then stay no-ops). Never throws.
int installNvtxHandlers(NvtxGetExportTableFunc_t getExportTable) noexcept;

// The body of InitializeInjectionNvtxExtension: fills the payload module's range and mark slots
// (moduleId NVTX_EXT_PAYLOAD_MODULEID, compatId 0x01xx; slot numbers NVTX3EXT_CBID_* of its one
// segment, bounded by the segment's slotCount). Returns 1 for every module, the ones it does not
// know included (NVTX then turns their unfilled slots into no-ops), 0 only for a null or malformed
// module description (a structSize too small to hold the segments, or segments missing).
// Never throws.
int installNvtxExtension(nvtxExtModuleInfo_t* module) noexcept;

} // namespace gpumem::tracer
