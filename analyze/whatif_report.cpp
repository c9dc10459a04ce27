#include "analyze/whatif_report.h"

#include "analyze/comparison.h"

#include "analyze/analysis_report.h"
#include "analyze/replay_report.h"
#include "core/error.h"
#include "core/display_width.h"
#include "core/message_quote.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <sstream>
#include <tuple>

namespace gpumem::analyze {

namespace {
    void checkFormat(std::string_view format)
    {
        if (format != "text" && format != "json" && format != "csv")
            throw UsageError("--format '" + std::string(format) + "' is not one of: text, json, csv");
    }

    // A text table: a header row and data rows; the first `leftColumns` columns are left-aligned. The
    // cells (policy specs, process names) are made fit for a terminal line here (textForTerminal).
    // Within `limit` columns (0 = unlimited): column `shrink` gives up what the others leave, its
    // cells shortened in the middle (comparison.h, shortenMiddle).
    void writeColumns(std::vector<std::vector<std::string>> rows, std::size_t leftColumns, std::ostream& out,
        std::size_t limit = 0, std::size_t shrink = std::string::npos, bool specs = false)
    {
        for (auto& r : rows)
            for (auto& cell : r)
                cell = textForTerminal(cell);
        std::vector<std::size_t> width;
        for (const auto& r : rows)
            for (std::size_t c = 0; c < r.size(); ++c) {
                width.resize(std::max(width.size(), r.size()));
                width[c] = std::max(width[c], displayWidth(r[c]));
            }
        if (limit != 0 && shrink < width.size()) {
            std::size_t others = 0;
            for (std::size_t c = 0; c < width.size(); ++c)
                others += c == shrink ? 0 : width[c] + (c ? 2 : 0);
            others += shrink ? 2 : 0;
            if (others + width[shrink] > limit) {
                width[shrink] = std::max<std::size_t>(8, limit > others ? limit - others : 8);
                for (auto& r : rows)
                    if (shrink < r.size())
                        r[shrink] = specs ? shortenSpec(r[shrink], width[shrink]) : shortenMiddle(r[shrink], width[shrink]);
            }
        }
        for (const auto& r : rows) {
            std::string line;
            for (std::size_t c = 0; c < r.size(); ++c) {
                std::string gap(width[c] - displayWidth(r[c]), ' '); // display columns, not bytes (brief esc item 2)
                line += (c ? "  " : "") + (c < leftColumns ? r[c] + gap : gap + r[c]);
            }
            while (!line.empty() && line.back() == ' ')
                line.pop_back();
            out << line << '\n';
        }
    }

    std::string bytesOrUnlimited(Bytes b) { return b == 0 ? std::string("-") : formatBytes(b); }

    void dump(const nlohmann::json& j, std::ostream& out)
    {
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    }
} // namespace

std::vector<std::size_t> sweepOrder(const std::vector<SweepRow>& rows)
{
    // The one ranking (comparison.h), so the best row is the first (review finding: a row with a failed
    // request and a low peak sorted above every configuration that worked).
    std::vector<const replay::ReplayResult*> results;
    for (const auto& r : rows)
        results.push_back(&r.result);
    return rankReplays(results);
}

std::size_t bestSweepRow(const std::vector<SweepRow>& rows)
{
    std::size_t best = rows.size();
    auto key = [&](std::size_t i) {
        const auto& r = rows[i].result;
        return std::make_tuple(r.ooms, r.peakReserved.bytes, r.deviceCalls(), i);
    };
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (best == rows.size() || key(i) < key(best))
            best = i;
    return best;
}

void writeSweepTable(const std::vector<SweepRow>& rows, std::string_view format, TimeNs start, std::ostream& out,
    const ComparisonContext& context)
{
    checkFormat(format);
    const auto order = sweepOrder(rows);
    const std::size_t best = bestSweepRow(rows);
    if (format == "json") {
        nlohmann::json all = nlohmann::json::array();
        for (std::size_t i : order) {
            auto j = replayResultToJson(rows[i].result, start);
            j["spec"] = rows[i].spec;
            j["best"] = i == best;
            j["start"] = std::string(replay::toString(context.start));
            j["recorded"] = false;
            j["lower_bound"] = context.lowerBound;
            j["reserved_vs_bound"] = context.lowerBound
                ? nlohmann::json(overBound(rows[i].result.peakReserved.bytes, context.lowerBound))
                : nlohmann::json(nullptr);
            all.push_back(std::move(j));
        }
        if (context.recorded)
            all.push_back({ { "spec", "recorded" }, { "policy", "recorded" }, { "recorded", true },
                { "source", context.recorded->source }, { "peak_reserved", context.recorded->bytes },
                { "reserved_is_lower_bound", false }, { "best", false },
                { "start", std::string(replay::toString(context.start)) } });
        dump(all, out);
        return;
    }
    if (format == "csv") {
        out << "best,spec,policy,peak_reserved,peak_allocated,waste_at_peak,device_calls,ooms,first_oom_time_ns,"
               "reserved_is_lower_bound\n";
        for (std::size_t i : order) {
            const auto& r = rows[i].result;
            char waste[32];
            std::snprintf(waste, sizeof waste, "%.6f", r.atPeak.waste());
            out << (i == best ? "1" : "0") << ',' << csvField(rows[i].spec) << ',' << csvField(r.policy) << ','
                << r.peakReserved.bytes << ',' << r.peakAllocated.bytes << ',' << waste << ',' << r.deviceCalls() << ','
                << r.ooms << ','
                << (r.failures.empty() ? std::string() : std::to_string(r.failures.front().time - start)) << ','
                << (r.reservedIsLowerBound ? 1 : 0) << '\n';
        }
        if (context.recorded)
            out << "0,recorded,recorded," << context.recorded->bytes << ",,,,,,0\n";
        return;
    }
    if (best < rows.size() && std::all_of(rows.begin(), rows.end(), [](const auto& r) { return r.result.requestEvents == 0; }))
        out << wrapText(noRequestsAnswer(context) + ".", context.width);
    else if (best < rows.size()) {
        // The answer first (M9 of the 2026-12-04 review: the best row was named only under the table).
        const auto& b = rows[best].result;
        std::string answer = "Best of " + counted(rows.size(), "configuration", "configurations") + ": "
            + textForTerminal(rows[best].spec) + ", peak reserved " + markedBytes(b.peakReserved.bytes, b.reservedIsLowerBound)
            + (b.ooms ? ", with " + counted(b.ooms, "OOM", "OOMs") + " (every configuration had a failed request)"
                      : std::string(" with no OOM"));
        if (rows.size() > 1) {
            const auto& worst = rows[order.back()];
            answer += "; the worst, " + textForTerminal(worst.spec) + ", "
                + markedBytes(worst.result.peakReserved.bytes, worst.result.reservedIsLowerBound)
                + (worst.result.ooms ? " with " + counted(worst.result.ooms, "OOM", "OOMs") : std::string());
        }
        if (context.recorded)
            answer += "; the run itself reserved " + formatBytes(context.recorded->bytes);
        out << wrapText(answer + ".", context.width);
    }
    if (context.before.any() || context.start == replay::StartState::Empty)
        out << wrapText(replay::startStateSentence(context.start, context.before), context.width);
    Bytes reservedMax = context.recorded ? context.recorded->bytes : 0, allocatedMax = 0;
    for (const auto& row : rows) {
        reservedMax = std::max(reservedMax, row.result.peakReserved.bytes);
        allocatedMax = std::max(allocatedMax, row.result.peakAllocated.bytes);
    }
    std::vector<std::vector<std::string>> table { { "", "configuration", "peak reserved", "vs bound",
        "peak allocated", "device calls", "OOMs" } };
    for (std::size_t i : order) {
        const auto& r = rows[i].result;
        table.push_back({ i == best ? "*" : "", rows[i].spec + (r.approximation.empty() ? "" : " (approx.)"),
            (r.reservedIsLowerBound ? "≥ " : "") + bytesInUnitOf(r.peakReserved.bytes, reservedMax),
            overBoundText(r.peakReserved.bytes, context.lowerBound), bytesInUnitOf(r.peakAllocated.bytes, allocatedMax),
            std::to_string(r.deviceCalls()), std::to_string(r.ooms) });
    }
    if (context.recorded)
        table.push_back({ "", "recorded", bytesInUnitOf(context.recorded->bytes, reservedMax),
            overBoundText(context.recorded->bytes, context.lowerBound), "-", "-", "-" });
    // A configuration wider than its column keeps every option's value (shortenSpec): the rows of a grid differ
    // in their values, and a middle cut hid them (two rows read alike).
    writeColumns(table, 2, out, context.width, 1, true);
    if (best < rows.size())
        out << wrapText("* best: " + textForTerminal(rows[best].spec)
                + (rows[best].result.ooms ? " (every configuration had a failed request)" : ""),
            context.width);
    for (std::size_t i : order)
        if (!rows[i].result.approximation.empty()) {
            out << wrapText("(approx.): " + rows[i].result.approximation, context.width);
            break; // one sentence: every approximated policy today is the CUDA pool
        }
    for (const auto& row : rows)
        if (row.result.outsideBytes != 0) {
            out << wrapText("outside the allocator: " + formatBytes(row.result.outsideBytes)
                    + " of the device taken from the capacity in every configuration",
                context.width);
            break;
        }
    if (context.recorded) {
        Bytes bestReserved = best < rows.size() ? rows[best].result.peakReserved.bytes : 0;
        out << wrapText(recordedRowNote(context, bestReserved), context.width);
    }
}

void writeFitTable(const std::vector<replay::FitResult>& fits, std::string_view format, std::ostream& out,
    const ComparisonContext& context)
{
    checkFormat(format);
    if (format == "json") {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& f : fits) {
            nlohmann::json probes = nlohmann::json::array();
            for (const auto& p : f.probes)
                probes.push_back(
                    { { "capacity", p.capacity }, { "fits", p.fits }, { "peak_reserved", p.peakReserved } });
            all.push_back({ { "spec", f.spec }, { "policy", f.policy }, { "fits", f.fits },
                { "capacity", f.fits ? nlohmann::json(f.capacity) : nlohmann::json(nullptr) },
                { "peak_reserved_at_capacity", f.peakReservedAtFit }, { "live_peak", f.lowerBound },
                { "unlimited_peak_reserved", f.unlimitedPeakReserved }, { "below_capacity_probed", f.belowProbed },
                { "monotone", !f.nonMonotone },
                { "non_monotone",
                    f.nonMonotone
                        ? nlohmann::json { { "fits_at", f.nonMonotone->first }, { "fails_at", f.nonMonotone->second } }
                        : nlohmann::json(nullptr) },
                { "probes", probes }, { "start", std::string(replay::toString(context.start)) },
                { "opening_allocated", f.openingAllocated }, { "reserved_is_lower_bound", f.lowerBoundMark },
                { "recorded", false } });
        }
        if (context.recorded)
            all.push_back({ { "spec", "recorded" }, { "policy", "recorded" }, { "recorded", true },
                { "source", context.recorded->source }, { "peak_reserved", context.recorded->bytes },
                { "reserved_is_lower_bound", false }, { "start", std::string(replay::toString(context.start)) } });
        dump(all, out);
        return;
    }
    if (format == "csv") {
        out << "spec,policy,fits,capacity,peak_reserved_at_capacity,live_peak,unlimited_peak_reserved,probes,"
               "monotone,reserved_is_lower_bound\n";
        for (const auto& f : fits)
            out << csvField(f.spec) << ',' << csvField(f.policy) << ',' << (f.fits ? 1 : 0) << ','
                << (f.fits ? std::to_string(f.capacity) : std::string()) << ',' << f.peakReservedAtFit << ','
                << f.lowerBound << ',' << f.unlimitedPeakReserved << ',' << f.probes.size() << ','
                << (f.nonMonotone ? 0 : 1) << ',' << (f.lowerBoundMark ? 1 : 0) << '\n';
        if (context.recorded)
            out << "recorded,recorded,,," << context.recorded->bytes << ",,,,,0\n";
        return;
    }
    if (!fits.empty()) {
        // The answer first (M9 of the 2026-12-04 review): the smallest device each policy fits, best first.
        std::vector<const replay::FitResult*> byCapacity;
        for (const auto& f : fits)
            byCapacity.push_back(&f);
        std::stable_sort(byCapacity.begin(), byCapacity.end(), [](const auto* a, const auto* b) {
            return std::make_tuple(!a->fits, a->capacity) < std::make_tuple(!b->fits, b->capacity);
        });
        const auto& f = *byCapacity.front();
        std::string answer;
        if (!f.fits)
            answer = (fits.size() == 1 ? textForTerminal(f.spec) + " fits no device" : std::string("No policy fits a device"))
                + " of up to " + formatBytes(f.maxCapacity) + " without an OOM";
        else if (std::all_of(fits.begin(), fits.end(), [](const auto& g) { return g.fits && g.capacity == 0 && g.lowerBound == 0; })
            && context.recorded && context.recorded->bytes > 0)
            answer = noRequestsAnswer(context);
        else if (std::all_of(fits.begin(), fits.end(), [](const auto& g) { return g.fits && g.capacity == 0; }))
            answer = (fits.size() == 1 ? textForTerminal(f.spec) : std::string("Every policy")) + " needs no memory: nothing is reserved on the device";
        else {
            answer = (fits.size() == 1 ? "" : "Smallest of " + std::to_string(fits.size()) + ": ") + textForTerminal(f.spec)
                + " fits in " + markedBytes(f.capacity, f.lowerBoundMark) + ", the smallest device it replays on without an OOM";
            if (fits.size() > 1) {
                const auto& n = *byCapacity[1];
                answer += "; next " + textForTerminal(n.spec)
                    + (n.fits ? " in " + markedBytes(n.capacity, n.lowerBoundMark) : std::string(", no fit"));
            }
            answer += "; the live peak, which no policy holds in less, is " + formatBytes(f.lowerBound);
        }
        out << wrapText(answer + ".", context.width);
    }
    if (context.before.any() || context.start == replay::StartState::Empty)
        out << wrapText(replay::startStateSentence(context.start, context.before), context.width);
    // Short headings, so that the policy column keeps most of the 100 columns (issue 16 item 5).
    std::vector<std::vector<std::string>> table { { "policy", "fits in", "reserved there", "unlimited reserved",
        "live peak", "probes" } };
    for (const auto& f : fits)
        table.push_back({ f.spec, f.fits ? markedBytes(f.capacity, f.lowerBoundMark) : std::string("no fit"),
            f.fits ? markedBytes(f.peakReservedAtFit, f.lowerBoundMark) : std::string("-"),
            markedBytes(f.unlimitedPeakReserved, f.lowerBoundMark), formatBytes(f.lowerBound),
            std::to_string(f.probes.size()) });
    if (context.recorded)
        table.push_back({ "recorded", "-", formatBytes(context.recorded->bytes), "-", "-", "-" });
    writeColumns(table, 1, out, context.width, 0);
    if (std::any_of(fits.begin(), fits.end(), [](const auto& f) { return f.lowerBoundMark; }))
        out << wrapText("≥: a lower bound: the probes hold the memory from before the trace, not the cache the "
                        "allocator had reserved around it then, which the trace does not show",
            context.width);
    if (context.recorded) {
        Bytes best = ~Bytes(0);
        for (const auto& f : fits)
            if (f.fits)
                best = std::min(best, f.capacity);
        out << wrapText(recordedRowNote(context, best == ~Bytes(0) ? 0 : best), context.width);
    }
    for (const auto& f : fits) {
        if (!f.fits) {
            out << textForTerminal(f.spec) << ": no capacity up to " << formatBytes(f.maxCapacity) << " runs without OOM\n";
            continue;
        }
        if (f.capacity == 0)
            out << textForTerminal(f.spec) << ": needs no memory (0 B): nothing is reserved on the device\n";
        if (f.nonMonotone)
            out << wrapText(textForTerminal(f.spec) + ": non-monotone: fits at " + formatBytes(f.nonMonotone->first) + " ("
                    + std::to_string(f.nonMonotone->first) + " B) but fails at " + formatBytes(f.nonMonotone->second)
                    + " (" + std::to_string(f.nonMonotone->second) + " B); the capacity shown is the smallest that fits",
                100);
    }
}

namespace {
    void writeFirstFailure(const replay::ColocatedResult& r, const replay::ColocatedFailure& f,
        const replay::ColocatedProcessResult& p, std::ostream& out);
} // namespace

void writeColocatedReport(const replay::ColocatedResult& r, std::string_view format, std::ostream& out)
{
    checkFormat(format);
    if (format == "json") {
        nlohmann::json procs = nlohmann::json::array();
        for (const auto& p : r.processes) {
            nlohmann::json failures = nlohmann::json::array();
            for (const auto& f : p.failures)
                failures.push_back({ { "time_ns", f.time }, { "event", f.event }, { "size", f.size },
                    { "stream", f.stream }, { "reserved", f.reserved }, { "allocated", f.allocated } });
            procs.push_back({ { "name", p.name }, { "policy", p.policy }, { "device", p.device },
                { "limit", p.limit == 0 ? nlohmann::json(nullptr) : nlohmann::json(p.limit) },
                { "offset_ns", p.offset }, { "request_events", p.requestEvents },
                { "peak_reserved", p.peakReserved.bytes }, { "peak_reserved_time_ns", p.peakReserved.time },
                { "peak_allocated", p.peakAllocated.bytes }, { "device_calls", p.deviceCounters.deviceCalls() },
                { "ooms", p.ooms }, { "failures", failures }, { "allocated_before_trace", p.openingAllocated } });
        }
        nlohmann::json first = nullptr;
        if (r.firstFailure) {
            const auto& f = *r.firstFailure;
            first = { { "process", r.processes[f.process].name }, { "time_ns", f.request.time },
                { "event", f.request.event }, { "size", f.request.size }, { "stream", f.request.stream },
                { "process_reserved", f.request.reserved }, { "combined_reserved", f.combinedReserved },
                { "refused_by", f.byLimit ? "process limit" : "device capacity" }, { "before_trace", f.beforeTrace } };
        }
        dump({ { "capacity", r.capacity == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.capacity) },
                 { "processes", procs }, { "combined_peak_reserved", r.combinedPeakReserved },
                 { "combined_peak_time_ns", r.combinedPeakTime }, { "ooms", r.ooms }, { "fits", r.ooms == 0 },
                 { "stopped_at_oom", r.stopped }, { "first_failure", first } },
            out);
        return;
    }
    if (format == "csv") {
        out << "process,policy,limit,offset_ns,peak_reserved,peak_reserved_time_ns,peak_allocated,device_calls,ooms,"
               "first_oom_time_ns,allocated_before_trace,capacity\n";
        const std::string capacity = r.capacity ? std::to_string(r.capacity) : "";
        Bytes before = 0;
        for (const auto& p : r.processes) {
            out << csvField(p.name) << ',' << csvField(p.policy) << ',' << (p.limit ? std::to_string(p.limit) : "")
                << ',' << p.offset << ',' << p.peakReserved.bytes << ',' << p.peakReserved.time << ','
                << p.peakAllocated.bytes << ',' << p.deviceCounters.deviceCalls() << ',' << p.ooms << ','
                << (p.failures.empty() ? std::string() : std::to_string(p.failures.front().time)) << ','
                << p.openingAllocated << ',' << capacity << '\n';
            before += p.openingAllocated;
        }
        out << "(combined),,,0," << r.combinedPeakReserved << ',' << r.combinedPeakTime << ",,," << r.ooms << ','
            << (r.firstFailure ? std::to_string(r.firstFailure->request.time) : std::string()) << ',' << before << ','
            << capacity << '\n';
        return;
    }
    out << "colocated on one device of " << (r.capacity ? formatBytes(r.capacity) : std::string("unlimited memory"))
        << ": " << r.processes.size() << " processes, each trace from its first event (+ offset)\n";
    // Peak figures under short headings, so that a process name keeps its columns within 100 (issue 16).
    std::vector<std::vector<std::string>> table { { "process", "policy", "limit", "start", "peak reserved", "at",
        "allocated", "OOMs", "first OOM" } };
    for (const auto& p : r.processes)
        table.push_back({ p.name, p.policy, bytesOrUnlimited(p.limit), formatOffset(p.offset),
            formatBytes(p.peakReserved.bytes), formatOffset(p.peakReserved.time),
            formatBytes(p.peakAllocated.bytes), std::to_string(p.ooms),
            p.failures.empty() ? std::string("-") : formatOffset(p.failures.front().time) });
    writeColumns(table, 2, out, 100, 0); // the process names give up columns first (issue 16 item 5)
    std::string before;
    for (const auto& p : r.processes)
        if (p.openingAllocated > 0)
            before += (before.empty() ? "" : ", ") + textForTerminal(p.name) + " " + formatBytes(p.openingAllocated);
    if (!before.empty())
        out << wrapText("allocated before the profiler trace began, held live from the process's start: " + before, 100);
    out << "combined peak reserved: " << formatBytes(r.combinedPeakReserved) << " at +"
        << formatSeconds(r.combinedPeakTime) << '\n';
    if (!r.firstFailure) {
        out << "fits: no process had a failed request\n";
        return;
    }
    const auto& f = *r.firstFailure;
    const auto& p = r.processes[f.process];
    std::ostringstream failure;
    writeFirstFailure(r, f, p, failure);
    out << wrapText(failure.str(), 100);
}

namespace {
void writeFirstFailure(const replay::ColocatedResult& r, const replay::ColocatedFailure& f,
    const replay::ColocatedProcessResult& p, std::ostream& out)
{
    out << "first failure: " << textForTerminal(p.name) << " at +" << formatSeconds(f.request.time) << ": ";
    if (f.beforeTrace)
        out << "the " << formatBytes(f.request.size) << " (" << f.request.size << " B) allocated before its trace began";
    else
        out << "request " << formatBytes(f.request.size) << " (" << f.request.size << " B) on stream "
            << f.request.stream << ", trace event " << f.request.event;
    out << "; " << textForTerminal(p.name) << " reserved " << formatBytes(f.request.reserved)
        << ", all processes " << formatBytes(f.combinedReserved) << "; refused by "
        << (f.byLimit ? textForTerminal(p.name) + "'s limit of " + formatBytes(p.limit)
                      : "the device (" + bytesOrUnlimited(r.capacity) + ")")
        << (r.stopped ? "; the run stopped there" : "");
}
} // namespace

} // namespace gpumem::analyze

namespace gpumem::analyze {
void writeTextTable(std::vector<std::vector<std::string>> rows, std::size_t leftColumns, std::ostream& out,
    std::size_t width, std::size_t shrink, bool specs)
{
    writeColumns(std::move(rows), leftColumns, out, width, shrink, specs);
}
} // namespace gpumem::analyze
