// gpumem sweep TRACE --policy GRID… — a grid of policy configurations (brace alternatives expanded,
// several braces = cartesian product) replayed in parallel, one row each, best first (no failed
// request, then peak reserved), the best row marked.
#include "analyze/comparison.h"
#include "analyze/replay_report.h"
#include "analyze/whatif_report.h"
#include "cli/job_whatif.h"
#include "cli/whatif_options.h"
#include "core/error.h"
#include "core/importer.h"
#include "core/message_quote.h"
#include "core/units.h"
#include "replay/parallel_runs.h"
#include "replay/policy_grid.h"

#include <ostream>

namespace gpumem::cli {

namespace {
    class SweepCommand final : public Command {
    public:
        std::string_view name() const override { return "sweep"; }
        std::string_view summary() const override
        {
            return "what-if grid: replay every configuration of policy grids in parallel, best first";
        }
        std::string_view synopsis() const override
        {
            return "sweep --policy GRID... [--capacity BYTES] [--on-oom stop|skip] [--jobs N] [--format "
                   "text|json|csv]\n"
                   "             [--fail-if-oom] [--max-reserved BYTES] TRACE [TRACE... | DIR]";
        }
        std::string_view details() const override
        {
            return "A GRID is a policy SPEC (see 'gpumem help replay') with {a,b,...} alternatives; several braces\n"
                   "give every combination (the leftmost varies slowest). Braces do not nest. Example:\n"
                   "  gpumem sweep run.pickle --policy 'pytorch:max_split_size_mb:{64,128,256,512}' \\\n"
                   "                          --policy 'pytorch:expandable_segments:{True,False}'\n"
                   "Rows are sorted best first: those without a failed request first (then fewer failed requests), then\n"
                   "by peak reserved, then by device calls; '*' marks the best (the first row). Gates: --fail-if-oom and --max-reserved exit 3\n"
                   "when even the best configuration violates them (a sweep asks whether some configuration works).\n"
                   "Several traces (or a DIR of them) are the ranks of one job: a configuration fits only if no rank has\n"
                   "a failed request, and its row gives the worst rank and its peak reserved; rows sort by the ranks\n"
                   "with an OOM, then the worst rank's peak. Under mpirun or srun the ranks are spread over the MPI\n"
                   "processes (docs/mpi.md).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("policy", po::value<std::vector<std::string>>()->required(), "policy GRID (repeatable)")(
                "capacity", po::value<std::string>(), "device capacity, e.g. 80GiB (default unlimited)")(
                "on-oom", po::value<std::string>()->default_value("skip"), "stop or skip at a failed request")(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "device", po::value<std::string>(), kDeviceOptionHelp);
            addOutsideOption(o);
            addJobsOption(o);
            addStartOptions(o);
            addCacheOptions(o);
            addGateOptions(o, true, "the best configuration");
            o.add_options()("trace", po::value<std::vector<std::string>>()->required(), "trace files (positional)");
            p.add("trace", -1);
        }
        bool spreadsOverProcesses() const override { return true; }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            // The cache options are read first, before any trace (a bad one is a usage error, exit 2); a job
            // replay hands them to every rank through these options.
            replay::ReplayOptions options;
            readCacheOptions(vm, options);
            const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
            const std::string onOom = checkedChoice(vm, "on-oom", { "stop", "skip" });
            std::vector<std::string> texts;
            for (const auto& grid : vm["policy"].as<std::vector<std::string>>())
                for (auto& t : replay::expandBraceGrid(grid))
                    texts.push_back(std::move(t));
            if (texts.size() > replay::kMaxGridSize)
                throw UsageError("the grids expand to " + std::to_string(texts.size()) + " configurations, more than "
                    + std::to_string(replay::kMaxGridSize) + "; split the sweep");
            const auto specs = checkedPolicySpecs(texts);
            const Gates gates = readGates(vm);
            const unsigned jobs = readJobs(vm);
            options.capacity = readCapacity(vm);
            options.outsideBytes = readOutside(vm);
            options.onOom = onOom == "stop" ? replay::OnOom::Stop : replay::OnOom::Skip;
            const auto paths = vm["trace"].as<std::vector<std::string>>();
            if (isJobArguments(paths)) { // one trace per rank (cli/job_whatif.h)
                JobWhatIf w = readJobWhatIf(vm, paths, specs, gates, format);
                w.options = options;
                return runJobSweep(vm, w, out, err);
            }
            const std::string path = paths.front();
            options.source = path;
            // A .gmt is streamed, a replay a pass (docs/streaming.md); any other format is read whole.
            // The .gmt's chunks are checked by the first replay's pass (withReplayInput): nothing is written before.
            return withReplayInput(path, [&, base = options](const ReplayInput& input) -> int {
                options = base; // a retry starts from the options as given
                const replay::StartState start = prepareReplays(vm, input, path, options);
                // --empty-cache-at tries the calls as a remedy: every configuration is replayed without and
                // with them, side by side, and the effect each time is said under the table.
                const replay::EmptyCacheSchedule schedule = options.addEmptyCache;
                const std::size_t variants = schedule.any() ? 2 : 1;
                replay::ReplayOptions plain = options;
                plain.addEmptyCache = {};
                std::vector<analyze::SweepRow> rows(specs.size() * variants);
                input.forEachReplay(rows.size(), jobs, [&](const MemoryEventSource& on, std::size_t k) {
                    const std::size_t i = k / variants;
                    const bool with = k % variants == 1;
                    rows[k].spec = with ? specs[i].text + " + empty_cache " + schedule.text() : specs[i].text;
                    rows[k].result = replay::Replayer(with ? options : plain).run(on, specs[i]);
                });
                // The replays are done (no retry can follow): a damaged trace is said to be one, as analyze does.
                noteDamagedTrace(name(), path, input.tables().importStats(), err);
                auto context = input.context(options.device.value_or(0), start);
                context.width = readTableWidth(vm);
                analyze::writeSweepTable(rows, format, input.firstEventTime(), out, context);
                if (variants == 2 && format == "text")
                    for (std::size_t i = 0; i < specs.size(); ++i)
                        out << analyze::wrapText(textForTerminal(specs[i].text) + ": "
                                + analyze::emptyCacheEffectText(rows[2 * i].result, rows[2 * i + 1].result, schedule)
                                + " (proven by replay)",
                            context.width);
                warnAboutMemoryBeforeTheWindow(context.before.openingAllocated, err, start, context.width);
                const std::size_t best = analyze::bestSweepRow(rows);
                if (best == rows.size())
                    return kExitOk;
                const auto& r = rows[best].result;
                return applyGates(gates,
                    { { "the best configuration (" + rows[best].spec + ")", r.ooms, r.peakReserved.bytes } }, name(), err);
            });
        }
    };
} // namespace

std::unique_ptr<Command> makeSweepCommand() { return std::make_unique<SweepCommand>(); }

} // namespace gpumem::cli
