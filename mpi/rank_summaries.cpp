#include "mpi/rank_summaries.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "mpi/process_group.h"

#include <nlohmann/json.hpp>

namespace gpumem::mpi {

std::vector<analyze::RankSummary> summarizeRanks(const std::vector<std::string>& paths, const LoadOptions& load,
    const analyze::RankSummaryOptions& options, unsigned jobs)
{
    MapOptions spread;
    spread.jobs = jobs;
    const auto gathered = processGroup().mapGather(
        paths.size(),
        [&](std::size_t i) {
            const std::string& path = paths[i];
            // The message names the file (a rank's error alone would not say which of a thousand it was).
            auto named = [&](const Error& e) { return std::string(e.what()).find(path) != std::string::npos ? std::string(e.what()) : path + ": " + e.what(); };
            try {
                LoadOptions lo = load;
                lo.progress = nullptr;
                const Trace trace = loadTrace(path, lo);
                const auto bytes = nlohmann::json::to_cbor(analyze::toJson(analyze::summarizeRank(trace, path, i, options)));
                return std::string(bytes.begin(), bytes.end());
            } catch (const UsageError& e) {
                throw UsageError(named(e));
            } catch (const Error& e) {
                throw Error(named(e));
            }
        },
        spread);
    std::vector<analyze::RankSummary> summaries;
    summaries.reserve(gathered.size());
    for (const auto& bytes : gathered)
        summaries.push_back(analyze::rankSummaryFromJson(nlohmann::json::from_cbor(bytes)));
    return summaries;
}

} // namespace gpumem::mpi
