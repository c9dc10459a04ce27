// The .gmt format (docs/trace-format.md): round trips, truncation at every byte, hostile and
// damaged files. The chunk walker below is written from the specification, not from the reader.
#include "core/error.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

std::string readBytes(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}

void writeBytes(const fs::path& path, std::string_view bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path tempPath(const std::string& name)
{
    auto dir = fs::temp_directory_path() / ("gpumem_gmt_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir / name;
}

std::string toJsonl(const Trace& t)
{
    std::ostringstream out;
    writeJsonl(t, out);
    return out.str();
}

// The micro traces written by hand and the project's sample traces (the round-trip corpus).
std::vector<fs::path> jsonlCorpus()
{
    std::vector<fs::path> files;
    for (const char* dir : { "tests/data", "traces" }) {
        fs::path d = fs::path(GPUMEM_SOURCE_DIR) / dir;
        if (!fs::is_directory(d))
            continue;
        for (const auto& e : fs::directory_iterator(d))
            if (e.path().extension() == ".jsonl")
                files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

fs::path dataFile(const std::string& name) { return fs::path(GPUMEM_SOURCE_DIR) / "tests/data" / name; }

std::uint32_t le32(std::string_view b, std::size_t at)
{
    auto u = [&](std::size_t i) { return std::uint32_t(static_cast<unsigned char>(b[at + i])); };
    return u(0) | u(1) << 8 | u(2) << 16 | u(3) << 24;
}
void putLe32(std::string& b, std::size_t at, std::uint32_t v)
{
    for (int i = 0; i < 4; ++i)
        b[at + i] = static_cast<char>(v >> (8 * i));
}
std::uint32_t crc(std::string_view bytes) { return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()))); }

struct ChunkInfo {
    std::size_t offset; // of the chunk header
    std::size_t end;    // one past the payload
    std::string type;
    std::uint32_t records;
};
struct Layout {
    std::size_t headerEnd; // one past the file header's checksum
    std::vector<ChunkInfo> chunks;
};

// Walks a whole .gmt file per docs/trace-format.md §2–§3.
Layout layout(std::string_view b)
{
    Layout l;
    l.headerEnd = 16 + le32(b, 12) + 4;
    std::size_t at = l.headerEnd;
    while (at < b.size()) {
        std::uint32_t length = le32(b, at + 4);
        l.chunks.push_back({ at, at + 16 + length, std::string(b.substr(at, 4)), le32(b, at + 8) });
        at += 16 + length;
    }
    EXPECT_EQ(at, b.size());
    return l;
}

// A chunk with a correct checksum (over type, length, records and payload).
std::string chunk(std::string_view type, std::uint32_t records, std::string_view payload)
{
    std::string c(16, '\0');
    c.replace(0, 4, type);
    putLe32(c, 4, static_cast<std::uint32_t>(payload.size()));
    putLe32(c, 8, records);
    std::string covered = c.substr(0, 12) + std::string(payload);
    putLe32(c, 12, crc(covered));
    return c + std::string(payload);
}

// `file` with `extra` inserted before its end chunk.
std::string insertBeforeEnd(const std::string& file, const std::string& extra)
{
    Layout l = layout(file);
    EXPECT_EQ(l.chunks.back().type, "END ");
    std::string out = file;
    out.insert(l.chunks.back().offset, extra);
    return out;
}

std::string gmtBytes(const Trace& t, std::size_t eventsPerChunk = 65536)
{
    auto path = tempPath("bytes.gmt");
    writeGmt(t, path.string(), eventsPerChunk);
    return readBytes(path);
}

Trace readTraceBytes(std::string_view bytes) { return readGmtBytes(bytes, "test.gmt"); }

} // namespace

TEST(GmtFormat, JsonlToGmtToJsonlIsByteIdenticalForEveryCorpusFile)
{
    auto files = jsonlCorpus();
    ASSERT_GE(files.size(), 4u) << "tests/data should hold the hand-written micro traces";
    for (const auto& file : files) {
        SCOPED_TRACE(file.string());
        const std::string original = readBytes(file);
        Trace fromJsonl = readJsonl(file.string());
        for (std::size_t perChunk : { std::size_t(65536), std::size_t(3), std::size_t(1) }) {
            auto gmt = tempPath(file.stem().string() + ".gmt");
            writeGmt(fromJsonl, gmt.string(), perChunk);
            Trace fromGmt = readGmt(gmt.string());
            EXPECT_EQ(toJsonl(fromGmt), original) << perChunk << " events per chunk";
            EXPECT_TRUE(fromGmt.importStats().find("truncated") == nullptr);
            // .gmt → .jsonl → .gmt is byte-identical too: the writer is deterministic.
            auto again = tempPath(file.stem().string() + ".again.gmt");
            writeGmt(readJsonl(file.string()), again.string(), perChunk);
            EXPECT_EQ(readBytes(again), readBytes(gmt));
        }
    }
}

TEST(GmtFormat, ReadsUpToTheLastWholeChunkWhenCutAtEveryOffset)
{
    Trace full = readJsonl(dataFile("annotated_step.jsonl").string());
    const std::string bytes = gmtBytes(full, 4); // 17 memory events: MEMV chunks of 4, 4, 4, 4, 1
    const Layout l = layout(bytes);
    int memv = 0;
    for (const auto& c : l.chunks)
        memv += c.type == "MEMV";
    ASSERT_EQ(memv, 5);
    ASSERT_EQ(l.chunks.back().type, "END ");
    const ChunkInfo firstMemv = *std::find_if(l.chunks.begin(), l.chunks.end(), [](const ChunkInfo& c) { return c.type == "MEMV"; });
    for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
        SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
        std::string_view prefix(bytes.data(), cut);
        if (cut < l.headerEnd) {
            try {
                readTraceBytes(prefix);
                ADD_FAILURE() << "a cut file header must be refused";
            } catch (const FormatError& e) {
                std::string m = e.what();
                EXPECT_TRUE(m.find(cut == 0 ? "empty file" : "truncated") != std::string::npos) << m;
                EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
            }
            continue;
        }
        if (cut < l.chunks[0].end) {
            // Not one chunk could be read: nothing to keep, so an error naming the file and offset.
            try {
                readTraceBytes(prefix);
                ADD_FAILURE() << "a file cut before the end of its first chunk must be refused";
            } catch (const FormatError& e) {
                std::string m = e.what();
                EXPECT_EQ(m.rfind("test.gmt: ", 0), 0u) << m;
                EXPECT_NE(m.find("offset " + std::to_string(l.headerEnd)), std::string::npos) << m;
                EXPECT_NE(m.find("not one chunk could be read"), std::string::npos) << m;
            }
            continue;
        }
        std::size_t expectedEvents = 0;
        for (const auto& c : l.chunks)
            if (c.end <= cut && c.type == "MEMV")
                expectedEvents += c.records;
        if (expectedEvents == 0 && cut >= firstMemv.offset + 4) {
            // Cut inside the first MEMV chunk, past its type: the file holds memory events and none survive.
            try {
                readTraceBytes(prefix);
                ADD_FAILURE() << "a file cut inside its first MEMV chunk must be refused";
            } catch (const FormatError& e) {
                std::string m = e.what();
                EXPECT_NE(m.find("the chunk at offset " + std::to_string(firstMemv.offset) + " is a MEMV chunk"), std::string::npos) << m;
                EXPECT_NE(m.find("not one memory event could be read"), std::string::npos) << m;
            }
            continue;
        }
        Trace t = readTraceBytes(prefix);
        ASSERT_EQ(t.memory().count(), expectedEvents);
        for (std::size_t i = 0; i < expectedEvents; ++i)
            ASSERT_EQ(t.memory().row(i), full.memory().row(i)) << "event " << i;
        const Anomaly* truncated = t.importStats().find("truncated");
        if (cut == bytes.size()) {
            EXPECT_TRUE(t.importStats().empty() || !truncated);
        } else {
            ASSERT_NE(truncated, nullptr);
            EXPECT_EQ(truncated->severity, Severity::Error);
            EXPECT_NE(truncated->detail.find(std::to_string(expectedEvents) + " memory events"), std::string::npos) << truncated->detail;
        }
    }
}

TEST(GmtFormat, TruncatedFileOnDiskReportsTheTruncation)
{
    const std::string bytes = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()), 4); // chunks of 4, 4, 2
    const Layout l = layout(bytes);
    // Cut in the middle of the third MEMV chunk: the first two (8 events) survive.
    std::size_t cut = 0;
    int seen = 0;
    for (const auto& c : l.chunks)
        if (c.type == "MEMV" && ++seen == 3)
            cut = c.offset + 20;
    ASSERT_GT(cut, 0u);
    auto path = tempPath("cut.gmt");
    writeBytes(path, std::string_view(bytes).substr(0, cut));
    Trace t = readGmt(path.string());
    EXPECT_EQ(t.memory().count(), 8u);
    const Anomaly* a = t.importStats().find("truncated");
    ASSERT_NE(a, nullptr);
    EXPECT_NE(a->detail.find(path.string()), std::string::npos);
    EXPECT_NE(a->detail.find("inside chunk MEMV at offset " + std::to_string(cut - 20)), std::string::npos) << a->detail;
    EXPECT_THROW(t.stats().throwIfStrictViolated(path.string()), FormatError);
}

TEST(GmtFormat, EmptyFileIsAClearError)
{
    auto path = tempPath("empty.gmt");
    writeBytes(path, "");
    try {
        readGmt(path.string());
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(path.string() + ": empty file (0 bytes)", 0), 0u) << e.what();
    }
}

TEST(GmtFormat, WrongMagicIsAClearError)
{
    for (std::string bytes : { std::string("{\"format\":\"gpumem-jsonl\"}\n"), std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16) }) {
        try {
            readTraceBytes(bytes);
            FAIL();
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find("not a .gmt file (wrong magic bytes at offset 0)"), std::string::npos) << e.what();
        }
    }
}

TEST(GmtFormat, NewerMajorVersionIsRefusedWithUpgradeAdvice)
{
    std::string bytes = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    bytes[8] = 2, bytes[9] = 0, bytes[10] = 3; // 2.3
    try {
        readTraceBytes(bytes);
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("written in .gmt format 2.3 by a newer gpumem; this gpumem reads format 1.x — upgrade gpumem"),
            std::string::npos)
            << e.what();
    }
}

TEST(GmtFormat, NewerMinorVersionReadsAndSkipsUnknownChunkTypes)
{
    Trace t = readJsonl(dataFile("tiny_alloc_free.jsonl").string());
    std::string bytes = insertBeforeEnd(gmtBytes(t), chunk("ZZZZ", 7, "a chunk type from gpumem 1.9"));
    bytes[10] = 9; // minor version 9: fix the header checksum, which covers the version
    const std::size_t headerEnd = layout(bytes).headerEnd;
    putLe32(bytes, headerEnd - 4, crc(std::string_view(bytes).substr(0, headerEnd - 4)));
    Trace read = readTraceBytes(bytes);
    EXPECT_TRUE(read.importStats().empty());
    EXPECT_EQ(toJsonl(read), toJsonl(t));
}

TEST(GmtFormat, RandomBytesNeverCrash)
{
    std::mt19937_64 rng(7);
    const std::string valid = gmtBytes(readJsonl(dataFile("annotated_step.jsonl").string()), 4);
    const std::size_t headerEnd = layout(valid).headerEnd;
    std::size_t firstMemvEnd = 0;
    for (const auto& c : layout(valid).chunks)
        if (c.type == "MEMV" && firstMemvEnd == 0)
            firstMemvEnd = c.end;
    for (int i = 0; i < 300; ++i) {
        std::string junk(rng() % 600, '\0');
        for (auto& ch : junk)
            ch = static_cast<char>(rng());
        // Pure noise: refused at the magic.
        EXPECT_THROW(readTraceBytes(junk), FormatError);
        // A valid header then noise: not one chunk can be read, so refused, never a crash.
        std::string tail = valid.substr(0, headerEnd) + junk;
        EXPECT_THROW(readTraceBytes(tail), FormatError);
        // A valid file with one byte changed: every chunk is covered by its checksum; damage in the
        // first chunk leaves nothing to read, nor does damage in or before the first MEMV chunk when the
        // MEMV chunks after it show there were memory events (an error); damage later keeps the chunks
        // before it.
        std::string flipped = valid;
        std::size_t at = headerEnd + rng() % (valid.size() - headerEnd);
        flipped[at] = static_cast<char>(flipped[at] ^ (1 + rng() % 255));
        if (at < layout(valid).chunks[0].end || at < firstMemvEnd) {
            EXPECT_THROW(readTraceBytes(flipped), FormatError) << "flipped byte at " << at;
            continue;
        }
        Trace f = readTraceBytes(flipped);
        EXPECT_TRUE(f.importStats().find("truncated") || f.importStats().find("corrupt_chunk")) << "flipped byte at " << at;
    }
}

TEST(GmtFormat, CorruptChecksumStopsAtThatChunk)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()), 4);
    const Layout l = layout(valid);
    std::vector<ChunkInfo> memv;
    for (const auto& c : l.chunks)
        if (c.type == "MEMV")
            memv.push_back(c);
    ASSERT_EQ(memv.size(), 3u);
    std::string bytes = valid;
    bytes[memv[1].offset + 16 + 3] ^= 0x40; // a payload byte of the second MEMV chunk
    Trace t = readTraceBytes(bytes);
    EXPECT_EQ(t.memory().count(), 4u);
    const Anomaly* a = t.importStats().find("corrupt_chunk");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->severity, Severity::Error);
    EXPECT_NE(a->detail.find("checksum mismatch in chunk MEMV at offset " + std::to_string(memv[1].offset)), std::string::npos) << a->detail;
}

TEST(GmtFormat, ChecksumCoversTheChunkHeader)
{
    // Changing a MEMV chunk's record count (4 → 3) without its payload must not go unnoticed. (The
    // second MEMV chunk: damage in the first leaves no memory event, an error of its own.)
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()), 4);
    int seen = 0;
    for (const auto& c : layout(valid).chunks) {
        if (c.type != "MEMV" || ++seen < 2)
            continue;
        std::string bytes = valid;
        putLe32(bytes, c.offset + 8, c.records - 1);
        Trace t = readTraceBytes(bytes);
        ASSERT_NE(t.importStats().find("corrupt_chunk"), nullptr);
        EXPECT_NE(t.importStats().find("corrupt_chunk")->detail.find("checksum mismatch"), std::string::npos);
        break;
    }
}

TEST(GmtFormat, HostileRecordCountsAreCorruptChunksNotHugeAllocations)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    // A MEMV chunk of 4e9 events whose 12 columns are all constant (kConst = 0, length 1, value 0):
    // 36 payload bytes that would decode to 256 GB.
    std::string constColumns;
    for (int i = 0; i < 12; ++i)
        constColumns += std::string("\x00\x01\x00", 3);
    for (std::uint32_t records : { 4000000000u, kGmtMaxEventsPerChunk + 1 }) {
        Trace t = readTraceBytes(insertBeforeEnd(valid, chunk("MEMV", records, constColumns)));
        EXPECT_EQ(t.memory().count(), 10u);
        ASSERT_NE(t.importStats().find("corrupt_chunk"), nullptr) << records;
        EXPECT_NE(t.importStats().find("corrupt_chunk")->detail.find("malformed MEMV chunk"), std::string::npos);
    }
    // At the limit it is legal (a trace of identical events compresses that well).
    Trace atLimit = readTraceBytes(insertBeforeEnd(valid, chunk("MEMV", 1000, constColumns)));
    EXPECT_EQ(atLimit.memory().count(), 1010u);
    EXPECT_NE(atLimit.importStats().find("corrupt_chunk"), nullptr) << "the end chunk counts 10 events, not 1010";
    // Raw columns need a byte per value: 1000 records in 3 bytes is malformed.
    std::string rawColumns = std::string("\x01\x03\x00\x00\x00", 5);
    Trace raw = readTraceBytes(insertBeforeEnd(valid, chunk("MEMV", 1000, rawColumns + constColumns.substr(3))));
    EXPECT_EQ(raw.memory().count(), 10u);
    EXPECT_NE(raw.importStats().find("corrupt_chunk"), nullptr);
    // Table chunks: every record takes at least a byte.
    Trace strings = readTraceBytes(insertBeforeEnd(valid, chunk("STRS", 4000000000u, std::string("\x01x", 2))));
    EXPECT_NE(strings.importStats().find("corrupt_chunk"), nullptr);
    Trace sites = readTraceBytes(insertBeforeEnd(valid, chunk("SITE", 1, std::string("\xff\xff\xff\xff\x0f", 5))));
    EXPECT_NE(sites.importStats().find("corrupt_chunk"), nullptr);
}

TEST(GmtFormat, EndChunkEventCountIsVerified)
{
    // Remove the second of three MEMV chunks whole: every remaining chunk is intact, but the end
    // chunk still counts 10 events.
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()), 4);
    int seen = 0;
    for (const auto& c : layout(valid).chunks) {
        if (c.type == "MEMV" && ++seen == 2) {
            std::string bytes = valid;
            bytes.erase(c.offset, c.end - c.offset);
            Trace t = readTraceBytes(bytes);
            EXPECT_EQ(t.memory().count(), 6u);
            const Anomaly* a = t.importStats().find("corrupt_chunk");
            ASSERT_NE(a, nullptr);
            EXPECT_NE(a->detail.find("counts 10 memory events but the chunks before it hold 6"), std::string::npos) << a->detail;
        }
    }
    EXPECT_EQ(seen, 3);
}

TEST(GmtFormat, MalformedStatsAndMetadataPatchesAreCorruptChunks)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    // A severity that is not a string used to escape as nlohmann::json::type_error.
    for (std::string stats : { R"([{"code":"x","severity":5,"count":1}])", R"([{"code":"x","count":1,"detail":[]}])",
             R"([{"code":"x","count":-1}])", R"({"code":"x"})" }) {
        Trace t = readTraceBytes(insertBeforeEnd(valid, chunk("STAT", 1, stats)));
        EXPECT_NE(t.importStats().find("corrupt_chunk"), nullptr) << stats;
        EXPECT_EQ(t.importStats().find("x"), nullptr);
    }
    Trace good = readTraceBytes(insertBeforeEnd(valid, chunk("STAT", 1, R"([{"code":"x","severity":"info","count":2}])")));
    ASSERT_NE(good.importStats().find("x"), nullptr);
    EXPECT_EQ(good.importStats().count("x"), 2u);
    // A patch that is not an object would replace the metadata object with an array.
    Trace array = readTraceBytes(insertBeforeEnd(valid, chunk("META", 1, "[1,2]")));
    EXPECT_TRUE(array.metadata().is_object());
    EXPECT_NE(array.importStats().find("corrupt_chunk"), nullptr);
    Trace patched = readTraceBytes(insertBeforeEnd(valid, chunk("META", 1, R"({"tool":null,"rank":3})")));
    EXPECT_EQ(patched.metadata().value("rank", 0), 3);
    EXPECT_FALSE(patched.metadata().contains("tool"));
}

TEST(GmtFormat, MalformedEventChunkAddsNoneOfItsRecords)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    // Two kernels (start, end, device, stream, name, correlation); the second names stream 5 of 1.
    const std::string kernels("\x02\x02\x00\x00\x01\x00"
                              "\x02\x02\x00\x05\x01\x00",
        12);
    Trace t = readTraceBytes(insertBeforeEnd(valid, chunk("KERN", 2, kernels)));
    EXPECT_EQ(t.kernels().size(), 0u);
    ASSERT_NE(t.importStats().find("corrupt_chunk"), nullptr);
    EXPECT_NE(t.importStats().find("corrupt_chunk")->detail.find("malformed KERN chunk"), std::string::npos);
    Trace good = readTraceBytes(insertBeforeEnd(valid, chunk("KERN", 1, kernels.substr(0, 6))));
    ASSERT_EQ(good.kernels().size(), 1u);
    EXPECT_EQ(good.kernels()[0].start, 1);
    EXPECT_EQ(good.kernels()[0].end, 2);
}

TEST(GmtFormat, DeeplyNestedMetadataIsRefusedBeforeItCanOverflowTheStack)
{
    // Writing such metadata back out (dump, merge_patch) recurses once per level.
    const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    std::string file(kGmtMagic, sizeof kGmtMagic);
    file += std::string("\x01\x00\x00\x00", 4) + std::string(4, '\0');
    putLe32(file, 12, static_cast<std::uint32_t>(deep.size()));
    file += deep;
    file += std::string(4, '\0');
    putLe32(file, file.size() - 4, crc(std::string_view(file).substr(0, file.size() - 4)));
    try {
        readTraceBytes(file);
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("nests deeper than 64 levels"), std::string::npos) << e.what();
    }
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    Trace patched = readTraceBytes(insertBeforeEnd(valid, chunk("META", 1, deep)));
    EXPECT_NE(patched.importStats().find("corrupt_chunk"), nullptr);
    EXPECT_FALSE(patched.metadata().contains("a"));
}

TEST(GmtFormat, DeviceOrdinalOutsideInt32IsMalformed)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()));
    // type cuda, ordinal zigzag(2^32) = 2^33 (varint 80 80 80 80 20), name 0, total 0.
    Trace t = readTraceBytes(insertBeforeEnd(valid, chunk("DEVS", 1, std::string("\x00\x80\x80\x80\x80\x20\x00\x00", 8))));
    EXPECT_EQ(t.devices().size(), 1u);
    EXPECT_NE(t.importStats().find("corrupt_chunk"), nullptr);
}

TEST(GmtFormat, ReportsProgressUpToOneAndCancels)
{
    auto path = tempPath("progress.gmt");
    writeGmt(readJsonl(dataFile("annotated_step.jsonl").string()), path.string(), 1);
    std::vector<double> seen;
    LoadOptions options;
    options.progress = [&](double f) {
        seen.push_back(f);
        return true;
    };
    readGmt(path.string(), options);
    ASSERT_GE(seen.size(), 2u);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_GE(seen.front(), 0.0);
    EXPECT_EQ(seen.back(), 1.0);
    options.progress = [](double) { return false; };
    EXPECT_THROW(readGmt(path.string(), options), Cancelled);
}

TEST(GmtFormat, ExtremeTimesAndValuesRoundTrip)
{
    // Kernel, annotation and counter times are delta-coded: extremes must wrap, not overflow.
    TraceBuilder b;
    b.alloc(std::numeric_limits<TimeNs>::min(), std::numeric_limits<Address>::max(), std::numeric_limits<Bytes>::max(), 1);
    b.free(std::numeric_limits<TimeNs>::max(), 0, 0);
    b.add(Kernel { std::numeric_limits<TimeNs>::max(), std::numeric_limits<TimeNs>::min(), 0, 0, b.intern("k"), ~0ull });
    b.add(Kernel { std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max(), 0, 0, b.intern("k"), 0 });
    b.add(Annotation { std::numeric_limits<TimeNs>::min(), std::numeric_limits<TimeNs>::max(), b.intern("a"), AnnotationKind::Range, kNoDevice, ~0ull });
    auto s = b.addCounterSeries(CounterSeries { b.intern("c"), 0 });
    b.add(CounterSample { std::numeric_limits<TimeNs>::max(), s, std::numeric_limits<std::int64_t>::min() });
    b.add(CounterSample { std::numeric_limits<TimeNs>::min(), s, std::numeric_limits<std::int64_t>::max() });
    Trace t = b.build();
    Trace back = readTraceBytes(gmtBytes(t));
    EXPECT_TRUE(back.importStats().empty());
    EXPECT_EQ(toJsonl(back), toJsonl(t));
    ASSERT_EQ(back.kernels().size(), 2u);
    EXPECT_EQ(back.kernels()[1].end, std::numeric_limits<TimeNs>::min());
}

TEST(GmtFormat, UsesEveryColumnEncodingAndSplitsLongRuns)
{
    // 2^20 + 5 events: the writer must split them (kGmtMaxEventsPerChunk) even when asked for one chunk.
    TraceBuilder b;
    b.device(DeviceType::Cuda, 0);
    b.stream(0, 0);
    auto& m = b.memoryColumns();
    const std::size_t n = kGmtMaxEventsPerChunk + 5;
    std::mt19937_64 rng(3);
    for (std::size_t i = 0; i < n; ++i) {
        MemoryEvent e;
        e.time = static_cast<TimeNs>(1000 * i);                            // linear
        e.kind = i % 2 ? EventKind::Free : EventKind::Alloc;               // raw, one byte each
        e.address = 0x7f0000000000 + (rng() % 4096) * 512;                 // delta or raw
        e.size = 512 * (1 + rng() % 64);                                   // raw
        e.requestedSize = e.size - rng() % 16;                             // diff from size
        e.thread = 42;                                                     // constant
        e.sequence = i;
        m.push(e);
    }
    Trace t = b.build();
    const std::string bytes = gmtBytes(t, std::numeric_limits<std::size_t>::max());
    std::set<int> encodings;
    std::vector<std::uint32_t> records;
    for (const auto& c : layout(bytes).chunks) {
        if (c.type != "MEMV")
            continue;
        records.push_back(c.records);
        // Column headers: encoding byte, varint length, data (spec §5).
        std::size_t at = c.offset + 16;
        for (int col = 0; col < 12; ++col) {
            encodings.insert(static_cast<unsigned char>(bytes[at++]));
            std::uint64_t len = 0;
            for (int shift = 0;; shift += 7) {
                auto byte = static_cast<unsigned char>(bytes[at++]);
                len |= std::uint64_t(byte & 0x7f) << shift;
                if (byte < 0x80)
                    break;
            }
            at += len;
        }
        EXPECT_EQ(at, c.end);
    }
    EXPECT_EQ(records, (std::vector<std::uint32_t> { kGmtMaxEventsPerChunk, 5 }));
    EXPECT_EQ(encodings, (std::set<int> { 0, 1, 2, 3, 4 })) << "const, raw, delta, linear, diff-size";
    Trace back = readTraceBytes(bytes);
    ASSERT_EQ(back.memory().count(), n);
    for (std::size_t i : { std::size_t(0), std::size_t(1), n / 2, n - 1 })
        EXPECT_EQ(back.memory().row(i), t.memory().row(i));
    EXPECT_EQ(back.memory().address, t.memory().address);
    EXPECT_EQ(back.memory().requestedSize, t.memory().requestedSize);
}

TEST(GmtFormat, WriterAppendsTablesAndEventsIncrementally)
{
    // The tracer's use: tables and events appended as they appear; a reader sees whole chunks only.
    auto path = tempPath("incremental.gmt");
    StringTable strings;
    strings.intern("NVIDIA H100 80GB HBM3");
    {
        GmtWriter w(path.string(), { { "tool", "gpumem-tracer" } });
        w.appendStrings(strings, 1, 1);
        w.appendDevices(std::vector<Device> { Device { DeviceType::Cuda, 0, 1, 85045379072 } });
        w.appendStreams(std::vector<Stream> { Stream { 0, 0, 0 } });
        MemoryEventColumns m;
        MemoryEvent e;
        e.address = 0x7f0000000000, e.size = 2 << 20, e.kind = EventKind::SegmentAlloc, e.sequence = 0;
        m.push(e);
        w.appendMemoryEvents(m, 0, 1);
        EXPECT_THROW(w.appendStrings(strings, 5, 1), Error);
        EXPECT_THROW(w.appendMetadataPatch(nlohmann::json::array()), Error); // its reader would refuse it
        w.appendMetadataPatch({ { "allocator_settings", "expandable_segments:True" } });
        // Not finished: the destructor writes the end chunk.
    }
    Trace t = readGmt(path.string());
    EXPECT_TRUE(t.importStats().empty());
    ASSERT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.str(t.devices()[0].name), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(t.metadata().value("tool", ""), "gpumem-tracer");
    EXPECT_EQ(t.metadata().value("allocator_settings", ""), "expandable_segments:True");
}

TEST(GmtFormat, OneFlippedBitInTheOnlyChunkIsAnErrorNamingTheOffset)
{
    // A header, one chunk and the end chunk; one bit of the chunk's payload flipped. This used to be
    // read as an empty trace with a corrupt_chunk anomaly (and `gpumem convert` exited 0).
    const std::string valid = gmtBytes(readJsonl(dataFile("annotated_step.jsonl").string()), 4);
    const std::string header = valid.substr(0, layout(valid).headerEnd);
    std::string file = header + chunk("ZZZZ", 0, "abcd") + chunk("END ", 0, std::string(1, '\0'));
    ASSERT_EQ(readTraceBytes(file).memory().count(), 0u); // unknown chunk types are skipped: it reads
    file[header.size() + 16] ^= 0x04;
    try {
        readTraceBytes(file);
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_EQ(std::string(e.what()),
            "test.gmt: checksum mismatch in chunk ZZZZ at offset " + std::to_string(header.size())
                + ": the rest of the file is ignored; not one chunk could be read (the file is damaged or was cut "
                  "before its first chunk)");
    }
}

// A file whose device and table chunks survive but whose memory chunks do not must not read as an
// empty trace (the fresh-user review: `gpumem info` printed 0 memory events and exited 0).
TEST(GmtFormat, DamageInOrBeforeTheFirstMemoryChunkIsAnErrorWhenNoMemoryEventSurvives)
{
    const std::string valid = gmtBytes(readJsonl(dataFile("tiny_alloc_free.jsonl").string()), 4); // MEMV of 4, 4, 2
    const Layout l = layout(valid);
    ASSERT_EQ(l.chunks.size(), 7u);
    ASSERT_EQ(l.chunks[1].type, "DEVS");
    ASSERT_EQ(l.chunks[2].type, "STRM");
    ASSERT_EQ(l.chunks[3].type, "MEMV");
    const std::size_t strm = l.chunks[2].offset, memv = l.chunks[3].offset, end = l.chunks[6].offset;
    auto message = [&](const std::string& bytes) {
        try {
            readTraceBytes(bytes);
        } catch (const FormatError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const std::string tail = "; not one memory event could be read, yet the file holds some (";
    const std::string cause = "): it is damaged or was cut in or before its first MEMV chunk";

    // One bit flipped in the first MEMV chunk's payload.
    std::string flipped = valid;
    flipped[memv + 16 + 2] ^= 0x10;
    EXPECT_EQ(message(flipped),
        "test.gmt: checksum mismatch in chunk MEMV at offset " + std::to_string(memv) + ": the rest of the file is ignored" + tail
            + "the chunk at offset " + std::to_string(memv) + " is a MEMV chunk" + cause);

    // One bit flipped in the stream table before it: the intact MEMV chunk after it is the evidence.
    std::string table = valid;
    table[strm + 16] ^= 0x01;
    EXPECT_EQ(message(table),
        "test.gmt: checksum mismatch in chunk STRM at offset " + std::to_string(strm) + ": the rest of the file is ignored" + tail
            + "a whole MEMV chunk of 4 events follows at offset " + std::to_string(memv) + cause);

    // The stream table's length damaged (it now runs past the end): found by scanning, not by lengths.
    std::string length = valid;
    putLe32(length, strm + 4, 1u << 30);
    EXPECT_EQ(message(length),
        "test.gmt: the file ends at offset " + std::to_string(valid.size()) + " inside chunk STRM at offset " + std::to_string(strm)
            + " (1073741824 payload bytes announced)" + tail + "a whole MEMV chunk of 4 events follows at offset " + std::to_string(memv)
            + cause);

    // Cut inside the first MEMV chunk.
    EXPECT_EQ(message(valid.substr(0, memv + 20)),
        "test.gmt: the file ends at offset " + std::to_string(memv + 20) + " inside chunk MEMV at offset " + std::to_string(memv) + " ("
            + std::to_string(l.chunks[3].end - memv - 16) + " payload bytes announced)" + tail + "the chunk at offset " + std::to_string(memv)
            + " is a MEMV chunk" + cause);

    // Every MEMV chunk removed: the end chunk still counts 10 events.
    std::string removed = valid.substr(0, memv) + valid.substr(end);
    EXPECT_EQ(message(removed),
        "test.gmt: the end chunk at offset " + std::to_string(memv) + " counts 10 memory events but the chunks before it hold 0 (a chunk was "
            "lost or skipped)" + tail + "its end chunk at offset " + std::to_string(memv) + " counts 10 memory events" + cause);

    // No sign of memory events: a writer killed after its tables (cut at a chunk boundary) reads as what it is.
    Trace tables = readTraceBytes(valid.substr(0, memv));
    EXPECT_EQ(tables.memory().count(), 0u);
    EXPECT_EQ(tables.devices().size(), 1u);
    ASSERT_NE(tables.importStats().find("truncated"), nullptr);

    // A cut or damage after the first MEMV chunk keeps what was read.
    std::string later = valid;
    later[l.chunks[4].offset + 16 + 2] ^= 0x10;
    Trace kept = readTraceBytes(later);
    EXPECT_EQ(kept.memory().count(), 4u);
    EXPECT_NE(kept.importStats().find("corrupt_chunk"), nullptr);
}

// ---- 1.1: pools and empty_cache (spec §4.8, §5.1) ----

// tests/data/mempool_release.jsonl holds a MemPool (pool 1), events of it and an empty_cache of it.
TEST(GmtFormat, PoolsAndEmptyCacheGoInChunksA10ReaderSkips)
{
    const Trace t = readJsonl(dataFile("mempool_release.jsonl").string());
    const std::string bytes = gmtBytes(t);
    EXPECT_EQ(bytes[10], 1); // minor version 1
    Layout l = layout(bytes);
    std::vector<std::string> types;
    for (const auto& c : l.chunks)
        types.push_back(c.type);
    ASSERT_NE(std::find(types.begin(), types.end(), "POOL"), types.end());
    auto memv = std::find(types.begin(), types.end(), "MEMV");
    ASSERT_NE(memv, types.end());
    ASSERT_NE(memv + 1, types.end());
    EXPECT_EQ(*(memv + 1), "MEVX"); // right after its MEMV chunk
    // What a 1.0 reader reads: the file without the chunks it does not know. The empty_cache is a
    // marker there and every event is of the default pool; nothing else changes.
    std::string old = bytes;
    for (auto c = l.chunks.rbegin(); c != l.chunks.rend(); ++c)
        if (c->type == "POOL" || c->type == "MEVX")
            old.erase(c->offset, c->end - c->offset);
    const Trace read = readTraceBytes(old);
    ASSERT_EQ(read.memory().count(), t.memory().count());
    EXPECT_EQ(read.pools().size(), 1u);
    for (std::size_t i = 0; i < t.memory().count(); ++i) {
        EXPECT_EQ(read.memory().pool[i], 0u);
        EXPECT_EQ(read.memory().kind[i], t.memory().kind[i] == EventKind::EmptyCache ? EventKind::Marker : t.memory().kind[i]);
    }
    // The whole file reads back exactly, also one event per chunk (a MEVX after each MEMV with a pool).
    EXPECT_EQ(toJsonl(readTraceBytes(bytes)), toJsonl(t));
    EXPECT_EQ(toJsonl(readTraceBytes(gmtBytes(t, 1))), toJsonl(t));
}

TEST(GmtFormat, AFileWithoutPoolsWritesNoNewChunkAndReadsAsVersion10)
{
    const Trace t = readJsonl(dataFile("tiny_alloc_free.jsonl").string());
    std::string bytes = gmtBytes(t);
    for (const auto& c : layout(bytes).chunks)
        EXPECT_TRUE(c.type != "POOL" && c.type != "MEVX") << c.type;
    bytes[10] = 0; // a 1.0 file: fix the header checksum, which covers the version
    const std::size_t headerEnd = layout(bytes).headerEnd;
    putLe32(bytes, headerEnd - 4, crc(std::string_view(bytes).substr(0, headerEnd - 4)));
    const Trace read = readTraceBytes(bytes);
    EXPECT_TRUE(read.importStats().empty());
    EXPECT_EQ(toJsonl(read), toJsonl(t));
    EXPECT_EQ(read.memory().pool.size(), read.memory().count());
}

TEST(GmtFormat, AMevxChunkNotRightAfterItsMemvChunkIsMalformed)
{
    const Trace t = readJsonl(dataFile("mempool_release.jsonl").string());
    const std::string bytes = gmtBytes(t);
    Layout l = layout(bytes);
    std::size_t mevx = 0;
    while (l.chunks[mevx].type != "MEVX")
        ++mevx;
    // Moved to just before the end chunk, after the other chunks: it no longer follows a MEMV chunk.
    std::string moved = bytes.substr(0, l.chunks[mevx].offset) + bytes.substr(l.chunks[mevx].end);
    const std::string mevxChunk = bytes.substr(l.chunks[mevx].offset, l.chunks[mevx].end - l.chunks[mevx].offset);
    moved = insertBeforeEnd(moved, chunk("ZZZZ", 0, "x") + mevxChunk);
    const Trace read = readTraceBytes(moved);
    ASSERT_NE(read.importStats().find("corrupt_chunk"), nullptr);
    EXPECT_NE(read.importStats().find("corrupt_chunk")->detail.find("malformed MEVX chunk"), std::string::npos);
}
