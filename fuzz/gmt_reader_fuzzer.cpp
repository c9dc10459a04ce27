// libFuzzer harness for the .gmt reader (docs/trace-format.md). Built with
// FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so checksums are not enforced and mutations reach the
// chunk decoders. Run: scripts/fuzz.sh gmt_reader_fuzzer 60
#include "core/error.h"
#include "core/gmt_format.h"
#include "fuzz/fuzz_common.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    try {
        gpumem::Trace trace = gpumem::readGmtBytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.gmt");
        gpumem::fuzz::exercise(trace);
    } catch (const gpumem::Error&) {
    }
    return 0;
}
