#include "core/detail/varint.h"

#ifdef GPUMEM_HAVE_PEXT_VARINTS
#include <cpuid.h>

#include <cstdlib>
#include <string_view>

namespace gpumem::detail {

bool fastPext()
{
    static const bool fast = [] {
        if (const char* no = std::getenv("GPUMEM_NO_PEXT"); no && std::string_view(no) == "1")
            return false;
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("bmi2"))
            return false;
        if (!__builtin_cpu_is("amd"))
            return true;
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
            return false;
        const unsigned family = ((eax >> 8) & 0xf) + (((eax >> 8) & 0xf) == 0xf ? (eax >> 20) & 0xff : 0);
        return family >= 0x19; // Zen 3 and later
    }();
    return fast;
}

bool fastAvx512Varints()
{
    static const bool fast = [] {
        for (const char* name : { "GPUMEM_NO_PEXT", "GPUMEM_NO_AVX512" })
            if (const char* no = std::getenv(name); no && std::string_view(no) == "1")
                return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi")
            && __builtin_cpu_supports("avx512vbmi2");
    }();
    return fast;
}

} // namespace gpumem::detail
#endif
