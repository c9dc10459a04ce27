#include "analyze/diagnosis.h"

#include "analyze/comparison.h"
#include "analyze/outside_layer.h"

#include "analyze/analysis_report.h" // percent
#include "analyze/bounded_analysis.h" // sourceOrigin
#include "analyze/category_inference.h"
#include "analyze/replay_report.h"
#include "analyze/steps.h"
#include "analyze/trace_summary.h"
#include "core/byte_total.h"
#include "core/chunk_pairing.h"
#include "core/display_width.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/message_quote.h"
#include "core/outside_memory.h"
#include "core/units.h"
#include "replay/capacity_fit.h"
#include "replay/fidelity.h"
#include "replay/parallel_runs.h"
#include "replay/policy_registry.h"
#include "replay/start_state.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <unordered_map>

namespace gpumem::analyze {

namespace {

    using replay::BlockInfo;
    using replay::BlockState;
    using replay::PolicyState;
    using replay::SegmentInfo;

    constexpr Bytes kMiB = Bytes(1) << 20;
    // Traces up to this many memory events get the smallest fitting GPU of their best fix.
    constexpr std::size_t kFitEventLimit = 500'000;

    // The counters a counters-only trace carries (the OOM-message and memory_summary importers write them).
    constexpr std::string_view kAllocatedCounter = "Total Allocated";
    constexpr std::string_view kReservedCounter = "Total Reserved";
    // A PyTorch <= 1.9 profiler trace's running sum of [memory] Bytes (importers/kineto_importer.cpp).
    constexpr std::string_view kLegacyAllocatedCounter = "Allocated (sum of Bytes)";
    constexpr std::string_view kProcessCounter = "Process In Use";
    constexpr std::string_view kDeviceFreeCounter = "Device Free";

    // What to record next: a snapshot has every block, segment and stack (allocators.md §1.15).
    constexpr const char* kRecordSnapshot
        = "torch.cuda.memory._record_memory_history(max_entries=100_000)\n"
          "try:\n"
          "    train()  # the code that ran out of memory\n"
          "finally:\n"
          "    torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")\n"
          "    torch.cuda.memory._record_memory_history(enabled=None)\n"
          "# then: gpumem explain oom_snapshot.pickle";
    // What to record next for TensorFlow: the BFC allocator logs its chunks and Stats at INFO level ("I
    // …bfc_allocator.cc:645] Sum Total of in-use chunks", tests/data/oom/tf_bfc_stats_deepspeech1940.txt),
    // which TF_CPP_MIN_LOG_LEVEL above 0 hides; tf.config.experimental.get_memory_info gives 'current'
    // and 'peak' bytes (TensorFlow API docs); a profile has every allocation.
    constexpr const char* kRecordTfLog
        = "# keep TensorFlow's INFO log: the BFC allocator dumps its chunks and Stats at the OOM\n"
          "#   TF_CPP_MIN_LOG_LEVEL=0 python train.py 2> tf_log.txt; then: gpumem explain tf_log.txt\n"
          "options = tf.compat.v1.RunOptions(report_tensor_allocations_upon_oom=True)  # TF1 sessions\n"
          "print(tf.config.experimental.get_memory_info(\"GPU:0\"))  # {'current', 'peak'} in bytes\n"
          "# or a profile with every allocation: tf.profiler.experimental.start(\"logdir\") ... stop()\n"
          "# then: gpumem explain logdir/plugins/profile/<run>/<host>.xplane.pb";

    std::string hex(Address a)
    {
        std::ostringstream s;
        s << "0x" << std::hex << a;
        return s.str();
    }

    // What the evidence reads of a trace allocation live at the moment: its alloc event (index, site, scope,
    // recorded category, time) and, once freed, the times of its free and of its free_completed. From
    // Trace::allocations() and the memory columns of a whole trace, or from one pass of a source.
    struct AllocationFacts {
        std::uint64_t allocEvent = kNoIndex;
        SiteId site = 0;
        ScopeId scope = 0;
        Category category = Category::Unknown;
        TimeNs time = 0;
        std::optional<TimeNs> freeTime, freeCompletedTime;
    };

    // The state at the moment, with the trace allocation behind each live block.
    struct Context {
        const Trace& trace; // the tables: a whole trace, or a source's skeleton
        DeviceId device = 0;
        TimeNs start = 0;
        const Analysis* analysis = nullptr;
        std::unordered_map<Address, std::uint32_t> allocationAt; // simulated address → allocation
        const PolicyState* state = nullptr;
        std::uint64_t firstWindowEvent = 0; // the first event after the state a snapshot importer rebuilt
        std::unordered_map<std::uint32_t, AllocationFacts> facts; // by allocation, for those live at the moment

        // The facts of the allocation at simulated address `a` whose alloc event the trace holds, or null.
        const AllocationFacts* allocEvent(Address a) const
        {
            auto it = allocationAt.find(a);
            if (it == allocationAt.end())
                return nullptr;
            const auto f = facts.find(it->second);
            if (f == facts.end() || f->second.allocEvent == kNoIndex)
                return nullptr;
            return &f->second;
        }
        std::string siteOf(const AllocationFacts& f) const
        {
            std::string s = siteLabel(trace, f.site);
            if (s.empty())
                s = scopePath(trace, f.scope);
            return s;
        }
        std::string categoryOf(Address a) const
        {
            auto it = allocationAt.find(a);
            if (it == allocationAt.end())
                return std::string(toString(Category::Unknown));
            if (analysis && it->second < analysis->categories.size())
                return std::string(toString(analysis->categories[it->second]));
            const AllocationFacts* f = allocEvent(a);
            return std::string(toString(f ? f->category : Category::Unknown));
        }
        EvidenceBlock block(const BlockInfo& b, StreamKey stream) const
        {
            EvidenceBlock e;
            e.address = b.address;
            e.size = b.size;
            e.requested = b.requested;
            e.state = std::string(replay::toString(b.state));
            e.stream = stream;
            if (b.state == BlockState::Allocated || b.state == BlockState::PendingFree) {
                e.category = categoryOf(b.address);
                if (auto it = allocationAt.find(b.address); it != allocationAt.end())
                    e.allocation = it->second;
                if (const AllocationFacts* f = allocEvent(b.address)) {
                    e.site = siteOf(*f);
                    if (f->allocEvent >= firstWindowEvent) // the rebuilt state before a snapshot's window has no time
                        e.allocTime = f->time;
                }
            }
            return e;
        }
        std::string blockText(const EvidenceBlock& b) const
        {
            std::string s = formatBytes(b.size) + " at " + hex(b.address);
            if (!b.site.empty())
                s += " from " + b.site;
            if (b.allocTime)
                s += ", allocated " + formatOffsetBetween(start, *b.allocTime);
            else if (b.state != "inactive")
                s += ", from before the trace window";
            return s;
        }
    };

    EvidenceSegment segmentEvidence(const Context& c, const SegmentInfo& seg)
    {
        EvidenceSegment e;
        e.address = seg.address;
        e.size = seg.size;
        e.stream = seg.stream;
        e.expandable = seg.expandable;
        std::vector<const BlockInfo*> live;
        for (const BlockInfo& b : seg.blocks) {
            if (b.state == BlockState::Free) {
                e.freeBytes += b.size;
                e.freeBlocks.push_back(b.size);
            } else if (b.state == BlockState::Allocated || b.state == BlockState::PendingFree)
                live.push_back(&b);
        }
        std::sort(e.freeBlocks.begin(), e.freeBlocks.end(), std::greater<>());
        std::stable_sort(live.begin(), live.end(), [](auto* a, auto* b) { return a->size > b->size; });
        e.pinningBlocks = live.size();
        for (std::size_t i = 0; i < live.size() && i < 4; ++i)
            e.pinning.push_back(c.block(*live[i], seg.stream));
        return e;
    }

    std::string segmentText(const EvidenceSegment& s)
    {
        std::string t = "segment " + hex(s.address) + " (" + formatBytes(s.size) + (s.expandable ? ", expandable" : "")
            + ", stream " + std::to_string(s.stream) + "): free ";
        for (std::size_t i = 0; i < s.freeBlocks.size() && i < 4; ++i)
            t += (i ? ", " : "") + formatBytes(s.freeBlocks[i]);
        if (s.freeBlocks.size() > 4)
            t += " and " + std::to_string(s.freeBlocks.size() - 4) + " more";
        t += "; pinned by " + counted(s.pinningBlocks, "live block", "live blocks");
        return t;
    }

    void addSegmentEvidence(const Context& c, Finding& f, std::vector<EvidenceSegment> segs, std::size_t limit = 4)
    {
        std::stable_sort(segs.begin(), segs.end(), [](const auto& a, const auto& b) {
            const Bytes la = a.freeBlocks.empty() ? 0 : a.freeBlocks.front(), lb = b.freeBlocks.empty() ? 0 : b.freeBlocks.front();
            return la != lb ? la > lb : a.freeBytes > b.freeBytes;
        });
        for (std::size_t i = 0; i < segs.size() && i < limit; ++i) {
            f.evidence.push_back(segmentText(segs[i]));
            for (std::size_t k = 0; k < segs[i].pinning.size() && k < 3; ++k)
                f.evidence.push_back("    pinned by " + c.blockText(segs[i].pinning[k]));
        }
        if (segs.size() > limit)
            f.evidence.push_back("… and " + counted(segs.size() - limit, "more segment", "more segments"));
        if (segs.size() > limit)
            segs.resize(limit * 4 < segs.size() ? limit * 4 : segs.size());
        f.segments = std::move(segs);
    }

    // Live bytes grouped by site, module and category, largest first (top `n` each).
    std::vector<Contributor> contributors(const Context& c, std::size_t n)
    {
        std::map<std::pair<std::string, std::string>, std::pair<Bytes, std::uint64_t>> groups;
        for (const auto& seg : c.state->segments)
            for (const auto& b : seg.blocks) {
                if (b.state != BlockState::Allocated && b.state != BlockState::PendingFree)
                    continue;
                const Bytes bytes = b.requested ? b.requested : b.size;
                const AllocationFacts* ev = c.allocEvent(b.address);
                std::string site = ev ? siteLabel(c.trace, ev->site) : std::string("(before the trace)");
                std::string module = ev ? scopePath(c.trace, ev->scope) : std::string("(before the trace)");
                // A trace without stacks (or scopes) has no such grouping: one "(no stack)" row says nothing.
                for (auto key : { std::pair<std::string, std::string> { "site", site }, { "module", module },
                         { "category", c.categoryOf(b.address) } }) {
                    if (key.second.empty())
                        continue;
                    auto& g = groups[key];
                    g.first += bytes;
                    ++g.second;
                }
            }
        std::vector<Contributor> all;
        for (const auto& [key, v] : groups)
            all.push_back({ key.first, key.second, v.first, v.second });
        std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
        std::vector<Contributor> out;
        std::map<std::string, std::size_t> taken;
        for (const auto& x : all)
            if (taken[x.by]++ < n)
                out.push_back(x);
        return out;
    }

    std::string defaultPolicy(const Trace& t, std::string& origin)
    {
        const auto& meta = t.metadata();
        const std::string format = meta.value("source_format", std::string());
        if (format == "xplane") {
            origin = "recorded by the trace: an XLA profile, BFC";
            return "tf-bfc";
        }
        if (format == "rmm-csv") {
            origin = "recorded by the trace: an RMM log";
            return "rmm-pool";
        }
        if (auto it = meta.find("allocator_settings"); it != meta.end() && it->is_object()) {
            origin = "the trace's recorded allocator_settings";
            return "pytorch";
        }
        // The tracer records a request (alloc/free) only for the stream-ordered pool
        // (cudaMallocAsync, cudaMallocFromPoolAsync, tracer/activity_converter.h); a caching
        // allocator's blocks it cannot see. Its requests are so the CUDA pool's: the first GPU run
        // (traces/gpu_check_h200.gmt) was replayed under PyTorch's policy, with PyTorch's settings
        // as the candidate fixes, for a program that has no PyTorch in it.
        if (meta.value("tool", std::string()) == "gpumem-tracer") {
            origin = "recorded by the trace: gpumem-tracer records requests of the cudaMallocAsync pool only";
            return "cuda-async";
        }
        origin = "default: the trace records no allocator";
        return "pytorch";
    }

    // The verdict's "the run recorded R" figure, with how much of it the tracer's allocation sources put
    // outside the allocator: those segments are segment events, so they are in R (outside_layer.h).
    std::string recordedReservedText(const Diagnosis& d, Bytes recorded)
    {
        std::string s = formatBytes(recorded);
        if (d.outside && d.outside->source == "tracer_allocation_source" && d.outside->process > 0)
            s += ", up to " + formatBytes(std::min(d.outside->process, recorded)) + " of it not the allocator's";
        return s;
    }

    const replay::PolicySpec& innermost(const replay::PolicySpec& s)
    {
        const replay::PolicySpec* b = &s;
        while (b->inner)
            b = b->inner.get();
        return *b;
    }

    // Options as PyTorch's PYTORCH_CUDA_ALLOC_CONF writes them: "k:v,k:v" ("" for none).
    std::string joinOptions(const std::vector<replay::ConfOption>& options)
    {
        std::string s;
        for (std::size_t i = 0; i < options.size(); ++i)
            s += (i ? "," : "") + options[i].first + ":" + options[i].second;
        return s;
    }

    // A spec "policy:k:v,…" with `key` set to `value` ("" removes it).
    std::string withOption(const std::string& policy, std::vector<replay::ConfOption> options, const std::string& key,
        const std::string& value)
    {
        std::erase_if(options, [&](const auto& o) { return o.first == key; });
        if (!value.empty())
            options.emplace_back(key, value);
        return options.empty() ? policy : policy + ":" + joinOptions(options);
    }

    std::vector<replay::ConfOption> effectivePytorchOptions(const replay::PyTorchConfig& config)
    {
        const std::string text = config.toString();
        return text.empty() ? std::vector<replay::ConfOption> {} : replay::splitAllocConf(text);
    }

    std::string settingFor(const replay::PolicySpec& spec)
    {
        if (spec.policy == "pytorch" && spec.version.empty() && !spec.inner) {
            const std::string conf = joinOptions(spec.options);
            return conf.empty() ? "PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's defaults)" : "PYTORCH_CUDA_ALLOC_CONF=" + conf;
        }
        return "--policy " + spec.text;
    }

    // A candidate's peak lowers the baseline's when it is below it by at least 1 % (the remedy rule).
    bool lowersThePeak(Bytes peak, Bytes baseline)
    {
        return peak < baseline && double(baseline - peak) >= 0.01 * double(baseline);
    }
    // The smallest peak that does not lower `baseline` (lowersThePeak is false from it upwards: the test is
    // monotone in the peak), found by bisection on the rule itself so the two can never disagree; 0 when
    // every peak is (baseline 0), which ReplayOptions::stopAtPeakReserved reads as "never stop".
    Bytes smallestPeakNotLower(Bytes baseline)
    {
        Bytes lo = 0, hi = baseline; // lowersThePeak(hi) is false; find the first such peak
        if (!lowersThePeak(lo, baseline))
            return 0;
        while (hi - lo > 1) {
            const Bytes mid = lo + (hi - lo) / 2;
            (lowersThePeak(mid, baseline) ? lo : hi) = mid;
        }
        return hi;
    }

    // What the remedy comparison reads of a replay (failures, peak, device calls, retries, initial state), for
    // a candidate that replays exactly as the baseline `r0`.
    replay::ReplayResult outcomeOf(const replay::ReplayResult& r0)
    {
        replay::ReplayResult r;
        r.policy = r0.policy;
        r.failures = r0.failures;
        r.ooms = r0.ooms;
        r.peakReserved = r0.peakReserved;
        r.deviceCounters = r0.deviceCounters;
        r.allocRetries = r0.allocRetries;
        r.initialAdopted = r0.initialAdopted;
        r.stopped = r0.stopped;
        return r;
    }

    // Whether max_split_size cannot change a pytorch replay of `trace` on `dev` under `config` (the options
    // `ro`): every request goes to the small pool, whose blocks max_split_size never touches. The proof, from
    // replay/policies/pytorch_policy.cpp (PyTorch c10/cuda/CUDACachingAllocator.cpp, allocators.md §1.5–1.10):
    // - a request is small when round_size(request) <= kSmallSize (1 MiB); round_size rounds to a multiple
    //   of 512 or up to a power-2 division, and 1 MiB is both, so a request of at most 1 MiB stays small
    //   (the replay's request is requestedSize, else size: request_feeder.cpp);
    // - small requests take 2 MiB small-pool segments (allocationSize) and without expandable segments no
    //   block is ever larger than its segment, so every block a small request can find is at most 2 MiB;
    // - maxSplitSize appears in three places: shouldSplit (only for a large-pool block: a small-pool one
    //   splits on kMinBlockSize alone), getFreeBlock (rejects a block >= maxSplitSize, or a request >=
    //   maxSplitSize: neither with blocks and requests <= 2 MiB below every maxSplitSize above 2 MiB), and
    //   releaseAvailableCachedBlocks (releases only blocks >= maxSplitSize of the request's pool: none, so it
    //   returns false, as it does with maxSplitSize unset);
    // - a state from before the window (adopted segments, opening bytes) could hold large-pool blocks, and
    //   the cudaMallocAsync backend and expandable segments follow other rules: each of them excludes it.
    // `largeRequest`: whether an alloc of `dev` requests more than kSmallSize (EventFacts).
    bool onlySmallPoolRequests(const Trace& tables, DeviceId dev, const replay::PyTorchConfig& config, const replay::ReplayOptions& ro,
        bool largeRequest)
    {
        if (config.expandableSegments || config.asyncBackend || (config.maxSplitSize != replay::kUnlimited && config.maxSplitSize <= replay::kSmallBuffer))
            return false;
        if (ro.openingAllocated != 0 || replay::initialStateEventCount(tables, dev) != 0)
            return false;
        return !largeRequest;
    }
    // Whether `candidate` differs from `baseline` in max_split_size alone, to a value above 2 MiB (or unset).
    bool onlyMaxSplitDiffers(replay::PyTorchConfig candidate, const replay::PyTorchConfig& baseline)
    {
        if (candidate.maxSplitSize != replay::kUnlimited && candidate.maxSplitSize <= replay::kSmallBuffer)
            return false;
        candidate.maxSplitSize = baseline.maxSplitSize;
        return candidate == baseline;
    }

    std::vector<std::string> wrap(const std::string& text, std::size_t width)
    {
        std::vector<std::string> lines;
        std::string line;
        // A size's unit stays on the line of its number ("630.00 MiB", never "630.00\nMiB").
        std::vector<std::string> ws;
        std::istringstream words(text);
        for (std::string w; words >> w;) {
            std::string_view unit(w);
            while (!unit.empty() && (unit.back() == ',' || unit.back() == ';' || unit.back() == ')' || unit.back() == '.'
                       || unit.back() == ':'))
                unit.remove_suffix(1);
            static const std::string_view kUnits[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "s", "ms", "%" };
            if (!ws.empty() && !ws.back().empty() && std::isdigit(static_cast<unsigned char>(ws.back().back()))
                && std::find(std::begin(kUnits), std::end(kUnits), unit) != std::end(kUnits))
                ws.back() += " " + w;
            else
                ws.push_back(w);
        }
        for (const std::string& w : ws) {
            if (!line.empty() && line.size() + 1 + w.size() > width) {
                lines.push_back(line);
                line.clear();
            }
            line += (line.empty() ? "" : " ") + w;
        }
        if (!line.empty())
            lines.push_back(line);
        return lines;
    }

    std::optional<std::int64_t> counterValue(const Trace& t, DeviceId dev, std::string_view name)
    {
        const auto series = t.counterSeries();
        std::optional<std::int64_t> out;
        for (const auto& sample : t.counterSamples()) {
            const auto& s = series[sample.series];
            if ((s.device == dev || s.device == kNoDevice) && t.str(s.name) == name)
                out = sample.value; // the last sample (these traces have one)
        }
        return out;
    }

    // What diagnose() asks of the memory events before its replays, in one pass (whole trace or source).
    struct RecordedOomEvent {
        std::uint64_t event = 0;
        TimeNs time = 0;
        Bytes size = 0;
        StreamId stream = 0;
    };
    struct EventFacts {
        bool hasRequests = false; // an alloc on the device
        bool largeRequest = false; // an alloc on the device requesting more than kSmallSize (onlySmallPoolRequests)
        std::optional<RecordedOomEvent> firstOom; // the first oom event of the device
        std::uint64_t lastAt = kNoIndex; // --at: the last event of the device at or before it
        TimeNs deviceEnd = 0; // the time of the device's last event
        std::uint64_t firstWindowEvent = 0; // the device's event number `rebuilt` (0 when rebuilt is 0)
        // The peak of the device's recorded segment bytes (segment_alloc/map minus free/unmap, raised at each add):
        // recordedReservedBytes's segment figure; 0 without segment events.
        Bytes segmentReservedPeak = 0;
        bool completions = false; // a free_completed on the device
    };
    // EventFacts of device `dev`, chunk by chunk in trace order. `peak`, when given, is fed every event
    // (outsideMemory's figure from the events).
    class EventFactsScan {
    public:
        EventFactsScan(DeviceId dev, std::optional<TimeNs> at, std::uint64_t rebuilt, AllocationSourcePeak* peak)
            : m_dev(dev)
            , m_at(at)
            , m_rebuilt(rebuilt)
            , m_peak(peak)
        {
        }
        void visit(const MemoryEventColumns& m, std::uint64_t first)
        {
            EventFacts& f = m_facts;
            for (std::size_t j = 0; j < m.count(); ++j) {
                if (m_peak)
                    m_peak->add(m, j);
                if (m.device[j] != m_dev)
                    continue;
                const std::uint64_t i = first + j;
                if (m_rebuilt > 0 && m_seen++ == m_rebuilt)
                    f.firstWindowEvent = i;
                if (m.kind[j] == EventKind::Alloc) {
                    f.hasRequests = true;
                    f.largeRequest = f.largeRequest || (m.requestedSize[j] ? m.requestedSize[j] : m.size[j]) > replay::kSmallSize;
                } else if (m.kind[j] == EventKind::Oom && !f.firstOom)
                    f.firstOom = RecordedOomEvent { i, m.time[j], m.size[j], m.stream[j] };
                else if (m.kind[j] == EventKind::SegmentAlloc || m.kind[j] == EventKind::SegmentMap) {
                    m_segments += m.size[j];
                    f.segmentReservedPeak = std::max(f.segmentReservedPeak, m_segments.value());
                } else if (m.kind[j] == EventKind::SegmentFree || m.kind[j] == EventKind::SegmentUnmap)
                    m_segments -= m.size[j];
                else if (m.kind[j] == EventKind::FreeCompleted)
                    f.completions = true;
                if (m_at && m.time[j] <= *m_at)
                    f.lastAt = i;
                f.deviceEnd = std::max(f.deviceEnd, m.time[j]);
            }
        }
        const EventFacts& facts() const { return m_facts; }

    private:
        DeviceId m_dev;
        std::optional<TimeNs> m_at;
        std::uint64_t m_rebuilt;
        AllocationSourcePeak* m_peak;
        EventFacts m_facts;
        std::uint64_t m_seen = 0;
        ByteTotal m_segments;
    };
    EventFacts eventFacts(const MemoryEventSource& source, DeviceId dev, std::optional<TimeNs> at, std::uint64_t rebuilt, AllocationSourcePeak* peak)
    {
        EventFactsScan scan(dev, at, rebuilt, peak);
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) { scan.visit(m, first); });
        return scan.facts();
    }

    // The facts of the allocations `wanted` (Trace::allocations() indices, all on `dev`): from the trace where
    // the source serves one whole, else from a pass that pairs the events as Trace::allocations() does
    // (ChunkPairing, completions tracked). With `steps`, `category` is the inferred one (inferCategories'
    // rules for these allocations alone: a continued lifetime's origin and the op-local test, as the bounded
    // analysis's block pass follows them), for an analysis that keeps no per-allocation categories.
    // `completions`: the device has free_completed events (EventFacts): without, the pass ends once every wanted
    // allocation is freed, since nothing later adds to its facts; with, once each has its completion too.
    std::unordered_map<std::uint32_t, AllocationFacts> allocationFacts(
        const MemoryEventSource& source, DeviceId dev, std::vector<std::uint32_t> wanted, const StepSet* steps, bool completions)
    {
        std::unordered_map<std::uint32_t, AllocationFacts> out;
        if (wanted.empty())
            return out;
        if (const Trace* whole = source.wholeTrace()) {
            const std::vector<Category> inferred = steps ? inferCategories(*whole, *steps) : std::vector<Category> {};
            const auto& m = whole->memory();
            for (const std::uint32_t id : wanted) {
                const auto& al = whole->allocations()[id];
                AllocationFacts f;
                f.allocEvent = al.allocEvent;
                if (al.allocEvent != kNoIndex) {
                    f.site = m.site[al.allocEvent];
                    f.scope = m.scope[al.allocEvent];
                    f.category = steps ? inferred[id] : m.category[al.allocEvent];
                    f.time = m.time[al.allocEvent];
                }
                if (al.freeEvent != kNoIndex)
                    f.freeTime = m.time[al.freeEvent];
                if (al.freeCompletedEvent != kNoIndex)
                    f.freeCompletedTime = m.time[al.freeCompletedEvent];
                out.emplace(id, f);
            }
            return out;
        }
        for (const std::uint32_t id : wanted)
            out.emplace(id, AllocationFacts {});
        ImportStats stats = source.skeleton().importStats();
        ChunkPairing pairing(stats, completions); // (the device's blocks pair alike without tracking where it has none)
        // For the inference: the origin of each live block of `dev` (the first alloc of a continued lifetime),
        // the device's matched frees at the current time, its allocs so far and, for the wanted, their count
        // before the alloc (category_inference.cpp inferCategories; bounded_analysis.cpp blockPass).
        struct RecentFree {
            Address address;
            Bytes size;
            TimeNs origin;
        };
        struct WantedLife {
            BlockLife life;
            std::uint32_t allocsBefore = 0;
        };
        std::unordered_map<std::uint32_t, TimeNs> origin;
        std::vector<RecentFree> recentFrees;
        TimeNs recentTime = std::numeric_limits<TimeNs>::min();
        std::uint32_t allocs = 0;
        std::unordered_map<std::uint32_t, WantedLife> lives; // the wanted allocations' lives
        std::size_t unfinished = out.size(); // wanted allocations whose facts a later event may still add to
        struct AllFound { };
        try {
        source.forEachChunk([&](const MemoryEventColumns& m, std::uint64_t first) {
            for (std::size_t j = 0; j < m.count(); ++j) {
                if (unfinished == 0)
                    throw AllFound {};
                const ChunkPairing::Outcome o = pairing.step(m, j, first + j);
                if (steps && m.device[j] == dev) {
                    if (m.time[j] != recentTime) {
                        recentFrees.clear();
                        recentTime = m.time[j];
                    }
                    if (o.replaced)
                        origin.erase(o.replaced->allocation); // never freed, as Trace::allocations() has it
                    if (o.pairing == ChunkPairing::Pairing::Opened) {
                        TimeNs from = m.time[j];
                        for (auto f = recentFrees.rbegin(); f != recentFrees.rend(); ++f)
                            if (f->address == m.address[j] && f->size == m.size[j]) {
                                from = f->origin;
                                break;
                            }
                        origin[o.block.allocation] = from;
                        if (out.count(o.block.allocation))
                            lives[o.block.allocation] = WantedLife { BlockLife { from, std::nullopt, false }, allocs };
                        ++allocs;
                    } else if (o.pairing == ChunkPairing::Pairing::Closed) {
                        const auto at = origin.find(o.block.allocation);
                        const TimeNs from = at != origin.end() ? at->second : m.time[j];
                        if (at != origin.end())
                            origin.erase(at);
                        recentFrees.push_back({ m.address[j], m.size[j], from });
                        if (const auto w = lives.find(o.block.allocation); w != lives.end()) {
                            w->second.life.freeTime = m.time[j];
                            w->second.life.opLocal = from == out[o.block.allocation].time && allocs == w->second.allocsBefore + 1;
                        }
                    }
                }
                if (o.pairing != ChunkPairing::Pairing::Opened && o.pairing != ChunkPairing::Pairing::Closed
                    && o.pairing != ChunkPairing::Pairing::Completed)
                    continue;
                const auto it = out.find(o.block.allocation);
                if (it == out.end())
                    continue;
                AllocationFacts& f = it->second;
                if (o.pairing == ChunkPairing::Pairing::Opened) {
                    f.allocEvent = first + j;
                    f.site = m.site[j];
                    f.scope = m.scope[j];
                    f.category = m.category[j];
                    f.time = m.time[j];
                } else if (o.pairing == ChunkPairing::Pairing::Closed) {
                    f.freeTime = m.time[j];
                    unfinished -= !completions;
                } else {
                    f.freeCompletedTime = m.time[j];
                    unfinished -= completions && f.freeTime;
                }
            }
        });
        } catch (const AllFound&) {
        }
        if (steps)
            for (auto& [id, f] : out)
                if (f.allocEvent != kNoIndex)
                    f.category = inferCategory(*steps, lives[id].life);
        return out;
    }

    // Findings by bytes, except segment_churn: its bytes are cudaFree'd over the run (a speed cost), not memory
    // held at the moment, so it follows every finding that is (it said why a 30 MiB request failed before the
    // live memory that exceeded the capacity did: oom_after_churn.jsonl).
    void rank(Diagnosis& d)
    {
        std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
            const bool ca = a.id == "segment_churn", cb = b.id == "segment_churn";
            return ca != cb ? cb : a.bytes > b.bytes;
        });
    }

    // ---- counters only (an OOM message, a memory_summary) ----

    Diagnosis diagnoseCounters(const Trace& trace, DeviceId dev, Diagnosis d, const std::optional<RecordedOomEvent>& firstOom, TimeNs start)
    {
        d.countersOnly = true;
        MemoryLayers L;
        auto get = [&](std::string_view n) -> std::optional<Bytes> {
            auto v = counterValue(trace, dev, n);
            return v && *v >= 0 ? std::optional<Bytes>(Bytes(*v)) : std::nullopt;
        };
        L.allocated = get(kAllocatedCounter);
        L.reserved = get(kReservedCounter);
        L.process = get(kProcessCounter);
        L.deviceFree = get(kDeviceFreeCounter);
        if (trace.devices()[dev].totalMemory)
            L.deviceTotal = trace.devices()[dev].totalMemory;
        if (firstOom) {
            L.request = firstOom->size;
            d.moment.kind = Moment::Kind::RecordedOom;
            d.moment.time = firstOom->time;
            d.moment.event = firstOom->event;
            d.moment.request = firstOom->size;
        }
        d.moment.reserved = L.reserved.value_or(0);
        d.moment.allocated = L.allocated.value_or(0);
        d.moment.deviceFree = L.deviceFree;
        d.capacity = L.deviceTotal.value_or(0);
        d.capacityOrigin = L.deviceTotal ? "the device's total memory" : "unknown";
        d.policyName = "pytorch (counters only: no allocator state to replay)";
        d.layers = L;

        const Bytes request = L.request.value_or(0);
        const Bytes cachedFree = L.reserved && L.allocated && *L.reserved > *L.allocated ? *L.reserved - *L.allocated : 0;
        const Bytes devFree = L.deviceFree.value_or(0);
        const auto& meta = trace.metadata();
        const bool tf = meta.value("source_format", std::string()) == "tf-oom-report";
        const bool noFigures = !L.allocated && !L.reserved && !L.process && !L.deviceFree;
        if (L.request && noFigures) {
            // no_memory_figures: an OOM message that names the request and nothing else (TF's "OOM when
            // allocating tensor", a PyTorch message cut after "Tried to allocate").
            Finding f;
            f.id = "no_memory_figures";
            f.bytes = request;
            f.proven = false;
            std::string what = "A " + formatBytes(request) + " request failed";
            std::vector<std::string> parts;
            if (auto it = meta.find("tensor_shape"); it != meta.end() && it->is_array()) {
                std::string shape = "shape[";
                for (std::size_t i = 0; i < it->size(); ++i)
                    shape += (i ? "," : "") + std::to_string((*it)[i].get<std::uint64_t>());
                parts.push_back(shape + "]");
            }
            if (auto it = meta.find("tensor_dtype"); it != meta.end() && it->is_string())
                parts.push_back("type " + it->get<std::string>());
            if (auto it = meta.find("allocator"); it != meta.end() && it->is_string())
                parts.push_back("allocator " + it->get<std::string>());
            for (std::size_t i = 0; i < parts.size(); ++i)
                what += (i ? ", " : " (a tensor of ") + parts[i];
            if (!parts.empty())
                what += ")";
            f.statement = what + ", but the message has no memory figures (allocated, reserved, free): what held the "
                + "device, and so why it failed, cannot be said from it; record what is below.";
            f.cause = "the message has no memory figures";
            f.rule = "an OOM message without allocated, reserved or free figures names the request only";
            f.source = tf ? "TensorFlow's \"OOM when allocating tensor with shape[…] and type … by allocator …\" "
                            "(docs/importers.md, OOM text)"
                          : "PyTorch's OutOfMemoryError message, cut after \"Tried to allocate\" (docs/importers.md)";
            if (auto it = meta.find("oom_message_line"); it != meta.end() && it->is_string())
            {
                std::string line = it->get<std::string>();
                if (line.size() > 240) // the evidence quotes its start; the metadata keeps it whole
                    line = line.substr(0, 240) + " …";
                f.evidence.push_back("the message: " + line);
            }
            d.findings.push_back(std::move(f));
        }
        const auto legacyPeak = [&]() -> std::optional<std::pair<std::int64_t, TimeNs>> {
            const auto series = trace.counterSeries();
            std::optional<std::pair<std::int64_t, TimeNs>> peak;
            for (const auto& sample : trace.counterSamples()) {
                const auto& sr = series[sample.series];
                if ((sr.device == dev || sr.device == kNoDevice) && trace.str(sr.name) == kLegacyAllocatedCounter
                    && (!peak || sample.value > peak->first))
                    peak = std::pair { sample.value, sample.time };
            }
            return peak;
        }();
        if (!L.request && !L.allocated && !L.reserved && legacyPeak) {
            // no_addresses: a PyTorch <= 1.9 profiler trace, whose [memory] events have sizes but no addresses.
            Finding f;
            f.id = "no_addresses";
            f.bytes = Bytes(std::max<std::int64_t>(0, legacyPeak->first));
            f.proven = false;
            f.statement = "This profiler trace's memory events record sizes but no addresses (PyTorch <= 1.9): no "
                          "block can be paired, placed or replayed, so neither fragmentation nor a fix can be "
                          "shown; the allocated bytes peak at "
                + formatBytes(f.bytes) + " at " + formatOffsetBetween(start, legacyPeak->second)
                + ". Profile again with PyTorch 1.10 or later (profile_memory=True), or record a memory snapshot.";
            f.cause = "sizes without addresses (PyTorch <= 1.9 profiler)";
            f.rule = "pairing allocations with frees and replaying them needs each block's address";
            f.source = "docs/kineto-import.md (the 2021 schema, no_addresses); the running sum of Bytes is the counter "
                       "\"Allocated (sum of Bytes)\"";
            d.moment.kind = Moment::Kind::PeakReserved;
            d.moment.time = legacyPeak->second;
            d.moment.allocated = f.bytes;
            d.findings.push_back(std::move(f));
        } else if (!L.request) {
            // no_request: counters without a failed request (a memory_summary or a BFC dump alone).
            Finding f;
            f.id = "no_request";
            f.bytes = L.reserved ? *L.reserved : L.allocated.value_or(0);
            f.proven = false;
            std::string held = L.allocated ? formatBytes(*L.allocated) + " allocated" : std::string();
            if (L.reserved)
                held += (held.empty() ? "" : " of ") + formatBytes(*L.reserved) + " reserved";
            if (cachedFree)
                held += " (" + formatBytes(cachedFree) + " of it cached but unallocated)";
            f.statement = "The text names no failed request, only the memory held" + (held.empty() ? "" : ": " + held)
                + "; which request failed and why cannot be said without the OOM message itself.";
            f.cause = "no failed request in the text";
            f.rule = "a memory_summary or an allocator dump alone records what was held, not what was asked for";
            f.source = tf ? "TensorFlow/TSL bfc_allocator.cc DumpMemoryLog (docs/importers.md, OOM text)"
                          : "torch/cuda/memory.py memory_summary (docs/importers.md, OOM text)";
            if (auto n = counterValue(trace, dev, "num_ooms (count)"))
                f.evidence.push_back("CUDA OOMs: " + std::to_string(*n) + " (num_ooms)");
            if (auto n = counterValue(trace, dev, "num_alloc_retries (count)"))
                f.evidence.push_back("cudaMalloc retries: " + std::to_string(*n)
                    + " (num_alloc_retries: each freed the cached blocks and retried cudaMalloc)");
            if (auto it = meta.find("memory_limit"); it != meta.end() && it->is_number_integer())
                f.evidence.push_back("the BFC allocator's limit: " + formatBytes(Bytes(it->get<std::int64_t>())));
            d.findings.push_back(std::move(f));
        }
        if (request > 0 && L.deviceFree && devFree >= request) {
            // free_exceeds_request: PyTorch reads the message's free figure (cudaMemGetInfo) only after the
            // failed cudaMalloc, after release_cached_blocks freed every unsplit cached block and the
            // retry failed too (DeviceCachingAllocator::malloc). Free ≥ the request then means the free
            // bytes changed between the failed call and the reading, or a limit other than free memory
            // refused (a memory fraction refuses in alloc_block without calling cudaMalloc).
            Finding f;
            f.id = "free_exceeds_request";
            f.bytes = request;
            f.proven = false;
            f.statement = "The device reported " + formatBytes(devFree) + " free, more than the " + formatBytes(request)
                + " request: the failed cudaMalloc was not for want of free bytes as the message measured them.";
            f.cause = formatBytes(devFree) + " free ≥ the " + formatBytes(request) + " request";
            f.rule = "the free figure is read after the failure (after the cache release and retry): free ≥ the "
                     "request means the memory changed meanwhile or a limit refused";
            f.source = "PyTorch c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc "
                       "(release_cached_blocks, the retry, then cudaMemGetInfo for the message); alloc_block";
            f.evidence.push_back("device free " + formatBytes(devFree) + " − request " + formatBytes(request) + " = "
                + formatBytes(devFree - request) + " more than asked for");
            std::string retry = "the free figure is taken after PyTorch released its cached blocks "
                                "(release_cached_blocks) and retried cudaMalloc";
            if (auto n = counterValue(trace, dev, "num_alloc_retries (count)"))
                retry += "; num_alloc_retries " + std::to_string(*n) + ": the run did so " + std::to_string(*n)
                    + (*n == 1 ? " time" : " times");
            f.evidence.push_back(retry);
            f.evidence.push_back("another process allocating at the same moment (and freeing before the figure was "
                                 "read) makes cudaMalloc fail with the free figure larger");
            if (auto it = meta.find("allowed_bytes"); it != meta.end() && it->is_number_integer()) {
                const Bytes allowed = Bytes(it->get<std::int64_t>());
                std::string e = "a per-process memory fraction allows " + formatBytes(allowed)
                    + " (\"allowed\"): PyTorch refuses to reserve beyond it whatever the device has free";
                if (L.reserved && *L.reserved + request > allowed)
                    e += "; reserved " + formatBytes(*L.reserved) + " + the request > " + formatBytes(allowed)
                        + ": the fraction refused it";
                f.evidence.push_back(e);
            } else
                f.evidence.push_back("no \"allowed\" figure: no per-process memory fraction limited it (PyTorch "
                                     "prints \"X allowed;\" when set_per_process_memory_fraction is in force)");
            const Bytes held = L.reserved.value_or(L.allocated.value_or(0));
            if (L.deviceTotal && (L.reserved || L.allocated) && held * 100 <= *L.deviceTotal)
                f.evidence.push_back("PyTorch holds " + formatBytes(held) + " (" + formatBytes(L.allocated.value_or(0))
                    + " allocated) of an almost empty " + formatBytes(*L.deviceTotal)
                    + " GPU: a broken CUDA setup (driver and runtime mismatched, a device in a bad state), not memory, "
                      "is likely");
            d.findings.push_back(std::move(f));
        }
        if (L.process && L.reserved && *L.process > *L.reserved) {
            Finding f;
            f.id = "outside_allocator";
            f.bytes = *L.process - *L.reserved;
            f.statement = formatBytes(f.bytes) + " of this process's " + formatBytes(*L.process)
                + " is outside PyTorch's allocator (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers, other "
                  "allocators): no PYTORCH_CUDA_ALLOC_CONF setting touches it.";
            f.cause = formatBytes(f.bytes) + " held outside PyTorch's allocator";
            f.rule = "process in use − reserved by PyTorch = memory this process took without the caching allocator";
            f.source = "PyTorch c10/cuda/CUDACachingAllocator.cpp, the OutOfMemoryError message (\"Including non-PyTorch "
                       "memory, this process has … in use\")";
            f.evidence.push_back("process in use " + formatBytes(*L.process) + " − reserved by PyTorch "
                + formatBytes(*L.reserved) + " = " + formatBytes(f.bytes));
            if (L.deviceTotal && L.deviceFree && *L.deviceTotal > *L.process + *L.deviceFree)
                f.evidence.push_back("other processes (or the driver) hold "
                    + formatBytes(*L.deviceTotal - *L.process - *L.deviceFree) + " of the " + formatBytes(*L.deviceTotal)
                    + " device");
            d.findings.push_back(std::move(f));
        }
        if (request > 0 && request > devFree + cachedFree && L.deviceFree) {
            Finding f;
            f.id = "capacity";
            f.bytes = request - devFree - cachedFree;
            f.statement = "The " + formatBytes(request) + " request exceeds the device's free " + formatBytes(devFree)
                + " plus PyTorch's cached free " + formatBytes(cachedFree) + " by " + formatBytes(f.bytes)
                + ": no allocator setting can serve it; that much live memory must go (or a larger GPU).";
            f.cause = "the request exceeds all free memory by " + formatBytes(f.bytes);
            f.rule = "a request larger than device free + reserved-but-unallocated cannot be served by any placement";
            f.source = "allocators.md §6.1 (the lower bound); §1.8 (malloc path)";
            f.proven = true;
            d.noSettingHelps = true;
            d.findings.push_back(std::move(f));
        } else if (request > 0 && cachedFree > 0 && (cachedFree >= request || request > devFree)) {
            // The rule: PyTorch looks in its cache (get_free_block) before it calls cudaMalloc, and the
            // message's reserved is read after release_cached_blocks freed every unsplit cached block. So
            // reserved − allocated that remains lies in segments live blocks split: when it alone is ≥ the
            // request, no single free block there was large enough; when it is smaller but with the device's
            // free it would be enough (and the device's free alone is not), only a layout that joins free
            // memory (expandable segments) could have served it. Either way the free bytes are fragmented.
            Finding f;
            f.id = "external_fragmentation";
            f.bytes = cachedFree;
            f.proven = false;
            f.statement = formatBytes(cachedFree) + " is reserved by PyTorch but unallocated, "
                + (cachedFree >= request ? "more than the " + formatBytes(request) + " request by itself"
                                         : "enough with the device's free " + formatBytes(devFree) + " for the "
                                 + formatBytes(request) + " request")
                + ", yet no free block was large enough: fragmentation. expandable_segments:True or "
                  "max_split_size_mb are candidates, but without a trace no replay can prove either.";
            f.cause = formatBytes(cachedFree) + " cached but unallocated (fragmentation, unproven)";
            f.rule = "an OOM with reserved − allocated ≥ the request, or with reserved − allocated + device free ≥ the "
                     "request > device free, means the free memory is split into blocks too small (external "
                     "fragmentation)";
            f.source = "allocators.md §5.4 (reserved-but-unallocated), §1.5–1.6 (best fit, splitting), §1.11";
            d.findings.push_back(std::move(f));
        }
        rank(d);
        d.lowerBounds.push_back("an OOM message has no blocks, segments or stacks: the findings rest on its counters");
        d.recordNext = tf ? kRecordTfLog : kRecordSnapshot;
        if (tf) {
            d.recordNextWhy = "the allocator's log or a profile says what held the memory";
            if (d.policyOrigin != "given") {
                d.policy = "tf-bfc";
                d.policyOrigin = "a TensorFlow OOM report: BFC";
            }
            d.policyName = d.policy + " (counters only: no allocator state to replay)";
        }
        std::string v = request ? "A " + formatBytes(request) + " request failed" : "Memory counters only";
        if (L.deviceFree)
            v += " with " + formatBytes(devFree) + " free";
        if (L.deviceTotal)
            v += " on a " + formatBytes(*L.deviceTotal) + " GPU";
        if (L.allocated && L.reserved)
            v += " (PyTorch: " + formatBytes(*L.allocated) + " allocated of " + formatBytes(*L.reserved) + " reserved)";
        if (!d.findings.empty())
            v += ": " + d.findings.front().cause + " (" + d.findings.front().id + ")";
        if (d.findings.size() > 1)
            v += "; " + d.findings[1].cause + " (" + d.findings[1].id + ")";
        v += d.noSettingHelps ? "; no allocator setting can help"
            : tf              ? "; record the allocator's log or a profile (below)"
                              : "; record a memory snapshot so a fix can be proven";
        d.verdict = v + ".";
        return d;
    }

} // namespace

Diagnosis diagnose(const Trace& trace, const DiagnosisOptions& options)
{
    return diagnose(*traceView(trace), options);
}

Diagnosis diagnose(const MemoryEventSource& source, const DiagnosisOptions& options)
{
    // The tables (devices, streams, strings, metadata, annotations, counters): the trace itself where the source
    // serves one whole (traceView), else the source's skeleton. Every replay and scan reads the source: a whole
    // trace's is one chunk, and its replays use the pairing the trace computed once.
    const Trace& trace = source.skeleton();
    Diagnosis d;
    auto device = options.device ? options.device : replay::defaultReplayDevice(source);
    if (!device && !trace.counterSeries().empty()) {
        // The device whose recorded counter peaks highest, a GPU before the host (a PyTorch <= 1.9 profiler
        // trace counts the CPU's allocations too), as the viewer opens such a trace.
        const auto series = trace.counterSeries();
        std::optional<std::pair<bool, std::int64_t>> best;
        for (const auto& sample : trace.counterSamples()) {
            const auto& sr = series[sample.series];
            const DeviceId on = sr.device == kNoDevice ? DeviceId(0) : sr.device;
            if (on >= trace.devices().size())
                continue;
            const std::pair<bool, std::int64_t> key { trace.devices()[on].type != DeviceType::Cpu, sample.value };
            if (!best || key > *best) {
                best = key;
                device = on;
            }
        }
    }
    if (!device) // the input, not how gpumem was called: exit 1, as replay, fit and sweep give (review finding)
        throw Error("the trace has no memory events and no memory counters: nothing to explain");
    if (*device >= trace.devices().size())
        throw UsageError("device " + std::to_string(*device) + " does not exist; the trace has "
            + std::to_string(trace.devices().size()) + " devices");
    const DeviceId dev = *device;
    d.device = dev;
    d.deviceLabel = deviceLabel(trace.devices()[dev]);
    const std::uint64_t rebuilt = replay::initialStateEventCount(trace, dev);
    std::optional<AllocationSourcePeak> outsideFeed; // outsideMemory's figure from the events, fed by the pass
    if (!options.outsideBytes && outsideMemoryNeedsEvents(trace))
        outsideFeed.emplace(trace, dev);
    // The replays' options, but for the capacity (the facts give it: a recorded OOM takes the device's size).
    replay::ReplayOptions ro;
    ro.device = dev;
    ro.outsideBytes = options.outsideBytes;
    ro.onOom = replay::OnOom::Stop;
    ro.keepFinalState = true;
    ro.recordSegmentEvents = true;
    // One look-ahead pass for the baseline, the moment's and the candidates' replays (over a streamed source,
    // a pass of its own per replay otherwise).
    ro.foresight = replay::makeForesightMemo();
    // Over a streamed source the facts are gathered in the replays' look-ahead pass, one decoding of the source
    // less (issue 22: a tenth of text analyze's time on a 10 M-event .gmt). Not where the outside-memory figure
    // comes from the events: the look-ahead then depends on the capacity, which the facts give. (A whole trace's
    // look-ahead ends after a few events.)
    const bool factsAhead = !source.wholeTrace() && !outsideFeed;
    EventFacts facts;
    bool factsGathered = false;
    if (factsAhead) {
        // The start every what-if comparison uses (replay/start_state.h, issue 16): memory the trace shows
        // from before its window is live from the start, so explain agrees with replay, fit and sweep.
        replay::applyStartState(ro, source, replay::StartState::Recorded);
        std::optional<EventFactsScan> scan(std::in_place, dev, options.at, rebuilt, nullptr);
        factsGathered = replay::foreseeWith(
            source, ro, [&](const MemoryEventColumns& m, std::uint64_t first) { scan->visit(m, first); },
            [&] { scan.emplace(dev, options.at, rebuilt, nullptr); });
        if (factsGathered)
            facts = scan->facts();
    }
    if (!factsGathered)
        facts = eventFacts(source, dev, options.at, rebuilt, outsideFeed ? &*outsideFeed : nullptr);
    if (options.outsideBytes)
        d.outside = OutsideMemory { *options.outsideBytes, 0, "command_line" };
    else
        d.outside = outsideMemory(trace, dev, outsideFeed ? &*outsideFeed : nullptr);
    const TimeNs start = sourceOrigin(source);

    d.policy = options.policy;
    d.policyOrigin = "given";
    if (d.policy.empty())
        d.policy = defaultPolicy(trace, d.policyOrigin);
    const replay::PolicySpec spec = replay::parsePolicySpec(d.policy);
    replay::validatePolicySpec(spec);

    if (!facts.hasRequests) {
        // An OOM event without counters (a message that names only the request) is explained too.
        if (facts.firstOom || counterValue(trace, dev, kReservedCounter) || counterValue(trace, dev, kAllocatedCounter)
            || counterValue(trace, dev, kProcessCounter) || counterValue(trace, dev, kLegacyAllocatedCounter))
            return diagnoseCounters(trace, dev, std::move(d), facts.firstOom, start);
        // Segment events alone (a traced PyTorch run: the caching allocator's cudaMalloc, not its blocks) hold
        // no request to replay; say where the requests are (review finding, 2026-12-04).
        if (facts.segmentReservedPeak > 0)
            throw Error("device " + d.deviceLabel + " has segment events (" + formatBytes(facts.segmentReservedPeak)
                + " reserved at the peak) but no allocation requests and no memory counters: "
                "nothing to replay; `gpumem record` and Nsight see a caching allocator's cudaMalloc and cuMemMap calls, not its "
                "blocks: explain a PyTorch memory snapshot of the same run (torch.cuda.memory._record_memory_history), and see "
                "this trace's segments with `gpumem info` or `analyze`");
        throw Error("device " + d.deviceLabel + " has no allocations and no memory counters: nothing to explain");
    }

    const std::optional<RecordedOomEvent>& recordedOom = facts.firstOom;
    const Bytes total = trace.devices()[dev].totalMemory;
    d.capacity = options.capacity;
    d.capacityOrigin = options.capacity ? "given" : "unlimited";
    if (!d.capacity && recordedOom && total) {
        d.capacity = total;
        d.capacityOrigin = "the device's total memory: the trace records an OOM";
    }

    ro.capacity = d.capacity;
    ro.totalMemory = options.capacity; // a given capacity is the GPU's size, as `gpumem fit` probes it
    if (!factsAhead) // (the start state: as above)
        replay::applyStartState(ro, source, replay::StartState::Recorded);
    const replay::ReplayResult r0 = replay::Replayer(ro).run(source, spec);
    d.policyName = r0.policy;
    d.ooms = r0.ooms;
    d.peakReserved = r0.peakReserved.bytes;
    d.finalReserved = r0.finalReserved;
    d.finalAllocated = r0.finalAllocated;
    d.deviceCalls = r0.deviceCalls();
    d.allocRetries = r0.allocRetries;
    d.lowerBound = options.analysis ? options.analysis->fragmentation.lowerBound
                                    : replay::livePeak(source, dev, ro.openingAllocated, true);
    // The run's own reserved peak from the facts pass's segment sums and the counters (recordedReserved made a
    // summary of the trace for it: a pass that pairs every event, a twentieth of a streamed verdict).
    d.recordedPeakReserved = recordedReservedBytes(trace, dev, facts.segmentReservedPeak);

    // The moment and the state there.
    replay::ReplayResult r1;
    const replay::ReplayResult* at = &r0;
    auto stateAt = [&](std::uint64_t event) {
        replay::ReplayOptions o = ro;
        o.stopAfterEvent = event;
        o.onOom = replay::OnOom::Skip;
        o.recordSegmentEvents = false;
        r1 = replay::Replayer(o).run(source, spec);
        at = &r1;
    };
    const replay::FailureDetail* failure = nullptr;
    if (options.at) {
        const std::uint64_t last = facts.lastAt; // the events are in time order: the last of the device at or before it
        if (last == kNoIndex)
            throw UsageError("--at " + formatOffsetBetween(start, *options.at) + " is before the first memory event of "
                + d.deviceLabel);
        const TimeNs end = facts.deviceEnd;
        if (*options.at > end)
            throw UsageError("--at " + formatOffsetBetween(start, *options.at) + " is after the last memory event of "
                + d.deviceLabel + " (" + formatOffsetBetween(start, end) + "); give a time within the trace");
        stateAt(last);
        d.moment.kind = Moment::Kind::Time;
        d.moment.time = *options.at;
        d.moment.event = last;
    } else if (!r0.failures.empty()) {
        const auto& f = r0.failures.front();
        d.moment.kind = Moment::Kind::ReplayedOom;
        d.moment.time = f.time;
        d.moment.event = f.event;
        d.moment.request = f.size;
        d.moment.stream = f.stream;
        d.moment.reserved = f.reserved;
        d.moment.allocated = f.allocated;
        if (d.capacity)
            d.moment.deviceFree = f.deviceFree;
        d.moment.refusedBy = f.refusedBy;
        if (!r0.failureDetails.empty())
            failure = &r0.failureDetails.front();
    } else if (recordedOom) {
        stateAt(recordedOom->event);
        d.moment.kind = Moment::Kind::RecordedOom;
        d.moment.time = recordedOom->time;
        d.moment.event = recordedOom->event;
        d.moment.request = recordedOom->size;
        d.moment.stream = trace.streams()[recordedOom->stream].handle;
    } else {
        stateAt(r0.peakReserved.event);
        d.moment.kind = Moment::Kind::PeakReserved;
        d.moment.time = r0.peakReserved.time;
        d.moment.event = r0.peakReserved.event;
    }
    if (at != &r0) {
        d.moment.reserved = at->finalReserved;
        d.moment.allocated = at->finalAllocated;
        if (d.capacity)
            d.moment.deviceFree = d.capacity - std::min(d.capacity, at->finalReserved);
    }

    Context c { trace, dev, start, options.analysis, {}, nullptr, facts.firstWindowEvent, {} };
    std::vector<std::uint32_t> liveIds;
    for (const auto& [a, addr] : at->liveAllocations) {
        c.allocationAt.emplace(addr, a);
        liveIds.push_back(a);
    }
    // An analysis without per-allocation categories (the bounded one, analyze/bounded_analysis.h) has them
    // inferred here for the allocations live at the moment, where the trace records none.
    const Analysis* an = options.analysis;
    // (Not for the verdict alone, which names no category: over a whole trace the inference is a pass of its own.)
    const bool infer = an && an->categories.empty() && !an->categoriesRecorded && !options.verdictOnly;
    c.facts = allocationFacts(source, dev, std::move(liveIds), infer ? &an->steps : nullptr, facts.completions);
    static const PolicyState kEmpty;
    const PolicyState& state = at->finalState ? *at->finalState : kEmpty;
    c.state = &state;

    const replay::PolicySpec& base = innermost(spec);
    const bool pytorch = base.policy == "pytorch" || base.policy == "gmlake";
    // The context every replay of the trace takes (its recorded settings and PyTorch version), so that the rules
    // the findings apply (rounding, the small pool, max_split_size) are the ones the replays ran.
    const replay::PolicyContext pctx = replay::policyContextOf(trace.metadata());
    std::optional<replay::PyTorchConfig> config;
    if (base.policy == "pytorch")
        config = replay::pytorchConfigFor(base, pctx);

    const bool oom = d.moment.isOom();
    const Bytes request = d.moment.request;
    const Bytes rounded = config && request ? config->roundSize(request) : request;
    const Bytes devFree = d.moment.deviceFree.value_or(0);

    // Totals of the state.
    Bytes freeCached = 0, largestFree = 0, live = 0, pending = 0, roundingOverhead = 0, allocatedBytes = 0;
    std::vector<EvidenceSegment> splitSegments; // segments with free blocks and live blocks
    for (const auto& seg : state.segments) {
        bool hasFree = false, hasLive = false;
        for (const auto& b : seg.blocks) {
            if (b.state == BlockState::Free) {
                freeCached += b.size;
                largestFree = std::max(largestFree, b.size);
                hasFree = true;
            } else if (b.state == BlockState::Allocated) {
                live += b.requested ? b.requested : b.size;
                allocatedBytes += b.size;
                if (b.requested && b.size > b.requested)
                    roundingOverhead += b.size - b.requested;
                hasLive = true;
            } else if (b.state == BlockState::PendingFree) {
                pending += b.size;
                hasLive = true;
            }
        }
        if (hasFree && hasLive)
            splitSegments.push_back(segmentEvidence(c, seg));
    }
    const auto streams = replay::streamMemory(state);

    // capacity
    if (oom && d.capacity) {
        const Bytes need = live + pending + request;
        const bool beforeWindow = !r0.failures.empty() && r0.failures.front().beforeWindow;
        if (need > d.capacity || beforeWindow || d.lowerBound > d.capacity) {
            Finding f;
            f.id = "capacity";
            const Bytes over = need > d.capacity ? need - d.capacity : (d.lowerBound > d.capacity ? d.lowerBound - d.capacity : 0);
            f.bytes = over;
            if (need > d.capacity)
                f.statement = "The live memory at the failure (" + formatBytes(live + pending) + ") plus the "
                    + formatBytes(request) + " request exceeds the " + formatBytes(d.capacity) + " capacity by "
                    + formatBytes(over) + ": no allocator setting can help; that much live memory must go.";
            else
                f.statement = "The run's live bytes peak at " + formatBytes(d.lowerBound) + ", above the "
                    + formatBytes(d.capacity) + " capacity: no allocator setting can make it fit; "
                    + formatBytes(over) + " of live memory must go.";
            f.cause = "the live memory exceeds the capacity by " + formatBytes(over);
            f.rule = "no placement holds more live bytes than the device has: the lower bound max live bytes "
                     "exceeds the capacity";
            f.source = "allocators.md §6.1 (offline optimum and lower bound)";
            f.contributors = contributors(c, 5);
            for (const auto& x : f.contributors)
                f.evidence.push_back("live by " + x.by + ": " + x.label + " " + formatBytes(x.bytes) + " in "
                    + counted(x.blocks, "block", "blocks"));
            d.noSettingHelps = true;
            d.findings.push_back(std::move(f));
        }
    }

    // external_fragmentation
    if (freeCached > 0 && !d.noSettingHelps && (!oom || (largestFree < rounded && freeCached + devFree >= rounded))) {
        Finding f;
        f.id = "external_fragmentation";
        Bytes pinned = 0;
        for (const auto& s : splitSegments)
            pinned += s.freeBytes;
        f.bytes = oom ? freeCached : pinned;
        if (oom)
            f.statement = formatBytes(freeCached) + " was cached free when the " + formatBytes(request)
                + " request failed, but the largest free block was " + formatBytes(largestFree)
                + (freeCached >= rounded ? "" : " (with the device's free " + formatBytes(devFree) + " enough in total)")
                + ": the free memory is split across segments that live blocks pin.";
        else
            f.statement = formatBytes(pinned) + " of the " + formatBytes(d.moment.reserved)
                + " reserved at this moment is free but held in segments that live blocks pin, so it cannot be "
                  "released or reused for larger requests (external fragmentation "
                + percent(freeCached ? double(freeCached - largestFree) / double(freeCached) : 0) + ").";
        f.cause = oom ? formatBytes(freeCached) + " cached free but no block of " + formatBytes(rounded)
                      : formatBytes(pinned) + " free in pinned segments";
        f.rule = "external fragmentation = (free − largest_free)/free; a request fails when no single free block "
                 "fits it although the free bytes would";
        f.source = "allocators.md §5.4; PyTorch CUDACachingAllocator.cpp get_free_block, release_cached_blocks "
                   "(only wholly free segments are released, §1.10)";
        f.evidence.push_back("free blocks: " + std::to_string(failure ? failure->freeBlockCount : 0) + (failure ? "" : " (see segments)")
            + "; largest " + formatBytes(largestFree) + "; external fragmentation "
            + percent(freeCached ? double(freeCached - largestFree) / double(freeCached) : 0));
        if (!failure)
            f.evidence.pop_back();
        addSegmentEvidence(c, f, splitSegments);
        if (f.bytes > 0 && (oom || pinned >= kMiB))
            d.findings.push_back(std::move(f));
    }

    // oversize_split: a segment large enough for the request carved by smaller requests (PyTorch large pool).
    if (oom && config && !d.noSettingHelps && rounded > kMiB && rounded < config->maxSplitSize && !config->expandableSegments) {
        Finding f;
        f.id = "oversize_split";
        std::vector<EvidenceSegment> carved;
        for (const auto& seg : state.segments) {
            if (seg.expandable || seg.smallPool || seg.size < rounded)
                continue;
            bool smallOnly = true, anyLive = false;
            for (const auto& b : seg.blocks)
                if (b.state == BlockState::Allocated || b.state == BlockState::PendingFree) {
                    anyLive = true;
                    smallOnly = smallOnly && b.size < rounded;
                }
            if (anyLive && smallOnly) {
                carved.push_back(segmentEvidence(c, seg));
                f.bytes += seg.size;
            }
        }
        if (!carved.empty()) {
            f.statement = counted(carved.size(), "segment", "segments") + " of at least " + formatBytes(rounded)
                + " (" + formatBytes(f.bytes) + (carved.size() == 1 ? ") was" : ") were")
                + " carved up by smaller requests, so the "
                + formatBytes(request) + " request found no block: max_split_size_mb is "
                + (config->maxSplitSize == replay::kUnlimited ? "not set" : "above the request")
                + ", so large cached blocks are split for small requests.";
            f.cause = "large segments carved by smaller requests";
            f.rule = "without max_split_size_mb a large-pool block of any size is split for a smaller request; "
                     "with it, blocks ≥ max_split_size are never split or handed to smaller requests";
            f.source = "allocators.md §1.5 step 4, §1.6; PyTorch CUDACachingAllocator.cpp get_free_block, should_split";
            addSegmentEvidence(c, f, carved, 4);
            d.findings.push_back(std::move(f));
        }
    }

    // stream_stranded
    if (streams.size() > 1) {
        const StreamKey mine = oom ? d.moment.stream : 0;
        Bytes otherFree = 0, otherLargest = 0;
        for (const auto& seg : state.segments)
            if (seg.stream != mine)
                for (const auto& b : seg.blocks)
                    if (b.state == BlockState::Free) {
                        otherFree += b.size;
                        otherLargest = std::max(otherLargest, b.size);
                    }
        if (otherFree > 0 && (!oom || otherLargest >= rounded || otherFree + devFree >= rounded || otherFree >= kMiB)) {
            Finding f;
            f.id = "stream_stranded";
            f.bytes = otherFree;
            f.streams = streams;
            f.statement = formatBytes(otherFree) + " is cached free on streams other than "
                + (oom ? "the failing request's (" + std::to_string(mine) + ")" : "the default stream")
                + "; PyTorch reuses a free block only for requests on its own stream"
                + (oom && otherLargest >= rounded ? ", and one of them (" + formatBytes(otherLargest) + ") would have fit"
                                                   : "")
                + ".";
            f.cause = formatBytes(otherFree) + " cached on other streams";
            f.rule = "free blocks are keyed by (stream, size, address): a request never takes another stream's "
                     "cached block; only empty_cache or the OOM recovery returns whole free segments";
            f.source = "allocators.md §1.12, §1.5; PyTorch CUDACachingAllocator.cpp get_free_block (BlockComparatorSize)";
            for (const auto& s : streams)
                f.evidence.push_back("stream " + std::to_string(s.stream) + ": reserved " + formatBytes(s.reserved)
                    + ", free " + formatBytes(s.free));
            d.findings.push_back(std::move(f));
        }
    }

    // pending_frees
    if (pending > 0) {
        Finding f;
        f.id = "pending_frees";
        f.bytes = pending;
        std::uint64_t count = 0;
        TimeNs longest = 0;
        for (const auto& seg : state.segments)
            for (const auto& b : seg.blocks)
                if (b.state == BlockState::PendingFree) {
                    ++count;
                    EvidenceBlock e = c.block(b, seg.stream);
                    std::string line = "pending " + c.blockText(e);
                    if (auto it = c.allocationAt.find(b.address); it != c.allocationAt.end()) {
                        const auto fa = c.facts.find(it->second);
                        if (fa != c.facts.end() && fa->second.freeTime && fa->second.freeCompletedTime) {
                            const TimeNs wait = *fa->second.freeCompletedTime - *fa->second.freeTime;
                            longest = std::max(longest, wait);
                            line += "; freed " + formatOffsetBetween(start, *fa->second.freeTime)
                                // (below a microsecond the figure printed as 0.000000 s: a state rebuilt
                                // from before the window has its events nanoseconds apart)
                                + (wait >= 1000 ? ", reusable after " + formatSeconds(wait)
                                                : ", its free_completed recorded within 1 µs of the free");
                        }
                    }
                    if (f.blocks.size() < 6) {
                        f.blocks.push_back(e);
                        f.evidence.push_back(line);
                    }
                }
        f.statement = counted(count, "block", "blocks") + " (" + formatBytes(pending) + ") had been freed by the program but "
            + (count == 1 ? "was not reusable yet: it was used on another stream (record_stream) and waits"
                          : "were not reusable yet: they were used on another stream (record_stream) and wait")
            + " for its work to finish"
            + (longest >= 1000 ? " (the longest for " + formatSeconds(longest) + ")" : std::string()) + ".";
        f.cause = formatBytes(pending) + " freed but pending on stream events";
        f.rule = "a block freed after record_stream(s) returns to the pool only when the events on s complete "
                 "(free_completed)";
        f.source = "allocators.md §1.7 steps 2 and 4; PyTorch CUDACachingAllocator.cpp free, process_events";
        d.findings.push_back(std::move(f));
    }

    // allocator_limit
    if (oom && failure && failure->refusedByPolicy) {
        Finding f;
        f.id = "allocator_limit";
        f.bytes = d.moment.reserved;
        f.statement = "The request was refused by " + d.moment.refusedBy + ", not by the device"
            + (d.capacity ? std::string(" (") + formatBytes(devFree) + " of the device was still free)" : std::string())
            + ".";
        f.cause = "refused by " + d.moment.refusedBy;
        f.rule = "an allocator limit below the device refuses growth without asking the driver";
        f.source = "allocators.md §1.8 step 4b (per_process_memory_fraction), §3.2 (RMM maximum_pool_size), §2.4 "
                   "(BFC memory_limit)";
        f.evidence.push_back("reserved " + formatBytes(d.moment.reserved) + " when the " + formatBytes(request)
            + " request failed");
        d.findings.push_back(std::move(f));
    }

    // expandable_max_split (PyTorch issue 123548)
    if (config && config->expandableSegments && config->maxSplitSize != replay::kUnlimited) {
        Finding f;
        f.id = "expandable_max_split";
        std::vector<EvidenceSegment> segs;
        for (const auto& seg : state.segments) {
            if (!seg.expandable)
                continue;
            Bytes oversize = 0;
            for (const auto& b : seg.blocks)
                if (b.state == BlockState::Free && b.size >= config->maxSplitSize)
                    oversize += b.size;
            if (oversize) {
                f.bytes += oversize;
                segs.push_back(segmentEvidence(c, seg));
            }
        }
        if (f.bytes > 0 && (!oom || rounded < config->maxSplitSize)) {
            f.statement = formatBytes(f.bytes) + " of mapped free memory inside expandable segments is in blocks of at "
                "least max_split_size (" + formatBytes(config->maxSplitSize)
                + "), which the oversize rule keeps from smaller requests: the two settings together leave mapped "
                  "holes unusable.";
            f.cause = formatBytes(f.bytes) + " of expandable holes barred by max_split_size_mb";
            f.rule = "a request below max_split_size never takes a free block of max_split_size or more, also inside "
                     "an expandable segment";
            f.source = "allocators.md §1.5 step 4, §1.11; PyTorch issue 123548";
            addSegmentEvidence(c, f, segs, 4);
            d.findings.push_back(std::move(f));
        }
    }

    // segment_churn: cudaFree bursts in the replay and retries after freeing the cache
    {
        std::uint64_t bursts = 0, frees = 0;
        Bytes freedBytes = 0;
        std::vector<std::string> times;
        std::uint64_t lastEvent = kNoIndex;
        // The failing request's own flush (release_cached_blocks before its last cudaMalloc) is the OOM's
        // recovery, not churn before it: its cudaFree calls and its retry are left out of the counts.
        const bool failed = !r0.failures.empty();
        const std::uint64_t failingEvent = failed ? r0.failures.front().event : kNoIndex;
        for (const auto& rec : r0.segmentEvents) {
            if (rec.call.kind != EventKind::SegmentFree && rec.call.kind != EventKind::SegmentUnmap)
                continue;
            if (rec.event == failingEvent)
                continue;
            ++frees;
            freedBytes += rec.call.size;
            if (rec.event != lastEvent) {
                ++bursts;
                if (times.size() < 5)
                    times.push_back(formatOffsetBetween(start, rec.time));
            }
            lastEvent = rec.event;
        }
        std::uint64_t retries = r0.allocRetries;
        if (failed && pytorch && retries > 0)
            --retries; // the failing request's own retry
        if (retries > 0 || bursts >= 2) {
            Finding f;
            f.id = "segment_churn";
            f.bytes = freedBytes;
            f.statement = counted(retries, "cudaMalloc retry", "cudaMalloc retries")
                + " after freeing the whole cache and " + counted(frees, "cudaFree", "cudaFree calls") + " of "
                + formatBytes(freedBytes) + " in " + counted(bursts, "burst", "bursts")
                + (failed && pytorch ? " before the failure (num_alloc_retries " + std::to_string(r0.allocRetries)
                              + " with the failing request's own retry)"
                                     : (failed ? " before the failure" : std::string()))
                + ": the allocator gave memory back and took it again, a synchronising speed cost.";
            f.cause = counted(retries, "cache flush", "cache flushes") + " and " + counted(frees, "cudaFree", "cudaFrees");
            f.rule = "when cudaMalloc fails PyTorch frees every wholly free cached segment and retries "
                     "(num_alloc_retries; DeepSpeed warns of these \"cache flushes\")";
            f.source = "allocators.md §1.8 step 4e, §1.10; PyTorch CUDACachingAllocator.cpp release_cached_blocks";
            if (!times.empty()) {
                std::string t = "cudaFree bursts at";
                for (const auto& x : times)
                    t += " " + x;
                f.evidence.push_back(t + (bursts > times.size() ? " …" : ""));
            }
            f.evidence.push_back(counted(r0.deviceCounters.mallocCalls, "cudaMalloc", "cudaMalloc calls") + ", "
                + counted(r0.deviceCounters.freeCalls, "cudaFree", "cudaFree calls") + " in the replay");
            d.findings.push_back(std::move(f));
        }
    }

    // growth_across_steps
    if (options.analysis && options.analysis->leaks.leaking) {
        const auto& lk = options.analysis->leaks;
        Finding f;
        f.id = "growth_across_steps";
        f.bytes = 0;
        for (const auto& s : lk.sites)
            f.bytes += s.bytes;
        f.statement = "Live memory grows by " + formatBytes(Bytes(std::max(0.0, lk.growthPerStep)))
            + " per step: " + lk.reason;
        f.cause = "growth of " + formatBytes(Bytes(std::max(0.0, lk.growthPerStep))) + " per step";
        f.rule = "with ≥ 3 steps, the allocated bytes at each step start strictly increase; the sites are those "
                 "whose blocks from ≥ 2 earlier steps are still live";
        f.source = "docs/analysis.md (leak rule), analyze/steps.h detectLeaks";
        for (std::size_t i = 0; i < lk.sites.size() && i < 5; ++i)
            f.evidence.push_back(lk.sites[i].label + ": " + formatBytes(lk.sites[i].bytes) + " in "
                + counted(lk.sites[i].blocks, "block", "blocks") + " from "
                + std::to_string(lk.sites[i].stepsWithSurvivors) + " steps");
        d.findings.push_back(std::move(f));
    }

    // rounding_overhead
    if (roundingOverhead >= kMiB && allocatedBytes > 0 && double(roundingOverhead) >= 0.01 * double(allocatedBytes)) {
        Finding f;
        f.id = "rounding_overhead";
        f.bytes = roundingOverhead;
        std::map<Bytes, std::pair<Bytes, std::uint64_t>> bySize; // requested size → overhead, blocks
        for (const auto& seg : state.segments)
            for (const auto& b : seg.blocks)
                if (b.state == BlockState::Allocated && b.requested && b.size > b.requested) {
                    auto& x = bySize[b.requested];
                    x.first += b.size - b.requested;
                    ++x.second;
                }
        std::vector<std::pair<Bytes, std::pair<Bytes, std::uint64_t>>> sizes(bySize.begin(), bySize.end());
        std::stable_sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
        f.statement = formatBytes(roundingOverhead) + " (" + percent(double(roundingOverhead) / double(allocatedBytes))
            + " of the allocated bytes) is rounding and unsplit padding: blocks larger than their requests.";
        f.cause = formatBytes(roundingOverhead) + " of rounding";
        f.rule = "allocated − requested (round_size to 512 B or power-of-two divisions; blocks not split when the "
                 "remainder is ≤ 1 MiB)";
        f.source = "allocators.md §1.2, §1.6, §5.4 (internal fragmentation)";
        for (std::size_t i = 0; i < sizes.size() && i < 4; ++i)
            f.evidence.push_back("requests of " + std::to_string(sizes[i].first) + " B: "
                + formatBytes(sizes[i].second.first) + " over " + counted(sizes[i].second.second, "block", "blocks"));
        d.findings.push_back(std::move(f));
    }

    // outside_allocator: the trace records an OOM that the replay on the whole device does not reproduce,
    // so part of the device was not this allocator's to take.
    const bool unreproduced = d.moment.kind == Moment::Kind::RecordedOom && d.capacity != 0;
    if (unreproduced && d.capacity > d.moment.reserved + rounded) {
        Finding f;
        f.id = "outside_allocator";
        f.bytes = d.capacity - d.moment.reserved - rounded;
        f.statement = "The replay on the whole " + formatBytes(d.capacity) + " device serves this "
            + formatBytes(request) + " request with " + formatBytes(d.moment.reserved)
            + " reserved, yet the run recorded an OOM: at least " + formatBytes(f.bytes)
            + " of the device was held outside this allocator (other processes, the CUDA context, NCCL or "
              "cuBLAS workspaces, another allocator) or before the trace.";
        f.cause = "at least " + formatBytes(f.bytes) + " of the device held outside the allocator";
        f.rule = "an OOM with reserved + request below the device's memory means the rest was not free to the "
                 "allocator";
        f.source = "allocators.md §1.8 step 5 (the oom entry's device_free), §1.17 (driver free memory is not in "
                   "the trace)";
        f.evidence.push_back("device " + formatBytes(d.capacity) + " − reserved " + formatBytes(d.moment.reserved)
            + " − request " + formatBytes(rounded) + " = " + formatBytes(f.bytes));
        d.findings.push_back(std::move(f));
    }

    // before_trace: what the window leaves unknown
    {
        const Bytes opening = replay::openingAllocated(source, dev);
        const std::string format = trace.metadata().value("source_format", std::string());
        const bool profiler = format == "kineto" || format == "pytorch-memory-timeline" || format == "xplane"
            || format == "nsys-sqlite";
        const bool reconstructed = replay::initialStateEventCount(trace, dev) > 0;
        if (opening > 0 || profiler || (r0.unmatchedFrees > 0 && !reconstructed)) {
            Finding f;
            f.id = "before_trace";
            f.bytes = opening;
            std::string what;
            if (opening > 0) {
                what = formatBytes(opening) + " was already allocated when the trace began: every replay holds it"
                       " from the start, but not how the cache around it was laid out";
                d.lowerBounds.push_back(formatBytes(opening) + " allocated before the trace is held, its cache unknown");
            }
            if (r0.unmatchedFrees > 0 && !reconstructed) {
                what += std::string(what.empty() ? "" : "; ") + counted(r0.unmatchedFrees, "free", "frees")
                    + " of blocks allocated before the window";
                d.lowerBounds.push_back("blocks from before the window are missing until freed");
            }
            if (profiler) {
                what += std::string(what.empty() ? "" : "; ")
                    + "a profiler window records no segments and no allocator settings, so reserved memory is "
                      "simulated with " + d.policyName + (opening > 0 ? " around the bytes held from before it" : " from an empty cache");
                d.lowerBounds.push_back("the cache held before the profiler window is unknown");
            }
            f.statement = "The trace window starts mid-run: " + what + ".";
            f.cause = opening > 0 ? formatBytes(opening) + " allocated before the trace" : "the profiler window starts mid-run";
            f.rule = "a profiler trace or ring-buffer snapshot starts after the model loaded: memory live before it "
                     "appears only as its first counter sample or as frees without allocs";
            f.source = "design.md §3 (ring buffers, ImportStats); allocators.md §1.17 (ring-buffer truncation)";
            d.findings.push_back(std::move(f));
            d.recordNext = kRecordSnapshot;
        }
    }
    rank(d);

    // Remedies proven by replay.
    if (unreproduced)
        d.lowerBounds.push_back("the replay does not reproduce the recorded OOM; give --capacity (the memory the "
                                "process had) to prove a setting");
    if (options.remedies && !d.noSettingHelps && !unreproduced) {
        std::vector<std::pair<std::string, std::vector<std::string>>> candidates; // spec, finding ids
        auto has = [&](std::string_view id) {
            return std::any_of(d.findings.begin(), d.findings.end(), [&](const Finding& f) { return f.id == id; });
        };
        auto add = [&](std::string s, std::vector<std::string> ids) {
            if (s == d.policy || std::any_of(candidates.begin(), candidates.end(), [&](const auto& c2) { return c2.first == s; }))
                return;
            candidates.emplace_back(std::move(s), std::move(ids));
        };
        if (config && base.version.empty() && !spec.inner) {
            const auto opts = effectivePytorchOptions(*config);
            // Only the settings the trace's PyTorch has (allocConfKeys): a 1.10 trace has no expandable segments,
            // and its candidate failed the whole explain ("unknown pytorch@1.10 option").
            const std::vector<std::string> keys = replay::allocConfKeys(config->version);
            if (!config->expandableSegments && std::find(keys.begin(), keys.end(), "expandable_segments") != keys.end())
                add(withOption("pytorch", opts, "expandable_segments", "True"),
                    { "external_fragmentation", "oversize_split" });
            if (config->maxSplitSize == replay::kUnlimited || has("oversize_split"))
                // The oversize rule helps a request only from a threshold below it (allocators.md §1.5 step 4).
                for (int mb : { 32, 64, 128, 256, 512, 1024 })
                    if (!oom || Bytes(mb) * kMiB < rounded)
                        add(withOption("pytorch", opts, "max_split_size_mb", std::to_string(mb)),
                            { "oversize_split", "external_fragmentation" });
            if (config->expandableSegments && config->maxSplitSize != replay::kUnlimited)
                add(withOption("pytorch", opts, "max_split_size_mb", ""), { "expandable_max_split" });
            add(withOption("pytorch", opts, "roundup_power2_divisions", "4"), { "external_fragmentation", "rounding_overhead" });
            if (config->fractionSet) {
                add(withOption("pytorch", opts, "garbage_collection_threshold", "0.8"), { "segment_churn", "allocator_limit" });
                add(withOption("pytorch", opts, "per_process_memory_fraction", ""), { "allocator_limit" });
            }
        } else if (base.policy == "rmm-pool" || base.policy == "rmm-binning") {
            add(withOption(base.policy, base.options, "maximum_pool_size", ""), { "allocator_limit" });
            add("rmm-arena", { "external_fragmentation", "stream_stranded" });
            add(base.policy == "rmm-pool" ? "rmm-binning" : "rmm-pool", { "external_fragmentation" });
        } else if (base.policy == "tf-bfc") {
            add(withOption("tf-bfc", base.options, "memory_limit", ""), { "allocator_limit" });
            add(withOption("tf-bfc", base.options, "allow_growth", "true"), { "external_fragmentation" });
            add(withOption("tf-bfc", base.options, "allow_growth", "false"), { "external_fragmentation" });
            add(withOption("tf-bfc", base.options, "garbage_collection", "true"), { "segment_churn" });
        }
        // Every candidate replay, the empty_cache one (a step-end schedule, where the trace has steps) last,
        // run in parallel: they are independent of each other.
        const bool steps = std::any_of(trace.annotations().begin(), trace.annotations().end(),
            [](const Annotation& a) { return a.kind == AnnotationKind::Step; });
        std::vector<replay::PolicySpec> specs;
        for (const auto& [text, ids] : candidates)
            specs.push_back(replay::parsePolicySpec(text));
        replay::ReplayOptions co = ro;
        co.keepFinalState = false;
        co.recordSegmentEvents = false;
        // The verdict alone: a candidate meant to lower the peak (no OOM to remove) is rejected once its peak
        // reaches the smallest one that is not 1 % below the baseline's, and that rejection's figure is not in
        // the verdict. (One meant to remove an OOM stops at its first OOM already: OnOom::Stop.)
        if (options.verdictOnly && r0.failures.empty())
            co.stopAtPeakReserved = smallestPeakNotLower(d.peakReserved);
        replay::ReplayOptions eo = co;
        eo.addEmptyCache.stepEnd = true;
        // Candidates that set max_split_size_mb replay exactly as the baseline where the trace never exercises
        // it (sameAsBaselineUnlessLargePool): their result is the baseline's, without a replay.
        const bool maxSplitIdle = config && onlySmallPoolRequests(trace, dev, *config, ro, facts.largeRequest);
        std::vector<replay::ReplayResult> results(specs.size() + (steps ? 1 : 0));
        std::vector<std::size_t> toRun;
        for (std::size_t i = 0; i < specs.size(); ++i) {
            if (maxSplitIdle && onlyMaxSplitDiffers(replay::pytorchConfigFor(innermost(specs[i]), pctx), *config))
                results[i] = outcomeOf(r0);
            else
                toRun.push_back(i);
        }
        if (steps)
            toRun.push_back(specs.size());
        // A streamed source serves one pass at a time: its candidates run one after another, or in parallel on
        // sources of their own (options.reopen).
        replay::forEachOnSource(toRun.size(), options.jobs, source, options.reopen, [&](const MemoryEventSource& on, std::size_t k) {
            const std::size_t i = toRun[k];
            results[i] = i < specs.size() ? replay::Replayer(co).run(on, specs[i]) : replay::Replayer(eo).run(on, spec);
        });
        d.remedyReplays = toRun.size();
        d.remedyReplaysSkipped = results.size() - toRun.size();
        for (std::size_t k : toRun)
            d.remedyReplaysStoppedEarly += results[k].stoppedAtPeak ? 1 : 0;
        for (std::size_t i = 0; i < specs.size(); ++i) {
            const auto& r = results[i];
            const bool noOom = r.failures.empty();
            // Confirmed: removes the failure (an OOM moment), or lowers the peak by ≥ 1 % without failing.
            const bool confirmed = noOom && (r0.failures.empty() ? lowersThePeak(r.peakReserved.bytes, d.peakReserved) : true);
            if (!confirmed) {
                std::string why = !noOom
                    ? "fails at " + formatOffsetBetween(start, r.failures.front().time)
                    : "peak reserved " + formatBytes(r.peakReserved.bytes) + ", not 1 % below "
                        + formatBytes(d.peakReserved);
                d.rejected.push_back({ specs[i].text, why });
                continue;
            }
            Remedy rm;
            rm.spec = specs[i].text;
            rm.setting = settingFor(specs[i]);
            rm.addresses = candidates[i].second;
            rm.removesOom = !r0.failures.empty();
            rm.ooms = r.ooms;
            rm.peakReserved = r.peakReserved.bytes;
            rm.deviceCalls = r.deviceCalls();
            rm.allocRetries = r.allocRetries;
            rm.changes = std::string(rm.removesOom ? "no OOM" : "no OOM, as before") + "; peak reserved "
                + formatBytes(rm.peakReserved) + " (was " + formatBytes(d.peakReserved) + (rm.removesOom ? " up to the failure" : "")
                + "); " + counted(rm.deviceCalls, "device call", "device calls") + " (was " + std::to_string(d.deviceCalls) + ")"
                + (r0.initialAdopted && !r.initialAdopted ? "; the state from before the window is replayed as requests under it"
                                                          : "");
            d.remedies.push_back(std::move(rm));
        }
        // empty_cache after each step (the periodic release of the cached segments), where the trace has
        // steps: the same policy, with torch.cuda.empty_cache() added at every step's end.
        if (steps) {
            const replay::ReplayResult& r = results.back();
            const std::string label = d.policy + " + empty_cache " + eo.addEmptyCache.text();
            const bool noOom = r.failures.empty();
            if (!(noOom && (r0.failures.empty() ? lowersThePeak(r.peakReserved.bytes, d.peakReserved) : true)))
                d.rejected.push_back({ label,
                    !noOom ? "fails at " + formatOffsetBetween(start, r.failures.front().time)
                           : "peak reserved " + formatBytes(r.peakReserved.bytes) + ", not 1 % below " + formatBytes(d.peakReserved) });
            else {
                Remedy rm;
                rm.spec = d.policy; // replayed with the calls added: emptyCacheAt
                rm.setting = "torch.cuda.empty_cache() after each step";
                rm.addresses = { "segment_churn", "external_fragmentation" };
                rm.removesOom = !r0.failures.empty();
                rm.ooms = r.ooms;
                rm.peakReserved = r.peakReserved.bytes;
                rm.deviceCalls = r.deviceCalls();
                rm.allocRetries = r.allocRetries;
                rm.emptyCacheAt = eo.addEmptyCache.text();
                rm.changes = std::string(rm.removesOom ? "no OOM; " : "no OOM, as before; ") + emptyCacheEffectText(r0, r, eo.addEmptyCache);
                d.remedies.push_back(std::move(rm));
            }
        }
        std::stable_sort(d.remedies.begin(), d.remedies.end(), [](const Remedy& a, const Remedy& b) {
            return a.peakReserved != b.peakReserved ? a.peakReserved < b.peakReserved : a.deviceCalls < b.deviceCalls;
        });
        // The smallest GPU the best fix fits, where the search is cheap (gpumem fit: a few rounds of parallel probes).
        // (Not for the empty_cache remedy: fit replays a policy spec, without added calls.)
        // (Nor for the verdict alone: the fit is in the remedy's line, not in the verdict.)
        if (!options.verdictOnly && !d.remedies.empty() && d.remedies.front().emptyCacheAt.empty()
        && source.eventCount() <= kFitEventLimit) {
            replay::FitOptions fo;
            fo.jobs = options.jobs;
            fo.device = dev;
            fo.reopen = options.reopen;
            const auto fit = replay::fitCapacity(source, replay::parsePolicySpec(d.remedies.front().spec), fo);
            if (fit.fits && fit.capacity) {
                d.remedies.front().fitsIn = fit.capacity;
                d.remedies.front().changes += "; fits a GPU of " + formatBytes(fit.capacity) + " (--capacity "
                    + std::to_string(fit.capacity) + "B; gpumem fit)";
            }
        }
    }

    // The verdict: one sentence.
    std::string v;
    if (oom) {
        // "At the recorded OOM (+t), a X request failed on a device of C with R reserved" (a forced moment: "At +t,
        // a X request fails ...").
        const bool recorded = d.moment.kind == Moment::Kind::RecordedOom;
        const std::string when = formatOffsetBetween(start, d.moment.time);
        v = (recorded ? "At the recorded OOM (" + when + "), a " : "At " + when + ", a ") + formatBytes(request)
            + " request " + (recorded ? "failed" : "fails")
            + (d.capacity ? " on a device of " + formatBytes(d.capacity) : std::string()) + " with "
            + formatBytes(d.moment.reserved) + " reserved";
    } else if (d.moment.kind == Moment::Kind::Time) {
        v = "At " + formatOffsetBetween(start, d.moment.time) + " " + formatBytes(d.moment.reserved) + " is reserved for "
            + formatBytes(d.moment.allocated) + " allocated";
    } else {
        v = "No OOM" + (d.capacity ? " on a device of " + formatBytes(d.capacity) : std::string(" (unlimited device)"))
            + "; the reserved peak is " + formatBytes(d.peakReserved) + " at " + formatOffsetBetween(start, d.moment.time)
            + " for " + formatBytes(d.moment.allocated) + " allocated"
            + (d.recordedPeakReserved && *d.recordedPeakReserved != d.peakReserved
                    ? " in replay (the run recorded " + recordedReservedText(d, *d.recordedPeakReserved) + ")"
                    : std::string());
    }
    if (!d.findings.empty()) {
        v += ": " + d.findings.front().cause + " (" + d.findings.front().id + ")";
        if (d.findings.size() > 1 && d.findings[1].bytes > 0)
            v += "; " + d.findings[1].cause + " (" + d.findings[1].id + ")";
    }
    if (d.noSettingHelps)
        v += "; no allocator setting can help";
    else if (!d.remedies.empty())
        v += "; " + d.remedies.front().setting
            + (oom ? " removes the OOM" : " lowers the peak to " + formatBytes(d.remedies.front().peakReserved))
            + " (proven by replay)";
    else if (options.remedies)
        v += oom ? "; no candidate setting removed the OOM in replay" : "; no candidate setting lowered the peak in replay";
    if (!d.lowerBounds.empty())
        v += " (figures are lower bounds: " + d.lowerBounds.front() + ")";
    d.verdict = v + ".";
    return d;
}

// ---- writers ----

namespace {
    nlohmann::json blockJson(const EvidenceBlock& b, TimeNs start)
    {
        nlohmann::json j = { { "address", b.address }, { "size", b.size }, { "requested", b.requested },
            { "state", b.state }, { "stream", b.stream }, { "site", b.site }, { "category", b.category } };
        j["alloc_time_ns"] = b.allocTime ? nlohmann::json(*b.allocTime - start) : nlohmann::json(nullptr);
        return j;
    }

    const char* momentKind(Moment::Kind k)
    {
        switch (k) {
        case Moment::Kind::ReplayedOom:
            return "replayed_oom";
        case Moment::Kind::RecordedOom:
            return "recorded_oom";
        case Moment::Kind::PeakReserved:
            return "peak_reserved";
        case Moment::Kind::Time:
            return "time";
        }
        return "peak_reserved";
    }

    std::string momentText(const Diagnosis& d, TimeNs start)
    {
        const auto& mo = d.moment;
        std::string s;
        switch (mo.kind) {
        case Moment::Kind::ReplayedOom:
            s = "the first OOM of the replay";
            break;
        case Moment::Kind::RecordedOom:
            s = "the OOM the trace records";
            break;
        case Moment::Kind::PeakReserved:
            s = "the reserved peak (no OOM)";
            break;
        case Moment::Kind::Time:
            s = "the time asked for";
            break;
        }
        s += ", " + formatOffsetBetween(start, mo.time);
        if (mo.isOom())
            s += ": request " + formatBytes(mo.request) + " on stream " + std::to_string(mo.stream);
        s += "; reserved " + formatBytes(mo.reserved) + ", allocated " + formatBytes(mo.allocated);
        if (mo.deviceFree)
            s += ", device free " + formatBytes(*mo.deviceFree);
        if (!mo.refusedBy.empty())
            s += "; refused by " + mo.refusedBy;
        return s;
    }
} // namespace

nlohmann::json diagnosisToJson(const Diagnosis& d, TimeNs start)
{
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : d.findings) {
        nlohmann::json segs = nlohmann::json::array(), blocks = nlohmann::json::array(), contrib = nlohmann::json::array();
        for (const auto& s : f.segments) {
            nlohmann::json pins = nlohmann::json::array();
            for (const auto& b : s.pinning)
                pins.push_back(blockJson(b, start));
            segs.push_back({ { "address", s.address }, { "size", s.size }, { "stream", s.stream },
                { "expandable", s.expandable }, { "free_bytes", s.freeBytes }, { "free_blocks", s.freeBlocks },
                { "pinning", pins }, { "pinning_blocks", s.pinningBlocks } });
        }
        for (const auto& b : f.blocks)
            blocks.push_back(blockJson(b, start));
        for (const auto& x : f.contributors)
            contrib.push_back({ { "by", x.by }, { "label", x.label }, { "bytes", x.bytes }, { "blocks", x.blocks } });
        findings.push_back({ { "id", f.id }, { "statement", f.statement }, { "bytes", f.bytes }, { "rule", f.rule },
            { "source", f.source }, { "proven", f.proven }, { "evidence", f.evidence }, { "segments", segs },
            { "blocks", blocks }, { "contributors", contrib }, { "streams", streamsToJson(f.streams) } });
    }
    nlohmann::json remedies = nlohmann::json::array();
    for (const auto& r : d.remedies) {
        remedies.push_back({ { "spec", r.spec }, { "setting", r.setting }, { "addresses", r.addresses },
            { "removes_oom", r.removesOom }, { "ooms", r.ooms }, { "peak_reserved", r.peakReserved },
            { "device_calls", r.deviceCalls }, { "alloc_retries", r.allocRetries }, { "changes", r.changes },
            { "fits_in", r.fitsIn ? nlohmann::json(*r.fitsIn) : nlohmann::json(nullptr) } });
        if (!r.emptyCacheAt.empty())
            remedies.back()["empty_cache_at"] = r.emptyCacheAt;
    }
    nlohmann::json rejected = nlohmann::json::array();
    for (const auto& r : d.rejected)
        rejected.push_back({ { "spec", r.spec }, { "why", r.why } });
    const auto& mo = d.moment;
    nlohmann::json j = {
        { "verdict", d.verdict },
        { "device", d.device },
        { "device_label", d.deviceLabel },
        { "policy", d.policy },
        { "policy_name", d.policyName },
        { "policy_origin", d.policyOrigin },
        { "capacity", d.capacity },
        { "capacity_origin", d.capacityOrigin },
        { "counters_only", d.countersOnly },
        { "moment",
            { { "kind", momentKind(mo.kind) }, { "time_ns", mo.time - start },
                { "event", mo.event == kNoIndex ? nlohmann::json(nullptr) : nlohmann::json(mo.event) },
                { "request", mo.request }, { "stream", mo.stream }, { "reserved", mo.reserved },
                { "allocated", mo.allocated },
                { "device_free", mo.deviceFree ? nlohmann::json(*mo.deviceFree) : nlohmann::json(nullptr) },
                { "refused_by", mo.refusedBy } } },
        { "ooms", d.ooms },
        { "peak_reserved", d.peakReserved },
        { "lower_bound", d.lowerBound },
        { "recorded_peak_reserved",
            d.recordedPeakReserved ? nlohmann::json(*d.recordedPeakReserved) : nlohmann::json(nullptr) },
        { "final_reserved", d.finalReserved },
        { "final_allocated", d.finalAllocated },
        { "device_calls", d.deviceCalls },
        { "alloc_retries", d.allocRetries },
        { "findings", findings },
        { "remedies", remedies },
        { "rejected", rejected },
        { "no_setting_helps", d.noSettingHelps },
        { "lower_bounds", d.lowerBounds },
        { "record_next", d.recordNext },
    };
    if (d.outside) // only when known: the JSON of a trace without the figure stays as it was
        j["outside_allocator"] = outsideMemoryToJson(*d.outside);

    if (d.layers) {
        auto opt = [](const std::optional<Bytes>& b) { return b ? nlohmann::json(*b) : nlohmann::json(nullptr); };
        j["layers"] = { { "allocated", opt(d.layers->allocated) }, { "reserved", opt(d.layers->reserved) },
            { "process", opt(d.layers->process) }, { "device_free", opt(d.layers->deviceFree) },
            { "device_total", opt(d.layers->deviceTotal) }, { "request", opt(d.layers->request) } };
    } else
        j["layers"] = nullptr;
    return j;
}

std::optional<std::string> verdictFor(const Trace& trace, const Analysis& analysis)
{
    return verdictFor(*traceView(trace), analysis);
}

std::optional<std::string> verdictFor(const MemoryEventSource& source, const Analysis& analysis, replay::SourceOpener reopen)
{
    if (analysis.empty && !analysis.countersOnly)
        return std::nullopt;
    try {
        DiagnosisOptions o;
        o.device = analysis.device;
        o.verdictOnly = true;
        o.reopen = std::move(reopen);
        if (!analysis.countersOnly)
            o.analysis = &analysis;
        return diagnose(source, o).verdict;
    } catch (const IoError&) {
        // The file could not be read (opened again for a candidate, or changed while it was read): the answer
        // is an error, as reading the trace whole would have given, not a page without its verdict (review
        // finding: under `ulimit -n 4` analyze printed its tables without the verdict, exit 0).
        throw;
    } catch (const Error&) {
        return std::nullopt;
    }
}

std::string verdictLines(const Diagnosis& d, std::size_t width)
{
    std::string out;
    bool first = true;
    for (const auto& l : wrap(textForTerminal(d.verdict), width - 9)) {
        out += (first ? "verdict: " : "         ") + l + '\n';
        first = false;
    }
    return out;
}

void writeDiagnosis(const Diagnosis& d, std::string_view format, TimeNs start, std::ostream& out)
{
    if (format == "json") {
        out << diagnosisToJson(d, start).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        return;
    }
    const bool md = format == "markdown";
    if (!md && format != "text")
        throw UsageError("--format '" + std::string(format) + "' is not one of: text, json, markdown");
    auto t = [](const std::string& s) { return textForTerminal(s); };
    if (md) {
        out << "**Verdict:** " << t(d.verdict) << "\n\n";
        out << "- device " << t(d.deviceLabel) << ", policy `" << t(d.policyName) << "` (" << t(d.policyOrigin)
            << "), capacity " << (d.capacity ? formatBytes(d.capacity) + " (" + d.capacityOrigin + ")" : "unlimited") << '\n';
        if (d.outside)
            out << "- outside the allocator: " << t(outsideMemoryText(*d.outside)) << '\n';
        if (!d.countersOnly)
            out << "- moment: " << t(momentText(d, start)) << "\n";
        out << "\n### Findings (ranked by bytes)\n\n";
        for (std::size_t i = 0; i < d.findings.size(); ++i) {
            const auto& f = d.findings[i];
            out << i + 1 << ". **`" << f.id << "`** (" << formatBytes(f.bytes) << (f.proven ? "" : ", unproven")
                << "): " << t(f.statement) << "\n";
            for (const auto& e : f.evidence) {
                const std::size_t indent = e.find_first_not_of(' ');
                out << (indent == 0 || indent == std::string::npos ? "   - " : "     - ")
                    << t(indent == std::string::npos ? e : e.substr(indent)) << '\n';
            }
            out << "   - rule: " << t(f.rule) << " (" << t(f.source) << ")\n";
        }
        out << "\n### Proven fixes\n\n";
        if (d.noSettingHelps)
            out << "No allocator setting can help: the live memory itself must shrink (see `capacity`).\n";
        for (const auto& r : d.remedies)
            out << "- `" << t(r.setting) << "`: " << t(r.changes) << '\n';
        if (!d.noSettingHelps && d.remedies.empty())
            out << "None of the candidate settings was confirmed by replay.\n";
        if (!d.rejected.empty()) {
            out << "\nTried, not confirmed:";
            for (std::size_t i = 0; i < d.rejected.size(); ++i)
                out << (i ? "; `" : " `") << t(d.rejected[i].spec) << "` (" << t(d.rejected[i].why) << ")";
            out << ".\n";
        }
        if (!d.recordNext.empty())
            out << "\n### What to record next\n\n```python\n" << d.recordNext << "\n```\n";
        return;
    }
    constexpr std::size_t kWidth = 100;
    out << verdictLines(d, kWidth) << '\n';
    // The first line after `prefix`, the rest indented to its width.
    auto para = [&](const std::string& prefix, const std::string& text) {
        bool first = true;
        for (const auto& l : wrap(t(text), kWidth - displayWidth(prefix))) {
            out << (first ? prefix : std::string(displayWidth(prefix), ' ')) << l << '\n';
            first = false;
        }
    };
    para("", "device " + d.deviceLabel + "; policy " + d.policyName + " (" + d.policyOrigin + "); capacity "
            + (d.capacity ? formatBytes(d.capacity) + " (" + d.capacityOrigin + ")" : std::string("unlimited")));
    if (d.outside)
        para("", "outside the allocator: " + outsideMemoryText(*d.outside)
                + (d.capacity && !d.countersOnly ? "; taken from the capacity in every replay" : ""));
    if (d.layers && !d.layers->request && !d.findings.empty() && d.findings.front().id == "no_addresses") {
        out << "recorded: the allocated bytes (a running sum of sizes), no addresses, no reserved memory\n";
    } else if (d.layers && !d.layers->allocated && !d.layers->reserved && !d.layers->process && !d.layers->deviceFree) {
        out << "the failed request " << (d.layers->request ? formatBytes(*d.layers->request) : std::string("?"))
            << "; the message has no memory figures\n";
    } else if (d.layers) {
        const auto& L = *d.layers;
        auto b = [](const std::optional<Bytes>& x) { return x ? formatBytes(*x) : std::string("?"); };
        out << "layers: allocated " << b(L.allocated) << " ⊂ reserved " << b(L.reserved) << " ⊂ process "
            << b(L.process) << " ⊂ device " << b(L.deviceTotal) << '\n'
            << "        device free " << b(L.deviceFree) << "; the failed request " << b(L.request) << '\n';
    } else
        para("", "moment: " + momentText(d, start));
    out << '\n' << "findings, ranked by bytes:\n";
    if (d.findings.empty())
        out << "  (none)\n";
    for (std::size_t i = 0; i < d.findings.size(); ++i) {
        const auto& f = d.findings[i];
        std::string head = std::to_string(i + 1) + ". " + f.id + "  " + formatBytes(f.bytes) + (f.proven ? "" : "  (unproven)");
        out << head << '\n';
        para("   ", f.statement);
        for (const auto& e : f.evidence) {
            // An indented item belongs to the one above it (a segment's pinning blocks), as in the markdown.
            const std::size_t indent = e.find_first_not_of(' ');
            if (indent == 0 || indent == std::string::npos)
                para("   - ", e);
            else
                para("     - ", e.substr(indent));
        }
        para("   rule: ", f.rule + " [" + f.source + "]");
    }
    out << '\n';
    // Whether a fixes or rejected block follows the findings' blank line (what to record next then needs one).
    const bool printedAfterFindings = d.noSettingHelps || !d.remedies.empty() || !d.countersOnly || !d.rejected.empty();
    if (d.noSettingHelps) {
        out << "fixes: no allocator setting can help; only less live memory (see capacity above) or a larger GPU.\n";
    } else if (!d.remedies.empty()) {
        out << "proven fixes (replayed on this trace" << (d.capacity ? " at " + formatBytes(d.capacity) : std::string())
            << "):\n";
        for (const auto& r : d.remedies) {
            out << "  " << t(r.setting) << '\n';
            para("      ", r.changes);
        }
    } else if (!d.countersOnly)
        out << "fixes: no candidate setting was confirmed by replay.\n";
    if (!d.rejected.empty()) {
        std::string s = "tried, not confirmed:";
        for (std::size_t i = 0; i < d.rejected.size(); ++i)
            s += std::string(i ? "; " : " ") + d.rejected[i].spec + " (" + d.rejected[i].why + ")";
        para("", s + ".");
    }
    if (!d.recordNext.empty()) {
        // One blank line before it: the findings end with one; a fixes block adds none after itself.
        if (printedAfterFindings)
            out << '\n';
        out << "what to record next (" << d.recordNextWhy << "):\n";
        std::istringstream code(d.recordNext);
        for (std::string l; std::getline(code, l);)
            out << "    " << l << '\n';
    }
}

} // namespace gpumem::analyze
