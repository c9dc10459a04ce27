// libFuzzer harness for the .xplane.pb importer (importers/xplane_importer.h): the sniff and the
// whole import, including pairing, on arbitrary bytes. A gpumem::Error is the expected answer to bad
// input; anything else escaping, a sanitizer report or a hang is a bug.
#include "importers/xplane_importer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    (void)gpumem::looksLikeXplane(bytes);
    try {
        gpumem::Trace trace = gpumem::importXplane(bytes, "fuzz.xplane.pb");
        (void)trace.allocations();
    } catch (const gpumem::Error&) {
    }
    return 0;
}
