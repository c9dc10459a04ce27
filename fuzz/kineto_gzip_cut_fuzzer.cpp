// libFuzzer harness for a Kineto .json.gz that may be cut short or damaged: arbitrary bytes as the
// compressed file, read as the Kineto importer's load() does (gunzip with GzipEnd, then the cut rule on
// what a stream that ends early inflates to). Any crash, sanitizer report, hang or exception other than
// gpumem::Error is a bug.
#include "core/error.h"
#include "core/file_io.h"
#include "importers/kineto_importer.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    if (!gpumem::isGzip(bytes))
        return 0; // plain JSON is kineto_json_fuzzer's
    try {
        gpumem::GzipEnd end;
        std::string json = gpumem::gunzip(bytes, "fuzz.json.gz", end);
        gpumem::Trace t = end.endsEarly
            ? gpumem::importKinetoJsonFromCutGzip(json, "fuzz.json.gz", end.compressedBytes)
            : gpumem::importKinetoJson(json, "fuzz.json.gz");
        (void)t.allocations();
    } catch (const gpumem::Error&) {
    }
    return 0;
}
