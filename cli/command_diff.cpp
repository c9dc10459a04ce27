// gpumem diff A B — peaks and breakdowns of two traces, matched by module name and stack.
#include "analyze/bounded_analysis.h"
#include "analyze/trace_diff.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/event_source.h"
#include "importers/importer_registry.h"

#include <nlohmann/json.hpp>

#include <ostream>

namespace gpumem::cli {


namespace {
    class DiffCommand final : public Command {
    public:
        std::string_view name() const override { return "diff"; }
        std::string_view summary() const override { return "compare two traces' peaks and breakdowns by module, stack, category, size, stream"; }
        std::string_view synopsis() const override { return "diff [--at peak|reserved-peak|TIME] [--top N] [--device D] [--format text|json|csv] A B"; }
        std::string_view details() const override
        {
            return "Rows are matched by module path and call stack (function, file, line), never by address. Module rows\n"
                   "compare self bytes, so one changed module is reported once, not in every ancestor. TIME is relative\n"
                   "to each trace's own start.";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("at", po::value<std::string>()->default_value("peak"), "instant compared: peak, reserved-peak or TIME")(
                "top", po::value<std::string>()->default_value("10"), "rows per grouping")(
                "device", po::value<std::string>(), kDeviceOptionHelp)(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "trace", po::value<std::vector<std::string>>()->required(), "the two traces A and B (positional)");
            p.add("trace", -1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
            const auto paths = vm["trace"].as<std::vector<std::string>>();
            if (paths.size() != 2)
                throw UsageError("diff takes exactly two traces, A and B (got " + std::to_string(paths.size()) + ")");
            LoadOptions load;
            load.strict = vm.count("strict") > 0;
            std::vector<analyze::Analysis> analyses;
            for (const auto& path : paths) {
                if (!load.strict && isGmtFile(path))
                    if (auto streamed = analyzeInPasses(vm, path, analyses.empty() ? "A" : "B", err)) {
                        analyses.push_back(std::move(*streamed));
                        continue;
                    }
                Trace trace = loadTrace(path, load);
                noteDamagedTrace(name(), path, trace.importStats(), err); // a damaged side is compared as far as it reads
                analyze::AnalysisOptions options;
                options.device = deviceOption(vm, trace, path);
                const std::vector<std::string> at { vm["at"].as<std::string>() };
                // Say which trace the instant misses (review finding: the message did not tell A from B).
                const std::string which = std::string(analyses.empty() ? "A" : "B") + " (" + path + "): ";
                try {
                    options.instants = instantSpecs(at, trace);
                    analyses.push_back(analyze::analyzeTrace(trace, options));
                    checkInstantsOnDevice(analyses.back(), at, options.instants);
                } catch (const UsageError& e) {
                    throw UsageError(which + e.what());
                }
            }
            auto diff = analyze::diffAnalyses(analyses[0], analyses[1]);
            if (format == "json")
                out << analyze::diffToJson(diff, paths[0], paths[1]).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
            else if (format == "csv")
                analyze::writeDiffCsv(diff, out);
            else
                analyze::writeDiffText(diff, paths[0], paths[1], topOption(vm), out);
            return kExitOk;
        }

    private:
        // A .gmt side analysed in passes over its chunks (analyze/bounded_analysis.h), as `analyze --format json`
        // is, without holding the trace (issue 22: diff of two 10^8-event traces read both whole); the same
        // analysis but for the timeline, which diff does not read, and the same messages, prefixed as below.
        // nullopt when the passes need the trace in memory (memory counters, …): it is read whole then.
        static std::optional<analyze::Analysis> analyzeInPasses(
            const po::variables_map& vm, const std::string& path, const std::string& side, std::ostream& err)
        {
            return withGmtSource(path, {}, [&](const MemoryEventSource& source) -> std::optional<analyze::Analysis> {
                const Trace& skeleton = source.skeleton();
                analyze::AnalysisOptions options;
                const std::vector<std::string> at { vm["at"].as<std::string>() };
                const std::string which = side + " (" + path + "): ";
                parseBeforeThePasses("diff", path, source, err, [&] {
                    options.device = deviceOption(vm, skeleton, path);
                    try {
                        options.instants = streamedInstantSpecs(at, source);
                    } catch (const UsageError& e) {
                        throw UsageError(which + e.what());
                    }
                });
                try {
                    auto bounded = analyze::analyzeSource(source, options);
                    if (!bounded.needsTrace.empty())
                        return std::nullopt;
                    // After the passes (a retry of the checked opening would say it twice), before the checks, as
                    // the in-memory path says it.
                    noteDamagedTrace("diff", path, skeleton.importStats(), err);
                    checkStreamedInstants(bounded.analysis, at, options.instants);
                    return std::move(bounded.analysis);
                } catch (const UsageError& e) {
                    throw UsageError(which + e.what());
                }
            });
        }
    };
} // namespace

std::unique_ptr<Command> makeDiffCommand() { return std::make_unique<DiffCommand>(); }

} // namespace gpumem::cli
