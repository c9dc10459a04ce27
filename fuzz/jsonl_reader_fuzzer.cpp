// libFuzzer harness for the .jsonl reader (docs/trace-format.md §8), gzip included.
// Run: scripts/fuzz.sh jsonl_reader_fuzzer 60
#include "core/error.h"
#include "core/file_io.h"
#include "core/jsonl_format.h"
#include "fuzz/fuzz_common.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        std::string text = gpumem::isGzip(bytes) ? gpumem::gunzip(bytes, "fuzz.jsonl.gz") : std::string(bytes);
        gpumem::Trace trace = gpumem::readJsonlText(text, "fuzz.jsonl");
        gpumem::fuzz::exercise(trace);
    } catch (const gpumem::Error&) {
    }
    return 0;
}
