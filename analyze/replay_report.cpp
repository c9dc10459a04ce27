#include "analyze/replay_report.h"

#include "analyze/analysis_report.h" // percent, csvField
#include "core/error.h"
#include "core/display_width.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <ostream>

namespace gpumem::analyze {

namespace {

    // Padded in display columns (core/display_width.h), not bytes: labels may hold CJK or "é".
    std::string pad(const std::string& s, std::size_t width, bool left = false)
    {
        return left ? padRight(s, width) : padLeft(s, width);
    }

    std::string firstOomText(const replay::ReplayResult& r, TimeNs start)
    {
        return r.failures.empty() ? std::string("-") : formatOffset(r.failures.front().time - start);
    }

    nlohmann::json sideJson(const replay::SegmentEventSide& s, TimeNs start)
    {
        if (!s.present)
            return nullptr;
        return { { "kind", toString(s.kind) }, { "address", s.address }, { "size", s.size },
            { "time_ns", s.time - start }, { "event", s.traceEvent } };
    }

    std::string sideText(const replay::SegmentEventSide& s, TimeNs start)
    {
        if (!s.present)
            return "(none)";
        return std::string(toString(s.kind)) + " " + formatBytes(s.size) + " (" + std::to_string(s.size)
            + " B) at address " + std::to_string(s.address) + ", +" + formatSeconds(s.time - start) + ", trace event "
            + std::to_string(s.traceEvent);
    }

} // namespace

nlohmann::json streamsToJson(const std::vector<replay::StreamMemory>& streams)
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : streams)
        out.push_back({ { "stream", s.stream }, { "reserved", s.reserved }, { "free", s.free } });
    return out;
}

std::string failureFreeText(const replay::FailureDetail& d)
{
    if (d.freeCached == 0)
        return "no cached free block";
    return formatBytes(d.freeCached) + " cached free in " + counted(d.freeBlockCount, "block", "blocks")
        + ", largest " + formatBytes(d.largestFree) + " (external fragmentation " + percent(d.external()) + ")";
}

nlohmann::json replayResultToJson(const replay::ReplayResult& r, TimeNs start)
{
    nlohmann::json failures = nlohmann::json::array();
    for (std::size_t k = 0; k < r.failures.size(); ++k) {
        const auto& f = r.failures[k];
        nlohmann::json fj = { { "time_ns", f.time - start }, { "event", f.event }, { "size", f.size },
            { "stream", f.stream }, { "reserved", f.reserved }, { "allocated", f.allocated },
            { "device_free", f.deviceFree }, { "before_window", f.beforeWindow }, { "refused_by", f.refusedBy } };
        if (k < r.failureDetails.size()) {
            const auto& d = r.failureDetails[k];
            fj["free_cached"] = d.freeCached;
            fj["largest_free"] = d.largestFree;
            fj["external_fragmentation"] = d.external();
            fj["free_block_count"] = d.freeBlockCount;
            fj["free_blocks"] = d.freeBlocks;
            fj["reserved_per_stream"] = streamsToJson(d.streams);
            fj["refused_by_policy"] = d.refusedByPolicy;
        }
        failures.push_back(std::move(fj));
    }
    nlohmann::json j = {
        { "policy", r.policy },
        { "initial_state", r.initialAdopted ? "adopted" : "allocated" },
        { "device", r.device },
        { "request_events", r.requestEvents },
        { "peak_reserved", r.peakReserved.bytes },
        { "peak_reserved_time_ns", r.peakReserved.time - start },
        { "peak_allocated", r.peakAllocated.bytes },
        { "peak_allocated_time_ns", r.peakAllocated.time - start },
        { "peak_requested", r.peakRequested.bytes },
        { "waste_at_peak", r.atPeak.waste() },
        { "external_fragmentation_at_peak", r.atPeak.external() },
        { "inactive_split_at_peak", r.atPeak.inactiveSplit },
        { "device_calls", r.deviceCalls() },
        { "cuda_malloc", r.deviceCounters.mallocCalls },
        { "cuda_free", r.deviceCounters.freeCalls },
        { "map", r.deviceCounters.mapCalls },
        { "unmap", r.deviceCounters.unmapCalls },
        { "ooms", r.ooms },
        { "alloc_retries", r.allocRetries },
        { "final_reserved", r.finalReserved },
        { "final_allocated", r.finalAllocated },
        { "reserved_per_stream", streamsToJson(r.finalStreams) },
        { "stopped_at_oom", r.stopped },
        { "failures", failures },
        { "unmatched_frees", r.unmatchedFrees },
        { "initial_segments", r.initialSegments },
        { "initial_blocks", r.initialBlocks },
    };
    if (r.peakReservedWithoutCompaction) {
        j["compactions"] = r.compactions;
        j["blocks_moved"] = r.blocksMoved;
        j["bytes_moved"] = r.bytesMoved;
        j["peak_reserved_without_compaction"] = *r.peakReservedWithoutCompaction;
        j["compaction_saving"] = r.compactionSaving();
    }
    return j;
}

std::optional<std::string> memoryBeforeTheTraceNote(Bytes before)
{
    if (before == 0)
        return std::nullopt;
    return formatBytes(before) + " was already allocated when this profiler trace began and is not in it";
}

namespace {
    // The row label: the policy with its effective options, marked when the replay started from the
    // state the trace recorded before its window (bare `pytorch` on a snapshot) — that row and the same
    // settings written out (which allocate that state as requests) differ, and must not look alike.
    std::string rowLabel(const replay::ReplayResult& r)
    {
        return r.initialAdopted ? r.policy + " (recorded state)" : r.policy;
    }
} // namespace

void writeReplayTable(
    const std::vector<replay::ReplayResult>& results, std::string_view format, TimeNs start, std::ostream& out)
{
    if (format == "json") {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& r : results)
            all.push_back(replayResultToJson(r, start));
        out << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        return;
    }
    if (format == "csv") {
        out << "policy,peak_reserved,peak_allocated,waste_at_peak,device_calls,ooms,first_oom_time_ns,alloc_retries,"
               "final_reserved,final_allocated,first_oom_largest_free,first_oom_free_cached\n";
        for (const auto& r : results) {
            char waste[32];
            std::snprintf(waste, sizeof waste, "%.6f", r.atPeak.waste());
            out << csvField(rowLabel(r)) << ',' << r.peakReserved.bytes << ',' << r.peakAllocated.bytes << ',' << waste
                << ',' << r.deviceCalls() << ',' << r.ooms << ','
                << (r.failures.empty() ? std::string() : std::to_string(r.failures.front().time - start)) << ','
                << r.allocRetries << ',' << r.finalReserved << ',' << r.finalAllocated << ','
                << (r.failureDetails.empty() ? std::string() : std::to_string(r.failureDetails.front().largestFree))
                << ','
                << (r.failureDetails.empty() ? std::string() : std::to_string(r.failureDetails.front().freeCached))
                << '\n';
        }
        return;
    }
    if (format != "text")
        throw UsageError("--format '" + std::string(format) + "' is not one of: text, json, csv");
    std::size_t w = 6;
    for (const auto& r : results)
        w = std::max(w, displayWidth(textForTerminal(rowLabel(r))));
    out << pad("policy", w, true) << "  " << pad("peak reserved", 13) << "  " << pad("peak allocated", 14) << "  "
        << pad("waste at peak", 13) << "  " << pad("device calls", 12) << "  " << pad("OOMs", 5) << "  "
        << pad("first OOM", 13) << '\n';
    for (const auto& r : results)
        out << pad(textForTerminal(rowLabel(r)), w, true) << "  " << pad(formatBytes(r.peakReserved.bytes), 13) << "  "
            << pad(formatBytes(r.peakAllocated.bytes), 14) << "  " << pad(percent(r.atPeak.waste()), 13) << "  "
            << pad(std::to_string(r.deviceCalls()), 12) << "  " << pad(std::to_string(r.ooms), 5) << "  "
            << pad(firstOomText(r, start), 13) << '\n';
    if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.initialAdopted; }))
        out << "(recorded state): started from the segments and blocks the trace holds from before its window, at "
               "their recorded addresses; the other rows allocate that state as requests first\n";
    for (const auto& r : results) {
        if (!r.peakReservedWithoutCompaction)
            continue;
        const std::int64_t saving = r.compactionSaving();
        out << textForTerminal(r.policy) << ": " << r.compactions << " compaction" << (r.compactions == 1 ? "" : "s") << " moved "
            << r.blocksMoved << " block" << (r.blocksMoved == 1 ? "" : "s") << " (" << formatBytes(r.bytesMoved)
            << "); peak reserved " << formatBytes(r.peakReserved.bytes) << " vs "
            << formatBytes(*r.peakReservedWithoutCompaction) << " without compaction: "
            << (saving >= 0 ? "saves " : "costs ") << formatBytes(Bytes(saving >= 0 ? saving : -saving)) << '\n';
    }
    for (const auto& r : results) {
        if (r.failures.empty())
            continue;
        const auto& f = r.failures.front();
        if (f.beforeWindow) {
            out << textForTerminal(r.policy) << ": the state before the trace holds " << formatBytes(f.allocated) << " (" << f.allocated
                << " B) in live blocks, in segments of " << formatBytes(f.reserved)
                << " that cannot be released, more than the capacity\n";
            continue;
        }
        out << textForTerminal(r.policy) << ": " << (r.stopped ? "stopped at the first OOM" : "first OOM") << ": +"
            << formatSeconds(f.time - start) << ", request " << formatBytes(f.size) << " (" << f.size
            << " B) on stream " << f.stream << ", reserved " << formatBytes(f.reserved) << ", device free "
            << (f.deviceFree == ~Bytes(0) ? std::string("unlimited") : formatBytes(f.deviceFree)) << ", trace event "
            << f.event << (f.refusedBy.empty() ? std::string() : "; refused by " + f.refusedBy) << '\n';
        if (!r.failureDetails.empty())
            out << "  then: " << failureFreeText(r.failureDetails.front()) << "; num_alloc_retries "
                << r.allocRetries << '\n';
    }
}

nlohmann::json fidelityToJson(const replay::FidelityReport& r, std::string_view label, TimeNs start)
{
    nlohmann::json j = {
        { "trace", label },
        { "policy", r.policy },
        { "exact", r.exact() },
        { "segment_events",
            { { "recorded", r.recordedSegmentEvents }, { "simulated", r.simulatedSegmentEvents },
                { "matched", r.matched } } },
        { "first_mismatch",
            r.firstMismatch ? nlohmann::json { { "index", r.firstMismatch->index },
                { "recorded", sideJson(r.firstMismatch->recorded, start) },
                { "simulated", sideJson(r.firstMismatch->simulated, start) } }
                            : nlohmann::json(nullptr) },
        { "peak_reserved",
            { { "recorded", r.recordedPeakReserved }, { "simulated", r.simulatedPeakReserved },
                { "error", r.peakReservedError } } },
        { "alloc_addresses", { { "compared", r.allocAddressesCompared }, { "matched", r.allocAddressesMatched } } },
        { "initial_state",
            { { "segments", r.initialSegments }, { "blocks", r.initialBlocks },
                { "not_adopted", r.initialNotAdopted } } },
        { "empty_cache_directives", r.emptyCacheDirectives },
        { "ooms", r.ooms },
    };
    if (r.endStateDifferences)
        j["end_state"] = { { "segments_recorded", r.endSegmentsRecorded },
            { "segments_simulated", r.finalState.segments.size() }, { "differences", *r.endStateDifferences } };
    auto counterJson = [&](const replay::CounterComparison& c) {
        return nlohmann::json { { "series", c.series }, { "samples", c.samples }, { "recorded_first", c.recordedFirst },
            { "recorded_peak", c.recordedPeak }, { "simulated_peak", c.simulatedPeak }, { "peak_error", c.peakError },
            { "peak_error_ratio", c.peakErrorRatio }, { "mean_abs_error", c.meanAbsError },
            { "max_abs_error", c.maxAbsError }, { "max_abs_error_time_ns", c.maxAbsErrorTime - start },
            { "within_1_percent", c.withinOnePercent } };
    };
    j["segment_level"] = r.segmentLevel;
    j["comparable"] = r.comparable;
    if (r.reservedCounter)
        j["reserved_counter"] = counterJson(*r.reservedCounter);
    if (r.reservedCounterWarm) {
        j["reserved_counter_warm"] = counterJson(*r.reservedCounterWarm);
        j["opening_allocated"] = r.openingAllocated;
    }
    return j;
}

void writeFidelityReport(
    const replay::FidelityReport& r, std::string_view label, std::string_view format, TimeNs start, std::ostream& out)
{
    if (format == "json") {
        out << fidelityToJson(r, label, start).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        return;
    }
    if (format != "text")
        throw UsageError("--format '" + std::string(format) + "' is not one of: text, json (for --fidelity)");
    out << textForTerminal(label) << '\n';
    out << "  policy            " << textForTerminal(r.policy) << '\n';
    out << "  initial state     " << counted(r.initialSegments, "segment", "segments") << ", "
        << counted(r.initialBlocks, "live block", "live blocks") << " adopted";
    if (r.initialNotAdopted)
        out << ", " << r.initialNotAdopted << " not adopted";
    out << '\n';
    if (!r.comparable) {
        out << "  nothing to compare: the trace records no segment events, no initial state and no reserved counter\n"
            << "  simulated         peak reserved " << formatBytes(r.simulatedPeakReserved) << ", "
            << r.simulatedSegmentEvents << " segment events\n";
        return;
    }
    if (r.segmentLevel) {
        out << "  segment events    " << r.matched << "/" << r.recordedSegmentEvents << " matched ("
            << r.simulatedSegmentEvents << " simulated)\n";
        if (r.firstMismatch) {
            out << "  first mismatch    segment event " << r.firstMismatch->index << '\n';
            out << "    recorded        " << sideText(r.firstMismatch->recorded, start) << '\n';
            out << "    simulated       " << sideText(r.firstMismatch->simulated, start) << '\n';
        }
        out << "  alloc addresses   " << r.allocAddressesMatched << "/" << r.allocAddressesCompared
            << " at the recorded address\n";
    } else {
        out << "  segment events    none recorded (reserved is known only from the " << textForTerminal(r.reservedCounter->series)
            << " counter); " << r.simulatedSegmentEvents << " simulated\n";
    }
    out << "  peak reserved     recorded " << formatBytes(r.recordedPeakReserved) << ", simulated "
        << formatBytes(r.simulatedPeakReserved) << ", error " << r.peakReservedError << " B\n";
    if (r.endStateDifferences) {
        out << "  end state         " << (r.endStateDifferences->empty() ? "identical to" : "differs from")
            << " the recorded segments (" << r.endSegmentsRecorded << " recorded, " << r.finalState.segments.size()
            << " simulated)\n";
        for (const auto& d : *r.endStateDifferences)
            out << "    " << textForTerminal(d) << '\n';
    }
    auto counterText = [&](const char* title, const replay::CounterComparison& c) {
        out << "  " << title << textForTerminal(c.series) << ": " << c.samples << (c.samples == 1 ? " sample" : " samples")
            << ", first " << formatBytes(c.recordedFirst)
            << "; peak recorded " << formatBytes(c.recordedPeak) << ", simulated " << formatBytes(c.simulatedPeak)
            << (c.recordedPeak == 0 ? std::string(" (the recorded counter is 0 B throughout: nothing to compare)")
                                    : " (error " + percent(c.peakErrorRatio) + ")")
            << "; mean |error| " << formatBytes(Bytes(c.meanAbsError))
            << ", max " << formatBytes(c.maxAbsError)
            // No error has no time: maxAbsErrorTime stays 0, which printed "at +-1732… s" (or "+-0.000001 s").
            << (c.maxAbsError == 0 ? std::string() : " at " + formatOffsetBetween(start, c.maxAbsErrorTime)) << "; "
            << percent(c.withinOnePercent) << " of samples within 1 % of the peak\n";
    };
    if (r.reservedCounter)
        counterText("cold start        ", *r.reservedCounter);
    if (r.reservedCounterWarm) {
        out << "  warm start        " << formatBytes(r.openingAllocated)
            << " allocated before the window held as one block, one pass first\n";
        counterText("                  ", *r.reservedCounterWarm);
    }
    if (r.emptyCacheDirectives)
        out << "  empty_cache       " << r.emptyCacheDirectives
            << " recorded release bursts replayed as empty_cache()\n";
    out << "  result            " << (r.exact() ? "exact" : "not exact") << '\n';
}

} // namespace gpumem::analyze
