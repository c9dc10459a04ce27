#include "analyze/whatif_report.h"

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

namespace gpumem::analyze {

namespace {
    void checkFormat(std::string_view format)
    {
        if (format != "text" && format != "json" && format != "csv")
            throw UsageError("--format '" + std::string(format) + "' is not one of: text, json, csv");
    }

    // A text table: a header row and data rows; the first `leftColumns` columns are left-aligned. The
    // cells (policy specs, process names) are made fit for a terminal line here (textForTerminal).
    void writeColumns(std::vector<std::vector<std::string>> rows, std::size_t leftColumns, std::ostream& out)
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
    std::vector<std::size_t> order(rows.size());
    std::iota(order.begin(), order.end(), 0);
    // bestSweepRow's key, so the best row is the first (review finding: a row with a failed request
    // and a low peak sorted above every configuration that worked).
    auto key = [&](std::size_t i) {
        const auto& r = rows[i].result;
        return std::make_tuple(r.ooms, r.peakReserved.bytes, r.deviceCalls());
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return order;
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

void writeSweepTable(const std::vector<SweepRow>& rows, std::string_view format, TimeNs start, std::ostream& out)
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
            all.push_back(std::move(j));
        }
        dump(all, out);
        return;
    }
    if (format == "csv") {
        out << "best,spec,policy,peak_reserved,peak_allocated,waste_at_peak,device_calls,ooms,first_oom_time_ns\n";
        for (std::size_t i : order) {
            const auto& r = rows[i].result;
            char waste[32];
            std::snprintf(waste, sizeof waste, "%.6f", r.atPeak.waste());
            out << (i == best ? "1" : "0") << ',' << csvField(rows[i].spec) << ',' << csvField(r.policy) << ','
                << r.peakReserved.bytes << ',' << r.peakAllocated.bytes << ',' << waste << ',' << r.deviceCalls() << ','
                << r.ooms << ','
                << (r.failures.empty() ? std::string() : std::to_string(r.failures.front().time - start)) << '\n';
        }
        return;
    }
    std::vector<std::vector<std::string>> table { { "", "configuration", "peak reserved", "peak allocated",
        "waste at peak", "device calls", "OOMs" } };
    for (std::size_t i : order) {
        const auto& r = rows[i].result;
        table.push_back(
            { i == best ? "*" : "", rows[i].spec, formatBytes(r.peakReserved.bytes), formatBytes(r.peakAllocated.bytes),
                percent(r.atPeak.waste()), std::to_string(r.deviceCalls()), std::to_string(r.ooms) });
    }
    writeColumns(table, 2, out);
    if (best < rows.size())
        out << "* best: " << textForTerminal(rows[best].spec)
            << (rows[best].result.ooms ? " (every configuration had a failed request)" : "") << '\n';
}

void writeFitTable(const std::vector<replay::FitResult>& fits, std::string_view format, std::ostream& out)
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
                { "probes", probes } });
        }
        dump(all, out);
        return;
    }
    if (format == "csv") {
        out << "spec,policy,fits,capacity,peak_reserved_at_capacity,live_peak,unlimited_peak_reserved,probes,"
               "monotone\n";
        for (const auto& f : fits)
            out << csvField(f.spec) << ',' << csvField(f.policy) << ',' << (f.fits ? 1 : 0) << ','
                << (f.fits ? std::to_string(f.capacity) : std::string()) << ',' << f.peakReservedAtFit << ','
                << f.lowerBound << ',' << f.unlimitedPeakReserved << ',' << f.probes.size() << ','
                << (f.nonMonotone ? 0 : 1) << '\n';
        return;
    }
    std::vector<std::vector<std::string>> table { { "policy", "fits in", "peak reserved there",
        "unlimited peak reserved", "live peak", "probes" } };
    for (const auto& f : fits)
        table.push_back({ f.spec, f.fits ? formatBytes(f.capacity) : std::string("no fit"),
            f.fits ? formatBytes(f.peakReservedAtFit) : std::string("-"), formatBytes(f.unlimitedPeakReserved),
            formatBytes(f.lowerBound), std::to_string(f.probes.size()) });
    writeColumns(table, 1, out);
    for (const auto& f : fits) {
        if (!f.fits) {
            out << textForTerminal(f.spec) << ": no capacity up to " << formatBytes(f.maxCapacity) << " runs without OOM\n";
            continue;
        }
        if (f.capacity == 0)
            out << textForTerminal(f.spec) << ": needs no memory (0 B): nothing is reserved on the device\n";
        if (f.nonMonotone)
            out << textForTerminal(f.spec) << ": non-monotone: fits at " << formatBytes(f.nonMonotone->first) << " ("
                << f.nonMonotone->first << " B) but fails at " << formatBytes(f.nonMonotone->second) << " ("
                << f.nonMonotone->second << " B); the capacity shown is the smallest that fits\n";
    }
}

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
    std::vector<std::vector<std::string>> table { { "process", "policy", "limit", "start", "peak reserved", "at",
        "peak allocated", "OOMs", "first OOM" } };
    for (const auto& p : r.processes)
        table.push_back({ p.name, p.policy, bytesOrUnlimited(p.limit), formatOffset(p.offset),
            formatBytes(p.peakReserved.bytes), formatOffset(p.peakReserved.time),
            formatBytes(p.peakAllocated.bytes), std::to_string(p.ooms),
            p.failures.empty() ? std::string("-") : formatOffset(p.failures.front().time) });
    writeColumns(table, 2, out);
    std::string before;
    for (const auto& p : r.processes)
        if (p.openingAllocated > 0)
            before += (before.empty() ? "" : ", ") + textForTerminal(p.name) + " " + formatBytes(p.openingAllocated);
    if (!before.empty())
        out << "allocated before the profiler trace began, held live from the process's start: " << before << '\n';
    out << "combined peak reserved: " << formatBytes(r.combinedPeakReserved) << " at +"
        << formatSeconds(r.combinedPeakTime) << '\n';
    if (!r.firstFailure) {
        out << "fits: no process had a failed request\n";
        return;
    }
    const auto& f = *r.firstFailure;
    const auto& p = r.processes[f.process];
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
        << (r.stopped ? "; the run stopped there" : "") << '\n';
}

} // namespace gpumem::analyze
