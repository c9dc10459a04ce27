#pragma once
// The diagnosis behind `gpumem explain` (design.md §6, issue 15): why a run ran out of memory or wasted
// it, and which allocator settings fix it, proven by replaying the same trace under them.
//
// Given a trace, a device, an optional capacity, a policy and a moment — the first OOM (recorded, or in
// a replay at that capacity), else the reserved peak, or a time — diagnose() replays the trace to that
// moment, reads the allocator state there (free blocks per segment, the live blocks that pin them,
// reserved and free per stream, blocks pending a cross-stream free, the limit that refused) and turns
// it into ordered Findings: each a mechanism with a stable id, one sentence, its evidence, the bytes it
// accounts for and the rule it rests on with its source. It then builds candidate settings from the
// findings, replays each on the same trace and capacity in parallel (replay::parallelFor), and keeps as
// Remedies only those the replay confirms. A trace without request-level events but with the counters
// an OOM message or memory_summary gives ("Total Allocated", "Total Reserved", "Process In Use",
// "Device Free") gets the layered breakdown and what can be concluded without a trace.
//
// The finding ids, their rules and sources and the JSON schema are in docs/explain.md.
// diagnose() is thread-safe for shared Traces; a Diagnosis is an immutable value.
#include "core/outside_memory.h"
#include "analyze/analysis.h"
#include "replay/parallel_runs.h"
#include "replay/replayer.h"

#include <nlohmann/json_fwd.hpp>

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::analyze {

using replay::StreamKey;

struct DiagnosisOptions {
    std::optional<DeviceId> device; // default: replay::defaultReplayDevice
    Bytes capacity = 0; // bytes; 0 = the device's recorded total memory when the trace records an OOM, else unlimited
    std::string policy; // a policy spec; "" = the one the trace records (tf-bfc for xplane, rmm-pool for RMM logs), else pytorch
    std::optional<TimeNs> at; // absolute time of the moment to explain (overrides the OOM and the peak)
    bool remedies = true; // replay candidate settings (the verdict of `analyze` skips them)
    unsigned jobs = 0; // threads for the remedy replays; 0 = replay::defaultJobs()
    // The trace's Analysis, when the caller has one (analyze, explain): growth across steps and inferred
    // categories come from it. Not owned; must outlive diagnose(). nullptr = recorded categories only, no
    // growth finding.
    const Analysis* analysis = nullptr;
    // Memory outside the allocator taken from the capacity of every replay (ReplayOptions::outsideBytes,
    // --outside); nullopt = the trace's figure (core/outside_memory.h), if any.
    std::optional<Bytes> outsideBytes;
    // Only the verdict is wanted (analyze's verdict line, the HTML report: verdictFor): a candidate meant to
    // lower the peak stops once it is rejected, so the peak a rejected candidate shows in `rejected` is then
    // a lower bound (not in the verdict), and the smallest-GPU fit of the best remedy (Remedy::fitsIn) is
    // skipped. The verdict is the one a full diagnosis gives.
    bool verdictOnly = false;
    // For diagnose(source) of a streamed source: opens the same source again (a .gmt: openGmtSource of its path,
    // with the checks the first one was opened with), so that the remedy replays run on `jobs` threads, one
    // source each (a source serves one pass at a time). Empty: they run one after another. Unused for a whole
    // trace, whose replays share it.
    replay::SourceOpener reopen;
};

// A block named as evidence. Addresses are the replay's: the recorded ones for a state adopted from a
// snapshot, simulated ones (from 2^48) otherwise.
struct EvidenceBlock {
    Address address = 0;
    Bytes size = 0;
    Bytes requested = 0;
    std::string state; // PyTorch's snapshot names: active_allocated, active_pending_free, inactive
    StreamKey stream = 0;
    std::string site; // analyze::siteLabel, else the scope path, else ""
    std::string category;
    std::optional<TimeNs> allocTime; // absolute ns; none for a block from before the trace
    // The live block's index into trace.allocations() (whose address is the recorded one: the viewer's
    // memory map finds the block by it); none for a free block.
    std::optional<std::uint32_t> allocation;
};
struct EvidenceSegment {
    Address address = 0;
    Bytes size = 0;
    StreamKey stream = 0;
    bool expandable = false;
    Bytes freeBytes = 0;
    std::vector<Bytes> freeBlocks; // largest first
    std::vector<EvidenceBlock> pinning; // live blocks in it, largest first (at most 4 listed)
    std::uint64_t pinningBlocks = 0; // all live blocks in it
};
// A group of live bytes (capacity: where the memory to cut is).
struct Contributor {
    std::string by; // site, module, category
    std::string label;
    Bytes bytes = 0;
    std::uint64_t blocks = 0;
};

struct Finding {
    std::string id; // stable: capacity, external_fragmentation, … (docs/explain.md)
    std::string statement; // one sentence
    std::string cause; // a short phrase for the verdict ("2.1 GiB cached free, no block large enough")
    Bytes bytes = 0; // bytes it accounts for (what ranks findings)
    std::string rule; // the rule it rests on, one sentence
    std::string source; // allocators.md section or PyTorch file/function
    bool proven = true; // false: concluded from counters alone (no trace to replay)
    std::vector<std::string> evidence; // lines a person reads (each under 96 columns where it can be)
    std::vector<EvidenceSegment> segments;
    std::vector<EvidenceBlock> blocks;
    std::vector<Contributor> contributors;
    std::vector<replay::StreamMemory> streams;
};

struct Remedy {
    std::string spec; // the policy spec replayed ("pytorch:expandable_segments:True")
    std::string setting; // what to paste: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" or the spec
    std::vector<std::string> addresses; // finding ids it answers
    bool removesOom = false; // the moment was an OOM and this replay has none
    std::uint64_t ooms = 0;
    Bytes peakReserved = 0;
    std::uint64_t deviceCalls = 0;
    std::uint64_t allocRetries = 0;
    std::string changes; // one sentence: what the replay showed
    // Not a setting but calls added to the program: empty_cache at these points (EmptyCacheSchedule::text(),
    // "step-end"; replayed with spec and ReplayOptions::addEmptyCache = parseEmptyCacheSchedule of it); "".
    std::string emptyCacheAt;
    // The smallest GPU (a multiple of 2 MiB) with no OOM under it (replay::fitCapacity), for the best remedy
    // of a trace of at most 500,000 memory events; nullopt otherwise.
    std::optional<Bytes> fitsIn;
};
struct RejectedCandidate {
    std::string spec;
    std::string why; // "still fails at +0.14 s", "peak reserved 13.2 GiB, not lower"
};

struct Moment {
    enum class Kind : std::uint8_t { ReplayedOom, RecordedOom, PeakReserved, Time } kind = Kind::PeakReserved;
    TimeNs time = 0; // absolute ns
    std::uint64_t event = kNoIndex; // the trace event (the failed request, the recorded oom, the peak)
    Bytes request = 0; // the failed request (OOM kinds)
    StreamKey stream = 0;
    Bytes reserved = 0, allocated = 0;
    std::optional<Bytes> deviceFree; // capacity − reserved (OOM kinds with a capacity)
    std::string refusedBy;
    bool isOom() const { return kind == Kind::ReplayedOom || kind == Kind::RecordedOom; }
};

// The counters of an OOM message or memory_summary (a counters-only trace): allocated ⊂ reserved ⊂
// process ⊂ device. Absent values are nullopt.
struct MemoryLayers {
    std::optional<Bytes> allocated, reserved, process, deviceFree, deviceTotal, request;
};

struct Diagnosis {
    std::string verdict; // one sentence, what every front end opens with
    std::string policy; // the spec replayed (as written or defaulted)
    std::string policyName; // its name with effective options
    std::string policyOrigin; // "given", "recorded by the trace", "default"
    DeviceId device = 0;
    std::string deviceLabel;
    Bytes capacity = 0; // 0 = unlimited
    std::string capacityOrigin; // "given", "the device's total memory", "unlimited"
    Moment moment;
    bool countersOnly = false;
    std::optional<MemoryLayers> layers;
    // The layer outside the allocator the replays took from the capacity (given, or the trace's), when known.
    std::optional<OutsideMemory> outside;
    // The baseline replay at the capacity (OnOom::Stop): its figures, for the remedies to compare with.
    std::uint64_t ooms = 0;
    Bytes peakReserved = 0, lowerBound = 0, finalReserved = 0, finalAllocated = 0;
    std::optional<Bytes> recordedPeakReserved; // the run's own peak reserved where the trace records it
    std::uint64_t deviceCalls = 0, allocRetries = 0;
    std::vector<Finding> findings; // ranked by bytes, descending (ties: detection order)
    std::vector<Remedy> remedies; // confirmed by replay, best first
    std::vector<RejectedCandidate> rejected; // tried and not confirmed
    bool noSettingHelps = false; // a capacity finding: only less live memory (or a bigger GPU) helps
    std::vector<std::string> lowerBounds; // figures that are lower bounds, and why
    std::string recordNext; // code to record what a next diagnosis needs ("" when the trace has it)
    std::string recordNextWhy = "a memory snapshot has every block, segment and stack"; // why that record
    // The remedy replays: run (in parallel), of them stopped once decided (DiagnosisOptions::verdictOnly), and
    // candidates not replayed because they replay exactly as the baseline (a knob the trace never exercises).
    std::uint64_t remedyReplays = 0, remedyReplaysStoppedEarly = 0, remedyReplaysSkipped = 0;
};

// Throws UsageError for a bad policy spec or device, or a trace with neither memory events nor memory
// counters on the device.
Diagnosis diagnose(const Trace& trace, const DiagnosisOptions& options = {});
// The same diagnosis over the memory events of a source, in passes (docs/streaming.md): one for what the
// replays must know ahead (requests, the first recorded OOM, --at's event), the replays (the baseline, the
// moment's, the candidates' — in parallel on sources of their own with options.reopen, else one after
// another — fit's probes), and one that pairs the events for the
// allocations live at the moment (their sites, categories and times). Memory: what the replays hold (the
// live blocks, the policy's state), not the events. diagnose(trace) is this over traceView(trace), which
// reads the whole trace's pairing and runs the candidates in parallel. Equal results either way
// (tests/analyze/streaming_diagnosis_test.cpp, tests/cli/streaming_explain_cli_test.cpp).
// Throws what diagnose(trace) throws, and what the source's passes throw (FormatError naming the file and
// offset; DeferredCheckFailed from a .gmt opened with its checks deferred: withGmtSource opens it again).
Diagnosis diagnose(const MemoryEventSource& source, const DiagnosisOptions& options = {});

// format: text (the verdict, findings ranked by bytes, proven fixes; 100 columns), json (docs/explain.md)
// or markdown. Times relative to `start` (the trace start). Throws UsageError for another format.
void writeDiagnosis(const Diagnosis& diagnosis, std::string_view format, TimeNs start, std::ostream& out);
nlohmann::json diagnosisToJson(const Diagnosis& diagnosis, TimeNs start);

// The verdict `analyze` and the HTML report open with: diagnose() of the analysed device with its Analysis
// (remedies included, so that it is explain's sentence), or nullopt where there is nothing to diagnose (a
// trace without memory events or counters on the device). Never throws gpumem::Error (a report must not
// fail for its verdict): nullopt then.
std::optional<std::string> verdictFor(const Trace& trace, const Analysis& analysis);
// The same verdict of a streamed source (a .gmt: analyze's text under the in-memory budget, issue 22), diagnosed
// in passes over it (diagnose(source)) with its bounded analysis; `reopen` as DiagnosisOptions::reopen (empty: the
// candidates one after another). Equal to verdictFor(trace, analyzeTrace(trace)) of the trace read whole
// (tests/analyze/streaming_diagnosis_test.cpp). Throws IoError where the source cannot be read (opened again, or
// changed while read) and no other gpumem::Error; DeferredCheckFailed passes through.
std::optional<std::string> verdictFor(const MemoryEventSource& source, const Analysis& analysis, replay::SourceOpener reopen = {});

// The verdict wrapped to `width` columns, prefixed "verdict: " (analyze's text and the HTML report open
// with it).
std::string verdictLines(const Diagnosis& diagnosis, std::size_t width = 100);

} // namespace gpumem::analyze
