// A plain Kineto .json cut short, at every byte of windows across event boundaries: one rule
// (docs/kineto-import.md, "Damaged files"). A cut inside traceEvents keeps every complete event
// before it; a cut after the list closed keeps all of them; a cut before the first complete event is
// a FormatError. Each names the byte where the JSON ends and the place (which event, and whether in a
// number, string or key). The kept-event count never falls as the cut moves later.
#include "core/error.h"
#include "core/file_io.h"
#include "importers/importer_registry.h"
#include "importers/kineto_importer.h"
#include "tests/importers/kineto_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using namespace gpumem;
using gpumem::test::publicTrace;

namespace {

using Outcome = gpumem::test::CutOutcome;

// What importing the first `cut` bytes gave.
Outcome importPrefix(std::string_view json, std::size_t cut)
{
    std::string text(json.substr(0, cut));
    return gpumem::test::cutOutcomeOf([&] { return importKinetoJson(text, "cut.json"); });
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Where each event of a file ends (the byte after its closing brace), and where the list opens and closes.
struct Layout {
    std::size_t listOpen = 0; // the byte after '['
    std::size_t listClose = 0; // the byte after ']'
    std::size_t documentEnd = 0; // the byte after the top-level object's '}': from there on, nothing is cut
    std::vector<std::size_t> eventEnds;
    std::uint64_t completeBefore(std::size_t cut) const
    {
        return std::uint64_t(std::upper_bound(eventEnds.begin(), eventEnds.end(), cut) - eventEnds.begin());
    }
};

// Checks one cut against the rule and returns the number of events kept (0 for an error).
std::uint64_t checkCut(std::string_view json, const Layout& layout, std::size_t cut)
{
    SCOPED_TRACE("cut at byte " + std::to_string(cut));
    const Outcome o = importPrefix(json, cut);
    if (cut >= layout.documentEnd) { // only blanks after the closing brace are missing: a whole file
        EXPECT_FALSE(o.error) << o.message;
        EXPECT_EQ(o.message, "");
        EXPECT_EQ(o.events, layout.eventEnds.size());
        return o.events;
    }
    const std::string at = "the JSON ends at byte " + std::to_string(cut) + ", ";
    EXPECT_TRUE(has(o.message, at)) << o.message;
    const std::uint64_t complete = layout.completeBefore(cut);
    if (cut < layout.listOpen) {
        EXPECT_TRUE(o.error);
        EXPECT_TRUE(has(o.message, "cut.json: ")) << o.message;
        EXPECT_TRUE(has(o.message, "before \"traceEvents\" began")) << o.message;
        return 0;
    }
    if (complete == 0) {
        EXPECT_TRUE(o.error);
        EXPECT_TRUE(has(o.message, "before its first complete trace event")) << o.message;
        return 0;
    }
    EXPECT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.events, complete);
    if (cut >= layout.listClose) {
        EXPECT_TRUE(has(o.message, at + "after traceEvents closed")) << o.message;
        EXPECT_TRUE(has(o.message, "all " + std::to_string(complete) + " events were kept")) << o.message;
        return complete;
    }
    // Between events (after a closing brace, its comma or blanks) or inside the next one.
    const bool between = cut == layout.eventEnds[complete - 1]
        || json.substr(layout.eventEnds[complete - 1], cut - layout.eventEnds[complete - 1]).find('{')
            == std::string_view::npos;
    if (between)
        EXPECT_TRUE(has(o.message, at + "after traceEvents[" + std::to_string(complete - 1) + "]")) << o.message;
    else
        EXPECT_TRUE(has(o.message, "inside traceEvents[" + std::to_string(complete) + "]")) << o.message;
    EXPECT_TRUE(has(o.message, std::to_string(complete) + " complete event")) << o.message;
    return complete;
}

// Cuts at every byte of [from, to) and checks each one and that the count of kept events is monotone.
void checkWindow(std::string_view json, const Layout& layout, std::size_t from, std::size_t to)
{
    std::uint64_t previous = 0;
    for (std::size_t cut = from; cut < to && cut <= json.size(); ++cut) {
        const std::uint64_t kept = checkCut(json, layout, cut);
        EXPECT_GE(kept, previous) << "fewer events kept at byte " << cut << " than one byte earlier";
        previous = kept;
        if (::testing::Test::HasFailure())
            return; // one cut's failures say enough
    }
}

// A small current-schema trace whose strings hold "}," and escaped quotes, written with its layout.
struct HandMade {
    std::string json;
    Layout layout;
    std::size_t numberAt = 0, stringAt = 0, keyAt = 0, baseTimeAt = 0; // a byte inside each, in traceEvents[1]
};

HandMade handMade()
{
    HandMade h;
    std::string& j = h.json;
    j = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"GPU \\\"0\\\" },{\", "
        "\"totalGlobalMem\": 1024}],\n"
        "  \"traceEvents\": [";
    h.layout.listOpen = j.size();
    const std::vector<std::string> events = {
        R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10.0, "dur": 90.5, "args": {"note": "a},{b"}})",
        R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.125, "args": {"Total Reserved": 2097152, "Total Allocated": 1048576, "Bytes": 1048576, "Addr": 4096, "Device Id": 0, "Device Type": 1, "Ev Idx": 1}})",
        R"({"ph": "X", "cat": "kernel", "name": "gemm \"}, {\" kernel", "pid": 0, "tid": 7, "ts": 20.5, "dur": 5.25, "args": {"device": 0, "stream": 7, "correlation": 3, "grid": [1, 1, 1]}})",
        R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30.0, "args": {"Total Reserved": 2097152, "Total Allocated": 0, "Bytes": -1048576, "Addr": 4096, "Device Id": 0, "Device Type": 1, "Ev Idx": 2}})",
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
        j += i ? ",\n    " : "\n    ";
        const std::size_t start = j.size();
        j += events[i];
        h.layout.eventEnds.push_back(j.size());
        if (i == 1) {
            h.numberAt = start + events[i].find("12.125") + 3;
            h.stringAt = start + events[i].find("cpu_instant") + 4;
            h.keyAt = start + events[i].find("Total Allocated") + 6;
        }
    }
    j += "\n  ]";
    h.layout.listClose = j.size();
    j += ",\n  \"traceName\": \"cut.json\",\n  \"baseTimeNanoseconds\": 1700000000000000000\n}\n";
    h.baseTimeAt = j.find("1700000000") + 5;
    h.layout.documentEnd = j.rfind('}') + 1;
    return h;
}

} // namespace

TEST(KinetoTruncation, TheHandMadeTraceWholeHasNoAnomaly)
{
    HandMade h = handMade();
    const Outcome whole = importPrefix(h.json, h.json.size());
    EXPECT_FALSE(whole.error) << whole.message;
    EXPECT_EQ(whole.message, "");
    EXPECT_EQ(whole.events, 4u);
    EXPECT_EQ(whole.memoryEvents, 2u);
}

TEST(KinetoTruncation, AHandMadeTraceCutAtEveryByteFollowsOneRule)
{
    HandMade h = handMade();
    checkWindow(h.json, h.layout, 1, h.json.size() + 1);
}

TEST(KinetoTruncation, TheMessageNamesTheNumberStringOrKeyTheCutFallsIn)
{
    HandMade h = handMade();
    EXPECT_TRUE(has(importPrefix(h.json, h.numberAt).message, "in a number inside traceEvents[1]"));
    EXPECT_TRUE(has(importPrefix(h.json, h.stringAt).message, "in a string inside traceEvents[1]"));
    EXPECT_TRUE(has(importPrefix(h.json, h.keyAt).message, "in a key inside traceEvents[1]"));
    // Inside the list's closing: after the last event, before its ']'; then after the ']'.
    const Outcome beforeBracket = importPrefix(h.json, h.layout.listClose - 1);
    EXPECT_TRUE(has(beforeBracket.message, "after traceEvents[3]: the file was cut; the 4 complete events"))
        << beforeBracket.message;
    EXPECT_EQ(beforeBracket.memoryEvents, 2u);
    const Outcome afterBracket = importPrefix(h.json, h.layout.listClose);
    EXPECT_TRUE(has(afterBracket.message, "after traceEvents closed (between top-level keys)")) << afterBracket.message;
    // The float times are offsets from baseTimeNanoseconds, which comes after traceEvents: a cut before
    // it or in it says the times are no longer wall-clock time.
    const Outcome inBase = importPrefix(h.json, h.baseTimeAt);
    EXPECT_TRUE(has(inBase.message, "(in the top-level \"baseTimeNanoseconds\")")) << inBase.message;
    EXPECT_TRUE(has(inBase.message, "not wall-clock time")) << inBase.message;
    const Outcome afterBase = importPrefix(h.json, h.json.size() - 2); // only the closing brace is missing
    EXPECT_TRUE(has(afterBase.message, "all 4 events were kept")) << afterBase.message;
    EXPECT_FALSE(has(afterBase.message, "wall-clock")) << afterBase.message;
}

TEST(KinetoTruncation, DamageThatIsNotACutStaysAnError)
{
    // A bracket that closes the wrong container, with the file's end intact: not a cut.
    std::string wrong = R"({"traceEvents": [{"ph": "X", "ts": 1]}, {"ph": "X", "ts": 2}]})";
    try {
        importKinetoJson(wrong, "wrong.json");
        FAIL() << "a damaged file must not import";
    } catch (const FormatError& e) {
        EXPECT_TRUE(has(e.what(), "wrong.json: invalid JSON")) << e.what();
        EXPECT_FALSE(has(e.what(), "outside traceEvents")) << e.what();
    }
}

// The BERT-small trace (TraceLens, 2,551 events, pretty-printed by Python's json with 2-space indents:
// every traceEvents entry closes on a line "    }" or "    },"). Cut at every byte of three windows: the
// list's opening and first events, events around the first [memory] event, and the list's closing.
TEST(KinetoTruncation, ARealTraceCutAtEveryByteOfThreeWindowsFollowsOneRule)
{
    const std::string path = publicTrace("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    GPUMEM_REQUIRE_PUBLIC(path);
    const std::string json = readFileMaybeGzip(path);
    Layout layout;
    const std::size_t key = json.find("\n  \"traceEvents\": [\n");
    ASSERT_NE(key, std::string::npos);
    layout.listOpen = json.find('[', key) + 1;
    for (std::size_t line = layout.listOpen; line < json.size();) {
        const std::size_t next = json.find('\n', line + 1);
        const std::string_view text = std::string_view(json).substr(line + 1, next - line - 1);
        if (text == "    }" || text == "    },")
            layout.eventEnds.push_back(line + 1 + 5);
        if (text == "  ]" || text == "  ],") {
            layout.listClose = line + 1 + 3;
            break;
        }
        line = next;
    }
    ASSERT_EQ(layout.eventEnds.size(), 2551u); // SOURCES.md
    ASSERT_GT(layout.listClose, layout.eventEnds.back());
    layout.documentEnd = json.rfind('}') + 1;

    checkWindow(json, layout, key - 4, layout.eventEnds[2] + 40);
    const std::size_t memory = json.find("\"[memory]\"", layout.listOpen);
    const std::size_t firstMemory = layout.completeBefore(memory);
    ASSERT_GE(firstMemory, 2u);
    checkWindow(json, layout, layout.eventEnds[firstMemory - 2] - 30, layout.eventEnds[firstMemory + 1] + 30);
    checkWindow(json, layout, layout.eventEnds[2549] - 60, layout.listClose + 40);
    // The [memory] event is kept once its closing brace is in, and not before.
    const std::size_t end = layout.eventEnds[firstMemory];
    EXPECT_EQ(importPrefix(json, end).memoryEvents, importPrefix(json, end - 1).memoryEvents + 1);
}

namespace {
// A Kineto file as TraceLens writes it: a "metadata" object first, here of about 70 KB (beyond the
// 64 KiB head that format detection reads), then traceEvents with one alloc/free pair.
std::string longMetadataTrace()
{
    std::string meta = R"({"metadata": {"pip": [)";
    for (int i = 0; i < 1400; ++i)
        meta += std::string(i ? ", " : "") + "\"package-" + std::to_string(i) + "==1.0.0 with a long name padding\"";
    return meta + R"(]}, "traceEvents": [
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":10,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":20,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":-1024}}
    ]})";
}
} // namespace

TEST(KinetoTruncation, FindsTraceEventsAfterAHeadFullOfMetadata)
{
    // Detection looked for "traceEvents" in the first 64 KiB only: a whole file whose metadata fills
    // them was "not a trace format".
    const std::string json = longMetadataTrace();
    ASSERT_GT(json.find("\"traceEvents\""), std::size_t(64 * 1024));
    gpumem::test::TempFile file("long_metadata.json", json);
    const Importer* importer = detectFormat(file.path());
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "kineto");
    Trace t = loadTrace(file.path());
    EXPECT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.stats().find("truncated"), nullptr);
}

TEST(KinetoTruncation, ACutInsideALongLeadingMetadataIsTheCutBeforeTheFirstEvent)
{
    // Cut inside "metadata" (within and beyond the detection head), the file said "not a trace format";
    // it is the cut before the first complete event, naming the byte.
    const std::string json = longMetadataTrace();
    for (std::size_t cut : { std::size_t(40000), std::size_t(66000) }) {
        gpumem::test::TempFile file("cut_metadata.json", json.substr(0, cut));
        try {
            loadTrace(file.path());
            FAIL() << "a file cut before its first event holds nothing";
        } catch (const FormatError& e) {
            EXPECT_EQ(std::string(e.what()),
                file.path() + ": the JSON ends at byte " + std::to_string(cut)
                    + ", before \"traceEvents\" began (in the top-level \"metadata\"): the file was cut before its "
                      "first complete trace event, so it holds nothing to import; copy or export it again");
        }
    }
    // An object that does not begin like a Kineto file is not claimed, cut or not.
    gpumem::test::TempFile other("other.json", R"({"hello": {"world": [1, 2,)");
    EXPECT_EQ(detectFormat(other.path()), nullptr);
    gpumem::test::TempFile whole("whole_metadata.json", R"({"metadata": {"a": 1}})");
    EXPECT_EQ(detectFormat(whole.path()), nullptr);
}
