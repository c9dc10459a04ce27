#include "tracer/caller_library.h"

#include <array>
#include <climits>
#include <dlfcn.h>
#include <execinfo.h>
#include <string_view>
#include <sys/auxv.h>
#include <unistd.h>

namespace gpumem::tracer {

bool isDriverSide(std::string_view file) noexcept
{
    const auto slash = file.rfind('/');
    const std::string_view name = slash == std::string_view::npos ? file : file.substr(slash + 1);
    for (std::string_view prefix : { "libcuda.so", "libcudart.so", "libcupti.so", "libnvidia-", "libgpumem_tracer" })
        if (name.starts_with(prefix))
            return true;
    return false;
}

namespace {
    std::string mainProgram()
    {
        std::array<char, PATH_MAX> path {};
        const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
        return n > 0 ? std::string(path.data(), static_cast<std::size_t>(n)) : std::string();
    }
} // namespace

std::string callerLibrary(std::span<void* const> frames, const void* self) noexcept
{
    try {
        Dl_info own {};
        const void* ownBase = self != nullptr && ::dladdr(self, &own) != 0 ? own.dli_fbase : nullptr;
        // The main program's program headers lie in its own mapping (AT_PHDR); it does not move.
        static const void* const programBase = [] {
            Dl_info program {};
            const auto* phdr = reinterpret_cast<const void*>(::getauxval(AT_PHDR));
            return phdr != nullptr && ::dladdr(phdr, &program) != 0 ? static_cast<const void*>(program.dli_fbase) : nullptr;
        }();
        for (void* frame : frames) {
            Dl_info info {};
            if (frame == nullptr || ::dladdr(frame, &info) == 0 || info.dli_fname == nullptr)
                continue;
            if (ownBase != nullptr && info.dli_fbase == ownBase)
                continue;
            const std::string_view file(info.dli_fname);
            if (isDriverSide(file))
                continue;
            // dladdr names the main program by argv[0], which may be relative or a bare name.
            if (programBase != nullptr && info.dli_fbase == programBase) {
                static const std::string exe = mainProgram();
                return exe.empty() ? std::string(file) : exe;
            }
            return std::string(file);
        }
        return {};
    } catch (...) {
        return {};
    }
}

std::string callingLibrary() noexcept
{
    std::array<void*, 64> frames {};
    const int n = ::backtrace(frames.data(), static_cast<int>(frames.size()));
    if (n <= 0)
        return {};
    return callerLibrary(std::span<void* const>(frames.data(), static_cast<std::size_t>(n)),
        reinterpret_cast<const void*>(&callingLibrary));
}

} // namespace gpumem::tracer
