#include "core/jsonl_to_gmt.h"

#include "core/chunk_pairing.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sys/stat.h>

namespace gpumem {

namespace {
    // Thrown by the sinks at the first record out of trace order: the input is then read whole.
    struct OutOfOrder {
        std::size_t line;
        const char* what;
    };

    std::string spoolFolderFor(const std::string& gmtPath)
    {
        // A FIFO or device (cli/output_file.h writes those directly), or a name under /dev/ (/dev/stdout onto a
        // regular file is written through a temporary file in the temporary folder; /dev is no place for a file
        // of gigabytes either way).
        struct stat st {};
        if (gmtPath.starts_with("/dev/") || (::stat(gmtPath.c_str(), &st) == 0 && !S_ISREG(st.st_mode)))
            return temporaryFolder();
        auto parent = std::filesystem::path(gmtPath).parent_path();
        return parent.empty() ? std::string(".") : parent.string();
    }

    // The stats `--strict` judges: Trace::stats(), the import anomalies then those pairing found.
    void throwIfStrictViolated(const Trace& skeleton, const ImportStats& pairing, const std::string& path)
    {
        ImportStats all = skeleton.importStats();
        for (const auto& a : pairing.anomalies())
            all.add(a.code, a.severity, a.detail, a.count);
        all.throwIfStrictViolated(path);
    }

    // The conversion while reading; its result has `streamed` set. Throws OutOfOrder at the first record out of
    // trace order.
    JsonlToGmtResult streamJsonlToGmt(const std::string& in, const std::string& out, const JsonlToGmtOptions& options, std::size_t perChunk)
    {
        const std::string folder = options.spoolFolder.empty() ? spoolFolderFor(out) : options.spoolFolder;
        GmtChunkSpool events(folder);
        std::optional<GmtChunkSpool> kernels; // made at the first whole chunk of kernels: most traces have none
        MemoryEventColumns chunk;
        chunk.reserve(perChunk);
        std::vector<Kernel> kernelChunk;
        ImportStats pairingStats;
        std::optional<ChunkPairing> pairing;
        if (options.strict)
            pairing.emplace(pairingStats);
        std::uint64_t count = 0;
        TimeNs lastTime = 0;
        std::uint64_t lastSequence = 0;
        bool anyKernel = false;
        TimeNs lastKernelStart = 0;

        auto flushEvents = [&] {
            const std::size_t n = chunk.count();
            if (n == 0)
                return;
            events.writer().appendMemoryEvents(chunk, 0, n);
            if (pairing)
                for (std::size_t i = 0; i < n; ++i)
                    pairing->step(chunk, i, count - n + i);
            chunk.clear();
        };
        auto flushKernels = [&] {
            if (kernelChunk.empty())
                return;
            if (!kernels)
                kernels.emplace(folder);
            kernels->writer().appendKernels(kernelChunk);
            kernelChunk.clear();
        };
        JsonlSink sink;
        sink.memoryEvent = [&](const MemoryEvent& e, std::size_t line) {
            // TraceBuilder::build sorts by (time, sequence) unless the events already are.
            if (count > 0 && (e.time < lastTime || (e.time == lastTime && e.sequence < lastSequence)))
                throw OutOfOrder { line, "memory event" };
            if (count == std::numeric_limits<std::uint32_t>::max()) // TraceBuilder::build's limit
                throw FormatError("trace has more than 4,294,967,295 memory events; split it");
            lastTime = e.time;
            lastSequence = e.sequence;
            chunk.push(e);
            ++count;
            if (chunk.count() == perChunk)
                flushEvents();
        };
        sink.kernel = [&](const Kernel& k, std::size_t line) {
            if (anyKernel && k.start < lastKernelStart) // build's stable sort by start leaves such kernels in place
                throw OutOfOrder { line, "kernel" };
            anyKernel = true;
            lastKernelStart = k.start;
            kernelChunk.push_back(k);
            if (kernelChunk.size() == perChunk)
                flushKernels();
        };
        LoadOptions load;
        const Trace skeleton = readJsonl(in, sink, load);
        flushEvents();
        flushKernels();
        if (pairing) {
            pairing->finish();
            throwIfStrictViolated(skeleton, pairingStats, in);
        }
        GmtWriter w(out, skeleton.metadata());
        w.appendTables(skeleton);
        w.appendSpool(events);
        if (kernels)
            w.appendSpool(*kernels);
        w.appendRecordsAfterKernels(skeleton, perChunk);
        w.finish();
        JsonlToGmtResult result;
        result.memoryEvents = count;
        result.streamed = true;
        result.importStats = skeleton.importStats();
        return result;
    }
} // namespace

JsonlToGmtResult writeGmtFromJsonl(const std::string& jsonlPath, const std::string& gmtPath, const JsonlToGmtOptions& options)
{
    const std::size_t perChunk = std::clamp<std::size_t>(options.eventsPerChunk, 1, kGmtMaxEventsPerChunk);
    JsonlToGmtResult result;
    if (!options.whole) {
        try {
            return streamJsonlToGmt(jsonlPath, gmtPath, options, perChunk);
        } catch (const OutOfOrder& o) {
            result.fallback = jsonlPath + ":" + std::to_string(o.line) + ": a " + o.what + " earlier than the one before it ("
                + (std::string_view(o.what) == "kernel" ? "by start" : "by time, then seq")
                + "): the trace is read again whole, to be sorted; its memory grows with the event count";
        }
    }
    LoadOptions load;
    const Trace trace = readJsonl(jsonlPath, load);
    if (options.strict)
        trace.stats().throwIfStrictViolated(jsonlPath);
    writeGmt(trace, gmtPath, perChunk);
    result.memoryEvents = trace.memory().count();
    result.importStats = trace.importStats();
    return result;
}

} // namespace gpumem
