#include "core/import_stats.h"

#include "core/error.h"
#include "core/message_quote.h"

#include <cstdint>

namespace gpumem {

void ImportStats::addEach(std::string_view code, Severity severity, const std::vector<std::string>& problems)
{
    if (!problems.empty())
        add(code, severity, problems.front(), problems.size());
}

void ImportStats::add(std::string_view code, Severity severity, std::string_view detail, std::uint64_t count)
{
    for (auto& a : m_anomalies) {
        if (a.code == code) {
            // Saturate: a hostile file must not wrap the count around.
            a.count = count > UINT64_MAX - a.count ? UINT64_MAX : a.count + count;
            if (severity > a.severity)
                a.severity = severity;
            return;
        }
    }
    // The detail often quotes the input: kept to one printable line of bounded length whatever the file
    // holds (a 20 MB record type was printed whole by `info`); unchanged for an ordinary detail.
    m_anomalies.push_back(Anomaly { std::string(code), severity, count, quoteForMessage(detail, kMaxDetailBytes) });
}

std::uint64_t ImportStats::count(std::string_view code) const
{
    const Anomaly* a = find(code);
    return a ? a->count : 0;
}

const Anomaly* ImportStats::find(std::string_view code) const
{
    for (const auto& a : m_anomalies)
        if (a.code == code)
            return &a;
    return nullptr;
}

Severity ImportStats::worst() const
{
    Severity worst = Severity::Info;
    for (const auto& a : m_anomalies)
        if (a.severity > worst)
            worst = a.severity;
    return worst;
}

AnomalyPlace placeOf(std::string_view detail, std::string_view source)
{
    if (source.empty() || !detail.starts_with(source) || detail.substr(source.size(), 1) != ":")
        return { {}, detail };
    std::size_t end = source.size() + 1;
    while (end < detail.size() && detail[end] >= '0' && detail[end] <= '9') // "SOURCE:LINE: …"
        ++end;
    if (end > source.size() + 1) {
        if (detail.substr(end, 2) != ": ")
            return { {}, detail };
        return { detail.substr(0, end), detail.substr(end + 2) };
    }
    if (detail.substr(source.size(), 2) != ": ")
        return { {}, detail };
    return { source, detail.substr(source.size() + 2) };
}

void ImportStats::throwIfStrictViolated(std::string_view source) const
{
    // Review finding (2026-12-02): "X: code (1×, error): X: detail" said the path twice; the detail's own place
    // (with its line, where it has one) now opens the message.
    for (const auto& a : m_anomalies)
        if (a.severity != Severity::Info) {
            const AnomalyPlace place = placeOf(a.detail, source);
            throw FormatError(std::string(place.where.empty() ? source : place.where) + ": " + quoteForMessage(a.code, kMaxDetailBytes)
                + " (" + std::to_string(a.count) + "×, " + std::string(toString(a.severity)) + "): " + std::string(place.rest)
                + " — rerun without --strict to import anyway");
        }
}

} // namespace gpumem
