// Brief esc items 1–3 end to end: escapes map back to one name, text tables are aligned in display
// columns (CJK and emoji two, combining marks none), cuts never fall inside an escape, and a shared
// unit never turns a nonzero value into 0. Smallest hand-made traces, written to a scratch folder.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <fstream>

using gpumem::test::runCli;
using gpumem::test::scratchDir;

namespace {
// A trace with one module scope per name, each holding one live 4 KiB block.
std::string moduleTrace(const std::string& file, const std::vector<std::string>& names)
{
    const auto path = scratchDir("display-width") / file;
    std::ofstream out(path, std::ios::binary);
    out << R"({"format":"gpumem-jsonl","version":1,"metadata":{}})" "\n"
        << R"({"type":"device","id":0,"kind":"cuda","ordinal":0,"total_memory":1073741824})" "\n"
        << R"({"type":"stream","id":0,"device":0,"handle":0})" "\n";
    for (std::size_t i = 0; i < names.size(); ++i)
        out << R"({"type":"scope","id":)" << i + 1 << R"(,"parent":0,"name":"nn.Module: )" << names[i] << R"(","kind":"module"})" "\n";
    for (std::size_t i = 0; i < names.size(); ++i)
        out << R"({"type":"mem","t":)" << 10 + i << R"(,"kind":"alloc","addr":)" << 4096 * (i + 1)
            << R"(,"size":4096,"scope":)" << i + 1 << "}\n";
    return path.string();
}
// The "By module" rows of `analyze --by module`, in order.
std::vector<std::string> moduleRows(const std::string& out)
{
    std::vector<std::string> rows;
    const auto at = out.find("| By module");
    for (auto start = out.find('\n', at) + 1; start < out.size();) {
        const auto end = out.find('\n', start);
        const std::string row = out.substr(start, end - start);
        if (row.rfind("| ", 0) != 0)
            break;
        rows.push_back(row);
        start = end + 1;
    }
    return rows;
}
} // namespace

TEST(DisplayWidthCli, ABackslashNameAndALineFeedNamePrintDifferently)
{
    // The text "a\x0ab" (JSON "a\\x0ab") and "a<LF>b" (JSON "a\nb"), as /tmp/v5/q.jsonl.
    const auto path = moduleTrace("q.jsonl", { "a\\\\x0ab", "a\\nb" });
    const auto r = runCli("analyze --by module '" + path + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto rows = moduleRows(r.out);
    ASSERT_EQ(rows.size(), 2u) << r.out;
    EXPECT_EQ(rows[0], "| nn.Module: a\\\\x0ab                    |   4096 B   |   4096 B   |  50.0 % |");
    EXPECT_EQ(rows[1], "| nn.Module: a\\x0ab                     |   4096 B   |   4096 B   |  50.0 % |");
    const auto csv = runCli("analyze --format csv --by module '" + path + "'");
    ASSERT_EQ(csv.exitCode, 0) << csv.err;
    EXPECT_NE(csv.out.find("nn.Module: a\\\\x0ab"), std::string::npos) << csv.out;
    EXPECT_NE(csv.out.find("nn.Module: a\\x0ab"), std::string::npos) << csv.out;
}

// Brief esc item 2: CJK and emoji take two columns, a combining mark none; the box stays aligned.
TEST(DisplayWidthCli, AnalyzeAlignsWideAndCombiningNamesInDisplayColumns)
{
    const auto path = moduleTrace("wide.jsonl",
        { "\xE6\xBC\xA2\xE5\xAD\x97\xE6\xBC\xA2\xE5\xAD\x97", "\xF0\x9F\x98\x80x", "e\xCC\x81", "\xC3\xA9" });
    const auto r = runCli("analyze --by module '" + path + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto rows = moduleRows(r.out);
    ASSERT_EQ(rows.size(), 4u) << r.out;
    const std::string cells = " |   4096 B   |   4096 B   |  25.0 % |";
    EXPECT_EQ(rows[0], "| nn.Module: \xE6\xBC\xA2\xE5\xAD\x97\xE6\xBC\xA2\xE5\xAD\x97                  " + cells);
    EXPECT_EQ(rows[1], "| nn.Module: \xF0\x9F\x98\x80x                       " + cells);
    EXPECT_EQ(rows[2], "| nn.Module: e\xCC\x81                         " + cells);
    EXPECT_EQ(rows[3], "| nn.Module: \xC3\xA9                         " + cells);
}

// Brief esc item 2: what-if tables (writeColumns) pad by display columns, not bytes.
TEST(DisplayWidthCli, ColocateTablePadsProcessNamesInDisplayColumns)
{
    const auto dir = scratchDir("display-width-colocate");
    const std::string trace = gpumem::test::slurp(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/tiny_alloc_free.jsonl");
    std::ofstream(dir / "\xE6\xBC\xA2\xE5\xAD\x97\xE6\xBC\xA2\xE5\xAD\x97.jsonl", std::ios::binary) << trace;
    std::ofstream(dir / "\xC3\xA9.jsonl", std::ios::binary) << trace;
    const auto r = runCli("replay --colocate '" + (dir / "\xE6\xBC\xA2\xE5\xAD\x97\xE6\xBC\xA2\xE5\xAD\x97.jsonl").string()
        + "' --capacity 1GiB '" + (dir / "\xC3\xA9.jsonl").string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // "allocated" for "peak allocated" since issue 16 (100 columns).
    const std::string cells = "  pytorch      -  +0.000000 s      22.00 MiB  +0.000003 s   4.00 MiB     0          -\n";
    EXPECT_NE(r.out.find("\nprocess   policy   limit"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n\xE6\xBC\xA2\xE5\xAD\x97\xE6\xBC\xA2\xE5\xAD\x97" + cells), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n\xC3\xA9       " + cells), std::string::npos) << r.out;
}

// Brief esc item 3: a cut falls between escapes, never inside one ("…B\...\x0dG…" before).
TEST(DisplayWidthCli, ACutNeverFallsInsideAnEscape)
{
    std::string controls;
    for (int i = 0; i < 12; ++i)
        controls += "\\u0001";
    const auto r = runCli("analyze --by module '" + moduleTrace("cut.jsonl", { controls }) + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto rows = moduleRows(r.out);
    ASSERT_EQ(rows.size(), 1u) << r.out;
    // 11 columns of head, "...", then the five whole "\x01" (20 columns) that fit in the other 23.
    EXPECT_EQ(rows[0], "| nn.Module: ...\\x01\\x01\\x01\\x01\\x01    |   4096 B   |   4096 B   | 100.0 % |");
}

// Brief esc item 3: after a saturated peak, "At end" 1 KiB read "0 PiB" (the row's shared unit), and
// diff printed "(unknown (both totals saturated))".
TEST(DisplayWidthCli, ASharedUnitNeverTurnsANonzeroValueIntoZero)
{
    const auto path = scratchDir("display-width") / "sat_free.jsonl";
    std::ofstream out(path, std::ios::binary);
    out << R"({"format":"gpumem-jsonl","version":1,"metadata":{}})" "\n"
        << R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" "\n"
        << R"({"type":"stream","id":0,"device":0,"handle":0})" "\n";
    const char* addr[] = { "4096", "6917529027641085952", "13835058055282167808" };
    for (int i = 0; i < 3; ++i)
        out << R"({"type":"mem","t":)" << 1 + i << R"(,"kind":"alloc","addr":)" << addr[i]
            << R"(,"size":6917529027641081856,"requested":6917529027641081856})" "\n";
    for (int i = 0; i < 3; ++i)
        out << R"({"type":"mem","t":)" << 10 + i << R"(,"kind":"free","addr":)" << addr[i] << R"(,"size":6917529027641081856})" "\n";
    out << R"({"type":"mem","t":20,"kind":"alloc","addr":4096,"size":1024,"requested":1000})" "\n";
    out.close();
    const auto r = runCli("analyze '" + path.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("\n| Allocated memory      |   1024 B   |   \xE2\x89\xA5 16 EiB |"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n| Requested memory      |   1000 B   |   \xE2\x89\xA5 16 EiB |"), std::string::npos) << r.out;
    const auto d = runCli("diff '" + path.string() + "' '" + path.string() + "'");
    ASSERT_EQ(d.exitCode, 0) << d.err;
    EXPECT_NE(d.out.find("  peak allocated   \xE2\x89\xA5 16 EiB -> \xE2\x89\xA5 16 EiB (unknown: both totals saturated)\n"),
        std::string::npos)
        << d.out;
    EXPECT_EQ(d.out.find("(("), std::string::npos) << d.out;
}
