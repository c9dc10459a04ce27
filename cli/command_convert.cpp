// gpumem convert IN -o OUT — any readable trace to .gmt or .jsonl.
#include "cli/command.h"
#include "cli/out_of_memory.h"
#include "cli/output_file.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "core/jsonl_format.h"
#include "core/jsonl_to_gmt.h"
#include "core/units.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <ostream>
#include <unistd.h>

namespace gpumem::cli {

namespace {
    bool endsWith(std::string_view s, std::string_view suffix)
    {
        return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
    }

    class ConvertCommand final : public Command {
    public:
        std::string_view name() const override { return "convert"; }
        std::string_view summary() const override { return "convert a trace (any readable format) to .gmt or .jsonl"; }
        std::string_view synopsis() const override { return "convert [--to gmt|jsonl] [--strict] IN -o OUT"; }
        std::string_view details() const override
        {
            return "The output format comes from --to, else from OUT's extension (.gmt or .jsonl). OUT is written\n"
                   "to a temporary file beside it and renamed when complete, so a failure never leaves a partial file.\n"
                   "An existing OUT is replaced unless it is the input or write-protected (then nothing is written).\n"
                   "A .jsonl whose memory events are in trace order (as gpumem writes them) becomes a .gmt while\n"
                   "it is read, in memory that grows with its tables, not its events; a .jsonl in another order\n"
                   "is read whole (a note on stderr says so).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("output,o", po::value<std::string>()->required(), "output file")(
                "to", po::value<std::string>(), "output format: gmt or jsonl (default: from the extension)")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "input", po::value<std::string>()->required(), "input trace (positional)");
            p.add("input", 1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const std::string in = vm["input"].as<std::string>();
            const std::string outPath = vm["output"].as<std::string>();
            std::string to;
            if (vm.count("to"))
                to = checkedChoice(vm, "to", { "gmt", "jsonl" });
            else if (endsWith(outPath, ".gmt"))
                to = "gmt";
            else if (endsWith(outPath, ".jsonl"))
                to = "jsonl";
            else
                throw UsageError("cannot tell the output format from '" + outPath + "': name it *.gmt or *.jsonl, or pass --to gmt|jsonl");
            OutputFile output(outPath, { in }); // checks the destination before the work
            LoadOptions options;
            options.strict = vm.count("strict") > 0;
            std::uint64_t events = 0;
            ImportStats stats;
            if (const Importer* importer = to == "gmt" ? detectFormat(in) : nullptr; importer && importer->name() == "jsonl") {
                JsonlToGmtResult result = jsonlToGmt(in, output.writePath(), options.strict, err);
                events = result.memoryEvents;
                stats = std::move(result.importStats);
            } else {
                Trace trace = loadTrace(in, options);
                if (to == "gmt")
                    writeGmt(trace, output.writePath());
                else
                    writeJsonl(trace, output.writePath());
                events = trace.memory().count();
                stats = trace.importStats();
            }
            output.commit();
            output.noticeStream(out, err) // not into the trace written there
                << "wrote " << textForTerminal(outPath) << " (" << to << ", " << counted(events, "memory event", "memory events") << ")\n";
            // A damaged input (an error-severity anomaly: a cut file, a corrupt chunk) converts as far as it reads,
            // as every verb reads it; the output records the anomaly. Said on stderr, so that nothing is lost
            // without a word; --strict refuses such an input instead (exit 1). Exit 0: a crashed run's trace, cut
            // after its last whole chunk, is salvaged this way (docs/trace-format.md §8).
            noteDamagedTrace(name(), in, stats, err, outPath);
            return kExitOk;
        }

    private:
        // .jsonl to .gmt while reading (core/jsonl_to_gmt.h): the same file as loadTrace then writeGmt, in
        // memory that grows with the tables. GPUMEM_CONVERT_WHOLE=1 reads the trace whole as before (the
        // baseline of bench/convert_scale.sh).
        static JsonlToGmtResult jsonlToGmt(const std::string& in, const std::string& writePath, bool strict, std::ostream& err)
        {
            JsonlToGmtOptions options;
            options.strict = strict;
            const char* whole = std::getenv("GPUMEM_CONVERT_WHOLE");
            options.whole = whole && *whole && std::string_view(whole) != "0";
            try {
                JsonlToGmtResult result = writeGmtFromJsonl(in, writePath, options);
                if (!result.fallback.empty())
                    err << fitMessage("gpumem convert: note: " + messageForTerminal(result.fallback));
                return result;
            } catch (const std::bad_alloc&) {
                throw Error(convertOutOfMemoryMessage(in, options.whole));
            }
        }
    };
} // namespace

std::unique_ptr<Command> makeConvertCommand() { return std::make_unique<ConvertCommand>(); }

} // namespace gpumem::cli
