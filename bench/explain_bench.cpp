// Benchmark: `gpumem explain` (analyzeTrace + the diagnosis: the baseline replay, the replay to the moment
// and the remedy replays, in parallel) against `gpumem analyze`'s analyzeTrace on the same synthetic
// training trace (~1 M events by default), in the same run. Issue 15's figure: explain / (analyze + the
// remedy replays) — explain must cost no more than analyze plus its remedy replays; printed beside
// explain / analyze, on an unlimited device (the reserved peak: every candidate replays the whole trace) and
// at 90 % of the unlimited pytorch peak (the first OOM). Beside it, the verdict alone (what `gpumem analyze`
// prints first: DiagnosisOptions::verdictOnly) and the replays each runs: the baseline, the one to the
// moment, and the remedy replays run, stopped once decided, and skipped (a knob the trace never exercises).
//   bench_explain [EVENTS | TRACE] [JOBS]    (default 1000000 synthetic events, hardware threads; a TRACE
//   file instead, e.g. bench/malloc_free_stream.c's stream converted to .gmt)
#include "analyze/analysis.h"
#include "analyze/diagnosis.h"
#include "bench/synthetic_training_trace.h"
#include "importers/importer_registry.h"
#include "replay/parallel_runs.h"
#include "replay/replayer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace gpumem;

int main(int argc, char** argv)
{
    const bool file = argc > 1 && std::filesystem::is_regular_file(argv[1]);
    const std::size_t target = argc > 1 && !file ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
    const unsigned jobs = argc > 2 ? unsigned(std::strtoul(argv[2], nullptr, 10)) : 0;
    const Trace trace = file ? loadTrace(argv[1]) : bench::buildTrainingTrace(target);
    trace.allocations();

    const auto peak = replay::Replayer().run(trace, replay::parsePolicySpec("pytorch")).peakReserved.bytes;
    std::printf("events              %zu\n", trace.memory().count());
    std::printf("                                          cpu s    wall s\n");
    // Unlimited: the reserved peak is explained and every candidate replays the whole trace; 90 % of the
    // peak: the first OOM, where the replays stop early (or no setting can help).
    for (const double fraction : { 0.0, 0.9 }) {
        analyze::DiagnosisOptions options;
        options.capacity = Bytes(double(peak) * fraction) / (Bytes(2) << 20) * (Bytes(2) << 20);
        options.jobs = jobs;

        bench::Clock c0;
        const auto analysis = analyze::analyzeTrace(trace);
        const auto analyzeS = bench::seconds(c0);

        bench::Clock c1;
        const auto explainAnalysis = analyze::analyzeTrace(trace);
        options.analysis = &explainAnalysis;
        const auto d = analyze::diagnose(trace, options);
        const auto explainS = bench::seconds(c1);

        bench::Clock c3;
        const auto verdictAnalysis = analyze::analyzeTrace(trace);
        analyze::DiagnosisOptions vo = options;
        vo.analysis = &verdictAnalysis;
        vo.verdictOnly = true;
        const auto v = analyze::diagnose(trace, vo);
        const auto verdictS = bench::seconds(c3);
        if (v.verdict != d.verdict) {
            std::fprintf(stderr, "the verdict alone differs from explain's:\n  %s\n  %s\n", v.verdict.c_str(), d.verdict.c_str());
            return 1;
        }

        // The remedy replays alone (what explain adds beside analyze), run as explain runs them.
        std::vector<replay::PolicySpec> specs;
        for (const auto& r : d.remedies)
            specs.push_back(replay::parsePolicySpec(r.spec));
        for (const auto& r : d.rejected)
            specs.push_back(replay::parsePolicySpec(r.spec));
        replay::ReplayOptions ro;
        ro.capacity = options.capacity;
        ro.totalMemory = options.capacity;
        ro.onOom = replay::OnOom::Stop;
        bench::Clock c2;
        replay::parallelFor(specs.size(), jobs, [&](std::size_t i) { (void)replay::Replayer(ro).run(trace, specs[i]); });
        const auto remediesS = bench::seconds(c2);

        std::printf("capacity %s: %zu candidate settings, %zu confirmed\n",
            options.capacity ? (std::to_string(options.capacity >> 20) + " MiB").c_str() : "unlimited", specs.size(),
            d.remedies.size());
        std::printf("  verdict: %s\n", d.verdict.c_str());
        std::printf("  analyze                                %7.3f  %7.3f\n", analyzeS.second, analyzeS.first);
        std::printf("  remedy replays                         %7.3f  %7.3f\n", remediesS.second, remediesS.first);
        std::printf("  explain                                %7.3f  %7.3f\n", explainS.second, explainS.first);
        std::printf("  analyze + verdict alone                %7.3f  %7.3f\n", verdictS.second, verdictS.first);
        std::printf("  replays: explain 2 + %llu remedy (%llu not replayed); verdict alone 2 + %llu remedy (%llu stopped once "
                    "decided, %llu not replayed)\n",
            (unsigned long long)d.remedyReplays, (unsigned long long)d.remedyReplaysSkipped, (unsigned long long)v.remedyReplays,
            (unsigned long long)v.remedyReplaysStoppedEarly, (unsigned long long)v.remedyReplaysSkipped);
        std::printf("  explain / analyze (wall)               %7.2f\n", explainS.first / analyzeS.first);
        std::printf("  (analyze + verdict alone) / analyze (cpu) %4.2f\n", verdictS.second / analyzeS.second);
        std::printf("  explain / (analyze + remedies) (wall)  %7.2f\n", explainS.first / (analyzeS.first + remediesS.first));
        (void)analysis;
    }
    return 0;
}
