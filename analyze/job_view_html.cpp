// The ranks section of `gpumem report` (analyze/job_view.h): the same answer, table, steps and differences as
// `gpumem ranks` prints, as HTML.
#include "analyze/html_report.h"
#include "analyze/job_view.h"
#include "core/byte_total.h"
#include "core/units.h"

#include <algorithm>

#include <ostream>

namespace gpumem::analyze {

namespace {
    void table(const JobViewTable& t, std::ostream& out, bool numbersRight)
    {
        out << "<table><tr>";
        for (std::size_t c = 0; c < t.header.size(); ++c)
            out << "<th" << (numbersRight && c > 0 && c + 1 < t.header.size() ? " class='n'" : "") << '>' << htmlEscape(t.header[c]) << "</th>";
        out << "</tr>";
        for (const auto& row : t.rows) {
            out << "<tr>";
            for (std::size_t c = 0; c < row.size(); ++c)
                out << "<td" << (numbersRight && c > 0 && c + 1 < row.size() ? " class='n'" : "") << '>' << htmlEscape(row[c]) << "</td>";
            out << "</tr>";
        }
        out << "</table>\n";
    }
} // namespace

void writeJobViewHtml(const JobView& v, std::size_t top, std::ostream& out)
{
    out << "<h2 id='ranks'>Ranks of one job</h2>\n<p class='verdict'><strong>Answer:</strong> " << htmlEscape(jobViewHeadline(v)) << "</p>\n";
    out << "<p class='muted'>" << htmlEscape(std::to_string(v.ranks.size()) + " ranks; " + rankNumbersNote(v) + ". The same figures as gpumem ranks; docs/ranks.md.")
        << "</p>\n";
    JobViewTable ranks = rankTable(v);
    // Which trace each rank is, so the sections below can be found.
    ranks.header.insert(ranks.header.begin() + 1, "trace");
    for (std::size_t r = 0; r < ranks.rows.size(); ++r)
        ranks.rows[r].insert(ranks.rows[r].begin() + 1, v.ranks[r].path);
    table(ranks, out, true);
    out << "<p class='muted'>" << htmlEscape(ranks.legend) << "</p>\n<p>";
    for (const auto& l : imbalanceLines(v))
        out << htmlEscape(l) << "<br>";
    out << "</p>\n";
    const JobViewTable steps = stepTable(v, 0);
    out << "<h3>Steps</h3><p class='muted'>" << htmlEscape(steps.legend) << "</p>\n";
    if (!steps.rows.empty())
        table(steps, out, true);
    for (const auto& d : v.differences) {
        out << "<h3>rank " << v.rankNumbers[d.rank] << " against the median rank " << v.rankNumbers[d.against] << "</h3><p class='muted'>"
            << htmlEscape("Live at the allocated peak: " + formatByteTotalShort(d.againstBytes) + " -> " + formatByteTotalShort(d.bytes) + " ("
                   + formatByteChange(d.againstBytes, d.bytes) + ")" + (d.complete ? "" : "; top rows kept per rank, a row beyond them counts 0"))
            << "</p>\n<table><tr><th>by</th><th>row</th><th class='n'>median rank</th><th class='n'>this rank</th><th class='n'>change</th></tr>";
        for (GroupBy g : kRankGroups) {
            std::size_t shown = 0;
            for (const auto& r : d.rows) {
                if (r.group != g || shown++ >= top)
                    continue;
                out << "<tr><td>" << htmlEscape(std::string(toString(g))) << "</td><td>" << htmlEscape(g == GroupBy::Module ? r.key : r.label)
                    << "</td><td class='n'>" << htmlEscape(formatByteTotalShort(r.before)) << "</td><td class='n'>"
                    << htmlEscape(formatByteTotalShort(r.after)) << "</td><td class='n'>" << htmlEscape(formatByteChange(r.before, r.after))
                    << "</td></tr>";
            }
        }
        out << "</table>\n";
    }
    const auto leaks = leakLines(v);
    if (!leaks.empty()) {
        out << "<h3>Leaks</h3><ul>";
        for (const auto& l : leaks)
            out << "<li class='leak'>" << htmlEscape(l) << "</li>";
        out << "</ul>\n";
    }
}

} // namespace gpumem::analyze
