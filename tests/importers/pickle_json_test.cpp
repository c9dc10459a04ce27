// Tests of PickleDocument::fromJsonText (importers/pickle_json.cpp): the kinds, numbers, strings,
// key order and errors of a snapshot saved as JSON, with hand-made texts whose expected values follow
// from the JSON itself (and nlohmann::json, which the builder replaced, for the error messages), and
// the public snapshots written as JSON in their own key order.
#include "core/gmt_format.h"
#include "importers/pickle_reader.h"
#include "importers/snapshot_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace gpumem;

namespace {

std::string errorOf(std::string_view text, int maxDepth = 256)
{
    try {
        (void)PickleDocument::fromJsonText(text, "x.json", maxDepth);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no error)";
}

// The message nlohmann::json::parse gave for `text`, as readSnapshotDocument wrote it before.
std::string nlohmannError(std::string_view text)
{
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        (void)j;
    } catch (const nlohmann::json::parse_error& e) {
        return "x.json: at byte offset " + std::to_string(e.byte) + ": not valid JSON (" + e.what() + ")";
    } catch (const nlohmann::json::out_of_range& e) {
        return e.what(); // a number beyond double: nlohmann::json::parse threw this, not a parse_error
    }
    return "(nlohmann accepts it)";
}

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

} // namespace

TEST(PickleJson, ReadsScalarsAsTheirKinds)
{
    PickleDocument doc
        = PickleDocument::fromJsonText(R"({"k": [1, -2, 2.5, "s", null, false, true, {"n": 0}, [], -0, 1E2]})", "x");
    EXPECT_EQ(doc.source(), "x");
    auto items = doc.items(*doc.find(doc.root(), "k"));
    ASSERT_EQ(items.size(), 11u);
    EXPECT_EQ(items[0].kind, PickleKind::Int);
    EXPECT_EQ(doc.toInt(items[0]), 1);
    EXPECT_EQ(doc.toInt(items[1]), -2);
    EXPECT_EQ(items[2].kind, PickleKind::Float);
    EXPECT_EQ(doc.toFloat(items[2]), 2.5);
    EXPECT_EQ(items[3].kind, PickleKind::Str);
    EXPECT_EQ(doc.text(items[3]), "s");
    EXPECT_EQ(items[4].kind, PickleKind::None);
    EXPECT_EQ(items[5].kind, PickleKind::Bool);
    EXPECT_EQ(items[5].bits, 0u);
    EXPECT_EQ(items[6].bits, 1u);
    EXPECT_EQ(items[7].kind, PickleKind::Dict);
    EXPECT_EQ(doc.toInt(*doc.find(items[7], "n")), 0);
    EXPECT_EQ(items[8].kind, PickleKind::List);
    EXPECT_TRUE(doc.items(items[8]).empty());
    EXPECT_EQ(items[9].kind, PickleKind::Int);
    EXPECT_EQ(items[10].kind, PickleKind::Float);
    EXPECT_EQ(doc.toFloat(items[10]), 100.0);
    // A scalar root.
    PickleDocument s = PickleDocument::fromJsonText(" \"a\\u00e9\" ", "s");
    EXPECT_EQ(s.text(s.root()), "a\xC3\xA9");
    PickleDocument n = PickleDocument::fromJsonText("18446744073709551616", "n");
    EXPECT_EQ(n.root().kind, PickleKind::BigInt);
}

TEST(PickleJson, ClampsIntegersBeyondInt64LikeAPickledLong)
{
    // Python's json.dump writes 2**70 as its 22 digits; nlohmann read integers beyond uint64 (and
    // negative ones below INT64_MIN) as doubles, and the rule was: an integral double beyond int64 is
    // that integer, clamped. The same kinds come out of the text.
    PickleDocument doc = PickleDocument::fromJsonText("[1180591620717411303424, -1180591620717411303424, "
                                                      "9223372036854775807, -9223372036854775808, "
                                                      "9223372036854775808, 18446744073709551615, 1e19, -1e19, "
                                                      "4.0, 1.5e300, -9223372036854775809, 12345678901234567890123]",
        "n.json");
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 12u);
    const PickleKind kinds[] = { PickleKind::BigInt, PickleKind::BigInt, PickleKind::Int, PickleKind::Int,
        PickleKind::BigInt, PickleKind::BigInt, PickleKind::BigInt, PickleKind::BigInt, PickleKind::Float,
        PickleKind::BigInt, PickleKind::Float, PickleKind::BigInt };
    const std::int64_t ints[] = { kMax, kMin, kMax, kMin, kMax, kMax, kMax, kMin, 4, kMax, 0, kMax };
    for (std::size_t i = 0; i < items.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(items[i].kind, kinds[i]);
        if (i != 10) {
            EXPECT_EQ(doc.toInt(items[i]), ints[i]);
        }
    }
    // -9223372036854775809 is -2^63 as a double: not beyond int64, so a float, as nlohmann read it.
    EXPECT_EQ(doc.toFloat(items[10]), -0x1p63);
    // The same values through a nlohmann value (fromJson renders it and reads the text).
    PickleDocument viaNlohmann = PickleDocument::fromJson(nlohmann::json::parse("[-1180591620717411303424, 4.0]"), "n");
    ASSERT_EQ(viaNlohmann.items(viaNlohmann.root()).size(), 2u);
    EXPECT_EQ(viaNlohmann.items(viaNlohmann.root())[0].kind, PickleKind::BigInt);
    EXPECT_EQ(viaNlohmann.items(viaNlohmann.root())[1].kind, PickleKind::Float);
}

TEST(PickleJson, KeepsKeysInFileOrderAndFindTakesTheLastOfRepeatedOnes)
{
    PickleDocument doc = PickleDocument::fromJsonText(R"({"b": 1, "a": 2, "c": {"x": [1]}, "a": 3})", "k.json");
    auto kv = doc.items(doc.root());
    ASSERT_EQ(kv.size(), 8u);
    EXPECT_EQ(doc.text(kv[0]), "b");
    EXPECT_EQ(doc.text(kv[2]), "a");
    EXPECT_EQ(doc.text(kv[4]), "c");
    EXPECT_EQ(doc.text(kv[6]), "a");
    EXPECT_EQ(doc.toInt(*doc.find(doc.root(), "a")), 3); // nlohmann's std::map kept the last one too
    // toJson renders it as nlohmann::json::parse read the text.
    EXPECT_EQ(doc.toJson(doc.root()), nlohmann::json::parse(R"({"b": 1, "a": 2, "c": {"x": [1]}, "a": 3})"));
}

TEST(PickleJson, InternsStringsAndUnescapesThem)
{
    PickleDocument doc = PickleDocument::fromJsonText(
        R"([{"name": "f", "filename": "m.py"}, {"name": "f", "filename": "m.py"}, "a\"b\\c\n\u00e9\ud83d\ude00", "m.py"])",
        "s.json");
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 4u);
    const auto a = doc.items(items[0]), b = doc.items(items[1]);
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) { // equal strings: one copy, the same offset
        EXPECT_EQ(a[i].bits, b[i].bits);
        EXPECT_EQ(a[i].length, b[i].length);
    }
    EXPECT_EQ(items[3].bits, a[3].bits);
    EXPECT_EQ(doc.text(a[3]), "m.py");
    EXPECT_EQ(doc.text(items[2]), "a\"b\\c\n\xC3\xA9\xF0\x9F\x98\x80");
    // A key with an escape.
    PickleDocument k = PickleDocument::fromJsonText(R"({"n\u0061me": 1})", "k.json");
    EXPECT_EQ(k.toInt(*k.find(k.root(), "name")), 1);
    // nlohmann took a NUL byte outside a string for the end of the input (found by snapshot_json_fuzzer).
    using namespace std::string_literals;
    PickleDocument nul = PickleDocument::fromJsonText("{\"a\": 2}\0\0junk"s, "nul.json");
    EXPECT_EQ(nul.toInt(*nul.find(nul.root(), "a")), 2);
    EXPECT_EQ(errorOf("{\"a\": \"x\0y\"}"s), nlohmannError("{\"a\": \"x\0y\"}"s));
    EXPECT_EQ(errorOf("{\"a\": 2\0}"s), nlohmannError("{\"a\": 2\0}"s));
    // A byte order mark is skipped, as nlohmann did.
    PickleDocument bom = PickleDocument::fromJsonText("\xEF\xBB\xBF{\"a\": 1}", "b.json");
    EXPECT_EQ(bom.toInt(*bom.find(bom.root(), "a")), 1);
}

TEST(PickleJson, NamesTheByteOffsetOfInvalidJsonAsBefore)
{
    // Syntax errors, trailing content, a number out of double range, an escaped lone surrogate, a raw
    // byte that is not UTF-8, a control character in a string: the message nlohmann::json::parse gave.
    const std::string cases[] = {
        R"({"a": [1, 2,]})",
        R"({"a": 1} x)",
        R"({"a": 1} {"b": 2})",
        R"({"a": 1)",
        R"({"a": 1e400})",
        "{\"a\": 1" + std::string(400, '0') + "}",
        R"({"a": "\udc00"})",
        R"({"a": "\ud800x"})",
        "{\"a\": \"\xff\"}",
        "{\"a\": \"x\ty\"}",
        R"({"a": nul})",
        R"({"a": tru})",
        R"({"a": -})",
        R"({"a": 01})",
        R"({"a": -01})",
        R"({"a": 01.5})",
        R"({"a": [1., 2]})",
        R"({"a": .5})",
        R"({"a": 1e})",
        R"({"a": 1.5e+})",
        R"({"a": +1})",
        R"({"a": 0x1})",
        R"({"a": NaN})",
        R"({"a": -Infinity})",
        R"([00])",
        "01",
        R"({"a": "\q"})",
        R"({"a" 1})",
        // Found by snapshot_json_fuzzer: a value left unread was skipped without checking what follows.
        R"([["s": "x"}, 2]])",
        R"([[12345678901234567890123: "x"}, 2]])",
        "",
    };
    for (const auto& text : cases) {
        SCOPED_TRACE(text);
        const std::string expected = nlohmannError(text);
        ASSERT_NE(expected, "(nlohmann accepts it)");
        if (expected.find("out_of_range") != std::string::npos) {
            // Before, this escaped as a nlohmann exception; now it is a FormatError with the offset.
            EXPECT_EQ(errorOf(text).rfind("x.json: at byte offset ", 0), 0u) << errorOf(text);
            EXPECT_NE(errorOf(text).find(expected), std::string::npos) << errorOf(text);
        } else {
            EXPECT_EQ(errorOf(text), expected);
        }
    }
    EXPECT_EQ(errorOf(R"({"a": 1e400})"),
        "x.json: at byte offset 11: not valid JSON ([json.exception.out_of_range.406] number overflow parsing "
        "'1e400')");
    EXPECT_NE(errorOf(R"({"a": 1} x)").find("x.json: at byte offset 10: not valid JSON"), std::string::npos)
        << errorOf(R"({"a": 1} x)");
}

TEST(PickleJson, RefusesNestingDeeperThanMaxDepth)
{
    auto nested = [](int levels, std::string_view inner) {
        return std::string(static_cast<std::size_t>(levels), '[') + std::string(inner)
            + std::string(static_cast<std::size_t>(levels), ']');
    };
    // The root is at depth 0; a value deeper than maxDepth is refused.
    EXPECT_EQ(errorOf(nested(257, "")), "(no error)");
    EXPECT_EQ(errorOf(nested(258, "")), "x.json: the JSON nests deeper than 256 levels");
    EXPECT_EQ(errorOf(nested(256, "1")), "(no error)");
    EXPECT_EQ(errorOf(nested(257, "1")), "x.json: the JSON nests deeper than 256 levels");
    EXPECT_EQ(errorOf(nested(5, "1"), 4), "x.json: the JSON nests deeper than 4 levels");
    EXPECT_EQ(errorOf(R"({"a": {"b": 1}})", 1), "x.json: the JSON nests deeper than 1 levels");
    // Far deeper than simdjson's own limit, and a syntax error after deep nesting: the syntax error
    // comes first, as when the whole text was parsed before the tree was built.
    EXPECT_EQ(errorOf(nested(5000, "1")), "x.json: the JSON nests deeper than 256 levels");
    const std::string broken = nested(300, "1") + ",";
    EXPECT_EQ(errorOf(broken), nlohmannError(broken));
}

TEST(PickleJson, ReadsAFileInPlaceOrFromAPaddedCopy)
{
    // A string_view says nothing of the bytes after it: it is read from a padded copy. A file read into
    // a buffer has kReadPadding spare bytes; a mapped one (over 8 MiB) the rest of its last page, which
    // is too little when the file ends on a page boundary. Every way gives the same document.
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::string head = R"({"a": [1, "xyz", 2.5], "pad": ")";
    const auto path = std::filesystem::temp_directory_path() / ("gpumem_pickle_json_" + std::to_string(::getpid()));
    auto write = [&](std::size_t size) {
        std::string text = head + std::string(size - head.size() - 2, 'x') + "\"}";
        std::ofstream(path) << text;
        return text;
    };
    const std::string small = write(page - 10);
    PickleDocument fromView = PickleDocument::fromJsonText(std::string_view(small), "v.json");
    auto items = fromView.items(*fromView.find(fromView.root(), "a"));
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(fromView.text(items[1]), "xyz");
    PickleDocument::Input input = PickleDocument::readInput(path.string());
    EXPECT_EQ(input.padding, 64u);
    PickleDocument fromFile = PickleDocument::fromJsonText(std::move(input), "f.json");
    EXPECT_EQ(fromFile.toJson(fromFile.root()), fromView.toJson(fromView.root()));
    for (std::size_t size : { (std::size_t(8) << 20) + 100, (std::size_t(8) << 20) + page }) {
        SCOPED_TRACE(size);
        write(size);
        PickleDocument::Input mapped = PickleDocument::readInput(path.string());
        EXPECT_EQ(mapped.bytes.size(), size);
        EXPECT_EQ(mapped.padding, (page - size % page) % page);
        PickleDocument doc = PickleDocument::fromJsonText(std::move(mapped), "m.json");
        EXPECT_EQ(doc.toJson(*doc.find(doc.root(), "a")), fromView.toJson(*fromView.find(fromView.root(), "a")));
        EXPECT_EQ(doc.text(*doc.find(doc.root(), "pad")).size(), size - head.size() - 2);
    }
    std::filesystem::remove(path);
}

namespace {

// JSON for a document in its own key order (as Python's json.dump writes the dict), not nlohmann's
// sorted order.
void writeInOrder(const PickleDocument& doc, const PickleValue& v, std::ostream& out)
{
    switch (v.kind) {
    case PickleKind::Dict: {
        auto kv = doc.items(v);
        out << '{';
        for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
            out << (i ? ", " : "") << doc.toJson(kv[i]).dump() << ": ";
            writeInOrder(doc, kv[i + 1], out);
        }
        out << '}';
        return;
    }
    case PickleKind::List:
    case PickleKind::Tuple: {
        out << '[';
        bool first = true;
        for (const auto& item : doc.items(v)) {
            out << (first ? "" : ", ");
            first = false;
            writeInOrder(doc, item, out);
        }
        out << ']';
        return;
    }
    default:
        out << doc.toJson(v).dump();
    }
}

std::string fileBytes(const std::filesystem::path& path)
{
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

class PublicJsonTwins : public ::testing::TestWithParam<const char*> { };

} // namespace

TEST_P(PublicJsonTwins, InFileOrderAndSortedConvertToTheSameGmt)
{
    const std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + GetParam();
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)";
    PickleDocument doc = readSnapshotDocument(path);
    const auto dir = std::filesystem::temp_directory_path();
    const auto json = dir / ("gpumem_twin_" + std::to_string(::getpid()) + ".json");
    const auto gmt = dir / ("gpumem_twin_" + std::to_string(::getpid()) + ".gmt");
    auto convert = [&](auto&& write) {
        {
            std::ofstream f(json);
            write(f);
        }
        Trace t = importPytorchSnapshot(json.string());
        writeGmt(t, gmt.string());
        return std::make_pair(fileBytes(gmt), t.importStats().count("big_int_clamped"));
    };
    const auto inOrder = convert([&](std::ostream& f) { writeInOrder(doc, doc.root(), f); });
    const auto sorted = convert([&](std::ostream& f) { f << doc.toJson(doc.root()).dump(); });
    EXPECT_GT(inOrder.first.size(), 1000u);
    EXPECT_TRUE(inOrder.first == sorted.first) << "the .gmt of the two JSON twins differ";
    // And the trace is the pickle's: the same events, sites and frames.
    Trace fromPickle = importPytorchSnapshot(doc);
    Trace fromJson = readGmt(gmt.string());
    EXPECT_EQ(fromJson.memory().count(), fromPickle.memory().count());
    EXPECT_EQ(fromJson.memory().address, fromPickle.memory().address);
    EXPECT_EQ(fromJson.memory().site, fromPickle.memory().site);
    EXPECT_EQ(fromJson.memory().time, fromPickle.memory().time);
    EXPECT_EQ(fromJson.siteCount(), fromPickle.siteCount());
    EXPECT_EQ(fromJson.frames().size(), fromPickle.frames().size());
    std::filesystem::remove(json);
    std::filesystem::remove(gmt);
}

INSTANTIATE_TEST_SUITE_P(PickleJson, PublicJsonTwins,
    ::testing::Values("cs336-bcrafton/memory_snapshot.pickle", "cs336-magma27/memory_snapshot.pickle",
        "cs336-silmont2000/mem_snapshot.pickle", "cs336-silmont2000/memory_forward_bf16_128.pickle",
        "flexgen-llm-inference/1.3b_snapshot.pickle"),
    [](const auto& param) {
        std::string name = param.param;
        for (char& c : name)
            c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        return name;
    });

TEST(PickleJson, SharesTheItemsOfRepeatedFrameDictsAndFramesListsOnly)
{
    // As the unpickler shares a repeated frames list or frame dict (its memo makes them one object):
    // equal dicts and lists of scalars, and lists of such dicts, get the first one's items and identity
    // but stay containers of their own. A container holding anything else is never shared.
    PickleDocument doc = PickleDocument::fromJsonText(R"({
        "a": [{"name": "f", "line": 1}, {"name": "g", "line": 2}],
        "b": [{"name": "f", "line": 1}, {"name": "g", "line": 2}],
        "c": [{"name": "f", "line": 1}, {"name": "g", "line": 3}],
        "d": [[], []],
        "e": [{"x": [1]}, {"x": [1]}],
        "f": [1, "s"], "g": [1, "s"], "h": [1.0, "s"]})",
        "share.json");
    auto at = [&](const char* key) { return *doc.find(doc.root(), key); };
    const PickleValue a = at("a"), b = at("b"), c = at("c");
    EXPECT_NE(a.bits, b.bits);
    EXPECT_EQ(doc.itemsIdentity(a), doc.itemsIdentity(b));
    EXPECT_NE(doc.itemsIdentity(a), doc.itemsIdentity(c));
    EXPECT_EQ(doc.itemsIdentity(doc.items(a)[0]), doc.itemsIdentity(doc.items(c)[0])); // {f, 1} twice
    EXPECT_NE(doc.itemsIdentity(doc.items(a)[1]), doc.itemsIdentity(doc.items(c)[1]));
    EXPECT_EQ(doc.text(*doc.find(doc.items(b)[1], "name")), "g");
    EXPECT_EQ(doc.toInt(*doc.find(doc.items(c)[1], "line")), 3);
    const auto d = doc.items(at("d")), e = doc.items(at("e"));
    EXPECT_NE(doc.itemsIdentity(d[0]), doc.itemsIdentity(d[1])); // empty lists: nothing to share
    EXPECT_NE(doc.itemsIdentity(e[0]), doc.itemsIdentity(e[1])); // dicts holding a list
    EXPECT_EQ(doc.itemsIdentity(*doc.find(e[0], "x")), doc.itemsIdentity(*doc.find(e[1], "x")));
    EXPECT_EQ(doc.itemsIdentity(at("f")), doc.itemsIdentity(at("g")));
    EXPECT_NE(doc.itemsIdentity(at("f")), doc.itemsIdentity(at("h"))); // 1 and 1.0 differ
    EXPECT_EQ(
        doc.toJson(doc.root())["b"], nlohmann::json::parse(R"([{"name": "f", "line": 1}, {"name": "g", "line": 2}])"));
}
