#pragma once
// The shared object that called a CUDA driver API, found from the calling thread's stack. The
// MEMORY2 records of cudaMalloc and its kin carry their allocation source (CUPTI), but the
// virtual-memory calls (cuMemCreate + cuMemMap) reach the tracer only as driver API callbacks,
// which name no caller. NCCL 2.2x allocates its buffers that way where the driver allows it
// (NCCL_CUMEM_ENABLE), and so do PyTorch's expandable segments: on the first GPU run
// (traces/gpu_check_h200.gmt) 194 of NCCL's 2 MiB maps had no library. The caller is the first
// frame, innermost first, that is neither the tracer itself nor CUPTI nor the driver.
#include <span>
#include <string>
#include <string_view>

namespace gpumem::tracer {

// Whether a frame in `file` is the tracer's, CUPTI's, the driver's or the shared CUDA runtime's:
// its file name starts with libcuda.so, libcudart.so, libcupti.so, libnvidia- or libgpumem_tracer
// (the caller of a call the runtime passes on is the runtime's caller).
bool isDriverSide(std::string_view file) noexcept;

// The file of the first frame in `frames` (return addresses, innermost first) that lies in a
// mapped object other than the one holding `self` and that isDriverSide() does not name; "" if
// there is none. A frame no object
// holds is skipped. The main program is named by /proc/self/exe, since dladdr gives it argv[0].
// Never throws; allocates only the returned string.
std::string callerLibrary(std::span<void* const> frames, const void* self) noexcept;

// callerLibrary() of the calling thread's stack (glibc backtrace(), at most 64 frames), with the
// tracer's own code as `self`. Costs one stack walk: the tracer calls it for cuMemMap only, and
// once when it starts, before any callback, so that glibc loads its unwinder (libgcc_s) then and
// not inside a driver call.
std::string callingLibrary() noexcept;

} // namespace gpumem::tracer
