// docs/output-formats.md lists every field of the JSON and CSV outputs of replay, fit, sweep, analyze and
// diff. This test runs each documented command on public traces (cs336-silmont2000's two snapshots; skipped
// where absent) and checks the doc against what the writers emit: every emitted field is documented,
// every field documented as always present ("absent when" —) is emitted, CSV headers are the documented
// columns in order, and every documented section is run here. So the doc cannot drift from the code.
#include "tests/cli/cli_runner.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::slurp;

namespace {

struct DocField {
    std::string path;
    bool alwaysPresent = false;
};
struct DocSection {
    std::vector<DocField> fields; // in table order
};

// `<group>` → {module, …} from the doc's "- `<group>` is one of: `a`, `b`" lines.
std::map<std::string, std::vector<std::string>> placeholders(const std::string& doc)
{
    std::map<std::string, std::vector<std::string>> out;
    const std::regex line(R"(^- `<(\w+)>` is one of: (.*)$)");
    const std::regex word("`([^`]+)`");
    std::istringstream in(doc);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (!std::regex_match(l, m, line))
            continue;
        const std::string rest = m[2];
        for (auto it = std::sregex_iterator(rest.begin(), rest.end(), word); it != std::sregex_iterator(); ++it)
            out[m[1]].push_back((*it)[1]);
    }
    return out;
}

// Sections "### `command`" and the first cell and last cell of their table rows.
std::map<std::string, DocSection> parseDoc(const std::string& doc)
{
    const auto expand = placeholders(doc);
    std::map<std::string, DocSection> sections;
    DocSection* current = nullptr;
    std::istringstream in(doc);
    for (std::string l; std::getline(in, l);) {
        if (l.starts_with("### `") && l.ends_with("`")) {
            current = &sections[l.substr(5, l.size() - 6)];
            continue;
        }
        if (l.starts_with("## "))
            current = nullptr;
        if (!current || !l.starts_with("| `"))
            continue;
        // Cells split at '|' not written as "\|".
        std::vector<std::string> cells;
        std::string cell;
        for (std::size_t i = 1; i < l.size(); ++i) {
            if (l[i] == '\\' && i + 1 < l.size() && l[i + 1] == '|') {
                cell += '|';
                ++i;
            } else if (l[i] == '|') {
                cells.push_back(cell);
                cell.clear();
            } else {
                cell += l[i];
            }
        }
        if (cells.size() != 5)
            ADD_FAILURE() << "a field row needs 5 cells: " << l;
        if (cells.empty())
            continue;
        auto trim = [](std::string s) {
            while (!s.empty() && s.front() == ' ')
                s.erase(s.begin());
            while (!s.empty() && s.back() == ' ')
                s.pop_back();
            return s;
        };
        std::string path = trim(cells.front());
        path = path.substr(1, path.size() - 2); // the backticks
        const bool always = trim(cells.back()) == "—";
        std::vector<std::string> paths { path };
        for (const auto& [name, values] : expand) {
            const std::string ph = "<" + name + ">";
            std::vector<std::string> next;
            for (const auto& p : paths) {
                if (p.find(ph) == std::string::npos) {
                    next.push_back(p);
                    continue;
                }
                for (const auto& v : values)
                    next.push_back(std::regex_replace(p, std::regex(ph), v));
            }
            paths = next;
        }
        for (const auto& p : paths)
            current->fields.push_back({ p, always });
    }
    return sections;
}

void flatten(const nlohmann::json& v, const std::string& path, std::set<std::string>& out)
{
    if (v.is_object()) {
        for (auto it = v.begin(); it != v.end(); ++it) {
            const std::string q = path.empty() ? it.key() : path + "." + it.key();
            out.insert(q);
            flatten(it.value(), q, out);
        }
    } else if (v.is_array()) {
        for (const auto& x : v)
            flatten(x, path + "[]", out);
    }
}

} // namespace

TEST(OutputFormatsDoc, EveryDocumentedFieldIsEmittedAndEveryEmittedFieldIsDocumented)
{
    const std::string dir = std::string(GPUMEM_PUBLIC_TRACES) + "/cs336-silmont2000";
    const std::string s = dir + "/mem_snapshot.pickle", b = dir + "/memory_forward_bf16_128.pickle";
    if (!std::filesystem::exists(s) || !std::filesystem::exists(b))
        GTEST_SKIP() << "public traces " << s << " and " << b << " are absent (set GPUMEM_PUBLIC_TRACES)";
    const auto sections = parseDoc(slurp(std::string(GPUMEM_SOURCE_DIR) + "/docs/output-formats.md"));
    // The commands behind each section; runs of one section are united (replay: with and without
    // failures, with and without a compaction policy).
    const std::map<std::string, std::vector<std::string>> runs = {
        { "replay --format json",
            { "replay --policy pytorch --policy compaction:pytorch --format json " + s,
                "replay --policy pytorch --capacity 3GiB --format json " + s } },
        { "replay --format csv", { "replay --policy pytorch --capacity 3GiB --format csv " + s } },
        { "replay --fidelity --format json", { "replay --fidelity --format json " + s } },
        { "replay --colocate --format json", { "replay --colocate --capacity 3GiB --format json " + s + " " + s } },
        { "replay --colocate --format csv", { "replay --colocate --capacity 3GiB --format csv " + s + " " + s } },
        { "fit --format json", { "fit --policy pytorch --format json " + s } },
        { "fit --format csv", { "fit --policy pytorch --format csv " + s } },
        { "sweep --format json", { "sweep --policy 'pytorch:max_split_size_mb:{128,256}' --format json " + s } },
        { "sweep --format csv", { "sweep --policy 'pytorch:max_split_size_mb:{128,256}' --format csv " + s } },
        { "analyze --format json", { "analyze --format json " + s } },
        { "analyze --format csv", { "analyze --format csv " + s } },
        { "diff --format json", { "diff --format json " + s + " " + b } },
        { "diff --format csv", { "diff --format csv " + s + " " + b } },
    };
    for (const auto& [name, section] : sections) {
        EXPECT_TRUE(runs.count(name)) << "docs/output-formats.md documents '" << name << "', which this test does not run";
    }
    for (const auto& [name, commands] : runs) {
        SCOPED_TRACE(name);
        auto it = sections.find(name);
        ASSERT_NE(it, sections.end()) << "docs/output-formats.md has no section ### `" << name << "`";
        const auto& fields = it->second.fields;
        ASSERT_FALSE(fields.empty());
        std::set<std::string> emitted;
        std::vector<std::string> header;
        const bool csv = name.ends_with("csv");
        for (const auto& command : commands) {
            const auto r = runCli(command);
            ASSERT_EQ(r.exitCode, 0) << command << ": " << r.err;
            if (csv) {
                std::istringstream first(r.out.substr(0, r.out.find('\n')));
                for (std::string c; std::getline(first, c, ',');)
                    header.push_back(c);
            } else {
                flatten(nlohmann::json::parse(r.out), "", emitted);
            }
        }
        if (csv) {
            std::vector<std::string> documented;
            for (const auto& f : fields)
                documented.push_back(f.path);
            EXPECT_EQ(header, documented) << "the CSV header differs from the documented columns";
            continue;
        }
        std::set<std::string> documented;
        for (const auto& f : fields) {
            documented.insert(f.path);
            if (f.alwaysPresent) {
                EXPECT_TRUE(emitted.count(f.path)) << f.path << " is documented as always present but was not emitted";
            }
        }
        for (const auto& e : emitted) {
            EXPECT_TRUE(documented.count(e)) << e << " is emitted but not documented";
        }
        EXPECT_GE(emitted.size(), 10u); // the runs produced real output
    }
}
