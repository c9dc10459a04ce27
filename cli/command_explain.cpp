// gpumem explain TRACE — why the run ran out of memory (or wasted it) and the settings that fix it, each
// proven by replaying the trace under it (analyze/diagnosis.h, docs/explain.md).
#include "analyze/analysis.h"
#include "analyze/bounded_analysis.h"
#include "analyze/comparison.h"
#include "analyze/diagnosis.h"
#include "analyze/trace_summary.h"
#include "cli/command.h"
#include "cli/whatif_options.h"
#include "core/error.h"
#include "core/event_source.h"
#include "importers/importer_registry.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <ostream>

namespace gpumem::cli {

namespace {
    class ExplainCommand final : public Command {
    public:
        std::string_view name() const override { return "explain"; }
        std::string_view summary() const override
        {
            return "why it ran out of memory or wasted it, and the settings that fix it, proven by replay";
        }
        std::string_view synopsis() const override
        {
            return "explain [--policy SPEC] [--capacity BYTES] [--at TIME] [--device D]\n"
                   "               [--format text|json|markdown] [--fail-if-oom] [--no-remedies] [--jobs N] TRACE";
        }
        std::string_view details() const override
        {
            return "The moment explained: the first OOM (one the trace records, or one the replay at --capacity\n"
                   "hits), else the reserved peak, or --at TIME (after the trace start: 1.5s, 250ms; @<ns>).\n"
                   "The verdict comes first, then the findings ranked by the bytes they account for, then the\n"
                   "settings that a replay of this trace at the same capacity confirms (the exact\n"
                   "PYTORCH_CUDA_ALLOC_CONF to paste). --policy defaults to the allocator the trace records (its\n"
                   "allocator_settings; tf-bfc for an XLA profile; rmm-pool for an RMM log), else pytorch.\n"
                   "A trace with only memory counters (an OOM message, a memory_summary) gets the layered\n"
                   "breakdown and what to record next. --fail-if-oom exits 3 when the moment is an OOM.\n"
                   "Finding ids, rules and the JSON schema: docs/explain.md. Example:\n"
                   "  gpumem explain memory_snapshot.pickle --capacity 13GiB";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("policy", po::value<std::string>(),
                "allocator policy SPEC (default: the trace's recorded allocator, else pytorch)")(
                "capacity", po::value<std::string>(),
                "device capacity, e.g. 13GiB (default: the device's memory when the trace records an OOM, else "
                "unlimited)")("at", po::value<std::string>(), "explain the state at TIME instead of the OOM or peak")(
                "device", po::value<std::string>(), kDeviceOptionHelp)(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or markdown")(
                "fail-if-oom", po::bool_switch(), "exit 3 when the moment explained is an OOM")(
                "no-remedies", "skip the remedy replays (findings only)");
            addOutsideOption(o);
            addJobsOption(o);
            o.add_options()("trace", po::value<std::string>()->required(), "trace file (positional)");
            p.add("trace", 1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const std::string format = checkedChoice(vm, "format", { "text", "json", "markdown" });
            const std::string path = vm["trace"].as<std::string>();
            analyze::DiagnosisOptions options;
            if (vm.count("policy")) {
                options.policy = vm["policy"].as<std::string>();
                checkedPolicySpecs({ options.policy });
            }
            options.capacity = readCapacity(vm);
            options.outsideBytes = readOutside(vm);
            options.jobs = readJobs(vm);
            options.remedies = !vm.count("no-remedies");
            if (isGmtFile(path) && streamsReplay(path))
                if (auto done = runInPasses(vm, path, format, options, out, err))
                    return *done;
            Trace trace = loadTrace(path);
            // A damaged or cut trace is explained as far as it reads, and said so first (review finding:
            // a truncated .json.gz was explained without a word).
            noteDamagedTrace("explain", path, trace.stats(), err);
            options.device = deviceOption(vm, trace, path);
            const TimeNs start = analyze::traceSpan(trace).start;
            options.at = atOption(vm, start);
            analyze::AnalysisOptions ao;
            ao.device = options.device;
            std::optional<analyze::Analysis> analysis;
            if (!trace.memory().time.empty())
                useAnalysis(options, analysis.emplace(analyze::analyzeTrace(trace, ao)));
            return write(vm, analyze::diagnose(trace, options), format, start, out, err);
        }

    private:
        // The diagnosis reads the analysis of the trace's memory events (the lower bound, the categories) where
        // there is one, and its device where none was given. `analysis` must outlive the diagnosis.
        static void useAnalysis(analyze::DiagnosisOptions& options, const analyze::Analysis& analysis)
        {
            if (!analysis.empty && !analysis.countersOnly)
                options.analysis = &analysis;
            if (!options.device && !analysis.empty)
                options.device = analysis.device;
        }

        // --at TIME from the trace start `start`; nullopt without it. UsageError for an instant that is not a time.
        static std::optional<TimeNs> atOption(const po::variables_map& vm, TimeNs start)
        {
            if (!vm.count("at"))
                return std::nullopt;
            const std::string& text = vm["at"].as<std::string>();
            // Not InstantSpec's own error, which offers peak and reserved-peak: explain takes a time only.
            const auto notATime = [&] {
                return UsageError("--at '" + text + "' is not a time after the trace start (1.5s, 250ms, 40us, 1200ns, "
                    + "+0.001937 s as printed) or @<absolute ns>; explain takes a time: the OOM or the reserved peak is "
                    + "the default");
            };
            analyze::InstantSpec spec;
            try {
                spec = analyze::InstantSpec::parse(text, start);
            } catch (const UsageError&) {
                throw notATime();
            }
            if (spec.kind != analyze::InstantSpec::Kind::Time)
                throw notATime();
            return spec.time;
        }

        static int write(const po::variables_map& vm, const analyze::Diagnosis& d, const std::string& format, TimeNs start,
            std::ostream& out, std::ostream& err)
        {
            analyze::writeDiagnosis(d, format, start, out);
            if (vm["fail-if-oom"].as<bool>() && d.moment.isOom()) {
                err << "gpumem explain: gate: the moment explained is an OOM ("
                    << formatBytes(d.moment.request) << " request)\n";
                return kExitGate;
            }
            return kExitOk;
        }

        // A .gmt is explained in passes over its chunks (analyze::diagnose over a source; issue 22: 10^8 events took
        // 15.9 GB read whole, and 10^7 took more CPU whole than in passes once the replays shared their look-ahead),
        // with the bounded analysis in place of analyzeTrace's: the same diagnosis. nullopt when it is to be read
        // whole instead: what the passes cannot compute (GPUMEM_REPLAY_IN_MEMORY=1 reads it whole before: streamsReplay).
        static std::optional<int> runInPasses(const po::variables_map& vm, const std::string& path, const std::string& format,
            analyze::DiagnosisOptions options, std::ostream& out, std::ostream& err)
        {
            // The candidates' own sources are opened with the checks the first had.
            return withReopenableGmtSource(path, {}, [&](const MemoryEventSource& source, SourceOpener reopen) -> std::optional<int> {
                options.reopen = std::move(reopen);
                const Trace& skeleton = source.skeleton();
                const TimeNs start = analyze::sourceOrigin(source);
                // Read whole, a damaged trace is said so before its options are refused (review finding).
                parseBeforeThePasses("explain", path, source, err, [&] {
                    options.device = deviceOption(vm, skeleton, path);
                    options.at = atOption(vm, start);
                });
                analyze::AnalysisOptions ao;
                ao.device = options.device;
                auto bounded = analyze::analyzeSource(source, ao);
                if (!bounded.needsTrace.empty())
                    return std::nullopt;
                // After the first pass (a retry of the checked opening would say it twice).
                noteDamagedTrace("explain", path, skeleton.importStats(), err);
                useAnalysis(options, bounded.analysis);
                return write(vm, analyze::diagnose(source, options), format, start, out, err);
            });
        }
    };
} // namespace

std::unique_ptr<Command> makeExplainCommand() { return std::make_unique<ExplainCommand>(); }

} // namespace gpumem::cli
