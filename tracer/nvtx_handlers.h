#pragma once
// The tracer as an NVTX tool (cupti.md §4.1, option B): installNvtxHandlers() is the body of
// InitializeInjectionNvtx2. NVTX calls it once per shared object that uses NVTX (each has its own
// NVTX state), handing over that object's callback tables; every table gets the same handlers,
// which forward to the RangeRecorder set by setNvtxRecorder(), so ranges pushed by different
// libraries land on one per-thread stack. Handled: Mark/RangeStart/RangeEnd/RangePush/RangePop
// (A, W and Ex forms) and the domain versions, DomainCreate and DomainRegisterString (ASCII,
// Unicode and registered messages). Ranges of a named domain are recorded as "[domain] message".
// Handlers never throw; with no recorder set (tracer off) they do nothing.
#ifndef NVTX_NO_IMPL
#define NVTX_NO_IMPL // the headers' mode for tools: declarations only, no loader (cupti.md §8)
#endif
#include <nvtx3/nvToolsExt.h>

namespace gpumem::tracer {

class RangeRecorder;

// The recorder the handlers feed; nullptr switches them off. The recorder must outlive its use
// (the injection library never destroys it).
void setNvtxRecorder(RangeRecorder* recorder);
RangeRecorder* nvtxRecorder();

// Fills the callback tables offered through `getExportTable`. Returns 1 (NVTX: the tool is
// attached) or 0 when the tables cannot be obtained (NVTX calls then stay no-ops). Never throws.
int installNvtxHandlers(NvtxGetExportTableFunc_t getExportTable) noexcept;

} // namespace gpumem::tracer
