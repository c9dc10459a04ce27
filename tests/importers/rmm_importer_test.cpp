#include "core/error.h"
#include "importers/importer_registry.h"
#include "importers/rmm_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using namespace gpumem;

namespace {

const std::string kFixture = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/rmm/rmm_log.dev1.csv";
constexpr TimeNs kSecond = 1'000'000'000;

std::string formatErrorOf(std::string_view text)
{
    try {
        importRmmCsv(text, "log.csv", 0);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

TEST(RmmCsvImporter, ImportsTheLogAcrossMidnight)
{
    const Importer* importer = detectFormat(kFixture);
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "rmm-csv");
    Trace t = loadTrace(kFixture);
    EXPECT_EQ(t.metadata().at("source_format"), "rmm-csv");

    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].type, DeviceType::Cuda);
    EXPECT_EQ(t.devices()[0].ordinal, 1); // rmm_log.dev1.csv

    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 7u);
    // In time order; the second-last row (a slower thread's 23:59:59.9999) stays on the first day.
    const TimeNs expectedTime[] = { 86398 * kSecond + 250'000'000, 86398 * kSecond + 500'125'000, 86399 * kSecond,
        86399 * kSecond + 999'900'000, 86399 * kSecond + 999'999'000, 86400 * kSecond + 500'000, 86401 * kSecond + 500'000'000 };
    const EventKind expectedKind[] = { EventKind::Alloc, EventKind::Alloc, EventKind::Oom, EventKind::Free, EventKind::Free,
        EventKind::Alloc, EventKind::Free };
    const Address expectedAddress[] = { 0x7f3a20000000, 0x7f3a20100000, 0, 0x7f3a20100000, 0x7f3a20000000, 0x7f3a20000000, 0x7f3a20000000 };
    const Bytes expectedSize[] = { 1048576, 4096, 85899345920, 4096, 1048576, 2048, 2048 };
    for (std::size_t i = 0; i < 7; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(m.time[i], expectedTime[i]);
        EXPECT_EQ(m.kind[i], expectedKind[i]);
        EXPECT_EQ(m.address[i], expectedAddress[i]);
        EXPECT_EQ(m.size[i], expectedSize[i]);
        EXPECT_EQ(m.requestedSize[i], expectedSize[i]);
    }
    EXPECT_EQ(m.thread[0], 140245u);
    EXPECT_EQ(m.thread[2], 140246u);
    EXPECT_EQ(t.streams()[m.stream[0]].handle, 0u);
    EXPECT_EQ(t.streams()[m.stream[1]].handle, 0x7f3a18001020u);
    EXPECT_EQ(t.stats().count("rmm_midnight_wrap"), 1u);
    EXPECT_EQ(t.stats().count("unmatched_free"), 0u);
    ASSERT_EQ(t.allocations().size(), 3u);
    for (const auto& a : t.allocations())
        EXPECT_NE(a.freeEvent, kNoIndex);
}

TEST(RmmCsvImporter, SniffsOnlyTheExactHeader)
{
    EXPECT_TRUE(looksLikeRmmCsv("Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.000001,allocate,0x10,8,0\n"));
    EXPECT_TRUE(looksLikeRmmCsv("Thread,Time,Action,Pointer,Size,Stream\r\n"));
    EXPECT_TRUE(looksLikeRmmCsv("Thread,Time,Action,Pointer,Size,Stream"));
    EXPECT_FALSE(looksLikeRmmCsv("Thread,Time,Action,Pointer,Size,Stream,Extra\n"));
    EXPECT_FALSE(looksLikeRmmCsv(" Thread,Time,Action,Pointer,Size,Stream\n"));
    EXPECT_FALSE(looksLikeRmmCsv("{\"traceEvents\": []}"));
    EXPECT_FALSE(looksLikeRmmCsv(""));
}

TEST(RmmCsvImporter, AcceptsCrlfLinesAndEpochSeconds)
{
    Trace t = importRmmCsv("Thread,Time,Action,Pointer,Size,Stream\r\n7,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\r\n"
                           "7,1634567890.5,deallocate,0x7f8a40000000,1024,0x7f8a38001020\r\n",
        "epoch.csv", 2);
    ASSERT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.memory().time[0], 1634567890123456000);
    EXPECT_EQ(t.memory().time[1], 1634567890500000000);
    EXPECT_EQ(t.memory().kind[1], EventKind::Free);
    EXPECT_EQ(t.devices()[0].ordinal, 2);
    EXPECT_EQ(t.metadata().at("time_base"), "unix epoch (ns)");
}

TEST(RmmCsvImporter, NamesLineAndColumnOfAMalformedRow)
{
    const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
    const std::string good = "1,10:00:00.000001,allocate,0x1000,64,0\n";
    std::string e = formatErrorOf(header + good + "1,10:00:00.000002,allocate,0x2000,sixty,0\n");
    EXPECT_NE(e.find("log.csv:3:"), std::string::npos) << e;
    EXPECT_NE(e.find("column 5 (Size)"), std::string::npos) << e;
    EXPECT_NE(e.find("\"sixty\""), std::string::npos) << e;

    e = formatErrorOf(header + "1,25:00:00.0,allocate,0x2000,64,0\n");
    EXPECT_NE(e.find("log.csv:2: column 2 (Time)"), std::string::npos) << e;
    e = formatErrorOf(header + "1,10:00:00.0,reallocate,0x2000,64,0\n");
    EXPECT_NE(e.find("column 3 (Action)"), std::string::npos) << e;
    e = formatErrorOf(header + "1,10:00:00.0,free,0xzz,64,0\n");
    EXPECT_NE(e.find("column 4 (Pointer)"), std::string::npos) << e;
    e = formatErrorOf(header + "1,10:00:00.0,free,0x10,64,stream\n");
    EXPECT_NE(e.find("column 6 (Stream)"), std::string::npos) << e;
    e = formatErrorOf(header + "t1,10:00:00.0,free,0x10,64,0\n");
    EXPECT_NE(e.find("column 1 (Thread)"), std::string::npos) << e;
    e = formatErrorOf(header + good + good + "1,10:00:00.0,free,0x10\n");
    EXPECT_NE(e.find("log.csv:4:"), std::string::npos) << e;
    EXPECT_NE(e.find("found 4"), std::string::npos) << e;
    e = formatErrorOf("Thread,Time,Action\n");
    EXPECT_NE(e.find("log.csv:1:"), std::string::npos) << e;
}

TEST(RmmCsvImporter, CountsATruncatedLastLineInsteadOfFailing)
{
    Trace t = importRmmCsv("Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x1000,64,0\n1,10:00:00.0000", "cut.csv", 0);
    EXPECT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.stats().count("truncated"), 1u);
    EXPECT_EQ(t.stats().find("truncated")->severity, Severity::Error);
    EXPECT_NE(t.stats().find("truncated")->detail.find("cut.csv:3:"), std::string::npos);
}

TEST(RmmCsvImporter, TakesTheDeviceFromDotDevInTheFileName)
{
    EXPECT_EQ(rmmDeviceOrdinalFromPath("/tmp/rmm.dev3.log"), 3);
    EXPECT_EQ(rmmDeviceOrdinalFromPath("logs.dev9/rmm_log.dev12.csv"), 12);
    EXPECT_EQ(rmmDeviceOrdinalFromPath("rmm.dev0"), 0);
    EXPECT_EQ(rmmDeviceOrdinalFromPath("rmm.device.log"), std::nullopt);
    EXPECT_EQ(rmmDeviceOrdinalFromPath("logs.dev9/rmm.log"), std::nullopt);
}

// fuzz/rmm_csv_fuzzer found it: 10485760125 s × 10⁹ overflowed int64 (UBSan) and imported as
// -7960983948709551616 ns. Seconds past 2262-04-11 are a FormatError naming the line and column.
TEST(RmmCsvImporter, EpochSecondsWhoseNsDoNotFitInt64AreAFormatError)
{
    const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
    std::string e = formatErrorOf(header + "1,10485760125,allocate,0x1000,64,0\n");
    EXPECT_NE(e.find("log.csv:2: column 2 (Time)"), std::string::npos) << e;
    EXPECT_NE(e.find("\"10485760125\""), std::string::npos) << e;
    EXPECT_NE(e.find("year 2262"), std::string::npos) << e;
    e = formatErrorOf(header + "1,9223372036.854775807,allocate,0x1000,64,0\n");
    EXPECT_NE(e.find("year 2262"), std::string::npos) << e;
    // The last second that fits still imports.
    Trace t = importRmmCsv(header + "1,9223372035.999999999,allocate,0x1000,64,0\n", "late.csv", 0);
    ASSERT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.memory().time[0], 9223372035999999999);
}

TEST(RmmCsvImporter, QuotesABadFieldBoundedAndEscaped)
{
    // A 20 MB Size field used to give a 20 MB message; a NUL in a field cut the message short.
    const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
    std::string e = formatErrorOf(header + "1,10:00:00.0,allocate,0x2000," + std::string(20 << 20, '9') + "x,0\n");
    EXPECT_LT(e.size(), 400u);
    EXPECT_NE(e.find("got \"" + std::string(120, '9') + "\xE2\x80\xA6\""), std::string::npos) << e;
    e = formatErrorOf(header + std::string("1,10:00:00.0,allocate,0x2000,6\0004,0\n", 37));
    EXPECT_NE(e.find("got \"6\\x004\"; fix or delete the row"), std::string::npos) << e;
}
