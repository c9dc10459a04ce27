// gpumem report TRACE… -o report.html — one self-contained HTML file per run, for CI artifacts and bug reports.
#include "analyze/bounded_analysis.h"
#include "analyze/diagnosis.h"
#include "analyze/html_report.h"
#include "analyze/job_view.h"
#include "cli/command.h"
#include "cli/output_file.h"
#include "analyze/comparison.h"
#include "cli/whatif_options.h"
#include "replay/policy_registry.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/message_quote.h"
#include "importers/importer_registry.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
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
                   "replayed like `gpumem replay --policy SPEC` (peak reserved, device calls, OOMs, overhead over max live bytes).\n"
                   "Traces that each name a different rank (RANK metadata, distributedInfo, rank<N> in the name; gpumem ranks)\n"
                   "open with a ranks section: which rank peaks and why; --ranks adds it for any traces, numbered in order.\n"
                   "An existing output file is replaced unless it is one of the traces or write-protected (then nothing is written).";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("output,o", po::value<std::string>()->required(), "the HTML file to write")(
                "policy", po::value<std::vector<std::string>>(), "allocator policy to compare (PolicySpec string)")(
                "top", po::value<std::string>()->default_value("10"), "rows per breakdown table (1 or more)")(
                "title", po::value<std::string>()->default_value("gpumem report"), "page title")(
                "device", po::value<std::string>(), kDeviceOptionHelp)(
                "strict", "treat import anomalies of warning or error severity as failures")(
                "ranks", "open with the ranks section even when the traces name no rank (ranks are then the order given)")(
                "start", po::value<std::string>(),
                "what every policy row starts from: recorded (default: the memory from before the trace) or empty")(
                "trace", po::value<std::vector<std::string>>()->required(), "trace files (positional)");
            p.add("trace", -1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            LoadOptions load;
            load.strict = vm.count("strict") > 0;
            const auto paths = vm["trace"].as<std::vector<std::string>>();
            const std::size_t top = topOption(vm);
            const replay::StartState start = readStart(vm);
            if (top == 0) // every breakdown table would be a header alone (review finding)
                throw UsageError("--top 0 leaves the breakdown tables empty; give the rows per table, 1 or more");
            const std::string outPath = vm["output"].as<std::string>();
            OutputFile output(outPath, paths); // checks the destination before the work
            analyze::HtmlOptions options;
            // A .gmt is analysed in passes (analyze/bounded_analysis.h), its charts bucketed in the first: only its
            // skeleton is held. Up to the budget its verdict is explain's, diagnosed in passes too (verdictFor over
            // the source), so the page is the whole trace's byte for byte; over it, the verdict says the remedies
            // were not replayed. The ranks section and the policy rows need the events, so they read it whole
            // (docs/streaming.md).
            const std::uint64_t budget = inMemoryEventBudget();
            const bool mayStream = !load.strict && !vm.count("ranks") && !vm.count("policy") && paths.size() == 1 && !replaysInMemory();
            std::vector<Trace> traces;
            std::vector<analyze::Analysis> analyses;
            std::vector<std::unique_ptr<MemoryEventSource>> sources(paths.size());
            std::vector<std::optional<analyze::ChartBuckets>> charts(paths.size());
            std::vector<std::string> verdicts(paths.size());
            traces.reserve(paths.size());
            analyses.reserve(paths.size());
            for (std::size_t i = 0; i < paths.size(); ++i) {
                const auto& path = paths[i];
                if (mayStream && isGmtFile(path)) {
                    // Opened without its opening pass (the chunks' checks run in the analysis's first pass, as for
                    // analyze): a chunk that fails a check starts this trace over with the file opened checked
                    // (nothing of it is kept before the analysis ends). The verdict's candidate replays open the
                    // file again with the same checks.
                    std::unique_ptr<MemoryEventSource> source;
                    std::optional<analyze::BoundedAnalysis> analysed;
                    auto attempt = [&](GmtChecks checks) {
                        analysed.reset();
                        source.reset();
                        verdicts[i].clear();
                        source = openGmtSource(path, load, checks);
                        if (const auto span = source->firstAndLastTime()) {
                            analyze::AnalysisOptions o;
                            o.device = deviceOption(vm, source->skeleton(), path);
                            const analyze::ChartRequest request { span->first, analyze::reportChartEnd(span->first, span->second),
                                options.buckets };
                            analysed = analyze::analyzeSource(*source, o, &request);
                            if (analysed->needsTrace.empty() && source->eventCount() <= budget) // (a check may fail here too)
                                verdicts[i] = analyze::verdictFor(*source, analysed->analysis, [&path, &load, checks] {
                                    return openGmtSource(path, load, checks);
                                }).value_or("");
                        }
                    };
                    // withDeferredChecks's rule, written out because the page keeps the source (its skeleton).
                    try {
                        attempt(GmtChecks::InFirstPass);
                    } catch (const DeferredCheckFailed&) {
                        attempt(GmtChecks::AtOpen);
                    } catch (const FormatError&) {
                        attempt(GmtChecks::AtOpen);
                    }
                    if (analysed) {
                        auto& bounded = *analysed;
                        if (bounded.needsTrace.empty()) {
                            if (source->eventCount() > budget && !bounded.analysis.empty)
                                verdicts[i] = streamedVerdict(bounded, source->skeleton(), source->eventCount());
                            noteDamagedTrace(name(), path, source->skeleton().importStats(), err);
                            traces.push_back(Trace {}); // the skeleton is the source's
                            analyses.push_back(std::move(bounded.analysis));
                            charts[i] = std::move(bounded.charts);
                            sources[i] = std::move(source);
                            continue;
                        }
                        if (source->eventCount() > budget)
                            err << analyze::wrapText("note: " + textForTerminal(path) + " is read whole (" + std::to_string(source->eventCount())
                                    + " events): the analysis needs the trace in memory for " + bounded.needsTrace,
                                100);
                    }
                }
                traces.push_back(loadTrace(path, load));
                noteDamagedTrace(name(), path, traces.back().importStats(), err); // the page covers what could be read
                analyze::AnalysisOptions o;
                o.device = deviceOption(vm, traces.back(), path);
                analyses.push_back(analyze::analyzeTrace(traces.back(), o));
                verdicts[i] = analyze::verdictFor(traces.back(), analyses.back()).value_or(""); // explain's verdict (issue 15)
            }
            std::vector<analyze::HtmlReportInput> inputs;
            for (std::size_t i = 0; i < paths.size(); ++i)
                inputs.push_back({ paths[i], sources[i] ? &sources[i]->skeleton() : &traces[i], &analyses[i], charts[i] ? &*charts[i] : nullptr });
            options.verdicts = verdicts;
            // Traces that each name a different rank are one job: the ranks section opens the report (gpumem ranks).
            std::optional<analyze::JobView> job;
            std::set<std::int64_t> named;
            for (std::size_t i = 0; i < paths.size(); ++i)
                if (auto r = analyze::namedRankOf(traces[i], paths[i]))
                    named.insert(r->first);
            if (vm.count("ranks") || (paths.size() >= 2 && named.size() == paths.size())) {
                std::vector<analyze::RankSummary> summaries;
                for (std::size_t i = 0; i < paths.size(); ++i) {
                    analyze::RankSummaryOptions rankOptions;
                    rankOptions.device = analyses[i].device;
                    summaries.push_back(analyze::summarizeRank(traces[i], paths[i], i, rankOptions));
                }
                job = analyze::buildJobView(std::move(summaries));
                options.jobView = &*job;
            }
            options.title = vm["title"].as<std::string>();
            options.top = top;
            std::vector<analyze::PolicyRow> policies;
            if (vm.count("policy")) {
                // A bad spec is a usage error before any work.
                const std::vector<replay::PolicySpec> specs = checkedPolicySpecs(vm["policy"].as<std::vector<std::string>>());
                for (std::size_t i = 0; i < paths.size(); ++i) {
                    if (analyses[i].countersOnly) { // as replay refuses it (whatif_options.cpp, loadReplayableTrace)
                        options.policySkipped.push_back(paths[i] + ": no policy rows: it records memory counters only (no "
                                                                   "addresses: a PyTorch <= 1.9 profiler trace), so there is nothing to replay.");
                        continue;
                    }
                    replay::ReplayOptions replayOptions;
                    replayOptions.device = analyses[i].device;
                    replayOptions.source = paths[i];
                    // Every row from the same start, measured and ranked as replay does (comparison.h).
                    replay::applyStartState(replayOptions, traces[i], start);
                    const auto context = analyze::comparisonContext(traces[i], analyses[i].device, start);
                    std::vector<replay::ReplayResult> results;
                    for (const auto& spec : specs)
                        results.push_back(replay::Replayer(replayOptions).run(traces[i], spec));
                    std::vector<const replay::ReplayResult*> pointers;
                    for (const auto& r : results)
                        pointers.push_back(&r);
                    const auto order = analyze::rankReplays(pointers);
                    Bytes bestReserved = results.empty() ? 0 : results[order.front()].peakReserved.bytes;
                    for (std::size_t k = 0; k < specs.size(); ++k) {
                        const auto& r = results[k];
                        analyze::PolicyRow row;
                        row.reservedIsLowerBound = r.reservedIsLowerBound;
                        row.rank = std::size_t(std::find(order.begin(), order.end(), k) - order.begin()) + 1;
                        row.trace = paths[i];
                        row.policy = vm["policy"].as<std::vector<std::string>>()[k];
                        row.peakReserved = r.peakReserved.bytes;
                        row.peakAllocated = r.peakAllocated.bytes;
                        row.deviceCalls = r.deviceCalls();
                        row.failedRequests = r.ooms;
                        if (context.lowerBound > 0)
                            row.overheadVsLowerBound = analyze::overBound(r.peakReserved.bytes, context.lowerBound);
                        policies.push_back(std::move(row));
                    }
                    if (context.recorded) {
                        analyze::PolicyRow row;
                        row.trace = paths[i];
                        row.policy = "recorded";
                        row.recorded = true;
                        row.peakReserved = context.recorded->bytes;
                        row.peakAllocated = context.recorded->allocatedPeak.value_or(0);
                        if (context.lowerBound > 0)
                            row.overheadVsLowerBound = analyze::overBound(context.recorded->bytes, context.lowerBound);
                        row.note = "the run's own peak reserved (" + context.recorded->source + ")";
                        policies.push_back(std::move(row));
                        options.policyNotes.push_back(paths[i] + ": " + analyze::recordedRowNote(context, bestReserved));
                    }
                    if (context.before.any() || start == replay::StartState::Empty)
                        options.policyNotes.push_back(paths[i] + ": " + replay::startStateSentence(start, context.before));
                }
            }
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
            output.noticeStream(out, err) << "wrote " << textForTerminal(outPath) << '\n'; // not into the page
            return kExitOk;
        }
    };
} // namespace

std::unique_ptr<Command> makeReportCommand() { return std::make_unique<ReportCommand>(); }

} // namespace gpumem::cli
