// libFuzzer harness for the Kineto JSON importer: arbitrary bytes as the decompressed trace. Any
// crash, sanitizer report, hang or exception other than gpumem::Error is a bug.
#include "core/error.h"
#include "importers/kineto_importer.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string json(reinterpret_cast<const char*>(data), size);
    try {
        gpumem::Trace t = gpumem::importKinetoJson(json, "fuzz.json");
        (void)t.allocations(); // pairing runs over whatever was imported
    } catch (const gpumem::Error&) {
    }
    return 0;
}
