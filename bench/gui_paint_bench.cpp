// Benchmark (issue #7 acceptance): the viewer's timeline on a ~10-million-event trace. First paint
// after the trace is loaded must take under 2 s and a pan or zoom redraw under 50 ms.
//
//   gui_paint_bench [TRACE] [--events N] [--moves M] [--width W]
// TRACE (default: the HTA DDP profiler trace in the shared public traces) is repeated until it holds
// N (default 10,000,000) memory events: each copy is the replay device's request-level events whose
// alloc and free are both in the window, plus its kernels and annotations, shifted by the trace's
// span. The copy is loaded as the viewer loads a file (summary, analysis, levels of detail), a
// `pytorch` replay adds one simulated reserved curve (the What-if overlay), then, offscreen:
//   first paint  = computeFrame over the whole trace + TimelineView painting it into a QImage;
//   pan / zoom   = M pans by a tenth of the width and M zooms by 1.25× about random points (in and
//                  out), each a new frame + paint, as the view does after a mouse move or wheel step.
// Frame computation runs on a worker thread in the viewer and painting on the UI thread; both are
// timed and reported separately and together (median and p95). The baseline is one pass that merely
// reads every memory event's time and size: each figure is also given as a multiple of it.
#include "importers/importer_registry.h"
#include "core/trace_builder.h"
#include "gui/models/timeline_model.h"
#include "gui/models/what_if_engine.h"
#include "gui/views/timeline_view.h"
#include "replay/replayer.h"

#include <QApplication>
#include <QImage>
#include <QPainter>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

using namespace gpumem;
using namespace gpumem::gui;

namespace {
// CPU time of the whole process (worker threads included) in ms: on a shared machine other jobs
// inflate wall time, not this. The viewer's frames run on one thread each, so CPU ≈ wall when idle.
struct Clock {
    using time_point = double;
    static double now()
    {
        timespec ts {};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
    }
};
double msSince(double t0) { return Clock::now() - t0; }

Trace repeated(const Trace& src, std::size_t targetEvents)
{
    const DeviceId dev = replay::defaultReplayDevice(src).value_or(0);
    const auto& m = src.memory();
    std::vector<char> keep(m.count(), 0);
    for (const auto& a : src.allocations())
        if (a.allocEvent != kNoIndex && a.freeEvent != kNoIndex && m.device[a.allocEvent] == dev)
            for (auto e : { a.allocEvent, a.freeEvent, a.freeCompletedEvent })
                if (e != kNoIndex)
                    keep[e] = 1;
    std::size_t perCopy = std::size_t(std::count(keep.begin(), keep.end(), 1));
    if (perCopy == 0) {
        std::fprintf(stderr, "gui_paint_bench: the trace has no paired allocations to repeat\n");
        std::exit(1);
    }
    TimeNs t0 = m.time.front(), t1 = m.time.back();
    for (const auto& k : src.kernels())
        t0 = std::min(t0, k.start), t1 = std::max(t1, k.end);
    const TimeNs span = t1 - t0 + 1000;
    TraceBuilder b;
    const Device& d = src.devices()[dev];
    const DeviceId out = b.device(d.type, d.ordinal);
    std::vector<StreamId> streams(src.streams().size());
    for (std::size_t s = 0; s < streams.size(); ++s)
        streams[s] = b.stream(out, src.streams()[s].handle);
    std::vector<StringId> names(src.strings().size(), 0);
    auto name = [&](StringId id) {
        if (id != 0 && names[id] == 0)
            names[id] = b.intern(src.str(id));
        return names[id];
    };
    const std::size_t copies = (targetEvents + perCopy - 1) / perCopy;
    b.memoryColumns().reserve(copies * perCopy);
    for (std::size_t c = 0; c < copies; ++c) {
        const TimeNs shift = TimeNs(c) * span;
        for (std::size_t i = 0; i < m.count(); ++i) {
            if (!keep[i])
                continue;
            MemoryEvent e = m.row(i);
            e.time += shift;
            e.device = out;
            e.stream = streams[e.stream];
            e.scope = 0;
            e.site = 0;
            e.sequence = MemoryEvent::kAutoSequence;
            b.add(e);
        }
        for (const auto& k : src.kernels()) {
            if (k.device != dev)
                continue;
            b.add(Kernel { k.start + shift, k.end + shift, out, streams[k.stream], name(k.name), k.correlation });
        }
        for (const auto& a : src.annotations())
            b.add(Annotation { a.start + shift, a.end + shift, name(a.name), a.kind, out, a.thread });
    }
    return b.build();
}

struct Stats {
    double median = 0, p95 = 0;
};
Stats stats(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return { v[v.size() / 2], v[std::min(v.size() - 1, std::size_t(double(v.size()) * 0.95))] };
}
} // namespace

int main(int argc, char** argv)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    std::string path = GPUMEM_PUBLIC_TRACES "/hta/df_index_resolver.json.gz";
    std::size_t events = 10'000'000;
    int moves = 50, width = 1400;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--events") && i + 1 < argc)
            events = std::strtoull(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--moves") && i + 1 < argc)
            moves = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--width") && i + 1 < argc)
            width = std::max(200, std::atoi(argv[++i]));
        else
            path = argv[i];
    }

    auto t = Clock::now();
    auto loaded = std::make_shared<LoadedTrace>();
    loaded->path = QString::fromStdString(path);
    loaded->trace = repeated(loadTrace(path), events);
    const double buildMs = msSince(t);
    t = Clock::now();
    loaded->summary = analyze::summarize(loaded->trace);
    loaded->analysis = analyze::analyzeTrace(loaded->trace);
    const double analyzeMs = msSince(t);
    t = Clock::now();
    loaded->lod = std::make_shared<const TimelineLod>(
        loaded->trace, loaded->analysis.timeline.device(loaded->analysis.device), loaded->analysis.device);
    const double lodMs = msSince(t);
    const auto& m = loaded->trace.memory();

    // Baseline: one pass reading every event's time and size.
    std::vector<double> baseline;
    for (int r = 0; r < 5; ++r) {
        t = Clock::now();
        std::uint64_t sum = 0;
        for (std::size_t i = 0; i < m.count(); ++i)
            sum += m.size[i] ^ std::uint64_t(m.time[i]);
        baseline.push_back(msSince(t));
        if (sum == 42)
            std::puts("");
    }
    const double base = stats(baseline).median;

    t = Clock::now();
    replay::ReplayOptions options;
    options.recordTimeline = true;
    options.device = loaded->analysis.device;
    auto replayed = replay::Replayer(options).run(loaded->trace, replay::parsePolicySpec("pytorch"));
    const double replayMs = msSince(t);
    auto curve = std::make_shared<analyze::DeviceTimeline>();
    for (const auto& p : replayed.timeline) {
        curve->time.push_back(p.time);
        curve->reserved.push_back(p.reserved);
        curve->allocated.push_back(p.allocated);
    }
    const std::size_t curvePoints = curve->time.size();
    std::shared_ptr<const SeriesLod> curveLod;
    curveLod = std::make_shared<const SeriesLod>(curve->time, curve->reserved);
    FrameContent content { { SimulatedCurve { "pytorch", simulatedCurveColor(0), curve, curveLod } }, false };

    TimelineView view;
    view.resize(width, 900);
    view.setFullRange(fullRangeOf(*loaded));
    QImage image(view.size(), QImage::Format_ARGB32_Premultiplied);
    auto frameAndPaint = [&](double& computeMs, double& paintMs) {
        auto t0 = Clock::now();
        TimelineFrame frame = computeFrame(*loaded, view.axis().visible(), view.axis().width(), content);
        computeMs = msSince(t0);
        t0 = Clock::now();
        view.setFrame(std::move(frame));
        QPainter painter(&image);
        view.render(&painter);
        painter.end();
        paintMs = msSince(t0);
    };
    double firstCompute = 0, firstPaint = 0;
    frameAndPaint(firstCompute, firstPaint);
    image.save("/tmp/gui_paint_bench_first.png");

    std::mt19937 rng(7);
    std::vector<double> panCompute, panPaint, panTotal, zoomCompute, zoomPaint, zoomTotal;
    view.axis().zoom(4.0, view.axis().width() / 2.0); // pans need room: start at a quarter of the trace
    for (int i = 0; i < moves; ++i) {
        double c = 0, p = 0;
        view.axis().pan((i / 10) % 2 ? -view.axis().width() / 10.0 : view.axis().width() / 10.0);
        frameAndPaint(c, p);
        panCompute.push_back(c), panPaint.push_back(p), panTotal.push_back(c + p);
    }
    view.axis().setVisible(view.axis().full());
    std::uniform_real_distribution<double> anchor(0, view.axis().width());
    for (int i = 0; i < moves; ++i) {
        double c = 0, p = 0;
        // Zoom in for 8 wheel steps, then back out, about random points: spans from the whole trace
        // down to 1/6 of it and back, the expensive end of the range.
        view.axis().zoom((i / 8) % 2 ? 1 / 1.25 : 1.25, anchor(rng));
        frameAndPaint(c, p);
        zoomCompute.push_back(c), zoomPaint.push_back(p), zoomTotal.push_back(c + p);
    }
    auto line = [&](const char* what, const std::vector<double>& compute, const std::vector<double>& paint,
                    const std::vector<double>& total) {
        const Stats c = stats(compute), p = stats(paint), s = stats(total);
        std::printf(
            "%-12s compute %7.1f / %7.1f   paint %6.1f / %6.1f   total %7.1f / %7.1f ms   total = %.2fx baseline\n",
            what, c.median, c.p95, p.median, p.p95, s.median, s.p95, s.median / base);
    };
    std::printf("trace        %s repeated: %zu memory events, %zu kernels, %zu annotations; plot %d px wide\n",
        path.c_str(), m.count(), loaded->trace.kernels().size(), loaded->trace.annotations().size(),
        view.axis().width());
    std::printf("load         repeat+build %.0f ms, summary+analysis %.0f ms, levels of detail %.0f ms; pytorch replay "
                "%.0f ms (%zu curve points)\n",
        buildMs, analyzeMs, lodMs, replayMs, curvePoints);
    std::printf("baseline     one pass over the events' time and size: %.1f ms (median of 5)\n", base);
    std::printf("first paint  compute %.1f ms + paint %.1f ms = %.1f ms (target < 2000 ms) = %.2fx baseline\n",
        firstCompute, firstPaint, firstCompute + firstPaint, (firstCompute + firstPaint) / base);
    std::printf("%d moves     median / p95 (target < 50 ms)\n", moves);
    line("pan", panCompute, panPaint, panTotal);
    line("zoom", zoomCompute, zoomPaint, zoomTotal);
    return 0;
}
