// gpumem replay TRACE --policy SPEC… — what-if: the trace's requests through allocator policies, one row
// per policy; --fidelity replays with the recorded policy and compares with the recorded segment events.
#include "analyze/comparison.h"
#include "analyze/replay_report.h"
#include "analyze/trace_summary.h"
#include "analyze/whatif_report.h"
#include "cli/command.h"
#include "cli/job_whatif.h"
#include "cli/whatif_options.h"
#include "core/error.h"
#include "importers/importer_registry.h"
#include "core/message_quote.h"
#include "core/units.h"
#include "replay/colocated_replay.h"
#include "replay/fidelity.h"
#include "replay/parallel_runs.h"
#include "replay/policy_registry.h"

#include <charconv>
#include <map>

#include <algorithm>
#include <cctype>
#include <ostream>
#include <sstream>

namespace gpumem::cli {

namespace {
    std::string policyHelp()
    {
        std::string s = "Policies (SPEC = NAME[@VERSION][:OPTIONS], options in PYTORCH_CUDA_ALLOC_CONF syntax):\n";
        std::size_t width = 0;
        for (const auto& p : replay::registeredPolicies())
            width = std::max(width, p.name.size() + 2);
        const std::string indent(2 + width, ' ');
        for (const auto& p : replay::registeredPolicies()) {
            s += "  " + p.name + std::string(width - p.name.size(), ' ') + p.summary + '\n';
            if (!p.versions.empty()) {
                s += indent + "versions:";
                for (const auto& v : p.versions)
                    s += " @" + v;
                s += '\n';
            }
            std::string line = indent + "options:";
            for (const auto& o : p.options) {
                if (line.size() + o.size() > 100) {
                    s += line + '\n';
                    line = indent + " ";
                }
                line += " " + o;
            }
            s += line + '\n';
        }
        return s;
    }

    // Without --capacity and without a device size in the trace, the simulated device reports the
    // simulator's default total memory (SimulatedDevice: 80 GiB [choice]), which rmm-pool, rmm-arena,
    // tf-bfc and PyTorch's memory fraction and expandable segments size from: say so (review finding).
    void noteAssumedDeviceMemory(const Trace& trace, const replay::ReplayOptions& options, std::ostream& err)
    {
        const DeviceId dev = options.device.value_or(0);
        if (options.capacity != 0 || options.totalMemory != 0
            || (dev < trace.devices().size() && trace.devices()[dev].totalMemory != 0))
            return;
        const replay::SimulatedDevice assumed;
        const std::string label = dev < trace.devices().size() ? analyze::deviceLabel(trace.devices()[dev]) : std::to_string(dev);
        std::ostringstream note;
        note << "gpumem replay: note: the trace records no memory size for device " << textForTerminal(label) << " and no --capacity was"
            << " given: the device is taken to have " << formatBytes(assumed.totalMemory())
            << " (the simulator's default), which rmm-pool, rmm-arena, tf-bfc and pytorch's"
            << " per_process_memory_fraction and expandable segments size from; give --capacity to set it";
        err << analyze::wrapText(note.str(), 100);
    }

    // "1.5s", "250ms", "40us", "1000ns" (a bare number is seconds) → nanoseconds; UsageError otherwise.
    TimeNs parseDuration(const std::string& text, const std::string& what)
    {
        double value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        const std::string unit(end, text.data() + text.size());
        static const std::map<std::string, double> scale { { "", 1e9 }, { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 },
            { "ns", 1.0 } };
        auto it = scale.find(unit);
        if (ec != std::errc() || it == scale.end() || !(value >= 0) || value * it->second > 9e18)
            throw UsageError(what + " '" + text + "': give a duration >= 0 such as 1.5s, 250ms, 40us or 1000ns");
        return TimeNs(value * it->second + 0.5);
    }

    // The process names of --colocate: each file's name without its trace extensions (.gz, .json,
    // .pt.trace, .gmt, …; "Qwen1.5-0.5B.json.gz" is "Qwen1.5-0.5B", not "Qwen1"), name#2… for repeats.
    std::vector<std::string> processNames(const std::vector<std::string>& paths)
    {
        static const std::vector<std::string> extensions = { ".gz", ".json", ".trace", ".pt", ".gmt", ".jsonl",
            ".pickle", ".pkl", ".pb", ".xplane", ".raw", ".csv", ".log", ".sqlite", ".nsys-rep" };
        std::vector<std::string> names;
        std::map<std::string, int> seen;
        for (const auto& p : paths) {
            std::string base = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
            for (bool stripped = true; stripped;) {
                stripped = false;
                for (const auto& e : extensions)
                    if (base.size() > e.size() && base.ends_with(e)) {
                        base.resize(base.size() - e.size());
                        stripped = true;
                    }
            }
            if (base.empty())
                base = "trace";
            int n = ++seen[base];
            names.push_back(n == 1 ? base : base + "#" + std::to_string(n));
        }
        return names;
    }

    // NAME=VALUE options: the process index and the value; UsageError naming the processes otherwise.
    // Split at the last '=' [choice]: no value (BYTES, DURATION, SPEC) holds one, a file name may
    // (`a=b.jsonl` is process `a=b`: --limit a=b=1GiB). `given` holds the earlier NAME=VALUE of this
    // option per process: naming a process twice is a usage error, not "the last one wins".
    std::pair<std::size_t, std::string> byProcess(const std::string& text, const std::vector<std::string>& names,
        const std::string& option, std::vector<std::string>& given)
    {
        auto eq = text.rfind('=');
        std::string list;
        for (const auto& n : names)
            list += (list.empty() ? "" : ", ") + n;
        if (eq == std::string::npos)
            throw UsageError("--" + option + " '" + text + "': write NAME=VALUE with NAME one of: " + list);
        const std::string name = text.substr(0, eq);
        given.resize(names.size());
        for (std::size_t i = 0; i < names.size(); ++i)
            if (names[i] == name) {
                if (!given[i].empty())
                    throw UsageError("--" + option + " names process '" + name + "' twice ('" + given[i] + "' and '"
                        + text + "'); give one");
                given[i] = text;
                return { i, text.substr(eq + 1) };
            }
        throw UsageError("--" + option + " '" + text + "' names no process; the processes are: " + list);
    }

    int runColocated(
        const po::variables_map& vm, const std::vector<std::string>& paths, std::ostream& out, std::ostream& err)
    {
        const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
        const Gates gates = readGates(vm);
        if (paths.size() < 2)
            throw UsageError("--colocate needs two or more traces (one per process)");
        if (!vm.count("capacity"))
            throw UsageError("--colocate needs --capacity: the memory of the GPU the processes share, e.g. 80GiB");
        if (vm.count("outside"))
            throw UsageError("--outside with --colocate: each process's own figure (its trace's outside_allocator) is "
                             "held on the shared GPU; give the other memory as a smaller --capacity");
        const auto names = processNames(paths);
        std::vector<replay::ColocatedProcess> processes(paths.size());
        std::vector<std::string> specText(paths.size());
        std::string common = "pytorch";
        bool commonGiven = false;
        std::vector<std::string> givenPolicy, givenLimit, givenOffset;
        if (vm.count("policy"))
            for (const auto& t : vm["policy"].as<std::vector<std::string>>()) {
                // NAME=SPEC for one process; a spec itself never holds '=' (PYTORCH_CUDA_ALLOC_CONF syntax).
                if (t.find('=') != std::string::npos) {
                    auto [i, spec] = byProcess(t, names, "policy", givenPolicy);
                    specText[i] = spec;
                    continue;
                }
                if (commonGiven)
                    throw UsageError("--colocate takes one --policy SPEC for every process ('" + common + "' and '" + t
                        + "'); write NAME=SPEC for one process");
                common = t;
                commonGiven = true;
            }
        for (std::size_t i = 0; i < paths.size(); ++i) {
            processes[i].name = names[i];
            processes[i].spec = checkedPolicySpecs({ specText[i].empty() ? common : specText[i] }).front();
        }
        if (vm.count("limit"))
            for (const auto& t : vm["limit"].as<std::vector<std::string>>()) {
                auto [i, bytes] = byProcess(t, names, "limit", givenLimit);
                processes[i].limit = parseBytes(bytes, "--limit " + names[i]);
                if (processes[i].limit == 0)
                    throw UsageError(
                        "--limit " + t + ": a limit of 0 bytes leaves the process nothing; omit it for none");
            }
        if (vm.count("offset"))
            for (const auto& t : vm["offset"].as<std::vector<std::string>>()) {
                auto [i, duration] = byProcess(t, names, "offset", givenOffset);
                processes[i].offset = parseDuration(duration, "--offset " + names[i]);
            }
        replay::ColocatedOptions options;
        options.capacity = parseBytes(vm["capacity"].as<std::string>(), "--capacity");
        if (options.capacity == 0)
            throw UsageError("--capacity 0 with --colocate: give the memory of the shared GPU, e.g. 80GiB");
        // Stop is the default here: the question is which process fails first.
        options.onOom = !vm.count("on-oom") || checkedChoice(vm, "on-oom", { "stop", "skip" }) == "stop"
            ? replay::OnOom::Stop
            : replay::OnOom::Skip;

        std::vector<Trace> traces(paths.size());
        for (std::size_t i = 0; i < paths.size(); ++i) {
            traces[i] = loadReplayableTrace(paths[i]);
            processes[i].trace = &traces[i];
            // Memory from before a profiler trace is live at the process's start (review finding: left
            // out, two 8 GiB processes "fit" in 12 GiB).
            processes[i].openingAllocated = replay::openingAllocated(
                traces[i], replay::defaultReplayDevice(traces[i]).value_or(0));
        }
        const auto result = replay::ColocatedReplay(options).run(processes);
        analyze::writeColocatedReport(result, format, out);
        // The allocated bytes from before a trace are held; the cache the allocator had reserved on top of
        // them is unknown. Say so where the trace recorded more reserved memory than the replay needed.
        // (A run that failed needs no such note: more memory would fail it sooner.)
        for (std::size_t i = 0; i < processes.size() && !result.firstFailure; ++i) {
            const auto& p = result.processes[i];
            if (p.openingAllocated == 0)
                continue;
            for (const auto& d : analyze::summarize(traces[i]).devices)
                if (d.device == p.device)
                    for (const auto& [counter, peak] : d.recordedPeaks) {
                        std::string name = counter;
                        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
                        if (name.find("reserved") != std::string::npos && peak.bytes > p.peakReserved.bytes)
                            err << analyze::wrapText("note: " + textForTerminal(p.name) + " recorded "
                                    + formatBytes(peak.bytes) + " reserved (" + textForTerminal(counter)
                                    + "), more than the " + formatBytes(p.peakReserved.bytes)
                                    + " its replay reserved: the " + formatBytes(p.openingAllocated)
                                    + " allocated before its trace is held, the cache its allocator reserved then is "
                                      "not known, so the combined figures may undercount (≥)",
                                100);
                    }
        }
        std::vector<GateSubject> subjects;
        for (const auto& p : result.processes)
            subjects.push_back({ "process " + p.name, p.ooms, 0 });
        subjects.push_back({ "the colocated run (all processes)", 0, result.combinedPeakReserved });
        return applyGates(gates, subjects, "replay", err);
    }

    class ReplayCommand final : public Command {
    public:
        std::string_view name() const override { return "replay"; }
        std::string_view summary() const override
        {
            return "what-if: replay a trace under allocator policies (peak reserved, device calls, OOMs)";
        }
        std::string_view synopsis() const override
        {
            return "replay [--policy SPEC]... [--capacity BYTES] [--on-oom stop|skip] [--format text|json|csv]\n"
                   "              [--fail-if-oom] [--max-reserved BYTES] TRACE\n"
                   "       gpumem replay --colocate --capacity BYTES [--policy [NAME=]SPEC]... [--limit "
                   "NAME=BYTES]...\n"
                   "              [--offset NAME=DURATION]... [--on-oom stop|skip] [--format text|json|csv] TRACE "
                   "TRACE...\n"
                   "       gpumem replay --fidelity [--policy SPEC] [--format text|json] TRACE\n"
                   "       gpumem replay [--policy SPEC]... [options] TRACE TRACE... | DIR   (a job: one trace per rank)";
        }
        std::string_view details() const override
        {
            static const std::string text = policyHelp()
                + "\n'pytorch' without options uses the allocator settings the trace recorded (a snapshot's\n"
                  "allocator_settings). Examples:\n"
                  "  gpumem replay run.pickle --policy pytorch --policy pytorch:expandable_segments:True --policy "
                  "ideal\n"
                  "  gpumem replay run.pickle --policy pytorch:max_split_size_mb:128 --capacity 40GiB --on-oom stop\n"
                  "  gpumem replay --fidelity run.pickle\n"
                  "  gpumem replay run.json.gz --policy pytorch --policy compaction:pytorch --policy optimal --policy "
                  "ideal\n"
                  "compaction[every=N,at=GLOB,order=address|size]:SPEC compacts SPEC's live blocks at every annotation\n"
                  "boundary matching GLOB (default ProfilerStep*) and/or every N request events, and reports the bytes\n"
                  "moved and the peak saved against SPEC alone. optimal plans the whole trace offline (greedy by size).\n"
                  "--start recorded (the default) starts every row with the memory the trace shows from before its\n"
                  "window (a snapshot's rebuilt live blocks, laid out by each policy; a profiler trace's opening Total\n"
                  "Allocated, held as opaque blocks, which makes reserved a lower bound, marked >=); --start empty\n"
                  "starts every row on an empty device. A `recorded` row gives the run's own peak reserved.\n"
                  "--empty-cache drop leaves out the empty_cache calls the trace records (kept by default);\n"
                  "--empty-cache-at step-end|annotation GLOB|every N adds them (after every step annotation, after\n"
                  "every annotation matching GLOB, before every N-th request event); --merge-pools replays the\n"
                  "private pools (CUDA graphs, torch.cuda.MemPool) as if they were the default pool.\n"
                  "--on-oom stop ends a replay at its first failed request and reports it (time, request, reserved "
                  "and\n"
                  "free then); skip (the default, except with --colocate) counts it, drops that allocation and its\n"
                  "free, and goes on.\n"
                  "--fidelity replays with the recorded policy from the reconstructed initial state and compares the\n"
                  "simulated segment events with the recorded ones (matched/total, first mismatch, peak reserved "
                  "error;\n"
                  "for a snapshot also the final segments block for block; for a profiler trace the Total Reserved "
                  "curve).\n"
                  "Run it on the snapshot file itself: a .gmt/.jsonl converted from it lacks the recorded blocks.\n"
                  "\n"
                  "Gates (for CI): --fail-if-oom exits 3 when any policy had a failed request; --max-reserved BYTES\n"
                  "exits 3 when any policy's peak reserved is above BYTES (with --colocate: any process failed; the\n"
                  "combined peak above BYTES). The table is printed first, the violations go to stderr.\n"
                  "\n"
                  "Several traces without --colocate (or a DIR of them) are the ranks of one job, each on its own GPU:\n"
                  "a policy fits the job only if no rank has a failed request; one row per policy gives the ranks\n"
                  "with an OOM, the worst rank (the most failed requests, then the highest peak reserved), its peak\n"
                  "reserved and the median rank's. Under mpirun or srun the ranks are spread over the MPI processes\n"
                  "and rank 0 prints the same table (docs/mpi.md).\n"
                  "\n"
                  "--colocate replays several processes' traces on one GPU of --capacity bytes, each with its own\n"
                  "allocator. A process is named after its file without its trace extensions (.json.gz, .gmt, …;\n"
                  "name#2 for a repeat); NAME=VALUE options split at the last '=', so a.b=c.json is process a.b=c.\n"
                  "Memory allocated before a profiler trace began (its opening Total Allocated) is held live from\n"
                  "that process's start, as one block.\n"
                  "Each trace starts at its own first event (time 0), plus --offset NAME=DURATION (e.g. b=1.5s, "
                  "250ms).\n"
                  "--policy SPEC applies to every process, --policy NAME=SPEC to one (default pytorch);\n"
                  "--limit NAME=BYTES caps one process (an MPS memory limit or a MIG slice) below the shared "
                  "capacity.\n"
                  "It reports each process's peak reserved, the combined peak, and which process failed first, when\n"
                  "and with which request (--on-oom stop, the default with --colocate, ends the run there).\n"
                  "  gpumem replay a.gmt b.gmt --colocate --capacity 80GiB --limit a=40GiB --policy "
                  "b=pytorch:expandable_segments:True";
            return text;
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()(
                "policy", po::value<std::vector<std::string>>(), "allocator policy SPEC (repeatable; default pytorch)")(
                "capacity", po::value<std::string>(), "device capacity, e.g. 80GiB (default unlimited)")(
                "on-oom", po::value<std::string>(),
                "stop or skip at a failed request (default: skip; with --colocate: stop)")(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "device", po::value<std::string>(), kDeviceOptionHelp)(
                "fidelity", "compare a replay with the recorded policy against the recorded segment events")(
                "colocate", "replay several traces as processes sharing one GPU")("limit",
                po::value<std::vector<std::string>>(), "with --colocate: NAME=BYTES, one process's own limit")("offset",
                po::value<std::vector<std::string>>(), "with --colocate: NAME=DURATION, when a process starts");
            o.add_options()("fail-if-oom", po::bool_switch(),
                "exit 3 when a policy (with --colocate: any process) has a failed request (OOM)")("max-reserved",
                po::value<std::string>(),
                "exit 3 when a policy's peak reserved (with --colocate: the combined peak of all processes) is "
                "above BYTES, e.g. 40GiB");
            addOutsideOption(o);
            addJobsOption(o);
            addStartOptions(o);
            addCacheOptions(o);
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
            const bool fidelity = vm.count("fidelity") > 0;
            const auto paths = vm["trace"].as<std::vector<std::string>>();
            if (vm.count("colocate")) {
                if (fidelity)
                    throw UsageError("--fidelity and --colocate do not go together");
                return runColocated(vm, paths, out, err);
            }
            for (const char* option : { "limit", "offset" })
                if (vm.count(option))
                    throw UsageError(std::string("--") + option + " is for --colocate");
            const bool job = isJobArguments(paths); // one trace per rank (cli/job_whatif.h)
            if (job && fidelity)
                throw UsageError("--fidelity takes one trace (" + std::to_string(paths.size()) + " given)");
            std::string format = checkedChoice(vm, "format",
                fidelity ? std::vector<std::string> { "text", "json" }
                         : std::vector<std::string> { "text", "json", "csv" });
            // skip is the default of a single trace's replays (stop: the default with --colocate).
            std::string onOom = vm.count("on-oom") ? checkedChoice(vm, "on-oom", { "stop", "skip" }) : "skip";
            std::vector<std::string> texts = vm.count("policy") ? vm["policy"].as<std::vector<std::string>>()
                                                                : std::vector<std::string> { "pytorch" };
            // The recorded policy of an XLA/TensorFlow profile is BFC, not PyTorch's (review finding).
            if (fidelity && !vm.count("policy"))
                if (const Importer* importer = detectFormat(paths.front()); importer && importer->name() == "xplane")
                    texts = { "tf-bfc" };
            // Bad specs are usage errors (exit 2) before any work.
            const std::vector<replay::PolicySpec> specs = checkedPolicySpecs(texts);
            const Gates gates = readGates(vm);
            const unsigned jobs = readJobs(vm);
            options.capacity = readCapacity(vm);
            options.outsideBytes = readOutside(vm);
            options.onOom = onOom == "stop" ? replay::OnOom::Stop : replay::OnOom::Skip;
            if (job) {
                JobWhatIf w = readJobWhatIf(vm, paths, specs, gates, format);
                w.options = options;
                return runJobReplay(vm, w, out, err);
            }
            const std::string& path = paths.front();
            options.source = path;
            if (fidelity) {
                for (const char* option : { "empty-cache", "empty-cache-at" })
                    if (vm.count(option))
                        throw UsageError(std::string("--") + option + " changes a what-if replay; --fidelity replays what the trace recorded");
                if (vm.count("merge-pools") && vm["merge-pools"].as<bool>())
                    throw UsageError("--merge-pools changes a what-if replay; --fidelity replays what the trace recorded");
                if (specs.size() > 1)
                    throw UsageError("--fidelity takes at most one --policy (the recorded one by default)");
                if (gates.failIfOom || gates.maxReserved)
                    throw UsageError("--fail-if-oom and --max-reserved gate what-if replays, not --fidelity");
                if (vm.count("device")) // a label needs the trace's device list
                    options.device = deviceOption(vm, loadTrace(path), path);
                auto report = replay::checkFidelityFile(path, specs.front(), options);
                analyze::writeFidelityReport(report, path, format, report.traceStart, out);
                return kExitOk;
            }
            // A .gmt is replayed chunk by chunk (docs/streaming.md "Replay"): the trace is never held whole.
            // Any other format is read whole and replayed as one chunk, by the same engine.
            // The .gmt's chunks are checked by the first replay's pass (withReplayInput): nothing is written before.
            return withReplayInput(path, [&, base = options](const ReplayInput& input) -> int {
                options = base; // a retry starts from the options as given
                const replay::StartState start = prepareReplays(vm, input, path, options);
                std::vector<replay::ReplayResult> results(specs.size());
                input.forEachReplay(specs.size(), jobs,
                    [&](const MemoryEventSource& on, std::size_t i) { results[i] = replay::Replayer(options).run(on, specs[i]); });
                // The replays are done (no retry can follow): a damaged trace is said to be one, as analyze does.
                noteDamagedTrace(name(), path, input.tables().importStats(), err);
                const DeviceId device = options.device.value_or(0);
                auto context = input.context(device, start);
                context.width = readTableWidth(vm);
                context.capacity = options.capacity;
                analyze::writeReplayTable(results, format, input.traceStart(), out, context);
                warnAboutMemoryBeforeTheWindow(context.before.openingAllocated, err, start, context.width);
                noteAssumedDeviceMemory(input.tables(), options, err);
                // Review defect M6 (2026-12-02): a schedule that matches no point of the trace added nothing, silently.
                if (options.addEmptyCache.any()
                    && std::all_of(results.begin(), results.end(), [](const replay::ReplayResult& r) { return r.emptyCacheAdded == 0; }))
                    err << analyze::wrapText("note: --empty-cache-at '" + textForTerminal(options.addEmptyCache.text())
                            + "' matched no point of this trace, so no empty_cache call was added"
                            + (options.addEmptyCache.stepEnd ? " (step-end needs step annotations such as ProfilerStep#N)"
                                                             : options.addEmptyCache.annotationGlob.empty()
                                                                 ? std::string()
                                                                 : " (no annotation name matches the pattern)"),
                        context.width ? context.width : 100);
                std::vector<GateSubject> subjects;
                for (const auto& r : results)
                    subjects.push_back({ r.policy, r.ooms, r.peakReserved.bytes });
                return applyGates(gates, subjects, name(), err);
            });
        }
    };
} // namespace

std::unique_ptr<Command> makeReplayCommand() { return std::make_unique<ReplayCommand>(); }

} // namespace gpumem::cli
