// libFuzzer harness for the RMM logging_resource_adaptor CSV importer (importers/rmm_importer.h).
// A gpumem::Error is the expected answer to bad input; anything else is a bug.
#include "importers/rmm_importer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    (void)gpumem::looksLikeRmmCsv(bytes);
    try {
        gpumem::Trace trace = gpumem::importRmmCsv(bytes, "fuzz.csv", 0);
        (void)trace.allocations();
    } catch (const gpumem::Error&) {
    }
    return 0;
}
