// gpumem ranks TRACE... | DIR — the job view of a distributed run: one row per rank, aligned by step, with the
// imbalance and what the worst rank holds beyond the median one (analyze/job_view.h, docs/ranks.md).
#include "analyze/job_view.h"
#include "cli/command.h"
#include "cli/output_file.h"
#include "cli/whatif_options.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "mpi/process_group.h"
#include "mpi/rank_summaries.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <ostream>

namespace gpumem::cli {

namespace {
    class RanksCommand final : public Command {
    public:
        std::string_view name() const override { return "ranks"; }
        std::string_view summary() const override
        {
            return "one table of a job's ranks, aligned by step: who peaks or runs out first, and why";
        }
        std::string_view synopsis() const override
        {
            return "ranks [--format text|json|csv] [--jobs N] [--top N] [-o FILE] TRACE... | DIR";
        }
        std::string_view details() const override
        {
            return "One trace per rank (a snapshot, a profiler trace or a gpumem record file each), or a folder holding them.\n"
                   "The rank number comes from the trace: the RANK or LOCAL_RANK the tracer records, Kineto's\n"
                   "distributedInfo, or a rank<N> in the file name; when a trace names none, every rank is its place in\n"
                   "the list given. Steps are aligned by ProfilerStep# number when every rank has them, else by index.\n"
                   "Outliers differ from the median rank's peak allocated by more than max(5 %, 3 robust deviations);\n"
                   "the worst rank and every outlier above the median are compared with the median rank by module, site\n"
                   "and category at each one's allocated peak, as `gpumem diff` does. Each rank is summarised on its own\n"
                   "(--jobs at once) and the table is built from the summaries; the output does not depend on --jobs.\n"
                   "Two traces naming the same rank, a missing file or an unreadable trace stop with an error naming it.";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "jobs,j", po::value<std::string>(), "traces summarised at once (default: the hardware threads)")(
                "top", po::value<std::string>()->default_value("5"), "rows per grouping in the worst rank's difference")(
                "output,o", po::value<std::string>(), "write to FILE instead of standard output")(
                "device", po::value<std::string>(), "device of every rank, by position in 'gpumem info' (0, 1, ...); default: each trace's busiest")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "trace", po::value<std::vector<std::string>>()->required(), "rank traces or folders of them (positional)");
            p.add("trace", -1);
        }
        bool spreadsOverProcesses() const override { return true; }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream&) override
        {
            const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
            const std::size_t top = topOption(vm);
            const unsigned jobs = readJobs(vm);
            LoadOptions load;
            load.strict = vm.count("strict") > 0;
            analyze::RankSummaryOptions options;
            if (vm.count("device")) {
                const std::string d = vm["device"].as<std::string>();
                std::size_t used = 0;
                unsigned long value = 0;
                try {
                    value = std::stoul(d, &used);
                } catch (const std::exception&) {
                    used = 0;
                }
                if (used == 0 || used != d.size() || d.front() == '-')
                    throw UsageError("--device '" + d + "': give the device's position in 'gpumem info' (0, 1, ...); labels differ between ranks");
                options.device = static_cast<DeviceId>(value);
            }
            const auto paths = analyze::rankTracePaths(vm["trace"].as<std::vector<std::string>>());
            std::optional<OutputFile> output;
            // Rank 0 checks the destination before the work (item 0 runs there); a refusal reaches every
            // process, none is left waiting for it.
            mpi::processGroup().mapGather(1, [&](std::size_t) {
                if (vm.count("output"))
                    output.emplace(vm["output"].as<std::string>(), paths);
                return std::string();
            });
            // Spread over the MPI processes under mpirun/srun, else threads (docs/mpi.md); rank 0 reports.
            auto summaries = mpi::summarizeRanks(paths, load, options, vm.count("jobs") ? jobs : 0);
            if (!mpi::processGroup().isRoot())
                return kExitOk;
            const auto view = analyze::buildJobView(std::move(summaries));
            auto write = [&](std::ostream& o) {
                if (format == "json")
                    o << analyze::jobViewToJson(view).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
                else if (format == "csv")
                    analyze::writeJobViewCsv(view, o);
                else
                    analyze::writeJobViewText(view, top, o);
            };
            if (!output) {
                write(out);
                return kExitOk;
            }
            const std::string outPath = vm["output"].as<std::string>();
            {
                std::ofstream f(output->writePath(), std::ios::binary);
                if (!f)
                    throw IoError(outPath + ": cannot write: check that the folder is writable");
                write(f);
                f.flush();
                if (!f)
                    throw IoError(outPath + ": writing failed (disk full?)");
            }
            output->commit();
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeRanksCommand() { return std::make_unique<RanksCommand>(); }

} // namespace gpumem::cli
