// libFuzzer harness for `gpumem sweep`'s brace grids (replay/policy_grid.h): any input either expands
// or throws UsageError. Invariants: at most kMaxGridSize specs, no spec with a brace left in it, and
// an input without braces is its own only expansion. Anything else thrown, a crash or a sanitizer
// report is a bug.
#include "core/error.h"
#include "replay/policy_grid.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 4096));
    std::vector<std::string> specs;
    try {
        specs = gpumem::replay::expandBraceGrid(text);
    } catch (const gpumem::UsageError&) {
        return 0;
    }
    if (specs.empty() || specs.size() > gpumem::replay::kMaxGridSize)
        std::abort();
    for (const auto& s : specs)
        if (s.find_first_of("{}") != std::string::npos)
            std::abort();
    if (text.find_first_of("{}") == std::string::npos && (specs.size() != 1 || specs.front() != text))
        std::abort();
    return 0;
}
