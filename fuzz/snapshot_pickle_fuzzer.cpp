// libFuzzer harness for the PyTorch snapshot importer (importers/snapshot_importer.h) and the
// plain-data unpickler under it: arbitrary bytes are parsed as a pickle, rendered as JSON (depth-bounded)
// and imported (from the document, and streamed: the trace entries decoded while parsing), including the pre-window reconstruction, pairing and the replay check. A gpumem::Error
// is the expected answer to bad input; anything else escaping, a sanitizer report or a hang is a bug.
#include "importers/snapshot_importer.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    try {
        gpumem::PickleDocument doc = gpumem::PickleDocument::parse(bytes, "fuzz.pickle");
        try {
            (void)doc.toJson(doc.root());
        } catch (const gpumem::Error&) {
        }
        gpumem::Trace trace = gpumem::importPytorchSnapshot(doc);
        (void)trace.allocations();
        // The streaming path (trace entries decoded while the pickle is parsed) must agree with it.
        gpumem::Trace streamed = gpumem::importPytorchSnapshot(gpumem::PickleDocument::Input { nullptr, bytes, 0 }, "fuzz.pickle");
        if (streamed.memory().count() != trace.memory().count())
            __builtin_trap();
        for (gpumem::DeviceId d = 0; d < trace.devices().size(); ++d)
            (void)gpumem::compareSnapshotState(gpumem::snapshotSegments(doc), gpumem::replaySnapshotState(trace, d));
    } catch (const gpumem::Error&) {
    }
    return 0;
}
