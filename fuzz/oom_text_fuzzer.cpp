// libFuzzer harness for the out-of-memory text importers (importers/oom_text_importer.h): the same
// bytes as a PyTorch OutOfMemoryError message, a memory_summary() table and a TensorFlow/XLA report.
// A gpumem::Error is the expected answer to bad input; anything else is a bug.
#include "importers/oom_text_importer.h"
#include "fuzz/fuzz_common.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    const std::string source = "fuzz.txt";
    (void)gpumem::looksLikeTorchOomMessage(bytes);
    (void)gpumem::looksLikeTorchMemorySummary(bytes);
    (void)gpumem::looksLikeTfOomReport(bytes);
    for (auto import : { gpumem::importTorchOomMessage, gpumem::importTorchMemorySummary, gpumem::importTfOomReport }) {
        try {
            gpumem::fuzz::exercise(import(bytes, source, {}));
        } catch (const gpumem::Error&) {
        }
    }
    return 0;
}
