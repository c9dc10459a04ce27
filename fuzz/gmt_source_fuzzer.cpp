// libFuzzer harness for the streamed .gmt reader (openGmtSource, core/event_source.h), differential against
// the whole read (readGmtBytes): the bytes are written to a file once, opened as a source with the checks at
// opening and with the checks deferred to the first pass, and each source's passes — every chunk decoded in
// place into reused columns, const columns kept from chunk to chunk (core/gmt_format.cpp GmtSource), the varint
// reader the CPU has (AVX-512, pext or portable) — must give the whole read's memory events column by column
// wherever both accept the file; then the bounded analysis (analyze/bounded_analysis.h) runs on the source.
// Built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so checksums are not enforced and mutations reach the
// chunk decoders. Run: scripts/fuzz.sh gmt_source_fuzzer 60
#include "analyze/bounded_analysis.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "fuzz/fuzz_common.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include <unistd.h>

namespace {

// The memory events of every pass over `source` put together; nullopt where a pass throws a gpumem::Error.
std::optional<gpumem::MemoryEventColumns> eventsOf(const gpumem::MemoryEventSource& source)
{
    gpumem::MemoryEventColumns all;
    try {
        source.forEachChunk([&](const gpumem::MemoryEventColumns& chunk, std::uint64_t first) {
            if (first != all.count())
                __builtin_trap(); // chunks out of order or overlapping
            for (std::size_t i = 0; i < chunk.count(); ++i)
                all.push(chunk.row(i));
        });
    } catch (const gpumem::Error&) {
        return std::nullopt;
    }
    return all;
}

bool sameEvents(const gpumem::MemoryEventColumns& a, const gpumem::MemoryEventColumns& b)
{
    if (a.count() != b.count())
        return false;
    for (std::size_t i = 0; i < a.count(); ++i)
        if (!(a.row(i) == b.row(i)))
            return false;
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::optional<gpumem::Trace> whole;
    try {
        whole = gpumem::readGmtBytes(bytes, "fuzz.gmt");
    } catch (const gpumem::Error&) {
    }
    static const std::string path = "/tmp/gmt_source_fuzzer_" + std::to_string(::getpid()) + ".gmt";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    for (const auto checks : { gpumem::GmtChecks::AtOpen, gpumem::GmtChecks::InFirstPass }) {
        std::unique_ptr<gpumem::MemoryEventSource> source;
        try {
            source = gpumem::openGmtSource(path, {}, checks);
        } catch (const gpumem::Error&) {
            continue;
        } catch (const gpumem::DeferredCheckFailed&) {
            continue;
        }
        try {
            const auto first = eventsOf(*source), second = eventsOf(*source); // a second pass over reused columns
            if (first && second && !sameEvents(*first, *second))
                __builtin_trap();
            if (whole && first && !sameEvents(*first, whole->memory()))
                __builtin_trap();
            (void)gpumem::analyze::analyzeSource(*source, {});
        } catch (const gpumem::Error&) {
        } catch (const gpumem::DeferredCheckFailed&) {
        }
    }
    return 0;
}
