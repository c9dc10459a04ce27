#include "importers/nsys_importer.h"

#include "importers/detail/device_tables.h"
#include "core/message_quote.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cctype>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

namespace gpumem {

namespace {
    constexpr std::string_view kSqliteMagic { "SQLite format 3\0", 16 };
    constexpr const char* kMemoryTable = "CUDA_GPU_MEMORY_USAGE_EVENTS";
    constexpr const char* kKernelTable = "CUPTI_ACTIVITY_KIND_KERNEL";
    constexpr const char* kPoolTable = "CUDA_GPU_MEMORY_POOL_EVENTS";
    constexpr const char* kStringTable = "StringIds";

    // ENUM_CUDA_MEM_KIND (SOURCES.md §F, checked in exports of schema 3.20 and 3.23).
    enum MemKind : std::int64_t { kPageable = 0, kPinned = 1, kDeviceKind = 2, kArray = 3, kManaged = 4, kDeviceStatic = 5, kManagedStatic = 6 };
    std::string memKindName(std::int64_t kind)
    {
        switch (kind) {
        case kPageable: return "Pageable";
        case kPinned: return "Pinned";
        case kDeviceKind: return "Device";
        case kArray: return "Array";
        case kManaged: return "Managed";
        case kDeviceStatic: return "Device Static";
        case kManagedStatic: return "Managed Static";
        default: return "Unknown (" + std::to_string(kind) + ")";
        }
    }

    // What a failed SQLite call means for the user, by its primary result code (https://sqlite.org/rescode.html).
    // Only damage is blamed on the file (issue 21: a locked database, one that cannot be read where it
    // lies, and a schema that is not Nsight's were all reported as "not a complete SQLite database").
    std::string sqliteCause(int code)
    {
        switch (code) {
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
            return "the file is not a complete SQLite database (re-run `nsys export --type sqlite`)";
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            return "another process holds the database locked (is nsys still writing it?); retry when it is done";
        case SQLITE_IOERR:
        case SQLITE_CANTOPEN:
        case SQLITE_READONLY:
        case SQLITE_PERM:
            return "the file could not be read where it lies (a read error or missing permission); copy it to a "
                   "local disk and retry";
        case SQLITE_NOMEM:
            return "SQLite ran out of memory";
        default:
            return "the database's tables are not those of an Nsight Systems export (`nsys export --type sqlite`)";
        }
    }

    // A file: URI for `path` (RFC 3986: every byte but unreserved ones and '/' percent-encoded), so that
    // sqlite3_open_v2 takes URI parameters.
    std::string fileUri(const std::string& path)
    {
        static constexpr char kHex[] = "0123456789ABCDEF";
        std::string uri = "file:";
        for (unsigned char c : path) {
            if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~')
                uri += static_cast<char>(c);
            else
                uri += '%', uri += kHex[c >> 4], uri += kHex[c & 15];
        }
        return uri;
    }

    class Statement {
    public:
        Statement(sqlite3* db, const std::string& sql, const std::string& path)
            : m_db(db)
            , m_path(path)
        {
            if (sqlite3_prepare_v2(db, sql.c_str(), -1, &m_stmt, nullptr) != SQLITE_OK)
                fail("preparing \"" + sql + "\"");
        }
        ~Statement() { sqlite3_finalize(m_stmt); }
        Statement(const Statement&) = delete;
        Statement& operator=(const Statement&) = delete;

        // True while there is a row; throws FormatError on a database error (corruption, not SQLite).
        bool step()
        {
            int rc = sqlite3_step(m_stmt);
            if (rc == SQLITE_ROW)
                return true;
            if (rc == SQLITE_DONE)
                return false;
            fail("reading");
        }
        bool isNull(int column) const { return sqlite3_column_type(m_stmt, column) == SQLITE_NULL; }
        int type(int column) const { return sqlite3_column_type(m_stmt, column); }
        double real(int column) const { return sqlite3_column_double(m_stmt, column); }
        std::int64_t integer(int column) const { return sqlite3_column_int64(m_stmt, column); }
        std::string_view text(int column) const
        {
            const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, column));
            return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(m_stmt, column))) : std::string_view();
        }
        void bind(int index, std::int64_t value)
        {
            sqlite3_reset(m_stmt);
            sqlite3_bind_int64(m_stmt, index, value);
        }

    private:
        [[noreturn]] void fail(const std::string& what) const
        {
            const int code = sqlite3_errcode(m_db) & 0xff; // the primary result code
            throw FormatError(m_path + ": SQLite error while " + what + ": " + quoteForMessage(sqlite3_errmsg(m_db)) + "; "
                + sqliteCause(code));
        }
        sqlite3* m_db;
        const std::string& m_path;
        sqlite3_stmt* m_stmt = nullptr;
    };

    class Database {
    public:
        explicit Database(const std::string& path)
        {
            // Read-only and, unless a -wal file holds changes not yet in the database, immutable: SQLite then
            // takes no locks and creates no -wal/-shm files beside a WAL-mode database (it did, and failed on
            // read-only media). With a non-empty -wal, its changes are part of the data: opened read-only
            // without immutable, which SQLite needs to read them.
            std::error_code ec;
            const auto walSize = std::filesystem::file_size(path + "-wal", ec);
            const bool pendingWal = !ec && walSize > 0;
            const std::string uri = fileUri(path) + (pendingWal ? "?mode=ro" : "?mode=ro&immutable=1");
            int rc = sqlite3_open_v2(uri.c_str(), &m_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
            if (rc != SQLITE_OK) {
                std::string message = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
                sqlite3_close(m_db);
                m_db = nullptr;
                throw IoError(path + ": cannot open as SQLite: " + quoteForMessage(message) + "; " + sqliteCause(rc & 0xff));
            }
        }
        ~Database() { sqlite3_close(m_db); }
        Database(const Database&) = delete;
        Database& operator=(const Database&) = delete;
        sqlite3* get() const { return m_db; }

    private:
        sqlite3* m_db = nullptr;
    };

    std::string quoted(std::string_view identifier) { return "\"" + std::string(identifier) + "\""; }

    class NsysReader {
    public:
        NsysReader(const std::string& path, const LoadOptions& options)
            : m_path(path)
            , m_options(options)
            , m_db(path)
            , m_tables(m_builder, path)
        {
        }

        Trace read()
        {
            m_builder.metadata()["source_format"] = "nsys-sqlite";
            m_builder.metadata()["time_base"] = "ns since the Nsight Systems session start";
            {
                Statement tables(m_db.get(), "SELECT name FROM sqlite_master WHERE type IN ('table','view')", m_path);
                while (tables.step())
                    m_tableNames.insert(std::string(tables.text(0)));
            }
            const bool memory = m_tableNames.count(kMemoryTable), kernels = m_tableNames.count(kKernelTable), pools = m_tableNames.count(kPoolTable);
            if (!memory && !kernels && !pools) {
                std::string found;
                for (const auto& t : m_tableNames)
                    if (found.size() < 200)
                        found += (found.empty() ? "" : ", ") + t;
                throw FormatError(m_path + ": an SQLite database but not an Nsight Systems export with memory or kernel data: none of the tables "
                    + std::string(kMemoryTable) + ", " + kKernelTable + ", " + kPoolTable + " is present (tables found: "
                    + (found.empty() ? "none" : found) + "); export a report recorded with `nsys profile --cuda-memory-usage=true` using `nsys export --type sqlite`");
            }
            readTargetInfo();
            if (memory)
                readMemoryEvents();
            else
                m_builder.stats().add("nsys_no_memory_usage_table", Severity::Warning,
                    m_path + ": no " + kMemoryTable + " table, so no memory events; record with `nsys profile --cuda-memory-usage=true`");
            progress(0.6);
            if (kernels)
                readKernels();
            else
                m_builder.stats().add("nsys_no_kernel_table", Severity::Info, m_path + ": no " + std::string(kKernelTable) + " table (no kernels were traced)");
            progress(0.9);
            if (pools)
                readPoolEvents();
            else
                m_builder.stats().add("nsys_no_memory_pool_table", Severity::Info,
                    m_path + ": no " + std::string(kPoolTable) + " table (no cudaMallocAsync memory pool was created or traced)");
            m_tables.commit();
            return m_builder.build();
        }

    private:
        void progress(double fraction) const
        {
            if (m_options.progress && !m_options.progress(fraction))
                throw Cancelled();
        }

        std::set<std::string> columns(const char* table)
        {
            std::set<std::string> out;
            Statement info(m_db.get(), "PRAGMA table_info(" + quoted(table) + ")", m_path);
            while (info.step())
                out.insert(std::string(info.text(1)));
            return out;
        }

        // The SELECT list for `wanted` columns: a required column that is missing is a FormatError; an
        // optional one reads as NULL.
        std::string selectList(const char* table, const std::vector<std::pair<const char*, bool>>& wanted)
        {
            auto have = columns(table);
            std::string list;
            for (auto [name, required] : wanted) {
                if (!have.count(name)) {
                    if (required)
                        throw FormatError(m_path + ": table " + table + " has no column \"" + name
                            + "\"; this export's schema is not one gpumem knows (nsys export schema 3.x expected)");
                    list += std::string(list.empty() ? "" : ", ") + "NULL";
                    continue;
                }
                list += (list.empty() ? "" : ", ") + quoted(name);
            }
            return list;
        }

        void readTargetInfo()
        {
            if (m_tableNames.count("TARGET_INFO_SESSION_START_TIME") && columns("TARGET_INFO_SESSION_START_TIME").count("utcEpochNs")) {
                Statement s(m_db.get(), "SELECT utcEpochNs, rowid FROM TARGET_INFO_SESSION_START_TIME LIMIT 1", m_path);
                if (s.step() && !s.isNull(0)
                    && integerColumns(s, "TARGET_INFO_SESSION_START_TIME", 1, { { 0, "utcEpochNs" } }, "the session start time is left unknown"))
                    m_builder.metadata()["session_start_utc_ns"] = s.integer(0);
            }
            if (!m_tableNames.count("TARGET_INFO_GPU"))
                return;
            auto have = columns("TARGET_INFO_GPU");
            if (!have.count("cuDevice") || !have.count("name"))
                return;
            Statement s(m_db.get(),
                "SELECT cuDevice, name, " + std::string(have.count("totalMemory") ? "totalMemory" : "NULL") + ", rowid FROM TARGET_INFO_GPU", m_path);
            while (s.step()) {
                if (!integerColumns(s, "TARGET_INFO_GPU", 3, { { 0, "cuDevice" } }))
                    continue;
                if (s.isNull(0) || s.integer(0) < 0 || s.integer(0) > INT32_MAX)
                    continue;
                DeviceId d = gpu(s.integer(0));
                if (m_tables.device(d).name == 0)
                    m_tables.device(d).name = m_builder.intern(s.text(1));
                // A totalMemory that is no integer ('lots') leaves the size unknown, said, not silently.
                if (!s.isNull(2) && integerColumns(s, "TARGET_INFO_GPU", 3, { { 2, "totalMemory" } }, "the device's total memory is left unknown")
                    && s.integer(2) > 0)
                    m_tables.device(d).totalMemory = static_cast<Bytes>(s.integer(2));
            }
        }

        DeviceId newDevice(DeviceType type, std::int32_t ordinal, std::string_view name)
        {
            return m_tables.addDevice(Device { type, ordinal, name.empty() ? 0 : m_builder.intern(name), 0 });
        }

        // Devices are collected here and added to the builder at the end, so that TARGET_INFO_GPU can
        // name them whatever the order of discovery.
        DeviceId gpu(std::int64_t deviceId)
        {
            auto it = m_gpus.find(deviceId);
            if (it != m_gpus.end())
                return it->second;
            DeviceId id = newDevice(DeviceType::Cuda, static_cast<std::int32_t>(deviceId), {});
            m_gpus.emplace(deviceId, id);
            return id;
        }

        DeviceId host()
        {
            if (!m_host)
                m_host = newDevice(DeviceType::Cpu, -1, "host (pageable and pinned memory)");
            return *m_host;
        }

        bool validDeviceId(const Statement& row, int column, const char* table)
        {
            if (!row.isNull(column) && row.integer(column) >= 0 && row.integer(column) <= INT32_MAX)
                return true;
            m_builder.stats().add("nsys_bad_device", Severity::Warning,
                m_path + ": a " + std::string(table) + " row has deviceId " + (row.isNull(column) ? "NULL" : std::to_string(row.integer(column))) + "; row skipped");
            return false;
        }

        // True when each of `columns` (NULL aside) holds an INTEGER. SQLite keeps a value in a column
        // of INTEGER affinity as TEXT ('abc'), REAL (1e30) or BLOB when it cannot convert it losslessly,
        // and sqlite3_column_int64 would then read 0 or a clamped value; such a row is counted as
        // nsys_wrong_type, naming the table, rowid and column (the last selected column is the rowid),
        // and what the caller does about it (`consequence`: the row is skipped, or a value left unknown).
        bool integerColumns(const Statement& row, const char* table, int rowidColumn,
            std::initializer_list<std::pair<int, const char*>> columns, const char* consequence = "row skipped")
        {
            for (const auto& [column, name] : columns) {
                const int t = row.type(column);
                if (t == SQLITE_INTEGER || t == SQLITE_NULL) [[likely]]
                    continue;
                std::string detail = m_path;
                detail.append(": ").append(table).append(" rowid ").append(std::to_string(row.integer(rowidColumn)));
                detail.append(": column ").append(name).append(" holds ");
                if (t == SQLITE_FLOAT)
                    detail.append("the REAL ").append(std::to_string(row.real(column)));
                else if (t == SQLITE_TEXT)
                    detail.append("the TEXT '").append(quoteForMessage(row.text(column))).append("'");
                else
                    detail.append("a BLOB");
                detail.append(", not an integer; ").append(consequence);
                m_builder.stats().add("nsys_wrong_type", Severity::Warning, detail);
                return false;
            }
            return true;
        }

        void readMemoryEvents()
        {
            std::string sql = "SELECT "
                + selectList(kMemoryTable,
                    { { "start", true }, { "deviceId", true }, { "address", true }, { "bytes", true }, { "memKind", true },
                        { "memoryOperationType", true }, { "streamId", false } })
                + ", rowid FROM " + kMemoryTable;
            Statement row(m_db.get(), sql, m_path);
            std::uint64_t n = 0;
            while (row.step()) {
                if ((++n & 0xffff) == 0)
                    progress(0.1);
                if (row.isNull(0) || row.isNull(2) || row.isNull(3) || row.isNull(4) || row.isNull(5)) {
                    m_builder.stats().add("nsys_null_field", Severity::Warning,
                        m_path + ": " + kMemoryTable + " row " + std::to_string(n) + " has NULL in start, address, bytes, memKind or memoryOperationType; row skipped");
                    continue;
                }
                if (!integerColumns(row, kMemoryTable, 7,
                        { { 0, "start" }, { 1, "deviceId" }, { 2, "address" }, { 3, "bytes" }, { 4, "memKind" },
                            { 5, "memoryOperationType" }, { 6, "streamId" } }))
                    continue;
                if (!validDeviceId(row, 1, kMemoryTable))
                    continue;
                std::int64_t op = row.integer(5);
                if (op != 0 && op != 1) {
                    m_builder.stats().add("nsys_unknown_memory_operation", Severity::Warning,
                        m_path + ": " + kMemoryTable + " row " + std::to_string(n) + " has memoryOperationType " + std::to_string(op)
                            + " (known: 0 allocation, 1 deallocation); row skipped");
                    continue;
                }
                if (row.integer(3) < 0) {
                    m_builder.stats().add("nsys_negative_size", Severity::Warning,
                        m_path + ": " + kMemoryTable + " row " + std::to_string(n) + " has bytes " + std::to_string(row.integer(3)) + "; row skipped");
                    continue;
                }
                const std::int64_t kind = row.integer(4);
                const auto streamId = static_cast<std::uint64_t>(row.isNull(6) ? 0 : row.integer(6));
                MemoryEvent e;
                e.time = row.integer(0);
                e.kind = op == 0 ? EventKind::Alloc : EventKind::Free;
                e.address = static_cast<Address>(row.integer(2)); // SQLite holds the 64-bit pattern
                e.size = static_cast<Bytes>(row.integer(3));
                e.requestedSize = e.size;
                if (kind == kDeviceKind || kind == kDeviceStatic || kind == kArray) {
                    e.device = gpu(row.integer(1));
                    e.stream = m_tables.stream(e.device, streamId);
                } else if (kind == kPageable || kind == kPinned) {
                    e.device = host();
                    e.stream = m_tables.stream(e.device, streamId);
                } else {
                    e.device = gpu(row.integer(1));
                    const std::uint64_t tagged = kNsysMemKindStreamTag | (static_cast<std::uint64_t>(kind & 0x7fffffff) << 32) | (streamId & 0xffffffffu);
                    e.stream = m_tables.stream(e.device, tagged, memKindName(kind) + " memory, stream " + std::to_string(streamId));
                    m_builder.stats().add("nsys_non_device_memory", Severity::Info,
                        m_path + ": " + memKindName(kind) + " memory events are kept on the GPU device but on streams of their own (handle bit 63 set)");
                }
                m_builder.add(e);
            }
        }

        StringId name(const Statement& row, int column, Statement& lookup)
        {
            if (row.isNull(column))
                return 0;
            std::int64_t id = row.integer(column);
            if (auto it = m_names.find(id); it != m_names.end())
                return it->second;
            lookup.bind(1, id);
            StringId result = 0;
            if (lookup.step())
                result = m_builder.intern(lookup.text(0));
            m_names.emplace(id, result);
            return result;
        }

        void readKernels()
        {
            const bool haveStrings = m_tableNames.count(kStringTable);
            if (!haveStrings)
                m_builder.stats().add("nsys_no_string_table", Severity::Warning,
                    m_path + ": no " + std::string(kStringTable) + " table; kernels are imported without names");
            std::string sql = "SELECT "
                + selectList(kKernelTable,
                    { { "start", true }, { "end", true }, { "deviceId", true }, { "streamId", true }, { "correlationId", false },
                        { "demangledName", false }, { "shortName", false } })
                + ", rowid FROM " + kKernelTable;
            Statement row(m_db.get(), sql, m_path);
            std::optional<Statement> lookup;
            if (haveStrings)
                lookup.emplace(m_db.get(), "SELECT value FROM StringIds WHERE id = ?", m_path);
            std::uint64_t n = 0;
            while (row.step()) {
                ++n;
                if (row.isNull(0) || row.isNull(1)) {
                    m_builder.stats().add("nsys_null_field", Severity::Warning,
                        m_path + ": " + kKernelTable + " row " + std::to_string(n) + " has NULL start or end; row skipped");
                    continue;
                }
                if (!integerColumns(row, kKernelTable, 7,
                        { { 0, "start" }, { 1, "end" }, { 2, "deviceId" }, { 3, "streamId" }, { 4, "correlationId" } }))
                    continue;
                if (!validDeviceId(row, 2, kKernelTable))
                    continue;
                Kernel k;
                k.start = row.integer(0);
                k.end = row.integer(1);
                if (k.end < k.start) {
                    m_builder.stats().add("nsys_kernel_ends_before_start", Severity::Warning,
                        m_path + ": " + kKernelTable + " row " + std::to_string(n) + " ends before it starts; kept with zero duration");
                    k.end = k.start;
                }
                k.device = gpu(row.integer(2));
                k.stream = m_tables.stream(k.device, static_cast<std::uint64_t>(row.isNull(3) ? 0 : row.integer(3)));
                k.correlation = static_cast<std::uint64_t>(row.isNull(4) ? 0 : row.integer(4));
                if (lookup) {
                    k.name = name(row, 5, *lookup);
                    if (k.name == 0)
                        k.name = name(row, 6, *lookup);
                }
                m_builder.add(k);
            }
        }

        void readPoolEvents()
        {
            auto have = columns(kPoolTable);
            const char* op = have.count("operationType") ? "operationType" : have.count("memoryPoolOperationType") ? "memoryPoolOperationType" : nullptr;
            if (!op || !have.count("start") || !have.count("deviceId")) {
                m_builder.stats().add("nsys_unknown_pool_schema", Severity::Warning,
                    m_path + ": table " + std::string(kPoolTable) + " lacks start, deviceId or operationType; memory pool events skipped");
                return;
            }
            auto optional = [&](const char* a, const char* b) {
                return have.count(a) ? quoted(a) : have.count(b) ? quoted(b) : std::string("NULL");
            };
            Statement row(m_db.get(),
                "SELECT start, deviceId, " + quoted(op) + ", " + optional("localMemoryPoolSize", "size") + ", "
                    + optional("localMemoryPoolUtilizedSize", "utilizedSize") + " FROM " + kPoolTable,
                m_path);
            std::map<std::pair<DeviceId, int>, std::uint32_t> series;
            auto counter = [&](DeviceId device, int which) {
                auto key = std::make_pair(device, which);
                if (auto it = series.find(key); it != series.end())
                    return it->second;
                auto id = m_builder.addCounterSeries(CounterSeries { m_builder.intern(which == 0 ? "Memory Pool Size" : "Memory Pool Utilized"), device });
                series.emplace(key, id);
                return id;
            };
            while (row.step()) {
                if (row.isNull(0) || !validDeviceId(row, 1, kPoolTable))
                    continue;
                DeviceId device = gpu(row.integer(1));
                // ENUM_CUDA_MEMPOOL_OPER (SOURCES.md §F): 1 Created, 2 Destroyed, 3 Trimmed.
                std::int64_t operation = row.isNull(2) ? 0 : row.integer(2);
                const char* what = operation == 1 ? "memory pool created" : operation == 2 ? "memory pool destroyed" : operation == 3 ? "memory pool trimmed" : "memory pool event";
                Annotation a;
                a.start = a.end = row.integer(0);
                a.name = m_builder.intern(what);
                a.kind = AnnotationKind::Instant;
                a.device = device;
                m_builder.add(a);
                for (int which = 0; which < 2; ++which)
                    if (!row.isNull(3 + which) && row.integer(3 + which) >= 0)
                        m_builder.add(CounterSample { row.integer(0), counter(device, which), row.integer(3 + which) });
            }
        }

        const std::string& m_path;
        const LoadOptions& m_options;
        Database m_db;
        TraceBuilder m_builder;
        detail::DeviceTables m_tables;
        std::set<std::string> m_tableNames;
        std::map<std::int64_t, DeviceId> m_gpus;
        std::optional<DeviceId> m_host;
        std::unordered_map<std::int64_t, StringId> m_names;
    };
} // namespace

bool looksLikeSqlite(std::string_view head) { return head.starts_with(kSqliteMagic); }

Trace readNsysSqlite(const std::string& path, const LoadOptions& options) { return NsysReader(path, options).read(); }

namespace {
    class NsysSqliteImporter final : public Importer {
    public:
        std::string_view name() const override { return "nsys-sqlite"; }
        std::string_view description() const override
        {
            return "Nsight Systems SQLite export (CUDA_GPU_MEMORY_USAGE_EVENTS, CUPTI_ACTIVITY_KIND_KERNEL, StringIds)";
        }
        // SQLite needs a file on disk: a gzip-compressed export is not sniffed (decompress it first).
        bool sniff(const SniffInput& in) const override { return !in.gzip && looksLikeSqlite(in.raw); }
        Trace load(const std::string& path, const LoadOptions& options) const override { return readNsysSqlite(path, options); }
    };
} // namespace

std::unique_ptr<Importer> makeNsysSqliteImporter() { return std::make_unique<NsysSqliteImporter>(); }

} // namespace gpumem
