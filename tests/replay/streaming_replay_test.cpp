// Replayer::run over a MemoryEventSource (issue 22, docs/streaming.md "Replay"): the same ReplayResult,
// field for field, as the whole-trace replay, on every trace of tests/data and every public trace
// (skipped with a message when absent), streamed from memory in slices of 7 and 3 events and from the
// trace written as .gmt in chunks of 5; for pytorch (default and the fidelity settings: recorded
// addresses, adopted initial state, timeline and segment events), direct and other policies, with
// --start recorded and empty, on an unlimited device and on one too small (OnOom stop and skip); and
// fitCapacity over each source as over the trace; and each setting once more with the look-ahead shared
// (ReplayOptions::foresight) across all of them.
#include "core/error.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "replay/capacity_fit.h"
#include "replay/policy_spec.h"
#include "replay/replayer.h"
#include "replay/start_state.h"

#include "tests/trace_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unistd.h>

using namespace gpumem;
using namespace gpumem::replay;
namespace fs = std::filesystem;

namespace {

using gpumem::test::forEachLoadableTrace;

// Every figure of a result, as text (a difference shows where).
std::string describe(const ReplayResult& r)
{
    std::ostringstream s;
    auto peak = [&](const char* name, const PeakAt& p) { s << name << ' ' << p.bytes << '@' << p.time << '#' << p.event << '\n'; };
    s << r.policy << " | " << r.approximation << " | outside " << r.outsideBytes << " device " << r.device << '\n'
      << "requests " << r.requestEvents << " allocations " << r.allocations << " unmatched " << r.unmatchedFrees << " zero "
      << r.zeroSizeRequests << " initial " << r.initialSegments << '/' << r.initialBlocks << '/' << r.initialNotAdopted << '/'
      << r.initialAdopted << " opening " << r.openingAllocated << " lower " << r.reservedIsLowerBound << '\n';
    peak("reserved", r.peakReserved);
    peak("allocated", r.peakAllocated);
    peak("requested", r.peakRequested);
    s << "at peak " << r.atPeak.reserved << ' ' << r.atPeak.allocated << ' ' << r.atPeak.freeBytes << ' ' << r.atPeak.largestFree
      << ' ' << r.atPeak.inactiveSplit << " final " << r.finalReserved << ' ' << r.finalAllocated << '\n';
    const auto& c = r.deviceCounters;
    s << "calls " << c.mallocCalls << ' ' << c.freeCalls << ' ' << c.mapCalls << ' ' << c.unmapCalls << ' ' << c.failedCalls << ' '
      << c.reserved << ' ' << c.peakReserved << " ooms " << r.ooms << " retries " << r.allocRetries << " stopped " << r.stopped
      << r.stoppedAtPeak << '\n';
    for (const auto& f : r.failures)
        s << "failure " << f.time << ' ' << f.event << ' ' << f.size << ' ' << f.stream << ' ' << f.reserved << ' ' << f.allocated << ' '
          << f.deviceFree << ' ' << f.beforeWindow << ' ' << f.refusedBy << '\n';
    for (const auto& d : r.failureDetails) {
        s << "detail " << d.freeCached << ' ' << d.largestFree << ' ' << d.freeBlockCount << ' ' << d.refusedByPolicy << ':';
        for (Bytes b : d.freeBlocks)
            s << ' ' << b;
        s << '\n';
    }
    for (const auto& m : r.finalStreams)
        s << "stream " << m.stream << ' ' << m.reserved << ' ' << m.free << '\n';
    for (const auto& p : r.pools)
        s << "pool " << p.pool << ' ' << p.reserved << ' ' << p.peakReserved << ' ' << p.released << '\n';
    s << "empty cache " << r.emptyCacheDirectives << ' ' << r.emptyCacheCalls << ' ' << r.emptyCacheDropped << ' ' << r.emptyCacheAdded
      << " merged " << r.poolsMerged << " compaction " << r.compactions << ' ' << r.blocksMoved << ' ' << r.bytesMoved << ' '
      << r.peakReservedWithoutCompaction.value_or(~Bytes(0)) << '\n';
    s << "timeline " << r.timeline.size();
    for (const auto& p : r.timeline)
        s << ' ' << p.time << ':' << p.reserved << ':' << p.allocated;
    s << "\nsegment events " << r.segmentEvents.size();
    for (const auto& e : r.segmentEvents)
        s << ' ' << e.event << ':' << int(e.call.kind) << ':' << e.call.address << ':' << e.call.size;
    s << "\nalloc addresses " << r.allocAddresses.size();
    for (const auto& [e, a] : r.allocAddresses)
        s << ' ' << e << ':' << a;
    s << "\nlive " << r.liveAllocations.size();
    for (const auto& [a, addr] : r.liveAllocations)
        s << ' ' << a << ':' << addr;
    if (r.finalState)
        s << "\nfinal segments " << r.finalState->segments.size();
    return s.str();
}

struct Setting {
    std::string name;
    std::string spec;
    ReplayOptions options;
    StartState start = StartState::Recorded;
    bool fidelity = false; // followRecorded, Adopt, everything recorded (checkFidelity's options)
};

std::vector<Setting> settings(Bytes capacity)
{
    std::vector<Setting> out;
    for (const StartState start : { StartState::Recorded, StartState::Empty })
        for (const char* spec : { "pytorch", "direct", "best-fit", "tf-bfc", "rmm-pool" }) {
            Setting s { std::string(spec) + " start " + std::string(toString(start)), spec, {}, start, false };
            out.push_back(s);
            if (capacity == 0)
                continue;
            for (const OnOom onOom : { OnOom::Stop, OnOom::Skip }) {
                Setting c = s;
                c.name += std::string(" capacity ") + std::to_string(capacity) + (onOom == OnOom::Stop ? " stop" : " skip");
                c.options.capacity = capacity;
                c.options.onOom = onOom;
                out.push_back(c);
            }
        }
    Setting fidelity { "pytorch fidelity", "pytorch", {}, StartState::Recorded, true };
    out.push_back(fidelity);
    Setting warm { "pytorch warm-up 1, keep final state", "pytorch", {}, StartState::Recorded, false };
    warm.options.warmupPasses = 1;
    warm.options.keepFinalState = true;
    out.push_back(warm);
    Setting steps { "pytorch empty-cache at step-end and every 5", "pytorch", {}, StartState::Recorded, false };
    steps.options.addEmptyCache = parseEmptyCacheSchedule("step-end");
    out.push_back(steps);
    steps.options.addEmptyCache = parseEmptyCacheSchedule("every 5");
    out.push_back(steps);
    out.push_back(Setting { "compaction:pytorch", "compaction[every=7]:pytorch", {}, StartState::Recorded, false });
    out.push_back(Setting { "optimal", "optimal", {}, StartState::Recorded, false });
    Setting ignored { "pytorch, the rebuilt initial state ignored", "pytorch", {}, StartState::Recorded, false };
    ignored.options.initialState = InitialStateMode::Ignore;
    out.push_back(ignored);
    return out;
}

ReplayOptions optionsFor(const Setting& s, const Trace& trace)
{
    ReplayOptions o = s.options;
    o.device = defaultReplayDevice(trace);
    if (s.fidelity) {
        o.followRecorded = o.recordTimeline = o.recordAllocAddresses = o.recordSegmentEvents = o.keepFinalState = true;
        o.initialState = InitialStateMode::Adopt;
    } else
        applyStartState(o, trace, s.start);
    return o;
}

// Compares the whole replay of `trace` with the replays of each source; `full`: every setting, else a few.
void expectStreamedReplaysEqual(const Trace& trace, const std::vector<const MemoryEventSource*>& sources,
    const std::vector<std::string>& names, const std::string& what, bool full)
{
    const Bytes unlimitedPeak = Replayer().run(trace, parsePolicySpec("pytorch")).peakReserved.bytes;
    // Each source's replays once more sharing one look-ahead memo (ReplayOptions::foresight) across every
    // setting, as diagnose's replays share one: a setting whose look-ahead differs from an earlier one's
    // (another start, window, recorded hints, outside-memory need) must not be handed that one's.
    std::vector<std::shared_ptr<ForesightMemo>> memos;
    for (std::size_t k = 0; k < sources.size() + 1; ++k)
        memos.push_back(makeForesightMemo());
    for (const Setting& s : settings(unlimitedPeak / 2)) {
        if (!full && s.spec != "pytorch" && s.spec != "direct")
            continue;
        const ReplayOptions o = optionsFor(s, trace);
        const PolicySpec spec = parsePolicySpec(s.spec);
        const std::string whole = describe(Replayer(o).run(trace, spec));
        for (std::size_t k = 0; k < sources.size(); ++k) {
            ReplayOptions streamed = s.options;
            streamed.device = defaultReplayDevice(*sources[k]);
            EXPECT_EQ(streamed.device, o.device) << what << " " << names[k];
            if (s.fidelity) {
                streamed = o;
            } else
                applyStartState(streamed, *sources[k], s.start);
            EXPECT_EQ(streamed.openingAllocated, o.openingAllocated) << what << " " << names[k];
            EXPECT_EQ(describe(Replayer(streamed).run(*sources[k], spec)), whole) << what << ", " << s.name << ", " << names[k];
            streamed.foresight = memos[k];
            EXPECT_EQ(describe(Replayer(streamed).run(*sources[k], spec)), whole)
                << what << ", " << s.name << ", " << names[k] << ", the look-ahead shared with the settings before it";
        }
        ReplayOptions shared = o;
        shared.foresight = memos.back();
        EXPECT_EQ(describe(Replayer(shared).run(trace, spec)), whole) << what << ", " << s.name << ", whole, the look-ahead shared";
    }
    // The same in another order: the empty starts first, then the rest from the last: a look-ahead made for a
    // later setting is not handed to an earlier one either (the forward order alone hands a start without an
    // opening the one made with it, and the ignored initial state comes last there).
    auto all = settings(unlimitedPeak / 2);
    std::reverse(all.begin(), all.end());
    std::stable_partition(all.begin(), all.end(), [](const Setting& s) { return s.start == StartState::Empty && !s.fidelity; });
    const auto reverseMemo = makeForesightMemo();
    for (auto s = all.begin(); s != all.end(); ++s) {
        if (!full && s->spec != "pytorch" && s->spec != "direct")
            continue;
        ReplayOptions o = optionsFor(*s, trace);
        const PolicySpec spec = parsePolicySpec(s->spec);
        const std::string whole = describe(Replayer(o).run(trace, spec));
        ReplayOptions streamed = s->options;
        streamed.device = defaultReplayDevice(*sources[0]);
        if (s->fidelity)
            streamed = o;
        else
            applyStartState(streamed, *sources[0], s->start);
        streamed.foresight = reverseMemo;
        EXPECT_EQ(describe(Replayer(streamed).run(*sources[0], spec)), whole)
            << what << ", " << s->name << ", " << names[0] << ", the look-ahead shared with the settings after it";
    }
    auto fitText = [](const FitResult& f) {
        std::string t = std::to_string(f.fits) + " " + std::to_string(f.capacity) + " " + std::to_string(f.lowerBound) + " "
            + std::to_string(f.unlimitedPeakReserved) + " " + std::to_string(f.peakReservedAtFit) + " " + std::to_string(f.openingAllocated);
        for (const auto& p : f.probes)
            t += " " + std::to_string(p.capacity) + ":" + std::to_string(p.fits) + ":" + std::to_string(p.peakReserved);
        return t;
    };
    FitOptions fit;
    fit.device = defaultReplayDevice(trace);
    fit.step = Bytes(1) << 20;
    const std::string wholeFit = fitText(fitCapacity(trace, parsePolicySpec("pytorch"), fit));
    for (std::size_t k = 0; k < sources.size(); ++k)
        EXPECT_EQ(fitText(fitCapacity(*sources[k], parsePolicySpec("pytorch"), fit)), wholeFit) << what << " fit, " << names[k];
    // The probes of a round in parallel, each on a source of its own (FitOptions::reopen).
    FitOptions parallel = fit;
    parallel.jobs = 3;
    parallel.reopen = [&trace] { return memorySource(trace, 7); };
    for (std::size_t k = 0; k < sources.size(); ++k)
        EXPECT_EQ(fitText(fitCapacity(*sources[k], parsePolicySpec("pytorch"), parallel)), wholeFit) << what << " fit in parallel, " << names[k];
    for (std::size_t k = 0; k < sources.size(); ++k)
        for (const bool withRebuilt : { true, false })
            EXPECT_EQ(livePeak(*sources[k], std::nullopt, 1 << 20, withRebuilt), livePeak(trace, std::nullopt, 1 << 20, withRebuilt))
                << what << " " << names[k];
}

// The traces of a directory, each replayed whole and streamed; returns how many had memory events.
std::size_t checkDirectory(const fs::path& dir, bool full, bool memorySlices)
{
    const fs::path tmp = fs::temp_directory_path() / ("gpumem_streaming_replay_" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    std::size_t checked = 0;
    forEachLoadableTrace(dir, [&](const fs::path& path, const Trace& loaded) {
        if (loaded.memory().count() == 0)
            return;
        SCOPED_TRACE(path.string());
        // The .gmt read whole is what a whole replay of it sees (a .gmt keeps what the format holds).
        const std::string gmt = (tmp / "trace.gmt").string();
        writeGmt(loaded, gmt, 5);
        const Trace trace = readGmt(gmt);
        const auto file = openGmtSource(gmt);
        std::vector<std::unique_ptr<MemoryEventSource>> slices;
        std::vector<const MemoryEventSource*> sources { file.get() };
        std::vector<std::string> names { "as .gmt in chunks of 5" };
        if (memorySlices)
            for (const std::size_t n : { 7, 3 }) {
                slices.push_back(memorySource(trace, n));
                sources.push_back(slices.back().get());
                names.push_back("in slices of " + std::to_string(n));
            }
        expectStreamedReplaysEqual(trace, sources, names, path.filename().string(), full);
        ++checked;
    });
    fs::remove_all(tmp);
    return checked;
}

TEST(StreamingReplay, EveryDataTraceReplaysAsItsWholeTrace)
{
    EXPECT_GE(checkDirectory(fs::path(GPUMEM_SOURCE_DIR) / "tests/data", true, true), 30u);
}

TEST(StreamingReplay, EveryPublicTraceReplaysAsItsWholeTrace)
{
    const fs::path dir(GPUMEM_PUBLIC_TRACES);
    if (!fs::exists(dir))
        GTEST_SKIP() << "the public traces are absent (" << dir.string() << ")";
    EXPECT_GE(checkDirectory(dir, false, false), 1u);
}

TEST(StreamingReplay, AStopAfterAnEventEndsTheStreamedPassThere)
{
    const Trace trace = loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/annotated_step.jsonl");
    ASSERT_GT(trace.memory().count(), 4u);
    ReplayOptions o;
    o.stopAfterEvent = trace.memory().count() / 2;
    o.keepFinalState = true;
    const auto source = memorySource(trace, 3);
    EXPECT_EQ(describe(Replayer(o).run(*source, parsePolicySpec("pytorch"))), describe(Replayer(o).run(trace, parsePolicySpec("pytorch"))));
    // The source serves another pass after one that ended early.
    o.stopAfterEvent = kNoIndex;
    EXPECT_EQ(describe(Replayer(o).run(*source, parsePolicySpec("pytorch"))), describe(Replayer(o).run(trace, parsePolicySpec("pytorch"))));
}

} // namespace

// foreseeWith (replay/replayer.h): a caller's facts in the replays' look-ahead pass. Every chunk comes once in
// trace order, or, where the pass starts over at the source's first free_completed, once more after `restarted`;
// the memo then serves the replays without another pass, and a second call shows nothing.
// tests/data/two_devices_streams.jsonl: 16 memory events, its first free_completed the 11th (in slices of 3).
TEST(ForeseeWith, ShowsEveryChunkOnceAfterTheLastRestartAndFillsTheMemo)
{
    const Trace trace = loadTrace(GPUMEM_SOURCE_DIR "/tests/data/two_devices_streams.jsonl");
    const auto source = memorySource(trace, 3);
    ReplayOptions o;
    o.device = 0;
    o.foresight = makeForesightMemo();
    std::vector<std::uint64_t> firsts;
    int restarts = 0;
    ASSERT_TRUE(foreseeWith(
        *source, o, [&](const MemoryEventColumns& m, std::uint64_t first) { firsts.push_back(first); (void)m; },
        [&] { ++restarts; firsts.clear(); }));
    EXPECT_EQ(restarts, 1);
    std::vector<std::uint64_t> every;
    for (std::uint64_t f = 0; f < source->eventCount(); f += 3)
        every.push_back(f);
    EXPECT_EQ(firsts, every);
    // The replays find the look-ahead in the memo: the same result as a replay that makes its own.
    ReplayOptions alone = o;
    alone.foresight = nullptr;
    EXPECT_EQ(describe(Replayer(o).run(*source, parsePolicySpec("pytorch"))),
        describe(Replayer(alone).run(*source, parsePolicySpec("pytorch"))));
    EXPECT_FALSE(foreseeWith(*source, o, [&](const MemoryEventColumns&, std::uint64_t) { ADD_FAILURE(); }, [] {}));
    // Without a memo there is nowhere to keep it.
    ReplayOptions none;
    EXPECT_THROW(foreseeWith(*source, none, [](const MemoryEventColumns&, std::uint64_t) {}, [] {}), std::logic_error);
}
