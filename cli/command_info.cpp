// gpumem info TRACE… — what a trace holds: format, devices, span, counts, live blocks, peaks, anomalies.
#include "analyze/summary_report.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/message_quote.h"
#include "importers/importer_registry.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace gpumem::cli {

void printFormats(std::ostream& out)
{
    out << "Formats gpumem reads (detected from the content, not the file name):\n";
    for (const auto& i : importers()) {
        std::string n(i->name());
        out << "  " << n << std::string(n.size() < 26 ? 26 - n.size() : 1, ' ') << i->description() << '\n';
    }
}

namespace {
    class InfoCommand final : public Command {
    public:
        std::string_view name() const override { return "info"; }
        std::string_view summary() const override { return "summarize traces: devices, span, event counts, live blocks, peaks, anomalies"; }
        std::string_view synopsis() const override { return "info [--format text|json] [--strict] TRACE..."; }
        std::string_view details() const override
        {
            return "TRACE may be any format gpumem reads ('gpumem help formats'). Peak allocated is the running sum of\n"
                   "blocks allocated and freed inside the trace; peak reserved comes from recorded segment events;\n"
                   "recorded peaks are the allocator's own counters (PyTorch profiler's Total Allocated/Reserved),\n"
                   "which also count memory allocated before a profiler trace began ('before trace').\n"
                   "Streams are counted by what they carry: 'N kernel streams' and 'memory events on M streams' (a\n"
                   "profiler trace puts its memory events on a stream of its own). Annotations are time ranges by kind:\n"
                   "a snapshot's START/END pair of external_annotations records is 1 range.\n"
                   "A file that fails to load is reported on stderr and the others are still shown (exit 1).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("format", po::value<std::string>()->default_value("text"), "output: text or json")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "trace", po::value<std::vector<std::string>>()->required(), "trace files (positional)");
            p.add("trace", -1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            std::string format = checkedChoice(vm, "format", { "text", "json" });
            LoadOptions options;
            options.strict = vm.count("strict") > 0;
            nlohmann::json all = nlohmann::json::array();
            int rc = kExitOk;
            bool first = true;
            for (const auto& path : vm["trace"].as<std::vector<std::string>>()) {
                try {
                    analyze::TraceSummary summary;
                    std::string reader;
                    if (const Importer* importer = detectFormat(path); importer && importer->name() == "gmt") {
                        // A .gmt file is read chunk by chunk: memory for the live blocks, not the events
                        // (docs/streaming.md); the same summary as the whole trace's.
                        ImportStats stats;
                        summary = withGmtSource(path, options, [&](const MemoryEventSource& source) {
                            stats = ImportStats {};
                            return analyze::summarize(source, &stats);
                        });
                        if (options.strict)
                            stats.throwIfStrictViolated(path);
                        reader = importer->name();
                    } else {
                        Trace trace = loadTrace(path, options, &importer);
                        summary = analyze::summarize(trace);
                        reader = importer ? importer->name() : "unknown";
                    }
                    if (format == "json") {
                        all.push_back(analyze::summaryToJson(summary, path, reader));
                    } else {
                        if (!first)
                            out << '\n';
                        analyze::writeSummaryText(summary, path, reader, out);
                    }
                    first = false;
                } catch (const Cancelled&) {
                    throw;
                } catch (const Error& e) {
                    err << fitMessage("gpumem info: error: " + messageForTerminal(e.what()));
                    rc = kExitFailed;
                }
            }
            if (format == "json")
                out << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
            return rc;
        }
    };
} // namespace

std::unique_ptr<Command> makeInfoCommand() { return std::make_unique<InfoCommand>(); }

} // namespace gpumem::cli
