// libFuzzer harness for the PyTorch snapshot importer (importers/snapshot_importer.h) and the
// plain-data unpickler under it: arbitrary bytes are parsed as a pickle, rendered as JSON (depth-bounded)
// and imported, including the pre-window reconstruction, pairing and the replay check. A gpumem::Error
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
        for (gpumem::DeviceId d = 0; d < trace.devices().size(); ++d)
            (void)gpumem::compareSnapshotState(gpumem::snapshotSegments(doc), gpumem::replaySnapshotState(trace, d));
    } catch (const gpumem::Error&) {
    }
    return 0;
}
