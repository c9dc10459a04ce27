// Memory event sources (core/event_source.h): the chunks of a pass put together are the trace's
// memory columns, on every hand-written trace of tests/data, whatever the chunk size.
#include "core/error.h"
#include "core/event_source.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>
#include <zlib.h>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> dataTraces()
{
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / "tests/data"))
        if (e.path().extension() == ".jsonl")
            paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    return paths;
}

// Every event of every pass, appended in order; checks that firstIndex follows on.
MemoryEventColumns concatenate(const MemoryEventSource& source, std::size_t* chunks = nullptr)
{
    MemoryEventColumns all;
    std::size_t n = 0;
    source.forEachChunk([&](const MemoryEventColumns& chunk, std::uint64_t first) {
        EXPECT_EQ(first, all.count());
        EXPECT_GT(chunk.count(), 0u);
        for (std::size_t i = 0; i < chunk.count(); ++i)
            all.push(chunk.row(i));
        ++n;
    });
    if (chunks)
        *chunks = n;
    return all;
}

// "code severity count detail" per anomaly, one a line.
std::string anomalyText(const ImportStats& stats)
{
    std::string s;
    for (const auto& a : stats.anomalies())
        s += a.code + " " + std::to_string(static_cast<int>(a.severity)) + " " + std::to_string(a.count) + " " + a.detail + "\n";
    return s;
}

void expectSameEvents(const MemoryEventColumns& a, const MemoryEventColumns& b, const std::string& what)
{
    ASSERT_EQ(a.count(), b.count()) << what;
    for (std::size_t i = 0; i < a.count(); ++i)
        ASSERT_EQ(a.row(i), b.row(i)) << what << ": event " << i;
}

// The tables of the skeleton are the trace's; it holds no memory event.
void expectSkeletonOf(const Trace& skeleton, const Trace& trace, bool kernels, const std::string& what)
{
    EXPECT_EQ(skeleton.memory().count(), 0u) << what;
    EXPECT_TRUE(skeleton.allocations().empty()) << what;
    EXPECT_EQ(skeleton.metadata(), trace.metadata()) << what;
    ASSERT_EQ(skeleton.strings().size(), trace.strings().size()) << what;
    for (std::size_t i = 0; i < trace.strings().size(); ++i)
        EXPECT_EQ(skeleton.str(static_cast<StringId>(i)), trace.str(static_cast<StringId>(i))) << what;
    EXPECT_EQ(skeleton.devices().size(), trace.devices().size()) << what;
    EXPECT_EQ(skeleton.streams().size(), trace.streams().size()) << what;
    EXPECT_EQ(skeleton.frames().size(), trace.frames().size()) << what;
    EXPECT_EQ(skeleton.scopes().size(), trace.scopes().size()) << what;
    ASSERT_EQ(skeleton.siteCount(), trace.siteCount()) << what;
    for (std::size_t s = 0; s < trace.siteCount(); ++s) {
        auto x = skeleton.siteFrames(static_cast<SiteId>(s)), y = trace.siteFrames(static_cast<SiteId>(s));
        EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << what << ": site " << s;
    }
    EXPECT_TRUE(std::equal(skeleton.pools().begin(), skeleton.pools().end(), trace.pools().begin(), trace.pools().end())) << what;
    EXPECT_TRUE(std::equal(skeleton.annotations().begin(), skeleton.annotations().end(), trace.annotations().begin(),
        trace.annotations().end())) << what;
    EXPECT_TRUE(std::equal(skeleton.counterSamples().begin(), skeleton.counterSamples().end(), trace.counterSamples().begin(),
        trace.counterSamples().end())) << what;
    EXPECT_EQ(skeleton.counterSeries().size(), trace.counterSeries().size()) << what;
    EXPECT_EQ(anomalyText(skeleton.importStats()), anomalyText(trace.importStats())) << what;
    if (kernels)
        EXPECT_TRUE(std::equal(skeleton.kernels().begin(), skeleton.kernels().end(), trace.kernels().begin(), trace.kernels().end()))
            << what;
    else
        EXPECT_TRUE(skeleton.kernels().empty()) << what;
}

TEST(MemorySource, SlicesPutTogetherAreTheTraceOnEveryDataTrace)
{
    const auto paths = dataTraces();
    ASSERT_GE(paths.size(), 20u);
    for (const auto& path : paths) {
        const Trace trace = readJsonl(path.string());
        for (std::size_t chunk : { std::size_t(1), std::size_t(7), std::size_t(65536) }) {
            const std::string what = path.filename().string() + " in slices of " + std::to_string(chunk);
            auto source = memorySource(trace, chunk);
            EXPECT_EQ(source->eventCount(), trace.memory().count()) << what;
            EXPECT_EQ(source->kernelCount(), trace.kernels().size()) << what;
            std::size_t chunks = 0;
            expectSameEvents(concatenate(*source, &chunks), trace.memory(), what);
            EXPECT_EQ(chunks, (trace.memory().count() + chunk - 1) / chunk) << what;
            expectSameEvents(concatenate(*source), trace.memory(), what + ", second pass");
            expectSkeletonOf(source->skeleton(), trace, true, what);
        }
    }
}

TEST(MemorySource, ChunkSizeZeroMeansOneEventAChunk)
{
    const Trace trace = readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/tiny_alloc_free.jsonl");
    ASSERT_GT(trace.memory().count(), 1u);
    std::size_t chunks = 0;
    expectSameEvents(concatenate(*memorySource(trace, 0), &chunks), trace.memory(), "tiny_alloc_free");
    EXPECT_EQ(chunks, trace.memory().count());
}

TEST(MemorySource, AVisitorThatThrowsLeavesTheSourceUsable)
{
    const Trace trace = readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/two_devices_streams.jsonl");
    auto source = memorySource(trace, 2);
    EXPECT_THROW(source->forEachChunk([](const MemoryEventColumns&, std::uint64_t) { throw std::runtime_error("stop"); }),
        std::runtime_error);
    expectSameEvents(concatenate(*source), trace.memory(), "after a throwing pass");
}

// ----------------------------------------------------------------------------------- openGmtSource

fs::path tempDir()
{
    auto dir = fs::temp_directory_path() / ("gpumem_event_source_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}

std::string fileBytes(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return { std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>() };
}

void writeFile(const fs::path& path, std::string_view bytes)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Kernel> byStart(std::vector<Kernel> k)
{
    std::stable_sort(k.begin(), k.end(), [](const Kernel& x, const Kernel& y) { return x.start < y.start; });
    return k;
}

// withGmtSource(path) — the checks of the MEMV and MEVX chunks deferred to the first pass, and the file opened
// again with the checks at open when one fails there — reads what readGmt(path) read into `trace`: the same
// events, tables and anomalies.
void expectDeferredReadsAsReadGmt(const fs::path& path, const Trace& trace, const std::string& what)
{
    bool reopened = false;
    int calls = 0;
    try {
        withGmtSource(path.string(), {}, [&](const MemoryEventSource& source) {
            reopened = ++calls > 1;
            expectSameEvents(concatenate(source), trace.memory(), what + " (deferred checks)");
            EXPECT_EQ(source.eventCount(), trace.memory().count()) << what << " (deferred checks)";
            expectSkeletonOf(source.skeleton(), trace, false, what + " (deferred checks)");
            return 0;
        });
    } catch (const Error& e) {
        ADD_FAILURE() << what << " (deferred checks): " << e.what();
    }
    // A file that reads without a damaged chunk or unsorted events is read once: the deferred checks passed.
    const bool clean = !trace.importStats().find("corrupt_chunk") && !trace.importStats().find("unsorted_input");
    EXPECT_TRUE(!clean || !reopened) << what << " (deferred checks: a clean file was opened twice)";
}

// openGmtSource(path) reads what readGmt(path) reads: the same error, or the same events, tables,
// kernels and anomalies. Returns whether the file was readable.
bool expectSourceReadsAsReadGmt(const fs::path& path, const std::string& what)
{
    std::string readError, sourceError;
    Trace trace;
    std::unique_ptr<MemoryEventSource> source;
    try {
        trace = readGmt(path.string());
    } catch (const Error& e) {
        readError = e.what();
    }
    try {
        source = openGmtSource(path.string());
    } catch (const Error& e) {
        sourceError = e.what();
    }
    EXPECT_EQ(sourceError, readError) << what;
    if (!readError.empty() || !source)
        return false;
    EXPECT_EQ(source->eventCount(), trace.memory().count()) << what;
    expectSameEvents(concatenate(*source), trace.memory(), what);
    expectSkeletonOf(source->skeleton(), trace, false, what);
    EXPECT_EQ(source->kernelCount(), trace.kernels().size()) << what;
    std::vector<Kernel> kernels;
    source->forEachKernelChunk([&](std::span<const Kernel> run) { kernels.insert(kernels.end(), run.begin(), run.end()); });
    EXPECT_EQ(byStart(kernels), std::vector<Kernel>(trace.kernels().begin(), trace.kernels().end())) << what;
    expectDeferredReadsAsReadGmt(path, trace, what);
    return true;
}

TEST(GmtSource, ReadsEveryDataTraceAsReadGmtInChunksOfFiveEvents)
{
    const auto dir = tempDir();
    std::size_t withKernels = 0, withPools = 0, multiChunk = 0;
    for (const auto& path : dataTraces()) {
        const Trace trace = readJsonl(path.string());
        const fs::path gmt = dir / (path.stem().string() + ".gmt");
        writeGmt(trace, gmt.string(), 5);
        expectSourceReadsAsReadGmt(gmt, path.filename().string());
        auto source = openGmtSource(gmt.string());
        std::size_t chunks = 0;
        expectSameEvents(concatenate(*source, &chunks), trace.memory(), path.filename().string() + " against the .jsonl");
        EXPECT_EQ(chunks, (trace.memory().count() + 4) / 5) << path;
        withKernels += !trace.kernels().empty();
        withPools += trace.pools().size() > 1;
        multiChunk += chunks > 1;
    }
    // The corpus exercises KERN chunks, MEVX chunks (pools, empty_cache) and chunk boundaries.
    EXPECT_GE(withKernels, 2u);
    EXPECT_GE(withPools, 1u);
    EXPECT_GE(multiChunk, 9u);
    fs::remove_all(dir);
}

TEST(GmtSource, ACutFileReadsAsReadGmtAtEveryOffset)
{
    const auto dir = tempDir();
    const fs::path whole = dir / "whole.gmt", cut = dir / "cut.gmt";
    writeGmt(readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/annotated_step.jsonl"), whole.string(), 4);
    const std::string bytes = fileBytes(whole);
    std::size_t readable = 0;
    for (std::size_t at = 0; at <= bytes.size(); ++at) {
        writeFile(cut, std::string_view(bytes).substr(0, at));
        readable += expectSourceReadsAsReadGmt(cut, "cut at " + std::to_string(at) + " of " + std::to_string(bytes.size()));
    }
    EXPECT_GT(readable, bytes.size() / 2); // most cuts keep the chunks before them
    fs::remove_all(dir);
}

TEST(GmtSource, ADamagedByteReadsAsReadGmtWhereverItIs)
{
    const auto dir = tempDir();
    const fs::path whole = dir / "whole.gmt", damaged = dir / "damaged.gmt";
    writeGmt(readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/mempool_release.jsonl"), whole.string(), 3);
    const std::string bytes = fileBytes(whole);
    std::mt19937 random(22);
    for (std::size_t at = 0; at < bytes.size(); ++at) {
        std::string copy = bytes;
        copy[at] = static_cast<char>(copy[at] ^ (1 + random() % 255));
        writeFile(damaged, copy);
        expectSourceReadsAsReadGmt(damaged, "byte " + std::to_string(at) + " of " + std::to_string(bytes.size()) + " damaged");
    }
    fs::remove_all(dir);
}

// Rewrites the checksum of the chunk at `at` (16-byte header: type, length, records, CRC-32 of the first 12
// header bytes and the payload), so that a damaged payload passes it.
void fixChecksum(std::string& bytes, std::size_t at)
{
    auto u32 = [&](std::size_t o) {
        const auto* u = reinterpret_cast<const unsigned char*>(bytes.data() + o);
        return std::uint32_t(u[0]) | std::uint32_t(u[1]) << 8 | std::uint32_t(u[2]) << 16 | std::uint32_t(u[3]) << 24;
    };
    const std::uint32_t length = u32(at + 4);
    uLong c = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data() + at), 12);
    c = crc32(c, reinterpret_cast<const Bytef*>(bytes.data() + at + 16), length);
    for (int k = 0; k < 4; ++k)
        bytes[at + 12 + static_cast<std::size_t>(k)] = static_cast<char>((c >> (8 * k)) & 0xff);
}

// The offsets of the chunks of type `type` (a .gmt: 16-byte fixed header with the metadata length at 12,
// the metadata, a 4-byte checksum, then chunks).
std::vector<std::size_t> chunksOfType(const std::string& bytes, std::string_view type)
{
    auto u32 = [&](std::size_t o) {
        const auto* u = reinterpret_cast<const unsigned char*>(bytes.data() + o);
        return std::uint32_t(u[0]) | std::uint32_t(u[1]) << 8 | std::uint32_t(u[2]) << 16 | std::uint32_t(u[3]) << 24;
    };
    std::vector<std::size_t> found;
    for (std::size_t at = 16 + u32(12) + 4; at + 16 <= bytes.size(); at += 16 + u32(at + 4))
        if (std::string_view(bytes.data() + at, 4) == type)
            found.push_back(at);
    return found;
}

// A MEMV payload damaged under a valid checksum passes the deferred opening and fails in the first pass,
// which throws DeferredCheckFailed; withGmtSource then reads the file as readGmt does (the chunk and
// what follows it dropped, a corrupt_chunk anomaly; or, where the time column is out of order, the events
// sorted). Every byte of the second MEMV chunk's payload in turn.
TEST(GmtSource, AMalformedChunkUnderAValidChecksumFailsTheDeferredCheckAndReadsAsReadGmt)
{
    const auto dir = tempDir();
    const fs::path whole = dir / "whole.gmt", damaged = dir / "damaged.gmt";
    writeGmt(readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/mempool_release.jsonl"), whole.string(), 3);
    const std::string bytes = fileBytes(whole);
    const auto memv = chunksOfType(bytes, "MEMV");
    ASSERT_GE(memv.size(), 3u);
    const std::size_t begin = memv[1] + 16, end = begin + static_cast<unsigned char>(bytes[memv[1] + 4])
        + 256 * static_cast<unsigned char>(bytes[memv[1] + 5]); // the payload (under 64 KiB here)
    ASSERT_LE(end, memv[2]);
    std::size_t failedInPass = 0, malformed = 0, unsorted = 0;
    for (std::size_t at = begin; at < end; ++at) {
        std::string copy = bytes;
        copy[at] = static_cast<char>(0xff); // a continuation byte: a varint runs on, a count or reference breaks
        fixChecksum(copy, memv[1]);
        writeFile(damaged, copy);
        const std::string what = "byte " + std::to_string(at) + " of the second MEMV payload set to 0xff";
        bool readable = true;
        try {
            const Trace read = readGmt(damaged.string());
            malformed += read.importStats().find("corrupt_chunk") != nullptr;
            unsorted += read.importStats().find("unsorted_input") != nullptr;
        } catch (const Error&) {
            readable = false;
        }
        if (readable) {
            auto deferred = openGmtSource(damaged.string(), {}, GmtChecks::InFirstPass); // the payload is not read
            try {
                concatenate(*deferred);
            } catch (const DeferredCheckFailed&) {
                ++failedInPass;
            }
        }
        expectSourceReadsAsReadGmt(damaged, what);
    }
    EXPECT_GT(malformed, (end - begin) / 4); // many such bytes make the chunk malformed, not merely different
    EXPECT_GT(unsorted, 0u);                 // some (in the time column) put the events out of order
    EXPECT_EQ(failedInPass, malformed + unsorted); // and the deferred checks find each of those in the pass
    fs::remove_all(dir);
}

// A table chunk after the memory chunk whose references need it: readGmt refuses the memory chunk (its
// references must point at rows read before it), and so must a source whose checks are deferred to the
// pass: it checks each chunk against the tables read before it, not the whole file's (review, 2026-12-02:
// it accepted such a file whole). STRM moved after MEMV, POOL after MEVX; whole chunks move, so every
// checksum stays valid.
TEST(GmtSource, ATableChunkAfterTheMemoryChunkThatNeedsItReadsAsReadGmt)
{
    const auto dir = tempDir();
    struct Case {
        const char* trace;
        std::string_view table, after;
    };
    for (const Case& c : { Case { "two_devices_streams.jsonl", "STRM", "MEMV" }, Case { "mempool_release.jsonl", "POOL", "MEVX" } }) {
        const fs::path whole = dir / "whole.gmt", moved = dir / "moved.gmt";
        writeGmt(readJsonl(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/" + c.trace), whole.string());
        const std::string bytes = fileBytes(whole);
        const auto table = chunksOfType(bytes, c.table), after = chunksOfType(bytes, c.after);
        ASSERT_EQ(table.size(), 1u) << c.trace;
        ASSERT_FALSE(after.empty()) << c.trace;
        ASSERT_LT(table.front(), after.front()) << c.trace;
        auto chunkBytes = [&](std::size_t at) {
            const auto* u = reinterpret_cast<const unsigned char*>(bytes.data() + at + 4);
            return 16 + (std::size_t(u[0]) | std::size_t(u[1]) << 8 | std::size_t(u[2]) << 16 | std::size_t(u[3]) << 24);
        };
        // The table chunk cut out and put back right after the first chunk of type `after`.
        const std::size_t t = table.front(), tn = chunkBytes(t), a = after.front(), an = chunkBytes(a);
        const std::string reordered = bytes.substr(0, t) + bytes.substr(t + tn, a + an - (t + tn)) + bytes.substr(t, tn) + bytes.substr(a + an);
        ASSERT_EQ(reordered.size(), bytes.size());
        writeFile(moved, reordered);
        bool refused = false;
        try {
            refused = readGmt(moved.string()).importStats().find("corrupt_chunk") != nullptr;
        } catch (const FormatError&) {
            refused = true;
        }
        EXPECT_TRUE(refused) << c.trace << ": readGmt read a " << c.after << " chunk before the " << c.table << " it needs";
        expectSourceReadsAsReadGmt(moved, std::string(c.trace) + " with " + std::string(c.table) + " after " + std::string(c.after));
    }
    fs::remove_all(dir);
}

TEST(GmtSource, EventsOutOfOrderAreSortedAsReadGmtSortsThem)
{
    const auto dir = tempDir();
    const fs::path gmt = dir / "unsorted.gmt";
    TraceBuilder b;
    b.alloc(100, 0x1000, 512);
    b.free(300, 0x1000, 512);
    b.alloc(200, 0x2000, 256); // before the free above in time, after it in the file
    const Trace sorted = b.build();
    ASSERT_NE(sorted.importStats().find("unsorted_input"), nullptr);
    {
        GmtWriter w(gmt.string(), nlohmann::json::object());
        w.appendDevices(sorted.devices());
        w.appendStreams(sorted.streams());
        // The events as they arrived: file order 100, 300, 200, in two chunks.
        MemoryEventColumns arrival;
        arrival.push(sorted.memory().row(0));
        arrival.push(sorted.memory().row(2));
        arrival.push(sorted.memory().row(1));
        w.appendMemoryEvents(arrival, 0, 2);
        w.appendMemoryEvents(arrival, 2, 3);
        w.finish();
    }
    ASSERT_TRUE(expectSourceReadsAsReadGmt(gmt, "unsorted"));
    auto source = openGmtSource(gmt.string());
    EXPECT_EQ(source->skeleton().importStats().count("unsorted_input"), 2u);
    // With the checks deferred, the opening cannot know; the first pass finds the order broken in the second
    // chunk (a visitor sees the first chunk only) and throws.
    auto deferred = openGmtSource(gmt.string(), {}, GmtChecks::InFirstPass);
    std::size_t visited = 0;
    EXPECT_THROW(deferred->forEachChunk([&](const MemoryEventColumns&, std::uint64_t) { ++visited; }), DeferredCheckFailed);
    EXPECT_EQ(visited, 1u);
    fs::remove_all(dir);
}

} // namespace
