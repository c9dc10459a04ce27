// gpumem analyze TRACE — memory summary (torch.cuda.memory_summary() layout), fragmentation, steps and
// leaks, and what was live at the peak grouped by module, category, site, size class and stream.
#include "analyze/analysis_report.h"
#include "analyze/diagnosis.h"
#include "analyze/peak_breakdown.h"
#include "analyze/replay_report.h"
#include "analyze/trace_summary.h"
#include "replay/fidelity.h"
#include "cli/command.h"
#include "core/error.h"
#include "importers/importer_registry.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <ostream>

namespace gpumem::cli {

// Shared by analyze, diff and report: --at values → InstantSpecs, --by values → GroupBys.
// A time outside the memory events is refused rather than snapped to the nearest event.
std::vector<analyze::InstantSpec> instantSpecs(const std::vector<std::string>& at, const Trace& trace)
{
    const auto& time = trace.memory().time;
    const TimeNs first = time.empty() ? 0 : time.front(), last = time.empty() ? 0 : time.back();
    const TimeNs origin = analyze::traceSpan(trace).start; // offsets count from the trace start, as info's
    std::vector<analyze::InstantSpec> specs;
    for (const auto& a : at) {
        specs.push_back(analyze::InstantSpec::parse(a, origin));
        const auto& s = specs.back();
        if (s.kind == analyze::InstantSpec::Kind::Time && !time.empty() && (s.time < first || s.time > last))
            throw UsageError("--at '" + a + "' is outside the trace's memory events, which span " + formatOffsetBetween(origin, first)
                + " to " + formatOffsetBetween(origin, last) + " from the trace start (@" + std::to_string(first) + " to @"
                + std::to_string(last) + ")");
    }
    return specs;
}

void checkInstantsOnDevice(
    const analyze::Analysis& analysis, const std::vector<std::string>& at, const std::vector<analyze::InstantSpec>& specs)
{
    // The analyzed device may start later than the trace's first memory event (OWLv2: cuda:0 after
    // the cpu): a time before its first event has no state to break down; say so, not nothing.
    // (specs holds at[k] parsed from the trace start, which is analysis.origin.)
    // A reserved peak needs a reserved series (segment events or a recorded reserved counter); without
    // one, --at reserved-peak has nothing to break down: say so (exit 2), not an empty section.
    const auto* device = analysis.timeline.device(analysis.device);
    for (std::size_t k = 0; k < at.size() && k < specs.size(); ++k)
        if (specs[k].kind == analyze::InstantSpec::Kind::PeakReserved
            && (!device || !device->has(analyze::SeriesKind::Reserved) || !analyze::resolveInstant(*device, specs[k])))
            throw UsageError("--at '" + at[k] + "': the trace has no reserved peak"
                + (device ? " on " + device->label : std::string()) + " (no segment events or reserved counter); give --at "
                + "peak or a time");
    if (const auto* dev = device; dev && dev->size())
        for (std::size_t k = 0; k < at.size() && k < specs.size(); ++k)
            if (const auto& spec = specs[k]; spec.kind == analyze::InstantSpec::Kind::Time && spec.time < dev->time.front())
                throw UsageError("--at '" + at[k] + "' is before the first memory event of " + dev->label + ", at "
                    + formatOffsetBetween(analysis.origin, dev->time.front()) + " from the trace start (@"
                    + std::to_string(dev->time.front()) + "); give a later time or --device");
}

std::vector<analyze::GroupBy> groupBys(const po::variables_map& vm)
{
    if (!vm.count("by"))
        return analyze::ReportOptions {}.groups;
    std::vector<analyze::GroupBy> groups;
    for (const auto& b : vm["by"].as<std::vector<std::string>>()) {
        auto g = analyze::groupByFromString(b);
        if (!g)
            throw UsageError("--by '" + b + "' is not one of: module, category, site, size, stream");
        groups.push_back(*g);
    }
    return groups;
}

std::optional<DeviceId> deviceOption(const po::variables_map& vm, const Trace& trace, std::string_view path)
{
    if (!vm.count("device"))
        return std::nullopt;
    const std::string text = vm["device"].as<std::string>();
    std::string labels;
    for (std::size_t i = 0; i < trace.devices().size(); ++i)
        labels += (i ? ", " : "") + analyze::deviceLabel(trace.devices()[i]);
    // The one refusal of every command (analyze, diff, report, replay, fit, sweep): what the trace has.
    auto notADevice = [&] {
        return UsageError("--device '" + text + "' is not a device of " + std::string(path)
            + (labels.empty() ? std::string(", which has no devices") : "; its devices are " + labels)
            + " (a label, or a position 0, 1, … in 'gpumem info')");
    };
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
        // A bare number is the position in `gpumem info`'s list (brief esc item 5: refused here, once).
        if (text.size() > 5 || std::stoul(text) >= trace.devices().size())
            throw notADevice();
        return static_cast<DeviceId>(std::stoul(text));
    }
    std::optional<DeviceId> found;
    for (std::size_t i = 0; i < trace.devices().size(); ++i)
        if (analyze::deviceLabel(trace.devices()[i]) == text) {
            if (found)
                throw UsageError("--device " + text + " names devices " + std::to_string(*found) + " and "
                    + std::to_string(i) + " of " + std::string(path) + ": give the position instead");
            found = static_cast<DeviceId>(i);
        }
    if (!found)
        throw notADevice();
    return found;
}

std::size_t topOption(const po::variables_map& vm)
{
    const long long n = vm["top"].as<long long>();
    if (n < 0)
        throw UsageError("--top " + std::to_string(n) + " is not a number of rows (0, 1, 2, …)");
    return static_cast<std::size_t>(n);
}

namespace {
    class AnalyzeCommand final : public Command {
    public:
        std::string_view name() const override { return "analyze"; }
        std::string_view summary() const override { return "memory summary, fragmentation, steps, leaks, and what was live at the peak"; }
        std::string_view synopsis() const override
        {
            return "analyze [--at peak|reserved-peak|TIME]... [--by module|category|site|size|stream]... [--top N]\n"
                   "               [--device D] [--format text|json|csv] TRACE";
        }
        std::string_view details() const override
        {
            return "--at may be given several times; TIME is after the trace start (1.5s, 250ms, 40us, 1200ns) or\n"
                   "@<absolute ns>. Default: the allocated peak and, when a reserved series exists, the reserved peak.\n"
                   "--by limits the groupings (default: all five). Categories are the recorded ones where the trace\n"
                   "has them, else inferred from lifetimes and step phases. Definitions: docs/analysis.md.";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("at", po::value<std::vector<std::string>>(), "instant(s) to break down: peak, reserved-peak or TIME")(
                "by", po::value<std::vector<std::string>>(), "grouping(s): module, category, site, size, stream")(
                "top", po::value<long long>()->default_value(10), "rows per grouping")(
                "device", po::value<std::string>(), kDeviceOptionHelp)(
                "format", po::value<std::string>()->default_value("text"), "output: text, json or csv")(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "details", po::bool_switch(), "every fragmentation definition, not only the headline (JSON has them all)")(
                "trace", po::value<std::string>()->required(), "trace file (positional)");
            p.add("trace", 1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const std::string format = checkedChoice(vm, "format", { "text", "json", "csv" });
            analyze::ReportOptions report;
            report.groups = groupBys(vm);
            report.top = topOption(vm);
            report.details = vm.count("details") && vm["details"].as<bool>();
            const std::string path = vm["trace"].as<std::string>();
            LoadOptions load;
            load.strict = vm.count("strict") > 0;
            Trace trace = loadTrace(path, load);
            analyze::AnalysisOptions options;
            options.device = deviceOption(vm, trace, path);
            const auto at = vm.count("at") ? vm["at"].as<std::vector<std::string>>() : std::vector<std::string> {};
            if (!at.empty())
                options.instants = instantSpecs(at, trace);
            auto analysis = analyze::analyzeTrace(trace, options);
            checkInstantsOnDevice(analysis, at, options.instants);
            // A profiler trace starts after the model was loaded: say how much the breakdowns cannot see.
            if (!analysis.empty)
                if (auto note = analyze::memoryBeforeTheTraceNote(analysis.fragmentation.openingAllocated))
                    err << analyze::wrapText("note: " + *note
                            + ": the breakdowns cover what was allocated inside the trace; the lower bound holds it "
                              "from the start, as the recorded counters do",
                        100);
            if (format == "json")
                out << analyze::analysisToJson(trace, analysis, path, report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
            else if (format == "csv")
                analyze::writeAnalysisCsv(analysis, path, report, out);
            else {
                // The verdict of `gpumem explain` first (issue 15), then the summary.
                if (auto verdict = analyze::verdictFor(trace, analysis)) {
                    analyze::Diagnosis d;
                    d.verdict = *verdict;
                    out << analyze::verdictLines(d) << '\n';
                }
                analyze::writeAnalysisText(trace, analysis, path, report, out);
            }
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeAnalyzeCommand() { return std::make_unique<AnalyzeCommand>(); }

} // namespace gpumem::cli
