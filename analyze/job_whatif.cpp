#include "analyze/job_whatif.h"

#include "analyze/analysis_report.h"
#include "analyze/comparison.h"
#include "analyze/whatif_report.h"
#include "core/error.h"
#include "core/units.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <tuple>

namespace gpumem::analyze {

namespace {
    using nlohmann::json;

    void checkFormat(std::string_view format)
    {
        if (format != "text" && format != "json" && format != "csv")
            throw UsageError("--format '" + std::string(format) + "' is not one of: text, json, csv");
    }

    json parseList(std::string_view bytes, const char* what)
    {
        json j = json::from_cbor(bytes.begin(), bytes.end(), true, false);
        if (!j.is_array() || j.empty())
            throw Error(std::string("job what-if: a gathered ") + what + " list is not a list (internal error)");
        return j;
    }

    Bytes lowerMedian(std::vector<Bytes> v)
    {
        if (v.empty())
            return 0;
        std::sort(v.begin(), v.end());
        return v[(v.size() - 1) / 2];
    }

    std::string jobSentence(std::size_t ranks, const char* rule)
    {
        return "job of " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + "; " + rule;
    }

    std::string nameOf(const std::vector<std::string>& names, std::size_t i)
    {
        return i < names.size() ? names[i] : "rank " + std::to_string(i);
    }

    json settingJson(const std::vector<std::string>& names, const JobSetting& s)
    {
        const JobVerdict v = judgeSetting(s);
        json perRank = json::array();
        for (std::size_t r = 0; r < s.ranks.size(); ++r) {
            const auto& x = s.ranks[r];
            perRank.push_back({ { "rank", nameOf(names, r) }, { "policy", x.policy }, { "peak_reserved", x.peakReserved },
                { "peak_allocated", x.peakAllocated }, { "device_calls", x.deviceCalls }, { "ooms", x.ooms },
                { "first_oom_time_ns", x.firstOom ? json(*x.firstOom) : json(nullptr) },
                { "first_oom_size", x.firstOomSize }, { "reserved_is_lower_bound", x.reservedIsLowerBound } });
        }
        return { { "spec", s.spec }, { "fits", v.fits }, { "ranks_with_oom", v.ranksWithOom },
            { "worst_rank", s.ranks.empty() ? json(nullptr) : json(nameOf(names, v.worst)) },
            { "worst_peak_reserved", v.worstPeakReserved }, { "median_peak_reserved", v.medianPeakReserved },
            { "ooms", v.ooms }, { "device_calls", v.deviceCalls }, { "reserved_is_lower_bound", v.lowerBound },
            { "per_rank", perRank } };
    }

    void dump(const json& j, std::ostream& out) { out << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n'; }

    // The replay and sweep tables: one row per setting in `order`; `best` marked when a sweep.
    void writeSettings(const std::vector<std::string>& names, const std::vector<JobSetting>& settings,
        const std::vector<std::size_t>& order, std::optional<std::size_t> best, std::string_view format,
        std::ostream& out, std::size_t width)
    {
        checkFormat(format);
        if (format == "json") {
            json all = json::array();
            for (std::size_t i : order) {
                json j = settingJson(names, settings[i]);
                if (best)
                    j["best"] = i == *best;
                all.push_back(std::move(j));
            }
            dump({ { "ranks", names }, { "settings", all } }, out);
            return;
        }
        if (format == "csv") {
            out << (best ? "best," : "")
                << "spec,rank,job_fits,worst_rank,policy,peak_reserved,peak_allocated,device_calls,ooms,"
                   "first_oom_time_ns,first_oom_size,reserved_is_lower_bound\n";
            for (std::size_t i : order) {
                const auto& s = settings[i];
                const JobVerdict v = judgeSetting(s);
                for (std::size_t r = 0; r < s.ranks.size(); ++r) {
                    const auto& x = s.ranks[r];
                    if (best)
                        out << (i == *best ? "1," : "0,");
                    out << csvField(s.spec) << ',' << csvField(nameOf(names, r)) << ',' << (v.fits ? 1 : 0) << ','
                        << (r == v.worst ? 1 : 0) << ',' << csvField(x.policy) << ',' << x.peakReserved << ','
                        << x.peakAllocated << ',' << x.deviceCalls << ',' << x.ooms << ','
                        << (x.firstOom ? std::to_string(*x.firstOom) : std::string()) << ',' << x.firstOomSize << ','
                        << (x.reservedIsLowerBound ? 1 : 0) << '\n';
                }
            }
            return;
        }
        out << wrapText(jobSentence(names.size(), "a setting fits when no rank has a failed request (OOM)"), width);
        Bytes unit = 0;
        for (const auto& s : settings)
            for (const auto& x : s.ranks)
                unit = std::max(unit, x.peakReserved);
        std::vector<std::vector<std::string>> table;
        table.push_back({ "setting", "fits", "worst rank", "ranks OOM", "OOMs", "peak reserved", "median" });
        if (best)
            table.front().insert(table.front().begin(), "");
        for (std::size_t i : order) {
            const JobVerdict v = judgeSetting(settings[i]);
            std::vector<std::string> row { settings[i].spec, v.fits ? "yes" : "no", nameOf(names, v.worst),
                std::to_string(v.ranksWithOom), std::to_string(v.ooms),
                (v.lowerBound ? "≥ " : "") + bytesInUnitOf(v.worstPeakReserved, unit),
                bytesInUnitOf(v.medianPeakReserved, unit) };
            if (best)
                row.insert(row.begin(), i == *best ? "*" : "");
            table.push_back(std::move(row));
        }
        const std::size_t settingColumn = best ? 1 : 0;
        writeTextTable(table, settingColumn + 3, out, width, settingColumn, best.has_value()); // a sweep: values kept
        out << wrapText("worst rank: the most failed requests, then the highest peak reserved; ranks OOM: the ranks with a "
                        "failed request; OOMs: over every rank; peak reserved: the worst rank's; median: the median "
                        "rank's",
            width);
        if (best && *best < settings.size()) {
            const JobVerdict v = judgeSetting(settings[*best]);
            out << wrapText("* best: " + settings[*best].spec
                    + (v.fits ? " (fits every rank)" : " (no configuration fits every rank)"),
                width);
        }
    }
} // namespace

RankReplay rankReplayOf(const replay::ReplayResult& result, TimeNs start)
{
    RankReplay r;
    r.policy = result.policy;
    r.peakReserved = result.peakReserved.bytes;
    r.peakAllocated = result.peakAllocated.bytes;
    r.deviceCalls = result.deviceCalls();
    r.ooms = result.ooms;
    if (!result.failures.empty()) {
        r.firstOom = result.failures.front().time - start;
        r.firstOomSize = result.failures.front().size;
    }
    r.reservedIsLowerBound = result.reservedIsLowerBound;
    return r;
}

RankFit rankFitOf(const replay::FitResult& fit)
{
    return { fit.policy, fit.fits, fit.capacity, fit.lowerBound, fit.lowerBoundMark, fit.nonMonotone.has_value() };
}


namespace {
    // [named rank | null, row, row, …], each row an array (rowJson / rowOf).
    template <class Row, class ToJson> std::string rowsToBytes(const RankRows<Row>& rows, ToJson rowJson)
    {
        json all = json::array({ rows.namedRank ? json(*rows.namedRank) : json(nullptr) });
        for (const auto& r : rows.rows)
            all.push_back(rowJson(r));
        const auto bytes = json::to_cbor(all);
        return { bytes.begin(), bytes.end() };
    }
    template <class Row, class FromJson>
    RankRows<Row> rowsFromBytes(std::string_view bytes, const char* what, FromJson rowOf)
    {
        const json all = parseList(bytes, what);
        RankRows<Row> out;
        if (!all.front().is_null())
            out.namedRank = all.front().get<std::int64_t>();
        for (std::size_t k = 1; k < all.size(); ++k)
            out.rows.push_back(rowOf(all[k]));
        return out;
    }
} // namespace

std::string toBytes(const RankRows<RankReplay>& replays)
{
    return rowsToBytes(replays, [](const RankReplay& r) {
        return json::array({ r.policy, r.peakReserved, r.peakAllocated, r.deviceCalls, r.ooms,
            r.firstOom ? json(*r.firstOom) : json(nullptr), r.firstOomSize, r.reservedIsLowerBound });
    });
}

RankRows<RankReplay> rankReplaysFromBytes(std::string_view bytes)
{
    return rowsFromBytes<RankReplay>(bytes, "replay", [](const json& j) {
        RankReplay r { j.at(0).get<std::string>(), j.at(1).get<Bytes>(), j.at(2).get<Bytes>(),
            j.at(3).get<std::uint64_t>(), j.at(4).get<std::uint64_t>(), std::nullopt, j.at(6).get<Bytes>(),
            j.at(7).get<bool>() };
        if (!j.at(5).is_null())
            r.firstOom = j.at(5).get<TimeNs>();
        return r;
    });
}

std::string toBytes(const RankRows<RankFit>& fits)
{
    return rowsToBytes(fits, [](const RankFit& f) {
        return json::array({ f.policy, f.fits, f.capacity, f.lowerBound, f.lowerBoundMark, f.nonMonotone });
    });
}

RankRows<RankFit> rankFitsFromBytes(std::string_view bytes)
{
    return rowsFromBytes<RankFit>(bytes, "fit", [](const json& j) {
        return RankFit { j.at(0).get<std::string>(), j.at(1).get<bool>(), j.at(2).get<Bytes>(), j.at(3).get<Bytes>(),
            j.at(4).get<bool>(), j.at(5).get<bool>() };
    });
}

std::vector<std::string> jobRankNames(const std::vector<std::optional<std::int64_t>>& namedRanks)
{
    const bool named = std::all_of(namedRanks.begin(), namedRanks.end(), [](const auto& r) { return r.has_value(); });
    std::vector<std::string> names;
    for (std::size_t i = 0; i < namedRanks.size(); ++i)
        names.push_back("rank " + (named ? std::to_string(*namedRanks[i]) : std::to_string(i)));
    return names;
}

JobVerdict judgeSetting(const JobSetting& setting)
{
    JobVerdict v;
    std::vector<Bytes> peaks;
    for (std::size_t r = 0; r < setting.ranks.size(); ++r) {
        const auto& x = setting.ranks[r];
        peaks.push_back(x.peakReserved);
        v.ooms += x.ooms;
        v.deviceCalls += x.deviceCalls;
        v.ranksWithOom += x.ooms > 0;
        v.lowerBound = v.lowerBound || x.reservedIsLowerBound;
        const auto& w = setting.ranks[v.worst];
        if (std::tie(x.ooms, x.peakReserved) > std::tie(w.ooms, w.peakReserved))
            v.worst = r;
    }
    v.fits = v.ranksWithOom == 0;
    v.worstPeakReserved = setting.ranks.empty() ? 0 : setting.ranks[v.worst].peakReserved;
    v.medianPeakReserved = lowerMedian(std::move(peaks));
    return v;
}

std::vector<std::size_t> jobSweepOrder(const std::vector<JobSetting>& settings)
{
    std::vector<JobVerdict> verdicts;
    for (const auto& s : settings)
        verdicts.push_back(judgeSetting(s));
    std::vector<std::size_t> order(settings.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const auto& x = verdicts[a];
        const auto& y = verdicts[b];
        return std::make_tuple(x.ranksWithOom, x.ooms, x.worstPeakReserved, x.deviceCalls)
            < std::make_tuple(y.ranksWithOom, y.ooms, y.worstPeakReserved, y.deviceCalls);
    });
    return order;
}

JobFitVerdict judgeFit(const JobFit& fit)
{
    JobFitVerdict v;
    v.fits = !fit.ranks.empty();
    for (std::size_t r = 0; r < fit.ranks.size(); ++r) {
        const auto& x = fit.ranks[r];
        v.lowerBound = std::max(v.lowerBound, x.lowerBound);
        v.lowerBoundMark = v.lowerBoundMark || x.lowerBoundMark;
        if (!x.fits) {
            if (v.fits)
                v.worst = r;
            v.fits = false;
        } else if (v.fits && x.capacity > v.capacity) {
            v.capacity = x.capacity;
            v.worst = r;
        }
    }
    if (!v.fits)
        v.capacity = 0;
    return v;
}

void writeJobReplayTable(const std::vector<std::string>& rankNames, const std::vector<JobSetting>& settings,
    std::string_view format, std::ostream& out, std::size_t width)
{
    std::vector<std::size_t> order(settings.size());
    std::iota(order.begin(), order.end(), 0);
    writeSettings(rankNames, settings, order, std::nullopt, format, out, width);
}

void writeJobSweepTable(const std::vector<std::string>& rankNames, const std::vector<JobSetting>& settings,
    std::string_view format, std::ostream& out, std::size_t width)
{
    const auto order = jobSweepOrder(settings);
    writeSettings(rankNames, settings, order, order.empty() ? std::nullopt : std::optional(order.front()), format,
        out, width);
}

void writeJobFitTable(const std::vector<std::string>& rankNames, const std::vector<JobFit>& fits,
    std::string_view format, std::ostream& out, std::size_t width)
{
    checkFormat(format);
    auto medianCapacity = [](const JobFit& f) {
        std::vector<Bytes> c;
        for (const auto& x : f.ranks)
            if (x.fits)
                c.push_back(x.capacity);
        return lowerMedian(std::move(c));
    };
    if (format == "json") {
        json all = json::array();
        for (const auto& f : fits) {
            const JobFitVerdict v = judgeFit(f);
            json perRank = json::array();
            for (std::size_t r = 0; r < f.ranks.size(); ++r) {
                const auto& x = f.ranks[r];
                perRank.push_back({ { "rank", nameOf(rankNames, r) }, { "policy", x.policy }, { "fits", x.fits },
                    { "capacity", x.fits ? json(x.capacity) : json(nullptr) }, { "live_peak", x.lowerBound },
                    { "reserved_is_lower_bound", x.lowerBoundMark }, { "monotone", !x.nonMonotone },
                    { "fails_at_job_capacity",
                        std::find(f.failsAtJobCapacity.begin(), f.failsAtJobCapacity.end(), r)
                            != f.failsAtJobCapacity.end() } });
            }
            all.push_back({ { "spec", f.spec }, { "fits", v.fits },
                { "capacity", v.fits ? json(v.capacity) : json(nullptr) },
                { "worst_rank", f.ranks.empty() ? json(nullptr) : json(nameOf(rankNames, v.worst)) },
                { "median_rank_capacity", medianCapacity(f) }, { "live_peak", v.lowerBound },
                { "reserved_is_lower_bound", v.lowerBoundMark },
                { "confirmed", v.fits && f.failsAtJobCapacity.empty() }, { "per_rank", perRank } });
        }
        dump({ { "ranks", rankNames }, { "policies", all } }, out);
        return;
    }
    if (format == "csv") {
        out << "spec,rank,job_capacity,worst_rank,policy,fits,capacity,live_peak,reserved_is_lower_bound,monotone,"
               "fails_at_job_capacity\n";
        for (const auto& f : fits) {
            const JobFitVerdict v = judgeFit(f);
            for (std::size_t r = 0; r < f.ranks.size(); ++r) {
                const auto& x = f.ranks[r];
                const bool failsThere = std::find(f.failsAtJobCapacity.begin(), f.failsAtJobCapacity.end(), r)
                    != f.failsAtJobCapacity.end();
                out << csvField(f.spec) << ',' << csvField(nameOf(rankNames, r)) << ','
                    << (v.fits ? std::to_string(v.capacity) : std::string()) << ',' << (r == v.worst ? 1 : 0) << ','
                    << csvField(x.policy) << ',' << (x.fits ? 1 : 0) << ','
                    << (x.fits ? std::to_string(x.capacity) : std::string()) << ',' << x.lowerBound << ','
                    << (x.lowerBoundMark ? 1 : 0) << ',' << (x.nonMonotone ? 0 : 1) << ',' << (failsThere ? 1 : 0)
                    << '\n';
            }
        }
        return;
    }
    out << wrapText(jobSentence(rankNames.size(),
                        "the smallest GPU memory on which every rank runs without a failed request (OOM)"),
        width);
    std::vector<std::vector<std::string>> table {
        { "policy", "capacity (all ranks)", "needed by", "median rank", "live peak (max)" }
    };
    for (const auto& f : fits) {
        const JobFitVerdict v = judgeFit(f);
        table.push_back({ f.spec,
            v.fits ? (v.lowerBoundMark ? "≥ " : "") + formatBytes(v.capacity) : std::string("no fit"),
            f.ranks.empty() ? "-" : nameOf(rankNames, v.worst),
            std::none_of(f.ranks.begin(), f.ranks.end(), [](const RankFit& x) { return x.fits; })
                ? std::string("-")
                : formatBytes(medianCapacity(f)),
            formatBytes(v.lowerBound) });
    }
    writeTextTable(table, 1, out, width, 0);
    out << wrapText("capacity: the largest of the ranks' own smallest capacities; needed by: that rank (without a "
                    "fit: the first rank that fits nowhere up to --max-capacity); median rank: the median of the "
                    "ranks' own capacities",
        width);
    for (const auto& f : fits) {
        std::string names;
        for (std::size_t r : f.failsAtJobCapacity)
            names += (names.empty() ? "" : ", ") + nameOf(rankNames, r);
        if (!names.empty())
            out << wrapText("note: " + f.spec + ": " + names
                    + " had a failed request at that capacity although it fits on less (OOM is not monotone in the "
                      "capacity there): no single capacity is confirmed for every rank",
                width);
    }
}

} // namespace gpumem::analyze
