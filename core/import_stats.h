#pragma once
// Anomalies met while importing a trace (Perfetto's stats.h idea): each is counted under a stable
// code with a severity and the first example's detail, and loading continues. `--strict` turns
// warnings and errors into a FormatError. Thread-compatible (no internal locking).
#include "core/types.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

struct Anomaly {
    std::string code;        // stable snake_case id, e.g. "unmatched_free", "truncated"
    Severity severity = Severity::Info;
    std::uint64_t count = 0; // occurrences
    std::string detail;      // the first occurrence, with its file offset, event index or field
};

// Where an anomaly's detail says it happened, and the rest of it. The importers start most details with the
// file they read ("SOURCE: …", "SOURCE:LINE: …"): such a detail splits after that place, so that a message
// naming SOURCE itself does not say it twice; any other detail has no `where` and is all `rest`.
struct AnomalyPlace {
    std::string_view where; // "SOURCE" or "SOURCE:LINE"; empty when the detail does not start with SOURCE
    std::string_view rest;
};
AnomalyPlace placeOf(std::string_view detail, std::string_view source);

class ImportStats {
public:
    static constexpr std::size_t kMaxDetailBytes = 1000;
    // Counts one occurrence of `code`; keeps the detail of the first one, made printable and cut after
    // kMaxDetailBytes bytes (quoteForMessage, core/message_quote.h).
    void add(std::string_view code, Severity severity, std::string_view detail, std::uint64_t count = 1);
    // add() of each problem under one code: counted once each, the first's text kept as the detail.
    void addEach(std::string_view code, Severity severity, const std::vector<std::string>& problems);
    const std::vector<Anomaly>& anomalies() const { return m_anomalies; }
    std::uint64_t count(std::string_view code) const;
    const Anomaly* find(std::string_view code) const;
    bool empty() const { return m_anomalies.empty(); }
    // The worst severity present; Info when empty.
    Severity worst() const;
    // Throws FormatError naming `source` (or the detail's "SOURCE:LINE", placeOf) and the first warning or
    // error, if any (the --strict rule).
    void throwIfStrictViolated(std::string_view source) const;

private:
    std::vector<Anomaly> m_anomalies; // in order of first occurrence
};

} // namespace gpumem
