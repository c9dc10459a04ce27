// gpumem convert IN -o OUT — any readable trace to .gmt or .jsonl.
#include "cli/command.h"
#include "cli/output_file.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "core/jsonl_format.h"
#include "core/units.h"

#include <cstdio>
#include <filesystem>
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
                   "An existing OUT is replaced unless it is the input or write-protected (then nothing is written).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("output,o", po::value<std::string>()->required(), "output file")(
                "to", po::value<std::string>(), "output format: gmt or jsonl (default: from the extension)")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "input", po::value<std::string>()->required(), "input trace (positional)");
            p.add("input", 1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream&) override
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
            Trace trace = loadTrace(in, options);
            if (to == "gmt")
                writeGmt(trace, output.writePath());
            else
                writeJsonl(trace, output.writePath());
            output.commit();
            out << "wrote " << textForTerminal(outPath) << " (" << to << ", " << counted(trace.memory().count(), "memory event", "memory events") << ")\n";
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeConvertCommand() { return std::make_unique<ConvertCommand>(); }

} // namespace gpumem::cli
