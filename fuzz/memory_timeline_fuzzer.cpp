// libFuzzer harness for the PyTorch memory-timeline raw importer ([[ts, action, bytes, category], …]).
#include "core/error.h"
#include "importers/memory_timeline_importer.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string json(reinterpret_cast<const char*>(data), size);
    try {
        gpumem::Trace t = gpumem::importMemoryTimelineJson(json, "fuzz.raw");
        (void)t.allocations();
    } catch (const gpumem::Error&) {
    }
    return 0;
}
