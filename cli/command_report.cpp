// gpumem report TRACE… -o report.html — one self-contained HTML file per run, for CI artifacts and bug reports.
#include "analyze/html_report.h"
#include "cli/command.h"
#include "cli/output_file.h"
#include "replay/policy_registry.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"
#include "core/error.h"
#include "core/importer.h"

#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace gpumem::cli {


namespace {
    class ReportCommand final : public Command {
    public:
        std::string_view name() const override { return "report"; }
        std::string_view summary() const override { return "write one self-contained HTML report (charts, peak breakdown, steps, leaks)"; }
        std::string_view synopsis() const override { return "report [--policy SPEC]... [--top N] [--title T] TRACE... -o report.html"; }
        std::string_view details() const override
        {
            return "The file has inline SVG and CSS only (no script, no network resources), so it opens anywhere and can be\n"
                   "attached to CI runs and bug reports. --policy adds a what-if comparison row per trace and policy,\n"
                   "replayed like `gpumem replay --policy SPEC` (peak reserved, device calls, OOMs, overhead over max live bytes).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("output,o", po::value<std::string>()->required(), "the HTML file to write")(
                "policy", po::value<std::vector<std::string>>(), "allocator policy to compare (PolicySpec string)")(
                "top", po::value<long long>()->default_value(10), "rows per breakdown table")(
                "title", po::value<std::string>()->default_value("gpumem report"), "page title")(
                "device", po::value<int>(), "device index (default: each trace's busiest)")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "trace", po::value<std::vector<std::string>>()->required(), "trace files (positional)");
            p.add("trace", -1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream&) override
        {
            LoadOptions load;
            load.strict = vm.count("strict") > 0;
            const auto paths = vm["trace"].as<std::vector<std::string>>();
            std::vector<Trace> traces;
            std::vector<analyze::Analysis> analyses;
            traces.reserve(paths.size());
            analyses.reserve(paths.size());
            for (const auto& path : paths) {
                traces.push_back(loadTrace(path, load));
                analyze::AnalysisOptions options;
                options.device = deviceOption(vm);
                analyses.push_back(analyze::analyzeTrace(traces.back(), options));
            }
            std::vector<analyze::HtmlReportInput> inputs;
            for (std::size_t i = 0; i < paths.size(); ++i)
                inputs.push_back({ paths[i], &traces[i], &analyses[i] });
            analyze::HtmlOptions options;
            options.title = vm["title"].as<std::string>();
            options.top = topOption(vm);
            std::vector<analyze::PolicyRow> policies;
            if (vm.count("policy")) {
                std::vector<replay::PolicySpec> specs;
                for (const auto& text : vm["policy"].as<std::vector<std::string>>()) {
                    specs.push_back(replay::parsePolicySpec(text));
                    replay::validatePolicySpec(specs.back()); // a bad spec is a usage error before any work
                }
                for (std::size_t i = 0; i < paths.size(); ++i) {
                    if (analyses[i].countersOnly) { // as replay refuses it (whatif_options.cpp, loadReplayableTrace)
                        options.policySkipped.push_back(paths[i] + ": no policy rows: it records memory counters only (no "
                                                                   "addresses: a PyTorch <= 1.9 profiler trace), so there is nothing to replay.");
                        continue;
                    }
                    replay::ReplayOptions replayOptions;
                    replayOptions.device = analyses[i].device;
                    for (std::size_t k = 0; k < specs.size(); ++k) {
                        auto r = replay::Replayer(replayOptions).run(traces[i], specs[k]);
                        analyze::PolicyRow row;
                        row.trace = paths[i];
                        row.policy = vm["policy"].as<std::vector<std::string>>()[k];
                        row.peakReserved = r.peakReserved.bytes;
                        row.peakAllocated = r.peakAllocated.bytes;
                        row.deviceCalls = r.deviceCalls();
                        row.failedRequests = r.ooms;
                        if (analyses[i].fragmentation.lowerBound > 0)
                            row.overheadVsLowerBound = double(r.peakReserved.bytes) / double(analyses[i].fragmentation.lowerBound);
                        policies.push_back(std::move(row));
                    }
                }
            }
            const std::string outPath = vm["output"].as<std::string>();
            OutputFile output(outPath);
            {
                std::ofstream f(output.writePath(), std::ios::binary);
                if (!f)
                    throw IoError(outPath + ": cannot write: check that the folder is writable");
                analyze::writeHtmlReport(inputs, policies, options, f);
                f.flush();
                if (!f)
                    throw IoError(outPath + ": writing failed (disk full?)");
            }
            output.commit();
            out << "wrote " << outPath << '\n';
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeReportCommand() { return std::make_unique<ReportCommand>(); }

} // namespace gpumem::cli
