// gpumem fit TRACE --policy SPEC… — the smallest device capacity (in 2 MiB steps) at which a replay
// has no failed request, per policy (replay/capacity_fit.h has the search).
#include "analyze/whatif_report.h"
#include "cli/job_whatif.h"
#include "cli/whatif_options.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/importer.h"
#include "core/units.h"
#include "replay/simulated_device.h"

#include <ostream>

namespace gpumem::cli {

namespace {
    class FitCommand final : public Command {
    public:
        std::string_view name() const override { return "fit"; }
        std::string_view summary() const override
        {
            return "what-if: the smallest GPU memory on which the trace runs without OOM, per policy";
        }
        std::string_view synopsis() const override
        {
            return "fit [--policy SPEC]... [--step BYTES] [--max-capacity BYTES] [--jobs N] [--format text|json|csv]\n"
                   "           [--max-reserved BYTES] TRACE [TRACE... | DIR]";
        }
        std::string_view details() const override
        {
            return "For each policy, fit finds the smallest capacity C (a multiple of --step, 2 MiB by default) at\n"
                   "which a replay has no failed request, and checks that C - step fails. A probe at capacity C "
                   "replays\n"
                   "on a GPU whose total memory is C, so capacity-dependent settings (per_process_memory_fraction)\n"
                   "scale with it. The search starts between the live-bytes peak (no policy fits below it) and the\n"
                   "policy's unlimited peak reserved (doubled until it fits), and probes 8 capacities per round on\n"
                   "--jobs threads (the answer does not depend on --jobs). If some capacity fits while a larger probe "
                   "failed, the OOM is not monotone in the\n"
                   "capacity for this trace and policy; the table says so under it.\n"
                   "Every probe starts from --start (recorded, the default: the memory the trace shows from before\n"
                   "its window is live from the start, and the live peak counts it; a profiler trace's opening bytes\n"
                   "make the answer a lower bound, marked >=; empty: nothing before the window).\n"
                   "--max-reserved BYTES exits 3 when some policy needs more than BYTES (or fits nowhere up to a\n"
                   "--max-capacity of at least BYTES).\n"
                   "Exit 4 when some policy fits nowhere up to --max-capacity (1 TiB by default) and no gate could\n"
                   "judge it: the table has no answer for that policy, and stderr says which one; raise\n"
                   "--max-capacity or look at its live peak (no capacity below it fits).\n"
                   "Several traces (or a DIR of them) are the ranks of one job: per policy, the smallest capacity on\n"
                   "which every rank runs without a failed request (the largest of the ranks' own), the rank that needs\n"
                   "it and the median rank's; every other rank is replayed at that capacity to confirm it (a note names\n"
                   "a rank that fails there). Under mpirun or srun the ranks are spread over the MPI processes\n"
                   "(docs/mpi.md).\n"
                   "Example:\n"
                   "  gpumem fit run.pickle --policy pytorch --policy pytorch:expandable_segments:True --format json";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()(
                "policy", po::value<std::vector<std::string>>(), "allocator policy SPEC (repeatable; default pytorch)")(
                "step", po::value<std::string>()->default_value("2MiB"), "capacity granularity")(
                "max-capacity", po::value<std::string>()->default_value("1TiB"), "the largest capacity to try")(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "device", po::value<std::string>(), kDeviceOptionHelp);
            addOutsideOption(o);
            addJobsOption(o);
            addStartOptions(o);
            addGateOptions(o, false, "some policy");
            o.add_options()("trace", po::value<std::vector<std::string>>()->required(), "trace files (positional)");
            p.add("trace", -1);
        }
        bool spreadsOverProcesses() const override { return true; }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
            const auto specs = checkedPolicySpecs(vm.count("policy") ? vm["policy"].as<std::vector<std::string>>()
                                                                     : std::vector<std::string> { "pytorch" });
            const Gates gates = readGates(vm);
            replay::FitOptions options;
            options.jobs = readJobs(vm);
            options.outsideBytes = readOutside(vm);
            options.step = parseBytes(vm["step"].as<std::string>(), "--step");
            if (options.step == 0)
                throw UsageError("--step 0: the capacity granularity must be at least 1 byte (default 2MiB)");
            options.maxCapacity = parseBytes(vm["max-capacity"].as<std::string>(), "--max-capacity");
            if (options.maxCapacity < options.step)
                throw UsageError("--max-capacity " + vm["max-capacity"].as<std::string>()
                    + " is below one step; fit needs a capacity of at least " + formatBytes(options.step) + " to try");

            const auto paths = vm["trace"].as<std::vector<std::string>>();
            if (isJobArguments(paths)) { // one trace per rank (cli/job_whatif.h)
                JobWhatIf w = readJobWhatIf(vm, paths, specs, gates, format);
                w.fit = options;
                return runJobFit(vm, w, out, err);
            }
            const std::string path = paths.front();
            // A .gmt is streamed, a probe a pass (docs/streaming.md); any other format is read whole. The .gmt's
            // chunks are checked by the first pass (withReplayInput), not by an opening pass of their own:
            // nothing is written before the probes are done.
            return withReplayInput(path, [&, base = options](const ReplayInput& input) -> int {
                replay::FitOptions fit = base; // a retry starts from the options as given
                return fitAndWrite(vm, input, path, specs, gates, format, fit, out, err);
            });
        }

    private:
        int fitAndWrite(const po::variables_map& vm, const ReplayInput& input, const std::string& path,
            const std::vector<replay::PolicySpec>& specs, const Gates& gates, const std::string& format,
            replay::FitOptions& options, std::ostream& out, std::ostream& err) const
        {
            options.device = deviceOption(vm, input.tables(), path);
            options.source = path;
            // The busiest device, chosen once here rather than by every replay (each is a pass over the trace).
            if (!options.device)
                options.device = replay::defaultReplayDevice(input.source());
            options.start = readStart(vm);
            options.reopen = input.reopener(); // a streamed .gmt: the probes of a round in parallel, a source each
            std::vector<replay::FitResult> fits;
            for (const auto& s : specs)
                fits.push_back(replay::fitCapacity(input.source(), s, options));
            // The passes are done (no retry can follow): a damaged trace is said to be one, as analyze does.
            noteDamagedTrace(name(), path, input.tables().importStats(), err);
            auto context = input.context(options.device.value_or(0), options.start);
            context.width = readTableWidth(vm);
            analyze::writeFitTable(fits, format, out, context);
            warnAboutMemoryBeforeTheWindow(context.before.openingAllocated, err, options.start, context.width);
            // A policy that fits nowhere up to --max-capacity has no answer in the table. A --max-reserved
            // gate at or below --max-capacity has judged it (it needs more than the gate): exit 3.
            // Otherwise exit 4, so that a script cannot take the table for a result.
            const bool gateJudges = gates.maxReserved && *gates.maxReserved <= options.maxCapacity;
            std::vector<GateSubject> subjects;
            bool noFit = false; // some policy fits nowhere up to --max-capacity
            for (const auto& f : fits) {
                if (f.fits) {
                    subjects.push_back({ f.spec, 0, f.capacity });
                    continue;
                }
                std::string why = (f.probes.size() == 1 ? std::string("the 1 capacity tried had")
                                                        : "each of the " + std::to_string(f.probes.size())
                                                            + " capacities tried had")
                    + " a failed request; raise --max-capacity";
                if (f.unlimitedFailure && f.unlimitedFailure->size > replay::kMaxDeviceBytes)
                    why = "a request of " + std::to_string(f.unlimitedFailure->size) + " B (trace event "
                        + std::to_string(f.unlimitedFailure->event)
                        + ") is above the largest device gpumem simulates, 4 EiB: no capacity serves it";
                else if (f.lowerBound > f.maxCapacity)
                    why = "its live peak, " + formatBytes(f.lowerBound)
                        + ", is above it; raise --max-capacity to at least " + formatBytes(f.lowerBound);
                err << fitMessage("gpumem fit: " + textForTerminal(f.spec) + " fits nowhere up to --max-capacity "
                    + formatBytes(f.maxCapacity) + ": " + why);
                if (gateJudges)
                    err << fitMessage("gpumem fit: gate: " + textForTerminal(f.spec) + " needs more than --max-capacity "
                        + formatBytes(f.maxCapacity) + ", so more than --max-reserved " + formatBytes(*gates.maxReserved));
                noFit = true;
            }
            const int gate = applyGates(gates, subjects, name(), err);
            return gate != kExitOk || (noFit && gateJudges) ? kExitGate : noFit ? kExitNoFit : kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeFitCommand() { return std::make_unique<FitCommand>(); }

} // namespace gpumem::cli
