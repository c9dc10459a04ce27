// The .jsonl interchange form (docs/trace-format.md §8): canonical output, defaults, and errors that
// name path:line and the field.
#include "core/error.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <limits>
#include <sstream>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

const std::string kHeader = R"({"format":"gpumem-jsonl","version":1,"metadata":{}})";
const std::string kTables = R"({"type":"device","id":0,"kind":"cuda","ordinal":0})"
                            "\n"
                            R"({"type":"stream","id":0,"device":0,"handle":0})";

std::string toJsonl(const Trace& t)
{
    std::ostringstream out;
    writeJsonl(t, out);
    return out.str();
}

Trace parse(const std::string& text) { return readJsonlText(text, "x.jsonl"); }

// The FormatError message for `text`, or "" if it reads.
std::string errorOf(const std::string& text)
{
    try {
        parse(text);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

fs::path dataFile(const std::string& name) { return fs::path(GPUMEM_SOURCE_DIR) / "tests/data" / name; }

} // namespace

TEST(JsonlFormat, WritesTheCanonicalFormWithDefaultsOmitted)
{
    TraceBuilder b;
    b.metadata() = { { "tool", "test" }, { "a", 1 } };
    auto dev = b.addDevice(Device { DeviceType::Cuda, 0, b.intern("A100"), 42505273344 });
    b.addStream(Stream { dev, 0, 0 });
    b.addStream(Stream { dev, 7, b.intern("side") });
    FrameId f = b.frame("forward", "model.py", 42);
    SiteId site = b.site(std::vector<FrameId> { f });
    ScopeId scope = b.scope(0, "nn.Module: Net", ScopeKind::Module);
    MemoryEvent e;
    e.time = 100, e.kind = EventKind::Alloc, e.address = 4096, e.size = 512, e.requestedSize = 500, e.scope = scope, e.site = site;
    e.category = Category::Activation;
    b.add(e); // sequence auto → 0 = its position: omitted
    e.time = 200, e.kind = EventKind::Free, e.stream = 1, e.requestedSize = 0, e.scope = 0, e.site = 0, e.thread = 9, e.sequence = 77;
    e.category = Category::Unknown;
    b.add(e);
    b.add(Kernel { 150, 180, 0, 1, b.intern("gemm"), 0 });
    b.add(Annotation { 90, 210, b.intern("ProfilerStep#1"), AnnotationKind::Step, kNoDevice, 0 });
    b.addCounterSeries(CounterSeries { b.intern("Total Allocated"), kNoDevice });
    b.add(CounterSample { 100, 0, 512 });
    b.stats().add("dropped_records", Severity::Warning, "3 dropped", 3);
    const std::string expected = R"({"format":"gpumem-jsonl","version":1,"metadata":{"a":1,"tool":"test"}}
{"type":"device","id":0,"kind":"cuda","ordinal":0,"name":"A100","total_memory":42505273344}
{"type":"stream","id":0,"device":0,"handle":0}
{"type":"stream","id":1,"device":0,"handle":7,"name":"side"}
{"type":"frame","id":1,"name":"forward","file":"model.py","line":42}
{"type":"site","id":1,"frames":[1]}
{"type":"scope","id":1,"parent":0,"name":"nn.Module: Net","kind":"module"}
{"type":"counter_series","id":0,"name":"Total Allocated"}
{"type":"mem","t":100,"kind":"alloc","addr":4096,"size":512,"requested":500,"scope":1,"site":1,"category":"activation"}
{"type":"mem","t":200,"kind":"free","stream":1,"addr":4096,"size":512,"thread":9,"seq":77}
{"type":"kernel","start":150,"end":180,"stream":1,"name":"gemm"}
{"type":"annotation","start":90,"end":210,"name":"ProfilerStep#1","kind":"step"}
{"type":"counter","t":100,"series":0,"value":512}
{"type":"anomaly","code":"dropped_records","severity":"warning","count":3,"detail":"3 dropped"}
)";
    Trace t = b.build();
    EXPECT_EQ(toJsonl(t), expected);
    EXPECT_EQ(toJsonl(parse(expected)), expected);
}

TEST(JsonlFormat, SeqDefaultsToThePositionAmongMemRecords)
{
    Trace t = parse(kHeader + "\n" + kTables + "\n" + R"({"type":"kernel","start":1,"end":2,"name":"k"})" + "\n"
        + R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512})" + "\n"
        + R"({"type":"mem","t":5,"kind":"alloc","addr":2,"size":512,"seq":0})" + "\n"
        + R"({"type":"mem","t":5,"kind":"alloc","addr":3,"size":512})" + "\n");
    // Positions 0, 1, 2 (the kernel line does not count); the second says seq 0 explicitly, so it
    // sorts first among the equal times.
    ASSERT_EQ(t.memory().count(), 3u);
    EXPECT_EQ(t.memory().address, (std::vector<Address> { 1, 2, 3 }));
    EXPECT_EQ(t.memory().sequence, (std::vector<std::uint64_t> { 0, 0, 2 }));
}

TEST(JsonlFormat, ExplicitSeqOfTheLargestValueIsKept)
{
    // TraceBuilder::add() reads 2^64−1 as "assign one"; an explicit value must survive.
    const std::string text = kHeader + "\n" + kTables + "\n" + R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512,"seq":18446744073709551615})" + "\n";
    Trace t = parse(text);
    EXPECT_EQ(t.memory().sequence[0], std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(toJsonl(t), text);
}

TEST(JsonlFormat, ErrorsNamePathLineAndField)
{
    const std::string head = kHeader + "\n" + kTables + "\n"; // lines 1–3
    struct Case {
        std::string line4;
        std::string message;
    };
    const Case cases[] = {
        { R"({"type":"mem","t":5,"kind":"alloc","size":512})", R"(x.jsonl:4: field "addr" is missing)" },
        { R"({"type":"mem","t":5,"kind":"alloc","addr":-1,"size":512})", R"(x.jsonl:4: field "addr" must be a non-negative integer)" },
        { R"({"type":"mem","t":5.5,"kind":"alloc","addr":1,"size":512})", R"(x.jsonl:4: field "t" must be an integer)" },
        { R"({"type":"mem","t":5,"kind":"malloc","addr":1,"size":512})", R"(x.jsonl:4: field "kind" has unknown value "malloc")" },
        { R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512,"device":1})", R"(x.jsonl:4: field "device" refers to no device record above it)" },
        { R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512,"device":70000})", R"(x.jsonl:4: field "device" is out of range)" },
        { R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512,"site":1})", R"(x.jsonl:4: field "site" refers to no site record above it)" },
        { R"({"type":"counter","t":5,"series":0,"value":1})", R"(x.jsonl:4: field "series" refers to no counter_series record above it)" },
        { R"({"type":"site","id":1,"frames":[3]})", R"(x.jsonl:4: field "frames" must hold ids of frame records above it)" },
        { R"({"type":"scope","id":2,"name":"x"})", R"(x.jsonl:4: field "id" must be 1 (ids are dense and in order))" },
        { R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512)", "x.jsonl:4:55: not valid JSON (syntax error while parsing object - unexpected end of input; expected '}')" },
        { R"([1,2])", "x.jsonl:4: not a JSON object" },
        // Found by jsonl_reader_fuzzer: nlohmann throws out_of_range, not parse_error, for this.
        { R"({"type":"mem","t":173200000E000800000,"kind":"alloc","addr":1,"size":512})",
            "x.jsonl:4: not valid JSON (number overflow parsing '173200000E000800000')" },
        { R"({"kind":"alloc"})", R"(x.jsonl:4: field "type" is missing)" },
    };
    for (const auto& c : cases) {
        std::string message = errorOf(head + c.line4 + "\n");
        EXPECT_EQ(message.rfind(c.message, 0), 0u) << c.line4 << "\n  gave: " << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
    }
    // Raw input echoed by the JSON parser is bounded, with invalid UTF-8 replaced.
    const std::string bad = errorOf(head + "{\"type\":\"mem\",\"kind\":\"\xff\xfe" + std::string(1000, 'a') + "\"}\n");
    EXPECT_EQ(bad.rfind("x.jsonl:4:", 0), 0u) << bad;
    EXPECT_EQ(bad.find("\xff"), std::string::npos);
    EXPECT_LT(bad.size(), 400u) << bad;
    const std::string longKind = errorOf(head + R"({"type":"mem","t":5,"kind":")" + std::string(500, 'z') + R"(","addr":1,"size":512})" + "\n");
    EXPECT_EQ(longKind, R"(x.jsonl:4: field "kind" has unknown value ")" + std::string(120, 'z') + "\xE2\x80\xA6\"");
    EXPECT_EQ(errorOf("").rfind("x.jsonl: empty .jsonl trace", 0), 0u);
    EXPECT_EQ(errorOf(R"({"format":"chrome-trace","version":1})").rfind(R"(x.jsonl:1: field "format" must be "gpumem-jsonl" on the first line)", 0), 0u);
    EXPECT_EQ(errorOf(R"({"format":"gpumem-jsonl","version":2})").rfind(R"(x.jsonl:1: field "version" is 2, newer than this gpumem reads (1); upgrade gpumem)", 0), 0u);
    EXPECT_EQ(errorOf(R"({"format":"gpumem-jsonl","version":1,"metadata":[]})").rfind(R"(x.jsonl:1: field "metadata" must be an object)", 0), 0u);
    const std::string deep = R"({"format":"gpumem-jsonl","version":1,"metadata":{"a":)" + std::string(5000, '[') + std::string(5000, ']') + "}}";
    EXPECT_EQ(errorOf(deep).rfind(R"(x.jsonl:1: field "metadata" nests deeper than 64 levels)", 0), 0u) << errorOf(deep);
}

TEST(JsonlFormat, SkipsBlankLinesAndCountsUnknownRecordTypes)
{
    Trace t = parse("\xEF\xBB\xBF" + kHeader + "\r\n\n   \n" + kTables + "\n" + R"({"type":"hologram","x":1})" + "\n"
        + R"({"type":"hologram"})" + "\n" + R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512})");
    EXPECT_EQ(t.memory().count(), 1u);
    const Anomaly* a = t.importStats().find("unknown_record");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->count, 2u);
    EXPECT_EQ(a->severity, Severity::Warning);
    EXPECT_NE(a->detail.find("x.jsonl:6: record type \"hologram\""), std::string::npos) << a->detail;
}

TEST(JsonlFormat, ReportsProgressUpToOne)
{
    std::string text = kHeader + "\n" + kTables + "\n";
    for (int i = 0; i < 70000; ++i)
        text += R"({"type":"mem","t":)" + std::to_string(i) + R"(,"kind":"alloc","addr":)" + std::to_string(4096 + 512 * i) + R"(,"size":512})" + "\n";
    std::vector<double> seen;
    LoadOptions options;
    options.progress = [&](double f) {
        seen.push_back(f);
        return true;
    };
    Trace t = readJsonlText(text, "big.jsonl", options);
    EXPECT_EQ(t.memory().count(), 70000u);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_GT(seen[0], 0.9);
    EXPECT_EQ(seen[1], 1.0);
    options.progress = [](double) { return false; };
    EXPECT_THROW(readJsonlText(text, "big.jsonl", options), Cancelled);
}

// The hand-written micro traces mean what their descriptions say (other tests and `gpumem info`
// golden outputs build on them).
TEST(JsonlFormat, MicroTracesHoldWhatTheyDescribe)
{
    Trace tiny = readJsonl(dataFile("tiny_alloc_free.jsonl").string());
    EXPECT_EQ(tiny.memory().count(), 10u);
    EXPECT_EQ(tiny.allocations().size(), 4u);
    for (const auto& a : tiny.allocations())
        EXPECT_NE(a.freeEvent, kNoIndex);
    EXPECT_TRUE(tiny.stats().empty());

    Trace step = readJsonl(dataFile("annotated_step.jsonl").string());
    EXPECT_EQ(step.kernels().size(), 3u);
    EXPECT_EQ(step.annotations().size(), 3u);
    EXPECT_EQ(step.counterSamples().size(), 4u);
    EXPECT_EQ(step.scopes().size(), 6u);
    EXPECT_EQ(step.siteCount(), 3u);
    EXPECT_EQ(step.importStats().count("dropped_records"), 3u);
    ASSERT_EQ(step.siteFrames(1).size(), 3u);
    EXPECT_EQ(step.str(step.frames()[step.siteFrames(1)[0]].name), "linear");

    Trace two = readJsonl(dataFile("two_devices_streams.jsonl").string());
    EXPECT_EQ(two.devices().size(), 2u);
    EXPECT_EQ(two.streams().size(), 4u);
    std::size_t completedLater = 0;
    for (const auto& a : two.allocations())
        if (a.freeCompletedEvent != kNoIndex && two.memory().time[a.freeCompletedEvent] > two.memory().time[a.freeEvent])
            ++completedLater;
    EXPECT_EQ(completedLater, 1u) << "the side-stream block becomes reusable 5.5 us after its free";

    Trace ring = readJsonl(dataFile("ring_buffer_window.jsonl").string());
    EXPECT_EQ(ring.stats().count("unmatched_free"), 3u);
    EXPECT_EQ(ring.stats().find("unmatched_free")->severity, Severity::Info);
    std::size_t live = 0;
    for (const auto& a : ring.allocations())
        live += a.freeEvent == kNoIndex;
    EXPECT_EQ(live, 2u);
}

// Regression (fresh-user review, 2026-11-30): a record whose "type" was 20 MB long made `gpumem info`
// print a 20 MB anomaly line. Every anomaly detail is now one printable line of bounded length.
TEST(JsonlFormat, AnUnknownRecordTypeOfTwentyMegabytesGivesABoundedAnomaly)
{
    const std::string header = R"({"format":"gpumem-jsonl","version":1,"metadata":{}})";
    const std::string content = header + "\n{\"type\":\"" + std::string(20 << 20, 'x') + "\"}\n";
    Trace t = readJsonlText(content, "big-type.jsonl");
    const Anomaly* a = t.stats().find("unknown_record");
    ASSERT_NE(a, nullptr);
    EXPECT_LE(a->detail.size(), ImportStats::kMaxDetailBytes + 3);
    // The type itself is quoted to 120 bytes (issue 21: messages quote at most 120 bytes of input).
    EXPECT_NE(a->detail.find("record type \"" + std::string(120, 'x') + "\xE2\x80\xA6\" is not known"), std::string::npos)
        << a->detail.substr(0, 200);
    // An ordinary detail is kept as it was.
    ImportStats stats;
    stats.add("x", Severity::Warning, "line 3: 2 ≤ 5 \"quoted\"");
    EXPECT_EQ(stats.find("x")->detail, "line 3: 2 ≤ 5 \"quoted\"");
}

TEST(JsonlFormat, PoolRecordsAndThePoolFieldAreChecked)
{
    const std::string head = "{\"format\":\"gpumem-jsonl\",\"version\":1}\n{\"type\":\"device\",\"id\":0,\"kind\":\"cuda\"}\n"
                             "{\"type\":\"stream\",\"id\":0,\"device\":0}\n";
    auto error = [&](const std::string& body) {
        try {
            parse(head + body);
        } catch (const FormatError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error("{\"type\":\"mem\",\"t\":1,\"kind\":\"alloc\",\"addr\":1,\"size\":512,\"pool\":1}\n")
                  .find("x.jsonl:4: field \"pool\" refers to no pool record above it"),
        std::string::npos);
    EXPECT_NE(error("{\"type\":\"pool\",\"id\":1,\"kind\":\"default\"}\n").find("field \"kind\" must not be \"default\""),
        std::string::npos);
    EXPECT_NE(error("{\"type\":\"pool\",\"id\":1,\"kind\":\"graph\",\"source_id\":[1]}\n").find("field \"source_id\""),
        std::string::npos);
    EXPECT_NE(error("{\"type\":\"pool\",\"id\":2,\"kind\":\"graph\"}\n").find("field \"id\" must be 1"), std::string::npos);
    const Trace t = parse(head + "{\"type\":\"pool\",\"id\":1,\"kind\":\"graph\",\"source_id\":[3,0]}\n"
                                 "{\"type\":\"mem\",\"t\":1,\"kind\":\"empty_cache\",\"addr\":0,\"size\":0,\"pool\":1}\n");
    ASSERT_EQ(t.pools().size(), 2u);
    EXPECT_EQ(t.pools()[1], (MemoryPool { PoolKind::Graph, 3, 0, false }));
    EXPECT_EQ(t.memory().kind[0], EventKind::EmptyCache);
    EXPECT_EQ(t.memory().pool[0], 1u);
}
