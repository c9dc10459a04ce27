#include "core/error.h"
#include "core/file_io.h"
#include "importers/importer_registry.h"

#include <filesystem>
#include <new>
#include <sys/stat.h>

// One line per format. Importers are defined next to their format (core/gmt_format.cpp,
// core/jsonl_format.cpp, importers/).
namespace gpumem {
std::unique_ptr<Importer> makeGmtImporter();
std::unique_ptr<Importer> makeJsonlImporter();
std::unique_ptr<Importer> makePytorchSnapshotImporter();
std::unique_ptr<Importer> makeKinetoImporter();
std::unique_ptr<Importer> makeMemoryTimelineImporter();
std::unique_ptr<Importer> makeXplaneImporter();
std::unique_ptr<Importer> makeRmmCsvImporter();
std::unique_ptr<Importer> makeNsysSqliteImporter();
// Out-of-memory text found anywhere in a log (importers/oom_text_importer.h): asked last, so a
// structured format that happens to quote such a message is still read as itself.
std::unique_ptr<Importer> makePytorchOomMessageImporter();
std::unique_ptr<Importer> makePytorchMemorySummaryImporter();
std::unique_ptr<Importer> makeTfOomReportImporter();

const std::vector<std::unique_ptr<Importer>>& importers()
{
    static const std::vector<std::unique_ptr<Importer>> all = [] {
        std::vector<std::unique_ptr<Importer>> v;
        v.push_back(makeGmtImporter());
        v.push_back(makeJsonlImporter());
        v.push_back(makePytorchSnapshotImporter());
        v.push_back(makeKinetoImporter());
        v.push_back(makeMemoryTimelineImporter());
        v.push_back(makeXplaneImporter());
        v.push_back(makeRmmCsvImporter());
        v.push_back(makeNsysSqliteImporter());
        v.push_back(makePytorchOomMessageImporter());
        v.push_back(makePytorchMemorySummaryImporter());
        v.push_back(makeTfOomReportImporter());
        return v;
    }();
    return all;
}

const Importer* detectFormat(const std::string& path)
{
    // Importers read a file more than once (sniff, then load) and may map it: a pipe or device would
    // hang or lose its head, so only regular files are accepted.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        throw IoError(path + ": not a regular file (a pipe, socket or device); gpumem reads traces from files — save it to a file first");
    constexpr std::size_t kHeadBytes = 64 * 1024;
    std::string raw = readFileHead(path, kHeadBytes);
    if (raw.empty())
        throw FormatError(path + ": empty file (0 bytes): there is no trace in it — was it written completely?");
    SniffInput input;
    input.path = path;
    input.raw = raw;
    input.gzip = isGzip(raw);
    std::string content = input.gzip ? readContentHead(path, kHeadBytes) : std::string();
    input.content = input.gzip ? std::string_view(content) : std::string_view(raw);
    for (const auto& importer : importers())
        if (importer->sniff(input))
            return importer.get();
    // A gzip file that no format claims and whose stream ends early (cut inside its header, or so early
    // that what it inflates to is too short to recognise) or is corrupt: the reason is the damage,
    // whatever the content ("the gzip stream ends early at compressed byte N"), not "no format matches".
    // gunzip() throws it; a whole stream returns. Only when the whole file was read.
    if (input.gzip && raw.size() < kHeadBytes)
        (void)gunzip(raw, path);
    return nullptr;
}

Trace loadTrace(const std::string& path, const LoadOptions& options, const Importer** used)
{
    const Importer* importer = detectFormat(path);
    if (used)
        *used = importer;
    if (!importer) {
        std::string names;
        for (const auto& i : importers())
            names += (names.empty() ? "" : ", ") + std::string(i->name());
        throw FormatError(path + ": not a trace format gpumem reads (the content matches none of: " + names
            + "); run `gpumem help formats` for what each format looks like");
    }
    Trace trace;
    try {
        trace = importer->load(path, options);
    } catch (const std::bad_alloc&) {
        throw Error(outOfMemoryWhileReading(path, importer->name()));
    }
    if (options.strict)
        trace.stats().throwIfStrictViolated(path);
    return trace;
}

std::string gmtPathBeside(const std::string& path)
{
    std::filesystem::path gmt(path);
    if (gmt.extension() == ".gz")
        gmt.replace_extension();
    return gmt.replace_extension(".gmt").string();
}

std::string outOfMemoryWhileReading(const std::string& path, std::string_view format)
{
    // Review finding (2026-12-02): the message said what happened, not what to do.
    // Raw, as every Error's words: the front end makes them printable (cli/main.cpp messageForTerminal).
    const std::string convert = "gpumem convert " + path + " -o " + gmtPathBeside(path);
    const std::string streaming = "info, analyze, report, replay, sweep, fit, diff and explain stream a .gmt (docs/streaming.md)";
    std::string m = path + ": out of memory while reading it as " + std::string(format)
        + " (the trace needs more memory than the process may use): ";
    if (format == "jsonl")
        m += "convert it to .gmt, which reads a .jsonl in trace order (as gpumem writes one) in memory that grows with its "
             "tables, not its events (" + convert
            + "), and give the .gmt: " + streaming;
    else if (format == "gmt")
        m += "ranks and convert hold the whole trace; " + streaming
            + " but for the options it lists (--strict among them): leave such options out, and GPUMEM_REPLAY_IN_MEMORY "
              "unset (at 1 it reads the trace whole for replay, sweep, fit, explain and the verdicts of analyze and report)";
    else
        m += "gpumem reads a " + std::string(format) + " trace whole, and so does convert: convert it to .gmt once where more "
            "memory is available (" + convert + "), then " + streaming;
    return m + "; or " + std::string(kRunWithMoreMemory);
}

} // namespace gpumem
