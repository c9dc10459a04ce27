// Issue 21 item 2: every JSON importer reads a number only when its whole token is a JSON number
// (importers/detail/json_number.h, isJsonNumber). Each case is the malformed token the adversarial
// test found; simdjson's on-demand parser types values by their first byte, so before the check
// "1024abc" read as 1024, "0x7f" as 0, "00012" as 12 (a Device Id of 12 made cuda:12), "nan" as null and
// "2p48" as 2.
#include "core/error.h"
#include "importers/detail/json_number.h"
#include "importers/kineto_importer.h"
#include "importers/memory_timeline_importer.h"
#include "core/trace.h"

#include <gtest/gtest.h>

using namespace gpumem;

TEST(StrictJsonNumber, AcceptsExactlyTheGrammarOfRfc8259)
{
    for (const char* ok : { "0", "-0", "12", "-12", "1.5", "0.25", "1e3", "1E+3", "2.5e-7", "1024 ", "7\n\t" })
        EXPECT_TRUE(detail::isJsonNumber(ok)) << ok;
    for (const char* bad : { "", "-", "1024abc", "0x7f", "00012", "-012", "2p48", "nan", "1.", ".5", "1e", "1e+",
             "+1", "Infinity", "1 2", "1.5.5" })
        EXPECT_FALSE(detail::isJsonNumber(bad)) << bad;
    EXPECT_TRUE(detail::isJsonNull("null "));
    EXPECT_FALSE(detail::isJsonNull("nan"));
    EXPECT_FALSE(detail::isJsonNull("nullx"));
    std::int64_t v = 0;
    EXPECT_FALSE(detail::parseScaledDecimal("1024abc", 0, v));
    EXPECT_TRUE(detail::parseScaledDecimal("1419116105360.746 ", 3, v));
    EXPECT_EQ(v, 1419116105360746);
}

namespace {
std::string kineto(const std::string& events)
{
    return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1000}],)"
           R"( "traceEvents": [)"
        + events + "]}";
}

// A free at 64 of 1024 B on cuda:0, after the event under test (whose args hold `args` and ts `ts`).
std::string oneMemoryEvent(const std::string& args, const std::string& ts = "10")
{
    return kineto(R"({"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":)" + ts + R"(,"args":{)" + args
        + R"(}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":30,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":-1024}})");
}

std::string badFieldDetail(std::string json)
{
    Trace t = importKinetoJson(json, "hand.json");
    const Anomaly* a = t.stats().find("bad_event_field");
    return a ? a->detail : "(no bad_event_field)";
}
} // namespace

TEST(StrictJsonNumber, KinetoRefusesEachMalformedNumberNamingTheEventFieldAndText)
{
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024abc)")),
        "traceEvents[0]: \"Bytes\" is 1024abc, not a JSON number; the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":0x7f00,"Bytes":1024)")),
        "traceEvents[0]: \"Addr\" is 0x7f00, not a JSON number; the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":00012)")),
        "traceEvents[0]: \"Bytes\" is 00012, not a JSON number; the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":2p48)")),
        "traceEvents[0]: \"Bytes\" is 2p48, not a JSON number; the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":nan)")),
        "traceEvents[0]: \"Bytes\" is nan, not a JSON value (a number or null); the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024)", "1024abc")),
        "traceEvents[0]: \"ts\" is 1024abc, not a JSON number; the event was skipped");
    EXPECT_EQ(badFieldDetail(oneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024)", "nan")),
        "traceEvents[0]: \"ts\" is nan, not a JSON value (a number or null); the event was skipped");
}

// `00012` as a Device Id made a device cuda:12 that the trace never had.
TEST(StrictJsonNumber, KinetoDeviceIdWithLeadingZerosCreatesNoDevice)
{
    std::string json = oneMemoryEvent(R"("Device Type":1,"Device Id":00012,"Addr":64,"Bytes":1024)");
    Trace t = importKinetoJson(json, "hand.json");
    for (const auto& d : t.devices())
        EXPECT_NE(d.ordinal, 12);
    ASSERT_NE(t.stats().find("bad_event_field"), nullptr);
    EXPECT_EQ(t.stats().find("bad_event_field")->detail,
        "traceEvents[0]: \"Device Id\" is 00012, not a JSON number; the event was skipped");
    EXPECT_EQ(t.memory().count(), 1u); // only the free
}

TEST(StrictJsonNumber, KinetoKernelWithMalformedTimeOrDeviceIsSkippedAndCounted)
{
    std::string json = kineto(R"(
      {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":2p48,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"X","cat":"kernel","name":"gemv","pid":0,"tid":7,"ts":20,"dur":5,"args":{"device":0x1,"stream":7}},
      {"ph":"X","cat":"kernel","name":"ok","pid":0,"tid":7,"ts":30,"dur":5,"args":{"device":0,"stream":7}})");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.kernels().size(), 1u);
    EXPECT_EQ(t.str(t.kernels()[0].name), "ok");
    EXPECT_EQ(t.stats().count("bad_event_field"), 2u);
}

TEST(StrictJsonNumber, KinetoBaseTimeThatIsNoNumberFailsTheFileNamingIt)
{
    std::string json = R"({"traceEvents": [], "baseTimeNanoseconds": 17000abc})";
    try {
        importKinetoJson(json, "hand.json");
        FAIL() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("\"baseTimeNanoseconds\" is not a JSON number (17000abc)"), std::string::npos)
            << e.what();
    }
}

namespace {
std::string timelineError(std::string json)
{
    try {
        importMemoryTimelineJson(json, "mt.raw");
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(accepted)";
}
} // namespace

TEST(StrictJsonNumber, MemoryTimelineRefusesEachMalformedNumberNamingTheRecordFieldAndText)
{
    const std::string tail = "); a memory-timeline raw export holds [ts_ns, action, bytes, category] lists of integers";
    EXPECT_EQ(timelineError("[[1, 2, 1024abc, 3]]"), "mt.raw: record 0: field bytes is not a JSON number (1024abc" + tail);
    EXPECT_EQ(timelineError("[[1, 2, 512, 3], [0x7f, 2, 512, 3]]"),
        "mt.raw: record 1: field ts is not a JSON number (0x7f" + tail);
    EXPECT_EQ(timelineError("[[1, 2, 00012, 3]]"), "mt.raw: record 0: field bytes is not a JSON number (00012" + tail);
    EXPECT_EQ(timelineError("[[1, 2, 2p48, 3]]"), "mt.raw: record 0: field bytes is not a JSON number (2p48" + tail);
    EXPECT_EQ(timelineError("[[1, 2, 512, 0003]]"), "mt.raw: record 0: field category is not a JSON number (0003" + tail);
    EXPECT_NE(timelineError("[[1, 2, nan, 3]]").find("mt.raw: record 0: field bytes is not an integer"), std::string::npos);
}
