#include "core/error.h"
#include "importers/importer_registry.h"
#include "importers/nsys_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace gpumem;

namespace {

// Runs `sql` into a fresh <test>_<name>.sqlite in the test's temporary folder and returns its path.
// The running test's name is part of it: ctest runs tests in parallel processes, and two tests building
// the same database under one name removed it under each other.
std::string databaseFromSql(const std::string& name, const std::string& sql)
{
    std::string path = ::testing::TempDir() + "gpumem_nsys_"
        + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + name + ".sqlite";
    std::filesystem::remove(path);
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
    return path;
}

// Builds tests/data/nsys/<name>.sql into a .sqlite.
std::string makeDatabase(const std::string& name)
{
    std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/nsys/" + name + ".sql");
    std::stringstream sql;
    sql << in.rdbuf();
    EXPECT_FALSE(sql.str().empty()) << name;
    return databaseFromSql(name, sql.str());
}

std::size_t findEvent(const Trace& t, EventKind kind, Address address)
{
    const auto& m = t.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.kind[i] == kind && m.address[i] == address)
            return i;
    ADD_FAILURE() << "no " << toString(kind) << " at " << address;
    return 0;
}

} // namespace

TEST(NsysSqliteImporter, ImportsMemoryUsageEventsKernelsAndPools)
{
    std::string path = makeDatabase("memory_and_kernels");
    const Importer* importer = detectFormat(path);
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "nsys-sqlite");
    Trace t = loadTrace(path);
    EXPECT_EQ(t.metadata().at("source_format"), "nsys-sqlite");

    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 6u); // 7 rows, one with an unknown memoryOperationType
    EXPECT_EQ(t.stats().count("nsys_unknown_memory_operation"), 1u);

    // Device memory: CUDA device 0, stream 7, named and sized from TARGET_INFO_GPU.
    std::size_t a = findEvent(t, EventKind::Alloc, 0x7f0000000000);
    EXPECT_EQ(m.time[a], 1000);
    EXPECT_EQ(m.size[a], 2097152u);
    EXPECT_EQ(m.requestedSize[a], 2097152u);
    const Device& gpu0 = t.devices()[m.device[a]];
    EXPECT_EQ(gpu0.type, DeviceType::Cuda);
    EXPECT_EQ(gpu0.ordinal, 0);
    EXPECT_EQ(t.str(gpu0.name), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(gpu0.totalMemory, 85029158912u);
    EXPECT_EQ(t.streams()[m.stream[a]].handle, 7u);
    std::size_t f = findEvent(t, EventKind::Free, 0x7f0000000000);
    EXPECT_EQ(m.time[f], 5000);
    EXPECT_EQ(m.device[f], m.device[a]);

    // Pinned memory goes to the host device, not GPU 0.
    std::size_t pinned = findEvent(t, EventKind::Alloc, 140000000000000);
    EXPECT_EQ(t.devices()[m.device[pinned]].type, DeviceType::Cpu);
    EXPECT_EQ(t.devices()[m.device[pinned]].ordinal, -1);

    // Managed memory stays on GPU 0 but on a tagged stream of its own.
    std::size_t managed = findEvent(t, EventKind::Alloc, 0x7f0000200000);
    EXPECT_EQ(m.device[managed], m.device[a]);
    const Stream& managedStream = t.streams()[m.stream[managed]];
    EXPECT_EQ(managedStream.handle, kNsysMemKindStreamTag | (std::uint64_t { 4 } << 32) | 7u);
    EXPECT_EQ(t.str(managedStream.name), "Managed memory, stream 7");
    EXPECT_EQ(t.stats().count("nsys_non_device_memory"), 1u);

    // Device 1's buffer is live at the end.
    std::size_t live = findEvent(t, EventKind::Alloc, 0x7f0200000000);
    EXPECT_EQ(t.devices()[m.device[live]].ordinal, 1);
    std::size_t liveAtEnd = 0;
    for (const auto& x : t.allocations())
        liveAtEnd += x.freeEvent == kNoIndex;
    EXPECT_EQ(t.allocations().size(), 4u);
    EXPECT_EQ(liveAtEnd, 2u); // device 1's buffer and the managed one

    // Kernels: names through StringIds, demangled first, shortName when the demangled id is unknown.
    auto kernels = t.kernels();
    ASSERT_EQ(kernels.size(), 3u);
    EXPECT_EQ(kernels[0].start, 2600);
    EXPECT_EQ(t.str(kernels[0].name), "relu");
    EXPECT_EQ(t.devices()[kernels[0].device].ordinal, 1);
    EXPECT_EQ(t.streams()[kernels[0].stream].handle, 13u);
    EXPECT_EQ(kernels[1].start, 3100);
    EXPECT_EQ(kernels[1].end, 4200);
    EXPECT_EQ(kernels[1].correlation, 42u);
    EXPECT_EQ(t.str(kernels[1].name), "void gemm_kernel<float>(float const*, float*)");
    EXPECT_EQ(t.str(kernels[2].name), "relu");

    // Pool events: instant annotations and the pool size counters on device 1.
    auto annotations = t.annotations();
    ASSERT_EQ(annotations.size(), 2u);
    EXPECT_EQ(t.str(annotations[0].name), "memory pool created");
    EXPECT_EQ(t.str(annotations[1].name), "memory pool trimmed");
    EXPECT_EQ(t.devices()[annotations[1].device].ordinal, 1);
    std::int64_t lastSize = -1, lastUtilized = -1;
    for (const auto& s : t.counterSamples()) {
        auto series = t.str(t.counterSeries()[s.series].name);
        if (series == "Memory Pool Size")
            lastSize = s.value;
        if (series == "Memory Pool Utilized")
            lastUtilized = s.value;
    }
    EXPECT_EQ(lastSize, 2097152);
    EXPECT_EQ(lastUtilized, 1048576);
    EXPECT_EQ(t.stats().count("nsys_no_memory_usage_table"), 0u);
}

TEST(NsysSqliteImporter, ToleratesMissingTablesWithAnAnomaly)
{
    Trace t = loadTrace(makeDatabase("kernels_only"));
    EXPECT_EQ(t.memory().count(), 0u);
    ASSERT_EQ(t.kernels().size(), 2u);
    EXPECT_EQ(t.str(t.kernels()[0].name), "vectorAdd");
    ASSERT_NE(t.stats().find("nsys_no_memory_usage_table"), nullptr);
    EXPECT_EQ(t.stats().find("nsys_no_memory_usage_table")->severity, Severity::Warning);
    EXPECT_NE(t.stats().find("nsys_no_memory_usage_table")->detail.find("--cuda-memory-usage=true"), std::string::npos);
    EXPECT_EQ(t.stats().count("nsys_no_memory_pool_table"), 1u);
}

TEST(NsysSqliteImporter, RejectsAnSqliteFileWithoutNsightTablesNamingThem)
{
    std::string path = makeDatabase("not_nsys");
    try {
        loadTrace(path);
        FAIL() << "a non-nsys SQLite file was accepted";
    } catch (const FormatError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find(path), std::string::npos) << what;
        EXPECT_NE(what.find("CUDA_GPU_MEMORY_USAGE_EVENTS"), std::string::npos) << what;
        EXPECT_NE(what.find("CUPTI_ACTIVITY_KIND_KERNEL"), std::string::npos) << what;
        EXPECT_NE(what.find("moz_places"), std::string::npos) << what;
    }
}

TEST(NsysSqliteImporter, RejectsACorruptDatabaseWithFormatError)
{
    std::string good = makeDatabase("kernels_only");
    std::string path = good + ".corrupt.sqlite";
    {
        std::ifstream in(good, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        ASSERT_GT(bytes.size(), 200u);
        std::fill(bytes.begin() + 100, bytes.end(), '\xff'); // keep the magic, destroy the pages
        std::ofstream(path, std::ios::binary) << bytes;
    }
    EXPECT_EQ(detectFormat(path)->name(), "nsys-sqlite");
    EXPECT_THROW(loadTrace(path), FormatError);
}

TEST(NsysSqliteImporter, SniffsTheSqliteMagicOnly)
{
    EXPECT_TRUE(looksLikeSqlite(std::string_view("SQLite format 3\0 rest", 21)));
    EXPECT_FALSE(looksLikeSqlite("SQLite format 3"));
    EXPECT_FALSE(looksLikeSqlite("{\"traceEvents\": []}"));
    EXPECT_FALSE(looksLikeSqlite(""));
}

TEST(NsysSqliteImporter, NamesTheTableAndColumnThatIsMissing)
{
    std::string path = databaseFromSql("no_bytes_column",
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, deviceId INTEGER, address INTEGER, memKind INTEGER, memoryOperationType INTEGER);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1, 0, 4096, 2, 0);");
    try {
        loadTrace(path);
        FAIL() << "a memory table without bytes was accepted";
    } catch (const FormatError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("CUDA_GPU_MEMORY_USAGE_EVENTS"), std::string::npos) << what;
        EXPECT_NE(what.find("\"bytes\""), std::string::npos) << what;
    }
}

TEST(NsysSqliteImporter, SkipsARowWhoseIntegerColumnHoldsTextRealOrBlob)
{
    // SQLite keeps 'abc', 1e30 and a blob as they are in INTEGER columns; they used to be read as
    // bytes 0, bytes 8 EiB and address 0. Each row is skipped and counted, naming table, rowid, column.
    std::string path = databaseFromSql("wrong_types",
        "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, deviceId INTEGER, address INTEGER, bytes INTEGER, "
        "memKind INTEGER, memoryOperationType INTEGER);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1, 0, 4096, 512, 2, 0);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (2, 0, 8192, 'abc', 2, 0);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (3, 0, 12288, 1e30, 2, 0);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (4, 0, X'0010', 256, 2, 0);"
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (5, 0, 16384, '1024', 2, 0);" // TEXT that converts: an INTEGER
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (6, 0, 4096, 512, 2, 1);");
    Trace t = loadTrace(path);
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.address[0], 4096u);
    EXPECT_EQ(m.address[1], 16384u);
    EXPECT_EQ(m.size[1], 1024u);
    EXPECT_EQ(m.kind[2], EventKind::Free);
    ASSERT_EQ(t.stats().count("nsys_wrong_type"), 3u);
    EXPECT_EQ(t.stats().find("nsys_wrong_type")->detail,
        path + ": CUDA_GPU_MEMORY_USAGE_EVENTS rowid 2: column bytes holds the TEXT 'abc', not an integer; row skipped");
}

TEST(NsysSqliteImporter, NamesADeviceTableValueThatIsNoInteger)
{
    // A totalMemory of 'lots' was read as 0 and dropped without a word; a cuDevice of 'abc' named device
    // 0; a session start of 2.5 became 2. Each is counted as nsys_wrong_type, naming table, rowid, column.
    auto import = [](const std::string& name, const std::string& gpuRows, const std::string& start) {
        return databaseFromSql(name,
            "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, totalMemory INTEGER, cuDevice INTEGER);"
            "INSERT INTO TARGET_INFO_GPU VALUES "
                + gpuRows
                + ";"
                  "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);"
                  "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES ("
                + start
                + ");"
                  "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, deviceId INTEGER, address INTEGER, "
                  "bytes INTEGER, memKind INTEGER, memoryOperationType INTEGER);"
                  "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1, 0, 4096, 512, 2, 0);"
                  "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (2, 1, 8192, 512, 2, 0);");
    };
    {
        const std::string path = import("total_memory", "(0, 'GPU zero', 'lots', 0), (1, 'GPU one', 1024, 1)", "7");
        Trace t = loadTrace(path);
        ASSERT_EQ(t.memory().count(), 2u);
        const Device& zero = t.devices()[t.memory().device[0]];
        const Device& one = t.devices()[t.memory().device[1]];
        EXPECT_EQ(t.str(zero.name), "GPU zero"); // the row's other values are kept
        EXPECT_EQ(zero.totalMemory, 0u);
        EXPECT_EQ(t.str(one.name), "GPU one");
        EXPECT_EQ(one.totalMemory, 1024u);
        EXPECT_EQ(t.metadata()["session_start_utc_ns"], 7);
        ASSERT_EQ(t.stats().count("nsys_wrong_type"), 1u);
        EXPECT_EQ(t.stats().find("nsys_wrong_type")->detail,
            path
                + ": TARGET_INFO_GPU rowid 1: column totalMemory holds the TEXT 'lots', not an integer; the "
                  "device's total memory is left unknown");
    }
    {
        const std::string path = import("cu_device", "(0, 'GPU bad', 2048, 'abc'), (1, 'GPU one', 1024, 1)", "7");
        Trace t = loadTrace(path);
        ASSERT_EQ(t.memory().count(), 2u);
        EXPECT_EQ(t.devices()[t.memory().device[0]].name, 0u); // device 0 is not named from the 'abc' row
        EXPECT_EQ(t.devices()[t.memory().device[0]].totalMemory, 0u);
        ASSERT_EQ(t.stats().count("nsys_wrong_type"), 1u);
        EXPECT_EQ(t.stats().find("nsys_wrong_type")->detail,
            path + ": TARGET_INFO_GPU rowid 1: column cuDevice holds the TEXT 'abc', not an integer; row skipped");
    }
    {
        const std::string path = import("session_start", "(0, 'GPU zero', 2048, 0)", "2.5");
        Trace t = loadTrace(path);
        EXPECT_FALSE(t.metadata().contains("session_start_utc_ns"));
        ASSERT_EQ(t.stats().count("nsys_wrong_type"), 1u);
        EXPECT_EQ(t.stats().find("nsys_wrong_type")->detail,
            path
                + ": TARGET_INFO_SESSION_START_TIME rowid 1: column utcEpochNs holds the REAL 2.500000, not an "
                  "integer; the session start time is left unknown");
    }
}
