// Issue 21 item 3: every string that can reach a terminal goes through textForTerminal /
// messageForTerminal (core/message_quote.h). Hostile text (CR, LF, ESC sequences, bidi controls, NEL,
// U+2028, invalid UTF-8) is put into EVERY string value of a .jsonl, a Kineto JSON and a snapshot JSON
// from tests/data (names, enums, anomaly codes and details alike), and into a .gmt written from a Trace
// whose anomaly code is hostile; every verb's text output and every message is scanned for raw controls.
#include "core/gmt_format.h"
#include "core/import_stats.h"
#include "core/trace_builder.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;
namespace fs = std::filesystem;

namespace {
// CR + "erase line", ESC colour, U+202E (right-to-left override), LF, NEL, U+2028, U+2066 (isolate).
const std::string kHostile = "x\r\x1b[2K\x1b[31mforged\xE2\x80\xAE\n\xC2\x85\xE2\x80\xA8\xE2\x81\xA6y";
// Stands in for invalid UTF-8 while nlohmann writes the JSON (it refuses to write invalid UTF-8).
const std::string kBadMarker = "@@INVALID_UTF8@@";

// Nothing that could move the cursor, end a line or reorder it (gpumem's own line ends aside).
std::string rawControlIn(const std::string& text)
{
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if ((b < 0x20 && b != '\n') || b == 0x7f)
            return "byte " + std::to_string(b) + " at " + std::to_string(i);
    }
    for (const char* raw : { "\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAE", "\xE2\x81\xA6", "\xff" })
        if (auto at = text.find(raw); at != std::string::npos)
            return "a raw control at " + std::to_string(at);
    // A raw LF from the input would show as a line starting with the NEL that follows it: caught above.
    return "";
}

// Every string value below `j` (object keys left alone) replaced by `text` (all = true), or only the
// values of name-like keys suffixed with it (all = false: the records stay valid and their names print).
void poison(nlohmann::ordered_json& j, const std::string& text, bool all, const std::string& key = "")
{
    static const std::set<std::string> kNames = { "name", "filename", "description", "tool", "code", "detail",
        "Call stack", "label", "file" };
    if (j.is_string()) {
        if (all)
            j = text;
        else if (kNames.count(key))
            j = j.get<std::string>() + text;
    } else if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it)
            poison(it.value(), text, all, it.key());
    } else if (j.is_array()) {
        for (auto& v : j)
            poison(v, text, all, key);
    }
}

std::string dumped(const nlohmann::ordered_json& j, bool invalidUtf8)
{
    std::string s = j.dump(-1, ' ', false);
    for (auto at = s.find(kBadMarker); invalidUtf8 && at != std::string::npos; at = s.find(kBadMarker, at))
        s.replace(at, kBadMarker.size(), "\xff\xfe\xc0\xaf");
    return s;
}

// The hostile variants of one JSON document (or of each line of a .jsonl).
std::vector<std::pair<std::string, std::string>> variantsOf(const std::string& name, const std::string& text, bool lines)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (int v = 0; v < 4; ++v) {
        const bool all = v % 2 == 1, invalid = v >= 2;
        const std::string hostile = kHostile + (invalid ? kBadMarker : "");
        std::string result;
        std::istringstream in(text);
        std::string line;
        auto one = [&](const std::string& doc) {
            auto j = nlohmann::ordered_json::parse(doc);
            poison(j, hostile, all);
            return dumped(j, invalid);
        };
        if (lines)
            while (std::getline(in, line))
                result += line.empty() ? "\n" : one(line) + "\n";
        else
            result = one(text);
        out.emplace_back(std::to_string(v) + "-" + name, result);
    }
    return out;
}

// Runs every verb on `path` and returns what was wrong, "" when nothing.
std::string scanVerbs(const fs::path& path, const fs::path& dir)
{
    const std::string p = "'" + path.string() + "'";
    const std::vector<std::string> runs = { "info " + p, "analyze " + p, "diff " + p + " " + p,
        "replay " + p, "sweep --policy 'pytorch:max_split_size_mb:{64,128}' " + p, "fit --max-capacity 64GiB " + p,
        "report " + p + " -o '" + (dir / "r.html").string() + "'", "convert " + p + " -o '" + (dir / "c.gmt").string() + "'",
        "info --strict " + p, "ranks " + p };
    std::string problems;
    for (const auto& args : runs) {
        const auto r = runCli(args);
        if (r.exitCode > 4 || r.exitCode < 0)
            problems += args + ": exit " + std::to_string(r.exitCode) + "\n";
        if (auto bad = rawControlIn(r.out); !bad.empty())
            problems += args + ": stdout: " + bad + "\n" + r.out.substr(0, 2000) + "\n";
        if (auto bad = rawControlIn(r.err); !bad.empty())
            problems += args + ": stderr: " + bad + "\n" + r.err.substr(0, 2000) + "\n";
    }
    return problems;
}
} // namespace

TEST(HostileFields, EveryStringOfJsonlKinetoAndSnapshotInputsPrintsEscapedInEveryVerb)
{
    const auto dir = scratchDir("hostile-fields");
    std::vector<std::pair<std::string, std::string>> files;
    // A .jsonl with an anomaly record too (its code reached `gpumem info` raw: issue 21 item 3).
    std::string jsonl = slurp(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl")
        + R"({"type":"anomaly","code":"forged_code","severity":"warning","count":1,"detail":"a detail"})" + "\n";
    for (auto& v : variantsOf("t.jsonl", jsonl, true))
        files.push_back(v);
    for (auto& v : variantsOf("k.json", slurp(GPUMEM_SOURCE_DIR "/tests/data/kineto/prewarm_a.json"), false))
        files.push_back(v);
    for (auto& v : variantsOf("s.json", slurp(GPUMEM_SOURCE_DIR "/tests/data/snapshot/entry_shapes.json"), false))
        files.push_back(v);
    std::string problems;
    for (const auto& [name, content] : files) {
        const auto path = dir / name;
        std::ofstream(path, std::ios::binary) << content;
        problems += scanVerbs(path, dir);
    }
    EXPECT_EQ(problems, "");
}

TEST(HostileFields, AGmtWithHostileStringsAndAnomalyCodePrintsEscaped)
{
    gpumem::TraceBuilder b;
    gpumem::Device d;
    d.name = b.intern(kHostile + "\xff\xfe");
    b.addDevice(d);
    b.stream(0, 0);
    b.alloc(1, 4096, 512);
    b.stats().add(kHostile + "\xff", gpumem::Severity::Warning, kHostile + "\xff");
    const auto dir = scratchDir("hostile-gmt");
    const auto path = dir / "h.gmt";
    gpumem::writeGmt(b.build(), path.string());
    EXPECT_EQ(scanVerbs(path, dir), "");
    // The code is printed, escaped, on its anomaly line.
    const auto r = runCli("info '" + path.string() + "'");
    EXPECT_NE(r.out.find("warning x\\x0d\\x1b[2K\\x1b[31mforged\\u202e\\x0a"), std::string::npos) << r.out;
}

// The issue's own input: an anomaly code with CR, LF and U+202E in a .jsonl reached `gpumem info` raw.
TEST(HostileFields, AnAnomalyCodeFromAJsonlPrintsEscapedOnItsLine)
{
    const auto path = scratchDir("hostile-code") / "code.jsonl";
    std::ofstream(path, std::ios::binary) << slurp(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl")
                                          << R"({"type":"anomaly","code":"x\r\n\u202eforged","severity":"warning","count":1,"detail":"d"})"
                                          << "\n";
    const auto r = runCli("info '" + path.string() + "'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(rawControlIn(r.out), "") << r.out;
    EXPECT_NE(r.out.find("\n    warning x\\x0d\\x0a\\u202eforged ×1: d\n"), std::string::npos) << r.out;
    const auto strict = runCli("info --strict '" + path.string() + "'");
    EXPECT_EQ(strict.exitCode, 1);
    EXPECT_NE(strict.err.find(": x\\x0d\\x0a\\u202eforged (1×, warning): d"), std::string::npos) << strict.err;
}
