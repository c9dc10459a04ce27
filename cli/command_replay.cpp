// gpumem replay TRACE --policy SPEC… — what-if: the trace's requests through allocator policies, one row
// per policy; --fidelity replays with the recorded policy and compares with the recorded segment events.
#include "analyze/replay_report.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/importer.h"
#include "core/units.h"
#include "replay/fidelity.h"
#include "replay/policy_registry.h"

#include <ostream>

namespace gpumem::cli {

namespace {
    // A profiler trace starts after the model was loaded: its recorded "Total Allocated" is already
    // above zero at the first sample, and those bytes are not in the trace, so a replay undercounts.
    // Say so on stderr instead of letting the table look like the whole story.
    void warnAboutMemoryBeforeTheWindow(const Trace& trace, DeviceId device, std::ostream& err)
    {
        if (Bytes before = replay::openingAllocated(trace, device); before > 0)
            err << "note: " << formatBytes(before)
                << " was already allocated when this profiler trace began and is not in it, so these replays "
                   "undercount; `gpumem replay --fidelity` replays from a warm start that holds it\n";
    }
} // namespace

namespace {
    std::string policyHelp()
    {
        std::string s = "Policies (SPEC = NAME[@VERSION][:OPTIONS], options in PYTORCH_CUDA_ALLOC_CONF syntax):\n";
        for (const auto& p : replay::registeredPolicies()) {
            s += "  " + p.name + std::string(p.name.size() < 10 ? 10 - p.name.size() : 1, ' ') + p.summary + '\n';
            if (!p.versions.empty()) {
                s += "            versions:";
                for (const auto& v : p.versions)
                    s += " @" + v;
                s += '\n';
            }
            std::string line = "            options:";
            for (const auto& o : p.options) {
                if (line.size() + o.size() > 100) {
                    s += line + '\n';
                    line = "             ";
                }
                line += " " + o;
            }
            s += line + '\n';
        }
        return s;
    }

    TimeNs traceStart(const Trace& t) { return t.memory().count() ? t.memory().time.front() : 0; }

    class ReplayCommand final : public Command {
    public:
        std::string_view name() const override { return "replay"; }
        std::string_view summary() const override
        {
            return "what-if: replay a trace through allocator policies (peak reserved, waste, device calls, OOMs)";
        }
        std::string_view synopsis() const override
        {
            return "replay [--policy SPEC]... [--capacity BYTES] [--on-oom stop|skip] [--format text|json|csv] TRACE\n"
                   "       gpumem replay --fidelity [--policy SPEC] [--format text|json] TRACE";
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
                  "--on-oom stop ends a replay at its first failed request and reports it (time, request, reserved "
                  "and\n"
                  "free then); skip (default) counts it, drops that allocation and its free, and goes on.\n"
                  "--fidelity replays with the recorded policy from the reconstructed initial state and compares the\n"
                  "simulated segment events with the recorded ones (matched/total, first mismatch, peak reserved "
                  "error;\n"
                  "for a snapshot also the final segments block for block; for a profiler trace the Total Reserved "
                  "curve).";
            return text;
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()(
                "policy", po::value<std::vector<std::string>>(), "allocator policy SPEC (repeatable; default pytorch)")(
                "capacity", po::value<std::string>(), "device capacity, e.g. 80GiB (default unlimited)")(
                "on-oom", po::value<std::string>()->default_value("skip"), "stop or skip at a failed request")(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "fidelity", "compare a replay with the recorded policy against the recorded segment events")(
                "trace", po::value<std::string>()->required(), "trace file (positional)");
            p.add("trace", 1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const bool fidelity = vm.count("fidelity") > 0;
            std::string format = checkedChoice(vm, "format",
                fidelity ? std::vector<std::string> { "text", "json" }
                         : std::vector<std::string> { "text", "json", "csv" });
            std::string onOom = checkedChoice(vm, "on-oom", { "stop", "skip" });
            std::vector<std::string> texts = vm.count("policy") ? vm["policy"].as<std::vector<std::string>>()
                                                                : std::vector<std::string> { "pytorch" };
            std::vector<replay::PolicySpec> specs;
            for (const auto& t : texts) {
                specs.push_back(replay::parsePolicySpec(t));
                replay::validatePolicySpec(specs.back()); // bad specs are usage errors (exit 2) before any work
            }
            replay::ReplayOptions options;
            if (vm.count("capacity"))
                options.capacity = parseBytes(vm["capacity"].as<std::string>(), "--capacity");
            options.onOom = onOom == "stop" ? replay::OnOom::Stop : replay::OnOom::Skip;
            const std::string path = vm["trace"].as<std::string>();
            if (fidelity) {
                if (specs.size() > 1)
                    throw UsageError("--fidelity takes at most one --policy (the recorded one by default)");
                auto report = replay::checkFidelityFile(path, specs.front(), options);
                analyze::writeFidelityReport(report, path, format, report.traceStart, out);
                return kExitOk;
            }
            Trace trace = loadTrace(path);
            if (trace.memory().count() == 0)
                throw Error(path + " has no memory events to replay (gpumem info shows what it holds)");
            std::vector<replay::ReplayResult> results;
            for (const auto& s : specs)
                results.push_back(replay::Replayer(options).run(trace, s));
            analyze::writeReplayTable(results, format, traceStart(trace), out);
            warnAboutMemoryBeforeTheWindow(trace, results.empty() ? 0 : results.front().device, err);
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeReplayCommand() { return std::make_unique<ReplayCommand>(); }

} // namespace gpumem::cli
