#include "cli/job_whatif.h"

#include "analyze/job_view.h"
#include "analyze/job_whatif.h"
#include "analyze/trace_summary.h"
#include "core/error.h"
#include "core/message_quote.h"
#include "core/units.h"
#include "mpi/process_group.h"
#include "replay/parallel_runs.h"
#include "replay/start_state.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>

namespace gpumem::cli {

namespace {
    // One rank's trace, loaded and ready to replay.
    struct RankRun {
        Trace trace;
        replay::ReplayOptions options;
        TimeNs start = 0; // the trace start the tables count times from
        std::optional<std::int64_t> namedRank; // analyze::namedRankOf
    };

    RankRun prepareRank(const po::variables_map& vm, const std::string& path, const replay::ReplayOptions& base,
        replay::StartState start)
    {
        RankRun run;
        run.trace = loadReplayableTrace(path);
        run.options = base;
        run.options.source = path;
        run.options.device = deviceOption(vm, run.trace, path);
        if (!run.options.device)
            run.options.device = replay::defaultReplayDevice(run.trace);
        replay::applyStartState(run.options, run.trace, start);
        run.start = analyze::traceSpan(run.trace).start;
        if (auto named = analyze::namedRankOf(run.trace, path))
            run.namedRank = named->first;
        return run;
    }

    // Threads for the items of this process (each holds one trace) and, inside an item, for its settings.
    struct Threads {
        unsigned ranks = 1;
        unsigned perRank = 1;
    };
    Threads splitThreads(unsigned jobs, std::size_t items)
    {
        const auto& g = mpi::processGroup();
        if (jobs == 0)
            jobs = g.defaultJobs();
        const std::size_t mine = (items + std::size_t(g.size()) - 1) / std::size_t(g.size());
        const unsigned outer = unsigned(std::clamp<std::size_t>(mine, 1, jobs));
        return { outer, std::max(1u, jobs / outer) };
    }

    // Every spec on every rank; on rank 0 one JobSetting per spec, elsewhere none. An item is one rank
    // and a slice of the specs: one slice when the ranks are at least the processes, else as many
    // slices as it takes to give every process work (each slice imports its rank's trace again).
    std::vector<analyze::JobSetting> replayEveryRank(
        const po::variables_map& vm, const JobWhatIf& job, std::vector<std::string>& names)
    {
        const std::size_t ranks = job.paths.size(), specs = job.specs.size();
        const auto processes = std::size_t(mpi::processGroup().size());
        const std::size_t slices = std::clamp<std::size_t>((processes + ranks - 1) / std::max<std::size_t>(ranks, 1), 1,
            std::max<std::size_t>(specs, 1));
        auto sliceOf = [&](std::size_t c) { return std::make_pair(specs * c / slices, specs * (c + 1) / slices); };
        const Threads threads = splitThreads(job.jobs, ranks * slices);
        mpi::MapOptions spread;
        spread.jobs = threads.ranks;
        const auto gathered = mpi::processGroup().mapGather(
            ranks * slices,
            [&](std::size_t item) {
                const RankRun run = prepareRank(vm, job.paths[item / slices], job.options, job.start);
                const auto [first, end] = sliceOf(item % slices);
                analyze::RankRows<analyze::RankReplay> rows { run.namedRank, std::vector<analyze::RankReplay>(end - first) };
                replay::parallelFor(end - first, threads.perRank, [&](std::size_t k) {
                    rows.rows[k] = analyze::rankReplayOf(
                        replay::Replayer(run.options).run(run.trace, job.specs[first + k]), run.start);
                });
                return analyze::toBytes(rows);
            },
            spread);
        if (gathered.empty())
            return {};
        std::vector<analyze::JobSetting> settings(specs);
        for (std::size_t i = 0; i < specs; ++i)
            settings[i].spec = job.specs[i].text;
        std::vector<std::optional<std::int64_t>> named;
        for (std::size_t item = 0; item < gathered.size(); ++item) {
            auto part = analyze::rankReplaysFromBytes(gathered[item]);
            const auto [first, end] = sliceOf(item % slices);
            if (part.rows.size() != end - first)
                throw Error("job what-if: a rank returned " + std::to_string(part.rows.size()) + " results for "
                    + std::to_string(end - first) + " settings (internal error)");
            for (std::size_t k = 0; k < part.rows.size(); ++k)
                settings[first + k].ranks.push_back(std::move(part.rows[k]));
            if (item % slices == 0)
                named.push_back(part.namedRank);
        }
        names = analyze::jobRankNames(named);
        return settings;
    }

    std::string settingLabel(const std::vector<std::string>& names, const analyze::JobSetting& s)
    {
        const auto v = analyze::judgeSetting(s);
        return s.spec + " (worst: " + names[v.worst] + ")";
    }
} // namespace

bool isJobArguments(const std::vector<std::string>& arguments)
{
    std::error_code ec;
    return arguments.size() > 1 || (arguments.size() == 1 && std::filesystem::is_directory(arguments.front(), ec));
}

JobWhatIf readJobWhatIf(const po::variables_map& vm, const std::vector<std::string>& arguments,
    const std::vector<replay::PolicySpec>& specs, const Gates& gates, const std::string& format)
{
    JobWhatIf w;
    w.paths = analyze::rankTracePaths(arguments);
    // The same file twice would count one rank twice in the median and the job's verdict.
    std::map<std::string, std::string> seen;
    for (const auto& path : w.paths) {
        std::error_code ec;
        const auto canonical = std::filesystem::weakly_canonical(path, ec);
        const std::string key = ec ? path : canonical.string();
        if (auto [it, fresh] = seen.emplace(key, path); !fresh)
            throw UsageError("the trace " + path + " is given twice (also as " + it->second
                + "); give each rank's trace once");
    }
    w.specs = specs;
    w.start = readStart(vm);
    w.gates = gates;
    w.format = format;
    w.width = readTableWidth(vm);
    w.jobs = vm.count("jobs") ? readJobs(vm) : 0;
    return w;
}

int runJobReplay(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err)
{
    std::vector<std::string> names;
    const auto settings = replayEveryRank(vm, job, names);
    if (!mpi::processGroup().isRoot())
        return kExitOk; // rank 0 reports (and decides the exit code of every process)
    analyze::writeJobReplayTable(names, settings, job.format, out, job.width);
    std::vector<GateSubject> subjects;
    for (const auto& s : settings) {
        const auto v = analyze::judgeSetting(s);
        subjects.push_back({ settingLabel(names, s), v.ooms, v.worstPeakReserved });
    }
    return applyGates(job.gates, subjects, "replay", err);
}

int runJobSweep(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err)
{
    // One trace's sweep tries --empty-cache-at as a remedy (each configuration with and without the
    // calls); the job table has no such pair of rows yet, so refuse rather than ignore it.
    if (vm.count("empty-cache-at"))
        throw UsageError("--empty-cache-at in a sweep over several ranks is not supported yet: sweep one rank's "
                         "trace to see its effect, or run 'gpumem replay' over the job with --empty-cache-at");
    std::vector<std::string> names;
    const auto settings = replayEveryRank(vm, job, names);
    if (!mpi::processGroup().isRoot() || settings.empty())
        return kExitOk;
    analyze::writeJobSweepTable(names, settings, job.format, out, job.width);
    const auto& best = settings[analyze::jobSweepOrder(settings).front()];
    const auto v = analyze::judgeSetting(best);
    return applyGates(job.gates, { { "the best configuration, " + settingLabel(names, best), v.ooms, v.worstPeakReserved } },
        "sweep", err);
}

int runJobFit(const po::variables_map& vm, const JobWhatIf& job, std::ostream& out, std::ostream& err)
{
    auto& group = mpi::processGroup();
    const Threads threads = splitThreads(job.jobs, job.paths.size());
    mpi::MapOptions spread;
    spread.jobs = threads.ranks;
    spread.to = mpi::GatherTo::All; // every process needs the job capacities for the confirming round
    replay::FitOptions fitOptions = job.fit;
    fitOptions.jobs = threads.perRank;
    fitOptions.start = job.start;
    replay::ReplayOptions base; // prepareRank's device and start; fitCapacity sets the rest per probe
    const auto gathered = group.mapGather(
        job.paths.size(),
        [&](std::size_t r) {
            const RankRun run = prepareRank(vm, job.paths[r], base, job.start);
            replay::FitOptions o = fitOptions;
            o.device = run.options.device;
            o.source = job.paths[r];
            analyze::RankRows<analyze::RankFit> fits { run.namedRank, {} };
            for (const auto& spec : job.specs)
                fits.rows.push_back(analyze::rankFitOf(replay::fitCapacity(run.trace, spec, o)));
            return analyze::toBytes(fits);
        },
        spread);
    std::vector<analyze::JobFit> fits(job.specs.size());
    for (std::size_t i = 0; i < fits.size(); ++i)
        fits[i].spec = job.specs[i].text;
    std::vector<std::optional<std::int64_t>> named;
    for (const auto& bytes : gathered) {
        auto rank = analyze::rankFitsFromBytes(bytes);
        for (std::size_t i = 0; i < fits.size() && i < rank.rows.size(); ++i)
            fits[i].ranks.push_back(std::move(rank.rows[i]));
        named.push_back(rank.namedRank);
    }
    // Confirm: every rank whose own capacity is below the job's replays at the job's capacity (OOM need
    // not be monotone in the capacity, capacity_fit.h).
    std::vector<analyze::JobFitVerdict> verdicts;
    for (const auto& f : fits)
        verdicts.push_back(analyze::judgeFit(f));
    mpi::MapOptions confirm = spread;
    confirm.to = mpi::GatherTo::Root;
    const auto failing = group.mapGather(
        job.paths.size(),
        [&](std::size_t r) {
            std::string fails(fits.size(), '0');
            std::optional<RankRun> run;
            for (std::size_t i = 0; i < fits.size(); ++i) {
                const auto& v = verdicts[i];
                if (!v.fits || v.capacity == 0 || fits[i].ranks[r].capacity == v.capacity)
                    continue;
                if (!run)
                    run = prepareRank(vm, job.paths[r], base, job.start);
                replay::ReplayOptions o = run->options;
                o.capacity = o.totalMemory = v.capacity;
                o.onOom = replay::OnOom::Stop;
                if (replay::Replayer(o).run(run->trace, job.specs[i]).ooms > 0)
                    fails[i] = '1';
            }
            return fails;
        },
        confirm);
    if (!group.isRoot())
        return kExitOk;
    for (std::size_t r = 0; r < failing.size(); ++r)
        for (std::size_t i = 0; i < fits.size(); ++i)
            if (failing[r][i] == '1')
                fits[i].failsAtJobCapacity.push_back(r);
    const auto names = analyze::jobRankNames(named);
    analyze::writeJobFitTable(names, fits, job.format, out, job.width);
    // As `gpumem fit`: a policy without a fit has no answer; a --max-reserved at or below --max-capacity
    // judges it (exit 3), else exit 4.
    const Gates& gates = job.gates;
    const bool gateJudges = gates.maxReserved && *gates.maxReserved <= job.fit.maxCapacity;
    std::vector<GateSubject> subjects;
    bool noFit = false;
    for (std::size_t i = 0; i < fits.size(); ++i) {
        const auto& v = verdicts[i];
        if (v.fits) {
            subjects.push_back({ fits[i].spec + " (needed by " + names[v.worst] + ")", 0, v.capacity });
            continue;
        }
        err << fitMessage("gpumem fit: " + textForTerminal(fits[i].spec) + " fits " + names[v.worst]
            + " nowhere up to --max-capacity " + formatBytes(job.fit.maxCapacity) + " (its live peak: "
            + formatBytes(fits[i].ranks[v.worst].lowerBound) + "); run gpumem fit on that rank's trace for the probes");
        if (gateJudges)
            err << fitMessage("gpumem fit: gate: " + textForTerminal(fits[i].spec) + " needs more than --max-capacity "
                + formatBytes(job.fit.maxCapacity) + ", so more than --max-reserved " + formatBytes(*gates.maxReserved));
        noFit = true;
    }
    const int gate = applyGates(gates, subjects, "fit", err);
    return gate != kExitOk || (noFit && gateJudges) ? kExitGate : noFit ? kExitNoFit : kExitOk;
}

} // namespace gpumem::cli
