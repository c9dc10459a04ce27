// Issue 21 item 5: the smaller findings of the adversarial test, each with its smallest input.
#include "core/error.h"
#include "core/gmt_format.h"
#include "importers/kineto_importer.h"
#include "importers/nsys_importer.h"
#include "importers/rmm_importer.h"
#include "importers/snapshot_importer.h"
#include "core/jsonl_format.h"
#include "core/trace.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {
fs::path scratch(const std::string& name)
{
    auto dir = fs::temp_directory_path() / ("gpumem-hardening-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / (::testing::UnitTest::GetInstance()->current_test_info()->name() + std::string("-") + name);
}

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string detailOf(const Trace& t, const char* code)
{
    const Anomaly* a = t.stats().find(code);
    return a ? a->detail : std::string("(no ") + code + ")";
}
} // namespace

// baseTimeNanoseconds near INT64_MAX plus a ts wrapped around (undefined behaviour in C++).
TEST(Hardening, KinetoBaseTimeNearTheInt64LimitPlusEventTimesSaturatesWithAnAnomaly)
{
    std::string json = R"({"traceEvents": [
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":10,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024}},
      {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":11,"dur":5,"args":{"device":0,"stream":7}}],
      "baseTimeNanoseconds": 9223372036854775000})";
    Trace t = importKinetoJson(json, "late.json");
    ASSERT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.memory().time[0], std::numeric_limits<TimeNs>::max());
    const Anomaly* a = t.stats().find("time_overflow");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->severity, Severity::Error);
    EXPECT_EQ(a->count, 3u); // the memory event, the kernel's start and its end
    EXPECT_EQ(a->detail, "9223372036854775000 ns + 10000 ns (baseTimeNanoseconds plus a \"ts\", or a \"ts\" plus its "
                         "\"dur\") is past the 64-bit nanosecond range; such times are clamped to it");
}

TEST(Hardening, KinetoKernelsWithoutATimeAreCountedNotDroppedSilently)
{
    std::string json = R"({"traceEvents": [
      {"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":null,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":20,"dur":5,"args":{"device":0,"stream":7}}]})";
    Trace t = importKinetoJson(json, "k.json");
    EXPECT_EQ(t.kernels().size(), 1u);
    ASSERT_EQ(t.stats().count("kernel_without_time"), 2u);
    EXPECT_EQ(detailOf(t, "kernel_without_time"), "traceEvents[0]: a kernel event has no \"ts\" (null or absent); skipped");
}

// An RMM log mixing seconds since the epoch and times of day reported a 51-year span.
TEST(Hardening, RmmLogMixingEpochAndTimeOfDayRowsIsRefusedNamingBothLines)
{
    const std::string text = std::string(kRmmCsvHeader) + "\n1,1634567890.123456,allocate,0x7f0000000000,256,0\n"
                                                          "1,12:00:01.000000,free,0x7f0000000000,256,0\n";
    try {
        importRmmCsv(text, "mixed.csv", 0);
        FAIL() << "a mixed log was read";
    } catch (const FormatError& e) {
        EXPECT_EQ(std::string(e.what()),
            "mixed.csv:3: column 2 (Time): \"12:00:01.000000\" is a time of day, but line 2 gives seconds since the "
            "epoch; one log has one kind of time (mixed, they would lie decades apart); fix or delete the row");
    }
}

// Two .gmt files joined: the first one's END chunk hid the second's chunks behind a warning.
TEST(Hardening, GmtChunksAfterAnEarlyEndChunkAreNamedAsAnError)
{
    Trace trace = readJsonl(GPUMEM_SOURCE_DIR "/tests/data/tiny_alloc_free.jsonl");
    const fs::path one = scratch("one.gmt");
    writeGmt(trace, one.string(), 4);
    const std::string bytes = slurp(one);
    // The second copy's chunks, without its file header (16 bytes, the metadata, its 4-byte checksum).
    const std::uint32_t metaLen = static_cast<unsigned char>(bytes[12]) | static_cast<unsigned char>(bytes[13]) << 8
        | static_cast<unsigned char>(bytes[14]) << 16 | static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[15])) << 24;
    const fs::path joined = scratch("joined.gmt");
    std::ofstream(joined, std::ios::binary) << bytes << bytes.substr(16 + metaLen + 4);
    Trace t = readGmt(joined.string());
    EXPECT_EQ(t.memory().count(), trace.memory().count());
    const Anomaly* a = t.stats().find("chunks_after_end");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->severity, Severity::Error);
    EXPECT_NE(a->detail.find("memory events) follow the end chunk that ends at offset " + std::to_string(bytes.size())
                  + " and were not read"),
        std::string::npos)
        << a->detail;
    EXPECT_NE(a->detail.find("(" + std::to_string(trace.memory().count()) + " memory events)"), std::string::npos) << a->detail;
    EXPECT_EQ(t.stats().find("trailing_bytes"), nullptr);
    // `cat one.gmt one.gmt`: the second file header came first and hid the join behind a trailing_bytes warning.
    std::ofstream(joined, std::ios::binary) << bytes << bytes;
    Trace cat = readGmt(joined.string());
    EXPECT_EQ(cat.memory().count(), trace.memory().count());
    const Anomaly* c = cat.stats().find("chunks_after_end");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->severity, Severity::Error);
    EXPECT_NE(c->detail.find("a second .gmt trace (its file header at offset " + std::to_string(bytes.size()) + ", then "),
        std::string::npos)
        << c->detail;
    EXPECT_NE(c->detail.find(std::to_string(trace.memory().count()) + " memory events) follows the end chunk"), std::string::npos)
        << c->detail;
    EXPECT_EQ(cat.stats().find("trailing_bytes"), nullptr);
    // The second file cut inside its header (its magic and 6 bytes): still a joined file, with nothing read of it.
    std::ofstream(joined, std::ios::binary) << bytes << bytes.substr(0, 14);
    const Trace cut = readGmt(joined.string());
    ASSERT_NE(cut.stats().find("chunks_after_end"), nullptr);
    EXPECT_NE(cut.stats().find("chunks_after_end")->detail.find("then 0 whole chunks, 0 memory events"), std::string::npos);
    EXPECT_EQ(cut.stats().find("trailing_bytes"), nullptr);
    // Review of the fix: a byte between the two files, or a damaged second header (its magic, its metadata
    // length), hid the second trace behind trailing_bytes again; the next whole MEMV chunk is searched for.
    const std::string events = std::to_string(trace.memory().count()) + " memory events)";
    std::string badMagic = bytes, badLength = bytes;
    badMagic[1] = 'X';
    badLength[14] = '\xff';
    for (const std::string& second : { "\n" + bytes, badMagic, badLength }) {
        std::ofstream(joined, std::ios::binary) << bytes << second;
        const Trace t2 = readGmt(joined.string());
        EXPECT_EQ(t2.memory().count(), trace.memory().count());
        const Anomaly* e = t2.stats().find("chunks_after_end");
        ASSERT_NE(e, nullptr) << second.size();
        EXPECT_NE(e->detail.find(events), std::string::npos) << e->detail;
        EXPECT_NE(e->detail.find(second == badLength ? "a second .gmt trace (its file header at offset " + std::to_string(bytes.size())
                                                     : std::string(", after bytes that are no chunk)")),
            std::string::npos)
            << e->detail;
        EXPECT_EQ(t2.stats().find("trailing_bytes"), nullptr);
    }
    // Three files joined: both further traces are counted.
    std::ofstream(joined, std::ios::binary) << bytes << bytes << bytes;
    const Anomaly* three = readGmt(joined.string()).stats().find("chunks_after_end");
    ASSERT_NE(three, nullptr);
    EXPECT_NE(three->detail.find("2 more .gmt traces (file headers from offset " + std::to_string(bytes.size()) + "; "),
        std::string::npos)
        << three->detail;
    EXPECT_NE(three->detail.find(", " + std::to_string(2 * trace.memory().count()) + " memory events in all) follow the end chunk"),
        std::string::npos)
        << three->detail;
    // Stray bytes that are no chunk are still a warning.
    std::ofstream(joined, std::ios::binary) << bytes << "junk";
    EXPECT_NE(readGmt(joined.string()).stats().find("trailing_bytes"), nullptr);
}

// Opening a WAL-mode database wrote -wal and -shm files beside it (and failed on read-only media).
TEST(Hardening, NsysWalModeDatabaseIsReadWithoutWritingBesideIt)
{
    std::ifstream in(GPUMEM_SOURCE_DIR "/tests/data/nsys/memory_and_kernels.sql");
    std::stringstream sql;
    sql << in.rdbuf();
    const fs::path path = scratch("wal.sqlite");
    fs::remove(path);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, ("PRAGMA journal_mode=WAL;" + sql.str()).c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db); // the last connection checkpoints and removes -wal and -shm
    ASSERT_FALSE(fs::exists(path.string() + "-wal"));
    Trace t = readNsysSqlite(path.string());
    EXPECT_GT(t.memory().count(), 0u);
    EXPECT_FALSE(fs::exists(path.string() + "-wal"));
    EXPECT_FALSE(fs::exists(path.string() + "-shm"));
    // A database cut short is blamed on the file, naming it.
    const std::string whole = slurp(path);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() / 2);
    try {
        readNsysSqlite(path.string());
        ADD_FAILURE() << "a cut database was read";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the file is not a complete SQLite database"), std::string::npos) << e.what();
    }
}

TEST(Hardening, SnapshotPickleWithBytesAfterStopIsAnAnomaly)
{
    const fs::path path = scratch("after-stop.pickle");
    std::ofstream(path, std::ios::binary) << slurp(GPUMEM_SOURCE_DIR "/tests/data/snapshot/protocol_2.pickle") << "JUNK";
    Trace t = importPytorchSnapshot(path.string());
    EXPECT_EQ(detailOf(t, "bytes_after_pickle"),
        path.string() + ": 4 bytes follow the pickle's STOP opcode and were not read (a second pickle appended, or damage)");
    EXPECT_EQ(importPytorchSnapshot(GPUMEM_SOURCE_DIR "/tests/data/snapshot/protocol_2.pickle").stats().find("bytes_after_pickle"),
        nullptr);
}

TEST(Hardening, SnapshotFramesThatAreListsAreAnAnomaly)
{
    std::string json = slurp(GPUMEM_SOURCE_DIR "/tests/data/snapshot/entry_shapes.json");
    const std::string dict = R"({"name": "f", "filename": "m.py", "line": 3})";
    ASSERT_NE(json.find(dict), std::string::npos);
    for (auto at = json.find(dict); at != std::string::npos; at = json.find(dict, at))
        json.replace(at, dict.size(), R"(["f", "m.py", 3])");
    const fs::path path = scratch("list-frames.json");
    std::ofstream(path, std::ios::binary) << json;
    Trace t = importPytorchSnapshot(path.string());
    EXPECT_EQ(detailOf(t, "frame_not_a_dict"),
        "a 'frames' list holds a list where a frame dict {name, filename, line} belongs; left out of the stack");
}

// An unknown block state or trace action was quoted whole in the error: 300 KB of input in one message.
TEST(Hardening, SnapshotErrorsQuoteAtMost120BytesOfAnUnknownStateOrAction)
{
    const std::string json = slurp(GPUMEM_SOURCE_DIR "/tests/data/snapshot/entry_shapes.json");
    const std::string huge(300000, 'q');
    for (const std::string from : { "\"state\": \"inactive\"", "\"action\": \"alloc\"" }) {
        std::string text = json;
        const auto at = text.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        text.replace(at, from.size(), from.substr(0, from.find(':')) + ": \"" + huge + "\"");
        const fs::path path = scratch(from.substr(1, 5) + ".json");
        std::ofstream(path, std::ios::binary) << text;
        std::string message;
        try {
            Trace t = importPytorchSnapshot(path.string());
            for (const auto& a : t.stats().anomalies())
                if (a.detail.find("qqqq") != std::string::npos)
                    message = a.detail;
        } catch (const Error& e) {
            message = e.what();
        }
        ASSERT_NE(message.find(std::string(120, 'q') + "…"), std::string::npos) << from << ": " << message.substr(0, 300);
        EXPECT_EQ(message.find(std::string(121, 'q')), std::string::npos) << from;
        EXPECT_LT(message.size(), 1000u) << from;
    }
}
