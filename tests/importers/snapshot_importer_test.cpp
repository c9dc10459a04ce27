// Tests of the PyTorch memory-snapshot importer: the public snapshots of SOURCES.md §3 (counts, and the
// reconstructed state replayed to the recorded `segments`), a hand-made JSON snapshot that exercises
// every reconstruction rule, and hostile input.
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "importers/snapshot_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>

using namespace gpumem;

namespace {

std::string publicTrace(const std::string& relative) { return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative; }

#define REQUIRE_PUBLIC(path)                                                                                           \
    if (!std::filesystem::exists(path))                                                                                \
    GTEST_SKIP() << "public trace " << path << " is absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)"

std::array<std::size_t, kEventKindCount> countKinds(const Trace& t)
{
    std::array<std::size_t, kEventKindCount> n {};
    for (auto k : t.memory().kind)
        ++n[static_cast<std::size_t>(k)];
    return n;
}
std::size_t count(const Trace& t, EventKind kind) { return countKinds(t)[static_cast<std::size_t>(kind)]; }

// What SOURCES.md §3 states for each snapshot, plus what the reconstruction must rebuild.
struct PublicSnapshot {
    const char* path;
    const char* generation;
    std::size_t segments, blocks, activeBlocks;
    std::size_t entries, allocs, frees, freeCompleted, segmentAllocs;
    std::size_t unmatchedFreesInTrace; // frees in the trace without an alloc in the trace
    std::size_t preSegments, preBlocks, prePending;
    std::size_t annotations;
    Bytes reserved;
};

const PublicSnapshot kPublic[] = {
    { "cs336-bcrafton/memory_snapshot.pickle", "D", 96, 550, 447, 6486, 2162, 2162, 2162, 0, 222, 96, 447, 0, 1,
        4238344192 },
    { "cs336-magma27/memory_snapshot.pickle", "D", 216, 455, 229, 5163, 1721, 1721, 1721, 0, 2, 216, 229, 0, 0,
        14180941824 },
    { "cs336-silmont2000/mem_snapshot.pickle", "C", 9, 20, 10, 97, 36, 26, 26, 9, 0, 0, 0, 0, 0, 3781165056 },
    { "cs336-silmont2000/memory_forward_bf16_128.pickle", "C", 43, 178, 137, 2811, 937, 937, 937, 0, 0, 43, 137, 0, 1,
        861929472 },
    { "flexgen-llm-inference/1.3b_snapshot.pickle", "A", 257, 948, 785, 1, 0, 0, 1, 0, 0, 257, 786, 1, 0, 7608467456 },
};

void PrintTo(const PublicSnapshot& p, std::ostream* os) { *os << p.path; }

std::string paramName(const ::testing::TestParamInfo<PublicSnapshot>& info)
{
    std::string n = info.param.path;
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return n;
}

// Each test reads one public snapshot in place; absent files skip the test.
class PublicSnapshots : public ::testing::TestWithParam<PublicSnapshot> {
protected:
    void SetUp() override
    {
        m_path = publicTrace(GetParam().path);
        m_name = paramName({ GetParam(), 0 });
        REQUIRE_PUBLIC(m_path);
    }
    std::string m_path;
    std::string m_name;
};

void expectSameMemory(const Trace& a, const Trace& b)
{
    const auto& x = a.memory();
    const auto& y = b.memory();
    ASSERT_EQ(x.count(), y.count());
    EXPECT_EQ(x.time, y.time);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.device, y.device);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(x.address, y.address);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.requestedSize, y.requestedSize);
    EXPECT_EQ(x.site, y.site);
    EXPECT_EQ(x.sequence, y.sequence);
}

std::filesystem::path tempFile(const std::string& name)
{
    auto dir = std::filesystem::temp_directory_path() / ("gpumem_snapshot_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / name;
}

} // namespace

TEST_P(PublicSnapshots, ImportsWithTheCountsOfSourcesMd)
{
    const auto& p = GetParam();
    const std::string& path = m_path;
    const Importer* importer = detectFormat(path);
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "pytorch-snapshot");
    Trace t = loadTrace(path);
    EXPECT_EQ(t.metadata()["source_format"], "pytorch-snapshot");
    EXPECT_EQ(t.metadata()["snapshot_generation"], p.generation);
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].type, DeviceType::Cuda);
    EXPECT_EQ(t.devices()[0].ordinal, 0);

    PickleDocument doc = readSnapshotDocument(path);
    auto segments = snapshotSegments(doc);
    ASSERT_EQ(segments.size(), p.segments);
    std::size_t blocks = 0, active = 0;
    Bytes reserved = 0;
    for (const auto& s : segments) {
        reserved += s.totalSize;
        Address cursor = s.address;
        for (const auto& b : s.blocks) {
            EXPECT_EQ(b.address, cursor) << "blocks tile the segment";
            cursor += b.size;
            ++blocks;
            active += b.state != SnapshotBlockState::Inactive;
        }
        EXPECT_EQ(cursor, s.address + s.totalSize);
    }
    EXPECT_EQ(blocks, p.blocks);
    EXPECT_EQ(active, p.activeBlocks);
    EXPECT_EQ(reserved, p.reserved);
    const auto& atDump = t.metadata()["segments_at_dump"];
    for (const char* column : { "device", "address", "total_size", "allocated_size", "active_size", "requested_size",
             "stream", "segment_type", "segment_pool_id", "is_expandable", "blocks" })
        EXPECT_EQ(atDump[column].size(), p.segments) << column;
    for (std::size_t i = 0; i < segments.size(); ++i) {
        EXPECT_EQ(atDump["address"][i], segments[i].address);
        EXPECT_EQ(atDump["total_size"][i], segments[i].totalSize);
        EXPECT_EQ(atDump["segment_type"][i], segments[i].small ? "small" : "large");
        EXPECT_EQ(atDump["blocks"][i], segments[i].blocks.size());
    }

    // Events: the trace's entries plus the reconstructed pre-window state.
    const auto& rec = t.metadata()["reconstruction"][0];
    EXPECT_EQ(rec["trace_entries"], p.entries);
    EXPECT_EQ(rec["segments_before_trace"], p.preSegments);
    EXPECT_EQ(rec["blocks_before_trace"], p.preBlocks);
    EXPECT_EQ(rec["pending_blocks_before_trace"], p.prePending);
    EXPECT_EQ(rec["blocks_sized_from_free"], p.unmatchedFreesInTrace + p.prePending);
    EXPECT_EQ(count(t, EventKind::Alloc), p.allocs + p.preBlocks);
    EXPECT_EQ(count(t, EventKind::Free), p.frees + p.prePending);
    EXPECT_EQ(count(t, EventKind::FreeCompleted), p.freeCompleted);
    EXPECT_EQ(count(t, EventKind::SegmentAlloc), p.segmentAllocs + p.preSegments);
    EXPECT_EQ(count(t, EventKind::SegmentFree) + count(t, EventKind::SegmentMap) + count(t, EventKind::SegmentUnmap)
            + count(t, EventKind::Oom) + count(t, EventKind::Marker),
        0u);
    EXPECT_EQ(t.memory().count(), p.entries + p.preSegments + p.preBlocks + p.prePending);

    // Pairing: with the pre-window state rebuilt, every free has its alloc and every block live at
    // the end is an active block of `segments`.
    EXPECT_EQ(t.stats().count("unmatched_free"), 0u);
    EXPECT_EQ(t.stats().count("alloc_at_live_address"), 0u);
    std::size_t liveAtEnd = 0;
    for (const auto& a : t.allocations())
        liveAtEnd += a.freeEvent == kNoIndex;
    EXPECT_EQ(liveAtEnd, p.activeBlocks);
    EXPECT_EQ(t.allocations().size(), p.allocs + p.preBlocks);
    for (const auto& anomaly : t.importStats().anomalies())
        EXPECT_EQ(anomaly.severity, Severity::Info) << anomaly.code << ": " << anomaly.detail;
    EXPECT_EQ(t.annotations().size(), p.annotations);
    if (std::string(p.generation) == "A")
        EXPECT_EQ(t.importStats().count("no_timestamps"), p.entries);
    else
        EXPECT_EQ(t.importStats().count("no_timestamps"), 0u);
}

TEST_P(PublicSnapshots, ReplayOfTheReconstructedStateEndsInTheRecordedSegments)
{
    const auto& p = GetParam();
    const std::string& path = m_path;
    Trace t = importPytorchSnapshot(path);
    ImportStats replayStats;
    auto replayed = replaySnapshotState(t, 0, &replayStats);
    auto recorded = snapshotSegments(readSnapshotDocument(path));
    EXPECT_TRUE(replayStats.empty()) << replayStats.anomalies().front().code << ": "
                                     << replayStats.anomalies().front().detail;
    auto diffs = compareSnapshotState(recorded, replayed);
    std::string all;
    for (const auto& d : diffs)
        all += d + "\n";
    EXPECT_TRUE(diffs.empty()) << all;
    EXPECT_EQ(replayed.size(), p.segments);
}

TEST_P(PublicSnapshots, GmtRoundTripKeepsEveryMemoryColumn)
{
    Trace t = importPytorchSnapshot(m_path);
    auto out = tempFile(m_name + ".gmt");
    writeGmt(t, out.string());
    Trace back = readGmt(out.string());
    expectSameMemory(t, back);
    EXPECT_EQ(back.metadata()["snapshot_generation"], t.metadata()["snapshot_generation"]);
    EXPECT_EQ(back.metadata()["segments_at_dump"], t.metadata()["segments_at_dump"]);
    EXPECT_EQ(back.siteCount(), t.siteCount());
    ASSERT_EQ(back.annotations().size(), t.annotations().size());
    std::filesystem::remove(out);
}

TEST_P(PublicSnapshots, TheSameDictSavedAsJsonImportsIdentically)
{
    const auto& p = GetParam();
    const std::string& path = m_path;
    PickleDocument doc = readSnapshotDocument(path);
    auto jsonPath = tempFile(m_name + ".json");
    {
        std::ofstream f(jsonPath);
        f << doc.toJson(doc.root()).dump();
    }
    const Importer* importer = detectFormat(jsonPath.string());
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "pytorch-snapshot");
    Trace fromJson = loadTrace(jsonPath.string());
    Trace fromPickle = importPytorchSnapshot(doc);
    expectSameMemory(fromPickle, fromJson);
    EXPECT_EQ(fromJson.metadata()["snapshot_generation"], p.generation);
    std::filesystem::remove(jsonPath);
}

INSTANTIATE_TEST_SUITE_P(SnapshotImporter, PublicSnapshots, ::testing::ValuesIn(kPublic), paramName);

TEST(SnapshotImporter, KeepsFramesAsSitesAndSettingsAsMetadata)
{
    const std::string path = publicTrace("cs336-bcrafton/memory_snapshot.pickle");
    REQUIRE_PUBLIC(path);
    Trace t = importPytorchSnapshot(path);
    EXPECT_EQ(t.metadata()["allocator_settings"]["max_split_size"], -1);
    EXPECT_EQ(t.metadata()["allocator_settings"]["graph_capture_record_stream_reuse"], false);
    EXPECT_EQ(t.metadata()["segments_at_dump"]["segment_pool_id"][0], nlohmann::json::parse("[0,0]"));
    EXPECT_EQ(t.metadata()["segments_at_dump"]["is_expandable"][0], false);
    // The first trace entry's innermost frame is PyTorch's unwinder (SOURCES.md shows the same).
    const auto& m = t.memory();
    std::size_t first = 0; // the first trace entry follows the pre-window events, 1 ns later
    while (m.time[first] == m.time[0])
        ++first;
    EXPECT_EQ(m.sequence[first], 0u);
    EXPECT_EQ(m.time[first], m.time[0] + 1);
    auto frames = t.siteFrames(m.site[first]);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "torch::unwind::unwind()");
    EXPECT_EQ(t.str(t.frames()[frames[0]].file), "??");
    // AdamW.step START/END became one range.
    ASSERT_EQ(t.annotations().size(), 1u);
    EXPECT_EQ(t.str(t.annotations()[0].name), "Optimizer.step#AdamW.step");
    EXPECT_EQ(t.annotations()[0].end - t.annotations()[0].start, (1773270053896695 - 1773270053883781) * 1000);
    EXPECT_EQ(m.time[first], 1773270053858957LL * 1000);
}

namespace {

// A generation-B snapshot (block addresses, no time_us) written by hand: one large segment with a
// block untouched by the trace, a pre-window block freed in the trace whose size must be grown over
// a 1 MiB gap, a block pending before the window, a segment created in the trace with an unsplit
// block, and an expandable segment mapped and unmapped in the trace.
constexpr Address kS1 = 0x7f0000000000;
constexpr Address kS2 = kS1 + 0x10000000;
constexpr Address kE = kS1 + 0x20000000;
constexpr Bytes kMiB = 1 << 20;

nlohmann::json handMadeSnapshot()
{
    using nlohmann::json;
    auto block = [](Address a, Bytes size, Bytes req, const char* state) {
        return json { { "address", a }, { "size", size }, { "requested_size", req }, { "state", state },
            { "frames", json::array() } };
    };
    auto entry = [](const char* action, Address a, Bytes size) {
        return json { { "action", action }, { "addr", a }, { "size", size }, { "stream", 0 },
            { "frames", json::array({ json { { "name", "f" }, { "filename", "m.py" }, { "line", 3 } } }) } };
    };
    json segs = json::array();
    segs.push_back(json { { "device", 0 }, { "address", kS1 }, { "total_size", 20 * kMiB }, { "stream", 0 },
        { "segment_type", "large" },
        { "blocks",
            json::array({ block(kS1, 4 * kMiB, 4 * kMiB, "active_allocated"),
                block(kS1 + 4 * kMiB, 2 * kMiB, 2 * kMiB - 100, "active_allocated"),
                block(kS1 + 6 * kMiB, 14 * kMiB, 0, "inactive") }) } });
    segs.push_back(json { { "device", 0 }, { "address", kS2 }, { "total_size", 20 * kMiB }, { "stream", 0 },
        { "segment_type", "large" },
        { "blocks", json::array({ block(kS2, 20 * kMiB, 39 * kMiB / 2, "active_allocated") }) } });
    segs.push_back(json { { "device", 0 }, { "address", kE }, { "total_size", 4 * kMiB }, { "stream", 0 },
        { "segment_type", "large" }, { "is_expandable", true },
        { "blocks",
            json::array({ block(kE, 2 * kMiB, 2 * kMiB, "active_allocated"),
                block(kE + 2 * kMiB, 3 * kMiB / 2, 3 * kMiB / 2, "active_allocated"),
                block(kE + 7 * kMiB / 2, kMiB / 2, 0, "inactive") }) } });
    json trace = json::array({
        entry("free_requested", kS1 + 8 * kMiB, 3 * kMiB),
        entry("free_completed", kS1 + 8 * kMiB, 3 * kMiB),
        entry("alloc", kS1 + 4 * kMiB, 2 * kMiB - 100),
        entry("free_completed", kS1 + 12 * kMiB, 3 * kMiB / 2),
        entry("segment_alloc", kS2, 20 * kMiB),
        entry("alloc", kS2, 39 * kMiB / 2),
        entry("segment_map", kE + 2 * kMiB, 2 * kMiB),
        entry("alloc", kE + 2 * kMiB, 3 * kMiB / 2),
        entry("segment_unmap", kE + 4 * kMiB, 2 * kMiB),
        json { { "action", "oom" }, { "device_free", 1024 }, { "size", 100 * kMiB }, { "stream", 0 } },
        json { { "action", "snapshot" }, { "addr", 0 }, { "size", 123 }, { "stream", 0 } },
        json { { "action", "user_defined" }, { "addr", 0 }, { "size", 0 }, { "stream", 0 } },
    });
    return json { { "segments", segs }, { "device_traces", json::array({ trace }) } };
}

Trace importJson(const nlohmann::json& j, const std::string& name)
{
    auto path = tempFile(name);
    {
        std::ofstream f(path);
        f << j.dump(1);
    }
    Trace t = loadTrace(path.string());
    std::filesystem::remove(path);
    return t;
}

} // namespace

TEST(SnapshotImporter, RebuildsInitialStateFromSegments)
{
    nlohmann::json j = handMadeSnapshot();
    Trace t = importJson(j, "handmade.json");
    EXPECT_EQ(t.metadata()["snapshot_generation"], "B");
    EXPECT_EQ(t.importStats().count("no_timestamps"), 11u);
    EXPECT_EQ(t.importStats().count("unknown_action"), 1u);
    const auto& rec = t.metadata()["reconstruction"][0];
    EXPECT_EQ(rec["segments_before_trace"], 3); // S1 and two mapped ranges of E
    EXPECT_EQ(rec["blocks_before_trace"], 4); // the untouched block, P, the pending Q, E's first block
    EXPECT_EQ(rec["pending_blocks_before_trace"], 1);
    EXPECT_EQ(rec["blocks_grown_unsplit"], 1);
    EXPECT_EQ(rec["trace_allocs_unsplit"], 1); // X below
    for (const auto& a : t.importStats().anomalies())
        EXPECT_EQ(a.severity, Severity::Info) << a.code << ": " << a.detail;

    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 8u + 11u);
    // The pre-window events come first, at time 0 (the entries are at index + 1 ns).
    std::vector<std::pair<EventKind, Address>> pre;
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(m.time[i], 0);
        pre.emplace_back(m.kind[i], m.address[i]);
    }
    std::vector<std::pair<EventKind, Address>> expected = {
        { EventKind::SegmentAlloc, kS1 },
        { EventKind::SegmentMap, kE },
        { EventKind::SegmentMap, kE + 4 * kMiB },
        // The pending Q first (alloc + free_requested), so it never counts as allocated at the pre-trace
        // instant (PyTorch drops allocated bytes at the user's free); then the allocated blocks.
        { EventKind::Alloc, kS1 + 12 * kMiB },
        { EventKind::Free, kS1 + 12 * kMiB },
        { EventKind::Alloc, kS1 },
        { EventKind::Alloc, kS1 + 8 * kMiB },
        { EventKind::Alloc, kE },
    };
    EXPECT_EQ(pre, expected);
    EXPECT_EQ(m.size[6], 4 * kMiB) << "3 MiB rounded, grown over the 1 MiB gap before Q";
    EXPECT_EQ(m.size[3], 3 * kMiB / 2);
    EXPECT_EQ(m.time[8], 1);
    EXPECT_EQ(m.sequence[8], 0u);
    // alloc B: 2 MiB − 100 rounds to 2 MiB and is split (14 MiB rest > 1 MiB).
    EXPECT_EQ(m.kind[10], EventKind::Alloc);
    EXPECT_EQ(m.size[10], 2 * kMiB);
    EXPECT_EQ(m.requestedSize[10], 2 * kMiB - 100);
    // alloc X: 19.5 MiB leaves 0.5 MiB, too little to split in the large pool: the block is 20 MiB.
    EXPECT_EQ(m.kind[13], EventKind::Alloc);
    EXPECT_EQ(m.size[13], 20 * kMiB);
    // alloc in the expandable segment: split at 512 B granularity.
    EXPECT_EQ(m.size[15], 3 * kMiB / 2);
    EXPECT_EQ(m.kind[17], EventKind::Oom);
    EXPECT_EQ(m.size[17], 100 * kMiB);
    EXPECT_EQ(m.kind[18], EventKind::Marker);
    EXPECT_EQ(m.size[18], 123u);
    EXPECT_EQ(m.sequence[18], 10u);
    EXPECT_EQ(t.siteFrames(m.site[10]).size(), 1u);

    ImportStats replayStats;
    auto replayed = replaySnapshotState(t, 0, &replayStats);
    EXPECT_TRUE(replayStats.empty());
    auto recorded = snapshotSegments(PickleDocument::fromJson(j, "handmade"));
    auto diffs = compareSnapshotState(recorded, replayed);
    EXPECT_TRUE(diffs.empty()) << (diffs.empty() ? "" : diffs.front());
}

TEST(SnapshotImporter, ReportsAnEndStateTheTraceDoesNotReach)
{
    nlohmann::json j = handMadeSnapshot();
    // The recorded state says B is 4 MiB, but the trace's alloc of 2 MiB − 100 was split to 2 MiB.
    j["segments"][0]["blocks"][1]["size"] = 4 * kMiB;
    j["segments"][0]["blocks"][2]["address"] = kS1 + 8 * kMiB;
    j["segments"][0]["blocks"][2]["size"] = 12 * kMiB;
    Trace t = importJson(j, "handmade_bad.json");
    auto diffs = compareSnapshotState(snapshotSegments(PickleDocument::fromJson(j, "bad")), replaySnapshotState(t, 0));
    ASSERT_EQ(diffs.size(), 1u);
    EXPECT_NE(diffs[0].find("block 1: [" + std::to_string(kS1 + 4 * kMiB) + ", +2097152) active_allocated, expected ["
                  + std::to_string(kS1 + 4 * kMiB) + ", +4194304) active_allocated"),
        std::string::npos)
        << diffs[0];
}

TEST(SnapshotImporter, SaturatesATimeThatOverflowsNanoseconds)
{
    // A corrupt time_us whose nanoseconds do not fit in int64 (found by the fuzzer: the multiply
    // was undefined behaviour) is saturated; the import goes on.
    nlohmann::json j = handMadeSnapshot();
    const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 10;
    for (auto& e : j["device_traces"][0])
        e["time_us"] = huge;
    Trace t = importJson(j, "handmade_huge_time.json");
    const auto& m = t.memory();
    ASSERT_GT(m.count(), 0u);
    std::size_t saturated = 0;
    for (std::size_t i = 0; i < m.count(); ++i)
        saturated += m.time[i] == std::numeric_limits<TimeNs>::max() ? 1 : 0;
    EXPECT_EQ(saturated, 11u); // the 12 entries but the unknown action
    EXPECT_EQ(m.time[0], std::numeric_limits<TimeNs>::max() - 1); // the pre-window state, 1 ns before
}

TEST(SnapshotImporter, CountsAnAllocTheEndStateDoesNotExplain)
{
    nlohmann::json j = handMadeSnapshot();
    j["segments"][1]["blocks"][0]["state"] = "inactive"; // X is allocated in the trace but never freed
    Trace t = importJson(j, "handmade_unexplained.json");
    EXPECT_EQ(t.importStats().count("alloc_not_live_after"), 1u);
    EXPECT_FALSE(
        compareSnapshotState(snapshotSegments(PickleDocument::fromJson(j, "x")), replaySnapshotState(t, 0)).empty());
}

TEST(SnapshotImporter, RefusesAPickleThatNamesAGlobal)
{
    struct Case {
        std::string bytes;
        std::string opcode; // as the error names it
        std::size_t offset;
    };
    const Case cases[] = {
        // A snapshot-looking pickle that builds an object: PROTO 4, EMPTY_DICT, 'segments', then
        // SHORT_BINUNICODE 'os', 'system', STACK_GLOBAL at byte offset 25.
        { std::string("\x80\x04\x7d\x8c\x08segments\x8c\x02os\x8c\x06system\x93\x73\x2e", 28),
            "STACK_GLOBAL (0x93)", 25 },
        // pickle.dumps(os.system, protocol=0) and the classic payload: GLOBAL 'posix system' at byte
        // offset 0 (after a MARK: offset 1). Before, detection did not claim them ("not a trace format").
        { "cposix\nsystem\np0\n.", "GLOBAL (0x63)", 0 },
        { "(cos\nsystem\nS'ls'\ntR.", "GLOBAL (0x63)", 1 },
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.bytes);
        auto path = tempFile("hostile.pickle");
        {
            std::ofstream f(path, std::ios::binary);
            f << c.bytes;
        }
        const Importer* importer = detectFormat(path.string());
        ASSERT_NE(importer, nullptr);
        EXPECT_EQ(importer->name(), "pytorch-snapshot");
        try {
            loadTrace(path.string());
            ADD_FAILURE() << "a pickle with " << c.opcode << " was accepted";
        } catch (const FormatError& e) {
            EXPECT_EQ(std::string(e.what()),
                path.string() + ": pickle opcode " + c.opcode + " at byte offset " + std::to_string(c.offset)
                    + " is not allowed: gpumem reads only plain-data pickles and never runs code from them");
        }
        std::filesystem::remove(path);
    }
    // Text that merely starts with a letter c is not claimed.
    auto path = tempFile("notes.txt");
    {
        std::ofstream f(path, std::ios::binary);
        f << "cuda memory notes: 12 GB\n";
    }
    const Importer* importer = detectFormat(path.string());
    EXPECT_TRUE(importer == nullptr || importer->name() != "pytorch-snapshot");
    std::filesystem::remove(path);
}

TEST(SnapshotImporter, SaysWhenTheBlocksOfASegmentDoNotTileIt)
{
    // PyTorch lists every block of a segment, free ones too, tiling it exactly; a damaged file whose
    // blocks run past the segment, overlap or leave a gap was imported without a word.
    struct Case {
        const char* what;
        void (*damage)(nlohmann::json&);
        std::string detail;
    };
    const Case cases[] = {
        { "past the end", [](nlohmann::json& j) { j["segments"][0]["blocks"][2]["size"] = 15 * kMiB; },
            "segments[0]: its blocks end at " + std::to_string(kS1 + 21 * kMiB) + ", the segment at "
                + std::to_string(kS1 + 20 * kMiB) },
        { "overlap", [](nlohmann::json& j) { j["segments"][0]["blocks"][1]["address"] = kS1 + 2 * kMiB; },
            "segments[0]: block 1 at " + std::to_string(kS1 + 2 * kMiB) + " overlaps the block before it (which ends at "
                + std::to_string(kS1 + 4 * kMiB) + ")" },
        { "gap", [](nlohmann::json& j) { j["segments"][1]["blocks"][0]["address"] = kS2 + kMiB; },
            "segments[1]: a gap of " + std::to_string(kMiB) + " bytes lies before block 0" },
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        nlohmann::json j = handMadeSnapshot();
        c.damage(j);
        Trace t = importPytorchSnapshot(PickleDocument::fromJson(j, "bad.json"));
        ASSERT_EQ(t.importStats().count("segment_blocks_do_not_tile"), 1u);
        EXPECT_EQ(t.importStats().find("segment_blocks_do_not_tile")->detail,
            c.detail + " (the blocks of a segment tile it exactly in a PyTorch snapshot)");
    }
    Trace whole = importPytorchSnapshot(PickleDocument::fromJson(handMadeSnapshot(), "good.json"));
    EXPECT_EQ(whole.importStats().count("segment_blocks_do_not_tile"), 0u);
}

TEST(SnapshotImporter, NamesTheFieldOfAMalformedSnapshot)
{
    nlohmann::json j = handMadeSnapshot();
    j["segments"][1]["blocks"][0].erase("size");
    try {
        importPytorchSnapshot(PickleDocument::fromJson(j, "bad.json"));
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("bad.json: segments[1].blocks[0]: the field 'size' is missing"),
            std::string::npos)
            << e.what();
    }
}

TEST(SnapshotImporter, RoundsSizesLikePyTorch)
{
    std::vector<std::int64_t> none(16, 0);
    EXPECT_EQ(pytorchRoundSize(1, none), 512u);
    EXPECT_EQ(pytorchRoundSize(513, none), 1024u);
    EXPECT_EQ(pytorchRoundSize(154389504, none), 154389504u);
    // allocators.md §1.2 examples with 4 divisions: 1200 → 1536, 5000 → 5120, 9000 → 10240,
    // 100 MiB → 112 MiB, 65 MiB → 80 MiB.
    std::vector<std::int64_t> four(16, 4);
    EXPECT_EQ(pytorchRoundSize(1200, four), 1536u);
    EXPECT_EQ(pytorchRoundSize(5000, four), 5120u);
    EXPECT_EQ(pytorchRoundSize(9000, four), 10240u);
    EXPECT_EQ(pytorchRoundSize(100 * kMiB, four), 112 * kMiB);
    EXPECT_EQ(pytorchRoundSize(65 * kMiB, four), 80 * kMiB);
}

TEST(SnapshotImporter, ReadsTheSameSnapshotPickledWithProtocols0To5)
{
    // fuzz/seeds/snapshot_pickle_fuzzer/snapshot_small_p*.pickle: one dict pickled by CPython with protocols 0, 1, 2, 4 and 5 (a
    // gen-C layout with a pre-window block freed in the trace, a small segment made in the trace, an
    // oom, a snapshot marker, roundup_power2_divisions and an annotation).
    const std::string dir = std::string(GPUMEM_SOURCE_DIR) + "/fuzz/seeds/snapshot_pickle_fuzzer/";
    Trace p2 = loadTrace(dir + "snapshot_small_p2.pickle");
    for (const char* other :
        { "snapshot_small_p0.pickle", "snapshot_small_p1.pickle", "snapshot_small_p4.pickle", "snapshot_small_p5.pickle" }) {
        Trace t = loadTrace(dir + other);
        expectSameMemory(p2, t);
    }
    EXPECT_EQ(p2.metadata()["pickle_protocol"], 2);
    EXPECT_EQ(p2.metadata()["snapshot_generation"], "C");
    EXPECT_EQ(p2.metadata()["allocator_settings"]["roundup_power2_divisions"]["2"], 4);
    // Pre-window: the segment, two blocks; then 7 entries.
    ASSERT_EQ(p2.memory().count(), 3u + 7u);
    EXPECT_EQ(count(p2, EventKind::Oom), 1u);
    EXPECT_EQ(count(p2, EventKind::Marker), 1u);
    // The 4-byte request in the fresh 2 MiB small segment rounds to 512 B and is split.
    const auto& m = p2.memory();
    EXPECT_EQ(m.kind[7], EventKind::Alloc);
    EXPECT_EQ(m.size[7], 512u);
    EXPECT_EQ(m.requestedSize[7], 4u);
    ASSERT_EQ(p2.annotations().size(), 1u);
    EXPECT_EQ(p2.annotations()[0].end - p2.annotations()[0].start, 4000);
    auto diffs = compareSnapshotState(
        snapshotSegments(readSnapshotDocument(dir + "snapshot_small_p2.pickle")), replaySnapshotState(p2, 0));
    EXPECT_TRUE(diffs.empty()) << (diffs.empty() ? "" : diffs.front());
}

TEST(SnapshotImporter, TilesGenerationABlocksAndTakesFramesFromHistory)
{
    const std::string path = std::string(GPUMEM_SOURCE_DIR) + "/fuzz/seeds/snapshot_pickle_fuzzer/snapshot_gen_a.pickle";
    Trace t = loadTrace(path);
    EXPECT_EQ(t.metadata()["snapshot_generation"], "A");
    EXPECT_EQ(t.metadata()["segments_at_dump"]["segment_pool_id"][0], nullptr);
    auto segs = snapshotSegments(readSnapshotDocument(path));
    ASSERT_EQ(segs.size(), 1u);
    ASSERT_EQ(segs[0].blocks.size(), 2u);
    EXPECT_EQ(segs[0].blocks[1].address, kS1 + 2 * kMiB);
    // Pre-window: segment, the pending block + its free, the live block (frames from its history).
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 5u);
    EXPECT_EQ(m.kind[1], EventKind::Alloc);
    EXPECT_EQ(m.address[1], kS1 + 2 * kMiB);
    EXPECT_EQ(m.kind[2], EventKind::Free);
    EXPECT_EQ(m.address[2], kS1 + 2 * kMiB);
    EXPECT_EQ(m.kind[3], EventKind::Alloc);
    EXPECT_EQ(m.address[3], kS1);
    ASSERT_EQ(t.siteFrames(m.site[3]).size(), 2u);
    EXPECT_EQ(t.str(t.frames()[t.siteFrames(m.site[3])[0]].name), "forward");
    EXPECT_EQ(m.kind[4], EventKind::FreeCompleted);
    EXPECT_TRUE(compareSnapshotState(segs, replaySnapshotState(t, 0)).empty());
}

TEST(SnapshotImporter, KeepsDevicesApartAndNamesThemByOrdinal)
{
    // Device 0 has an empty trace and no segments; devices 1 and 2 each have a segment, and only
    // device 2's trace allocates: the trace gets devices 1 and 2, and each replays to its own state.
    using nlohmann::json;
    auto segment = [](int device, Address a, const char* state) {
        return json { { "device", device }, { "address", a }, { "total_size", 2 * kMiB }, { "stream", 7 },
            { "segment_type", "small" },
            { "blocks",
                json::array({ json { { "address", a }, { "size", 512 }, { "requested_size", 100 }, { "state", state } },
                    json { { "address", a + 512 }, { "size", 2 * kMiB - 512 }, { "requested_size", 0 },
                        { "state", "inactive" } } }) } };
    };
    json j = {
        { "segments", json::array({ segment(1, kS1, "active_allocated"), segment(2, kS2, "active_allocated") }) },
        { "device_traces",
            json::array({ json::array(), json::array(),
                json::array({ json { { "action", "alloc" }, { "addr", kS2 }, { "size", 100 }, { "stream", 7 },
                    { "time_us", 5 } } }) }) },
    };
    Trace t = importJson(j, "devices.json");
    ASSERT_EQ(t.devices().size(), 2u);
    std::vector<std::int32_t> ordinals { t.devices()[0].ordinal, t.devices()[1].ordinal };
    std::sort(ordinals.begin(), ordinals.end());
    EXPECT_EQ(ordinals, (std::vector<std::int32_t> { 1, 2 }));
    EXPECT_EQ(t.streams().size(), 2u); // stream 7 on each device
    auto recorded = snapshotSegments(PickleDocument::fromJson(j, "devices"));
    std::vector<SnapshotSegment> replayed;
    for (DeviceId d = 0; d < t.devices().size(); ++d)
        for (auto& s : replaySnapshotState(t, d))
            replayed.push_back(std::move(s));
    EXPECT_TRUE(compareSnapshotState(recorded, replayed).empty());
    // Device 1: segment and block before the window; device 2: only the segment.
    std::size_t allocs = count(t, EventKind::Alloc), segs = count(t, EventKind::SegmentAlloc);
    EXPECT_EQ(allocs, 2u);
    EXPECT_EQ(segs, 2u);
    const auto& m = t.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        EXPECT_EQ(t.streams()[m.stream[i]].handle, 7u);
}

TEST(SnapshotImporter, StaysLinearWhenAHostileFileSharesHugeContainers)
{
    // device_traces[0] holds 4000 references to one entry dict with 3000 fields: without the field
    // bound (64) the entry loop would do 12 million steps; it is refused at the first entry instead.
    std::string p;
    auto op = [&p](std::initializer_list<int> bytes) {
        for (int b : bytes)
            p += static_cast<char>(b);
    };
    op({ 0x80, 4, '}', '(' }); // PROTO 4, root dict, MARK
    op({ 0x8c, 8 });
    p += "segments";
    op({ ']', 0x8c, 13 });
    p += "device_traces";
    op({ ']', ']', '(', '}', 0x94, '(' }); // outer list, device-0 list, MARK, entry dict (memo 0), MARK
    for (int i = 0; i < 3000; ++i)
        op({ 'M', i & 0xff, i >> 8, 'K', 1 }); // BININT2 i: BININT1 1
    op({ 'u' }); // SETITEMS into the entry dict
    for (int i = 1; i < 4000; ++i)
        op({ 'h', 0 }); // BINGET 0
    op({ 'e', 'a', 'u', '.' }); // APPENDS, APPEND to device_traces, SETITEMS root, STOP
    PickleDocument doc = PickleDocument::parse(p, "hostile.pickle");
    try {
        importPytorchSnapshot(doc);
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("device_traces[0][0]: has 3000 fields"), std::string::npos) << e.what();
    }

    // Two segments that are one object (a memo GET): refused, as PyTorch never shares them.
    p.clear();
    op({ 0x80, 4, '}', '(', 0x8c, 8 });
    p += "segments";
    op({ ']', '(', '}', 0x94, '(', 0x8c, 6 });
    p += "device";
    op({ 'K', 0, 0x8c, 7 });
    p += "address";
    op({ 'K', 0, 0x8c, 10 });
    p += "total_size";
    op({ 'M', 0, 2, 0x8c, 6 });
    p += "blocks";
    op({ ']', 'u', 'h', 0, 'e', 0x8c, 13 });
    p += "device_traces";
    op({ ']', 'u', '.' });
    try {
        importPytorchSnapshot(PickleDocument::parse(p, "shared.pickle"));
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(
            std::string(e.what()).find("segments[1]: is the same object as an earlier segment"), std::string::npos)
            << e.what();
    }

    // [L, L] nested 70 times expands to 2^70 values: the JSON rendering refuses it quickly.
    std::string q;
    for (int b : std::initializer_list<int> { 0x80, 4, ']', 0x94 })
        q += static_cast<char>(b);
    for (int i = 0; i < 70; ++i)
        for (int b : std::initializer_list<int> { 'h', i, 'h', i, 0x86, 0x94 }) // BINGET i, BINGET i, TUPLE2, MEMOIZE
            q += static_cast<char>(b);
    q += '.';
    PickleDocument laughs = PickleDocument::parse(q, "laughs.pickle");
    EXPECT_THROW(laughs.toJson(laughs.root(), 100), FormatError);
}

namespace {
// tests/data/snapshot/entry_shapes.{pickle,json}: one small snapshot dict, pickled by CPython (keys
// shared through the memo) and saved as JSON. Its entries change their keys: the first two have the
// same keys, the next two the same keys in reverse order, then two with one key more, then the
// reversed order again, a marker with fewer keys and the reversed order once more.
std::string snapshotData(const char* name) { return std::string(GPUMEM_SOURCE_DIR) + "/tests/data/snapshot/" + name; }
constexpr Address kShapeSegment = 0x7f0000000000;
} // namespace

TEST(SnapshotImporter, ReadsEntriesWhoseKeysChangeOrderAndNumberLikeTheirJsonTwin)
{
    // The entries are read by the keys of the entry before when they repeat them (the pickle shares the
    // key strings through the memo; the JSON document interns them).
    Trace p = importPytorchSnapshot(snapshotData("entry_shapes.pickle"));
    Trace j = importPytorchSnapshot(snapshotData("entry_shapes.json"));
    expectSameMemory(p, j);
    const auto& m = p.memory();
    ASSERT_EQ(m.count(), 10u); // the segment rebuilt before the window, then the nine entries
    EXPECT_EQ(m.kind[0], EventKind::SegmentAlloc);
    const EventKind kinds[] = { EventKind::Alloc, EventKind::Alloc, EventKind::Free, EventKind::FreeCompleted,
        EventKind::Free, EventKind::FreeCompleted, EventKind::Alloc, EventKind::Marker, EventKind::Free };
    const Address addresses[] = { kShapeSegment, kShapeSegment + 1024, kShapeSegment, kShapeSegment,
        kShapeSegment + 1024, kShapeSegment + 1024, kShapeSegment + 4096, 0, kShapeSegment + 4096 };
    const Bytes requested[] = { 1000, 3000, 1000, 1000, 3000, 3000, 512, 0, 512 };
    for (std::size_t i = 0; i < 9; ++i) {
        SCOPED_TRACE("entry " + std::to_string(i));
        EXPECT_EQ(m.kind[i + 1], kinds[i]);
        EXPECT_EQ(m.address[i + 1], addresses[i]);
        EXPECT_EQ(m.requestedSize[i + 1], requested[i]);
        EXPECT_EQ(m.time[i + 1], static_cast<TimeNs>(10 + i) * 1000);
        EXPECT_EQ(m.sequence[i + 1], i);
    }
    EXPECT_EQ(m.size[2], 3072u); // round_size(3000)
    // Entry 1 (read by position) has frames g, f; entry 4 (one key more) the same list.
    auto frames = p.siteFrames(m.site[2]);
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(p.str(p.frames()[frames[0]].name), "g");
    EXPECT_EQ(p.str(p.frames()[frames[1]].file), "m.py");
    EXPECT_EQ(p.frames()[frames[1]].line, 3);
    EXPECT_EQ(m.site[5], m.site[2]);
    EXPECT_EQ(m.site[7], 0u); // no frames
}

TEST(SnapshotImporter, ReadsTheSameSnapshotPickledWithEachProtocol)
{
    // protocol_0 … protocol_5.pickle (make_protocol_pickles.py): protocols 0 and 1 have no PROTO opcode;
    // they were "not a trace format" and are now detected from their first key and read with the text
    // opcodes (LONG addresses, INT bools, protocol 0's UNICODE strings with raw-unicode-escape).
    const Trace reference = loadTrace(snapshotData("protocol_2.pickle"));
    for (int protocol = 0; protocol <= 5; ++protocol) {
        SCOPED_TRACE("protocol " + std::to_string(protocol));
        const std::string path = snapshotData(("protocol_" + std::to_string(protocol) + ".pickle").c_str());
        const Importer* importer = detectFormat(path);
        ASSERT_NE(importer, nullptr);
        EXPECT_EQ(importer->name(), "pytorch-snapshot");
        const Trace t = loadTrace(path);
        expectSameMemory(t, reference);
        const auto& m = t.memory();
        ASSERT_EQ(m.count(), 5u); // the segment and block rebuilt before the window, then the three entries
        const EventKind kinds[] = { EventKind::SegmentAlloc, EventKind::Alloc, EventKind::Alloc, EventKind::Free,
            EventKind::FreeCompleted };
        const Address a = 140000000000000;
        const Address addresses[] = { a, a, a + 512, a + 512, a + 512 };
        const Bytes sizes[] = { 2097152, 512, 1024, 1024, 1024 };
        for (std::size_t i = 0; i < 5; ++i) {
            EXPECT_EQ(m.kind[i], kinds[i]) << i;
            EXPECT_EQ(m.address[i], addresses[i]) << i;
            EXPECT_EQ(m.size[i], sizes[i]) << i;
        }
        EXPECT_EQ(m.time[2], 5000);
        EXPECT_EQ(t.importStats().count("reconstructed_initial_state"), 2u);
        // The frame's name and file, decoded from raw-unicode-escape in protocol 0 (é, €, 😀 and backslashes).
        const auto frames = t.siteFrames(m.site[2]);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_EQ(t.str(t.frames()[frames[0]].name), "f\xc3\xa9\\n\xe2\x82\xac");
        EXPECT_EQ(t.str(t.frames()[frames[0]].file), "C:\\dir\\m\xf0\x9f\x98\x80.py");
        EXPECT_EQ(t.frames()[frames[0]].line, 7);
    }
}

TEST(SnapshotImporter, CountsABigIntInAnEntryThatRepeatsTheKeysOfTheOneBefore)
{
    // Three entries with the same keys; the second one's size is 2**70.
    Trace t = importPytorchSnapshot(snapshotData("entry_big_int.pickle"));
    ASSERT_EQ(t.importStats().count("big_int_clamped"), 1u);
    // Task "lim" item 5: a size_t above 2^64 - 1 is stored as 2^64 - 1, as the message says (was 2^63 - 1).
    EXPECT_EQ(t.importStats().find("big_int_clamped")->detail, "device_traces[0][1]: 'size' was clamped to 2^64 - 1");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.requestedSize[0], 1000u);
    EXPECT_EQ(m.requestedSize[1], std::numeric_limits<Bytes>::max());
    EXPECT_EQ(m.requestedSize[2], 512u);
}

TEST(SnapshotImporter, CountsABigIntInTheJsonTwinLikeInThePickle)
{
    // entry_big_int.pickle saved by json.dump: the size 2**70 is written as its 22 digits.
    Trace t = importPytorchSnapshot(snapshotData("entry_big_int.json"));
    ASSERT_EQ(t.importStats().count("big_int_clamped"), 1u);
    EXPECT_EQ(t.importStats().find("big_int_clamped")->detail, "device_traces[0][1]: 'size' was clamped to 2^64 - 1");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.requestedSize[1], std::numeric_limits<Bytes>::max());
    // -2**70 clamps to the other end; an integral float within int64 stays a float.
    PickleDocument doc = PickleDocument::fromJson(nlohmann::json::parse("[-1180591620717411303424, 4.0]"), "n.json");
    auto items = doc.items(doc.root());
    ASSERT_EQ(items.size(), 2u);
    EXPECT_EQ(items[0].kind, PickleKind::BigInt);
    EXPECT_EQ(doc.toInt(items[0]), std::numeric_limits<std::int64_t>::min());
    EXPECT_EQ(items[1].kind, PickleKind::Float);
}

TEST(SnapshotImporter, RejectsANegativeEntryAddressOrSize)
{
    // Three entries with the same keys (the second is read by position); its addr or size is -1. Before,
    // size -1 became a 512-byte block and addr -1 a block at 2^64 - 1, without a word.
    for (const char* field : { "size", "addr" }) {
        SCOPED_TRACE(field);
        const std::string path = snapshotData((std::string("entry_") + field + "_negative.pickle").c_str());
        try {
            importPytorchSnapshot(path);
            ADD_FAILURE() << "accepted";
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find(path + ": device_traces[0][1]: '" + field + "' is negative (-1)"),
                std::string::npos)
                << e.what();
        }
    }
}

namespace {
// handMadeSnapshot() damaged by `damage`, named "bad.json", must be refused with `message` in the error.
struct DamageCase {
    const char* what;
    void (*damage)(nlohmann::json&);
    const char* message;
};
void expectEachDamageRefused(std::initializer_list<DamageCase> cases)
{
    for (const DamageCase& c : cases) {
        SCOPED_TRACE(c.what);
        nlohmann::json j = handMadeSnapshot();
        c.damage(j);
        try {
            importPytorchSnapshot(PickleDocument::fromJson(j, "bad.json"));
            ADD_FAILURE() << "accepted";
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
        }
    }
}
} // namespace

TEST(SnapshotImporter, RejectsANegativeOrNoneAddressInTheSegments)
{
    // A block's address or requested_size of None was accepted (tiled / 0) while a None size was an
    // error; a negative segment or block address became an address near 2^64.
    expectEachDamageRefused({
        { "block address None", [](nlohmann::json& j) { j["segments"][0]["blocks"][1]["address"] = nullptr; },
            "bad.json: segments[0].blocks[1]: 'address' is None, not an int" },
        { "block requested_size None",
            [](nlohmann::json& j) { j["segments"][0]["blocks"][0]["requested_size"] = nullptr; },
            "bad.json: segments[0].blocks[0]: 'requested_size' is None, not an int" },
        // Brief tx item 2: the kind is named with its article ("is an int", "is a bool"), None without one.
        { "blocks an int", [](nlohmann::json& j) { j["segments"][0]["blocks"] = 7; },
            "bad.json: segments[0]: 'blocks' is an int, not a list" },
        { "block size a float", [](nlohmann::json& j) { j["segments"][0]["blocks"][0]["size"] = 1.5; },
            "bad.json: segments[0].blocks[0]: 'size' is a float, not an int" },
        { "block address negative", [](nlohmann::json& j) { j["segments"][1]["blocks"][0]["address"] = -4096; },
            "bad.json: segments[1].blocks[0]: 'address' is negative (-4096)" },
        { "segment address negative", [](nlohmann::json& j) { j["segments"][2]["address"] = -1; },
            "bad.json: segments[2]: 'address' is negative (-1)" },
    });
}

TEST(SnapshotImporter, RejectsABoolWhereAnIntIsRead)
{
    // s_bool_size.pickle: a trace entry's 'size' True was read as a 1-byte block. Python's bool is an int,
    // but no snapshot field read as one is ever a bool; it is an error naming the field, as for None.
    expectEachDamageRefused({
        { "entry size (read by position)", [](nlohmann::json& j) { j["device_traces"][0][1]["size"] = true; },
            "bad.json: device_traces[0][1]: 'size' is a bool, not an int" },
        { "entry addr (read key by key)", [](nlohmann::json& j) { j["device_traces"][0][0]["addr"] = false; },
            "bad.json: device_traces[0][0]: 'addr' is a bool, not an int" },
        { "block size", [](nlohmann::json& j) { j["segments"][0]["blocks"][2]["size"] = true; },
            "bad.json: segments[0].blocks[2]: 'size' is a bool, not an int" },
        { "segment total_size", [](nlohmann::json& j) { j["segments"][1]["total_size"] = true; },
            "bad.json: segments[1]: 'total_size' is a bool, not an int" },
    });
    // allocator_settings' max_split_size True is no size: ignored as absent, not read as 1 byte (which
    // stops the 2 MiB alloc at kS1 + 4 MiB from splitting its free block).
    auto allocSizes = [](const nlohmann::json& maxSplitSize) {
        nlohmann::json j = handMadeSnapshot();
        if (!maxSplitSize.is_null())
            j["allocator_settings"] = { { "max_split_size", maxSplitSize } };
        const Trace t = importPytorchSnapshot(PickleDocument::fromJson(j, "settings.json"));
        std::vector<Bytes> sizes;
        for (std::size_t i = 0; i < t.memory().count(); ++i)
            if (t.memory().kind[i] == EventKind::Alloc)
                sizes.push_back(t.memory().size[i]);
        return sizes;
    };
    EXPECT_NE(allocSizes(1), allocSizes(nullptr));
    EXPECT_EQ(allocSizes(true), allocSizes(nullptr));
}

TEST(SnapshotImporter, RejectsAnEntrySizeThatIsNotAnInt)
{
    // Three entries with the same keys (the second and third are read by position); the second one's
    // size is "big" (entry_size_str) or None (entry_size_none). Before, both became a 0-byte alloc.
    for (const char* name : { "entry_size_str.pickle", "entry_size_none.pickle" }) {
        SCOPED_TRACE(name);
        const std::string path = snapshotData(name);
        try {
            importPytorchSnapshot(path);
            ADD_FAILURE() << "accepted";
        } catch (const FormatError& e) {
            const std::string kind = std::string(name) == "entry_size_str.pickle" ? "a str" : "None";
            EXPECT_NE(std::string(e.what()).find(path + ": device_traces[0][1]: 'size' is " + kind + ", not an int"),
                std::string::npos)
                << e.what();
        }
    }
    // The JSON document: the same error for a str time_us (the first entry: read key by key).
    nlohmann::json j = handMadeSnapshot();
    j["device_traces"][0][0]["time_us"] = "10";
    try {
        importPytorchSnapshot(PickleDocument::fromJson(j, "bad.json"));
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("bad.json: device_traces[0][0]: 'time_us' is a str, not an int"),
            std::string::npos)
            << e.what();
    }
}

// Brief tx item 2 (wording): the rebuilt state said "1 segments and 0 blocks".
TEST(SnapshotImporter, CountsTheRebuiltStateInWordsThatAgreeWithTheNumber)
{
    Trace t = importPytorchSnapshot(snapshotData("entry_shapes.pickle"));
    const Anomaly* a = t.importStats().find("reconstructed_initial_state");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->detail, "device 0: 1 segment and 0 blocks existed before the first trace entry; they were rebuilt from "
                         "`segments` and the trace");
}

// Task "lim" item 5: an action that is not a str is named by its type (was "action ''"), and frames that
// are not a list are refused naming the field (were accepted silently).
TEST(SnapshotImporter, NamesTheTypeOfABadActionAndRefusesFramesThatAreNotAList)
{
    for (const auto& [value, text] : { std::pair { nlohmann::json(5), std::string("an int") },
             std::pair { nlohmann::json(nullptr), std::string("None") } }) {
        auto j = handMadeSnapshot();
        j["device_traces"][0][2]["action"] = value;
        Trace t = importJson(j, "action_type.json");
        ASSERT_NE(t.importStats().find("unknown_action"), nullptr);
        EXPECT_EQ(t.importStats().find("unknown_action")->detail,
            "device_traces[0][2]: action (" + text + ", not a str) is not a memory action gpumem knows; skipped");
    }
    auto none = handMadeSnapshot();
    none["segments"][0]["segment_type"] = nullptr;
    try {
        importJson(none, "segtype_none.json");
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("segments[0]: 'segment_type' is None, not a str ('small' or 'large')"),
            std::string::npos)
            << e.what();
    }
    auto j = handMadeSnapshot();
    j["device_traces"][0][2]["frames"] = "x";
    try {
        importJson(j, "frames_str.json");
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("device_traces[0][2]: 'frames' is a str, not a list"), std::string::npos)
            << e.what();
    }
}

namespace {
// The anomalies of a trace as (code, count, detail), for comparing two imports of one file.
std::vector<std::tuple<std::string, std::uint64_t, std::string>> anomalyList(const Trace& t)
{
    std::vector<std::tuple<std::string, std::uint64_t, std::string>> out;
    for (const auto& a : t.stats().anomalies())
        out.emplace_back(a.code, a.count, a.detail);
    return out;
}
} // namespace

TEST(SnapshotImporter, StreamedImportOfEveryPublicSnapshotEqualsTheImportOfItsDocument)
{
    // importPytorchSnapshot(path) decodes the trace entries while it parses the pickle (issue 22); the
    // document import reads them from the whole object tree. Same events, sites, anomalies, metadata.
    for (const char* name : { "cs336-bcrafton/memory_snapshot.pickle", "cs336-magma27/memory_snapshot.pickle",
             "cs336-silmont2000/mem_snapshot.pickle", "cs336-silmont2000/memory_forward_bf16_128.pickle",
             "flexgen-llm-inference/1.3b_snapshot.pickle" }) {
        SCOPED_TRACE(name);
        const std::string path = publicTrace(name);
        REQUIRE_PUBLIC(path);
        Trace streamed = importPytorchSnapshot(path);
        Trace whole = importPytorchSnapshot(readSnapshotDocument(path));
        expectSameMemory(streamed, whole);
        EXPECT_EQ(anomalyList(streamed), anomalyList(whole));
        EXPECT_EQ(streamed.metadata(), whole.metadata());
        EXPECT_GT(streamed.memory().count(), 90u);
    }
}

TEST(SnapshotImporter, StreamedImportReadsAPickleThatRepeatsAnEntryDictWhole)
{
    // tests/data/snapshot/entry_repeated_object.pickle: entry_shapes.pickle with its entries 0, 2 and 3
    // appended once more as the same Python objects (pickle.dump protocol 4), so the pickle refers to
    // those dicts again by memo GETs: the streamed import, which took them out of the document, reads
    // the file again whole and gives what the document import gives.
    const std::string path = snapshotData("entry_repeated_object.pickle");
    Trace streamed = importPytorchSnapshot(path);
    Trace whole = importPytorchSnapshot(readSnapshotDocument(path));
    expectSameMemory(streamed, whole);
    EXPECT_EQ(anomalyList(streamed), anomalyList(whole));
    const auto& m = streamed.memory();
    ASSERT_EQ(m.count(), 13u); // the segment rebuilt before the window, the nine entries, the three repeats
    EXPECT_EQ(m.kind[10], EventKind::Alloc);
    EXPECT_EQ(m.address[10], kShapeSegment);
    EXPECT_EQ(m.requestedSize[10], 1000u);
    EXPECT_EQ(m.kind[12], EventKind::FreeCompleted);
}

namespace {
// A protocol-4 snapshot pickle written as CPython's pickler writes one (keys and strings memoized,
// FRAME opcodes every 64 KiB at an entry's end, APPENDS batches of 1,000): one 64 MiB segment and
// `cycles` × (alloc, free_requested, free_completed) of a 1 MiB block at its start, every entry with
// the frames list [{name: "train_step", filename: "big.py", line: 7}], the frame dict memoized once.
class SnapshotPickleWriter {
public:
    static constexpr Address kBase = 0x7f1000000000;
    std::string write(std::size_t cycles)
    {
        std::string out = "\x80\x04";
        dict([&] {
            key("segments");
            m_piece += ']';
            memoize();
            dict([&] {
                key("device"), small(0), key("address"), integer(kBase), key("total_size"), integer(64 << 20);
                key("stream"), small(0), key("segment_type"), str("large"), key("blocks");
                m_piece += ']';
                memoize();
                dict([&] { key("address"), integer(kBase), key("size"), integer(64 << 20), key("state"), str("inactive"); });
                m_piece += 'a'; // APPEND
            });
            m_piece += 'a';
            key("device_traces");
            m_piece += "]";
            memoize();
            m_piece += "]";
            memoize();
            std::size_t frameMemo = 0;
            for (std::size_t i = 0; i < 3 * cycles; ++i) {
                if (i % 1000 == 0)
                    m_piece += '(';
                dict([&] {
                    key("action"), str(i % 3 == 0 ? "alloc" : i % 3 == 1 ? "free_requested" : "free_completed");
                    key("addr"), integer(kBase), key("size"), integer(1 << 20), key("stream"), small(0);
                    key("time_us"), integer(static_cast<std::int64_t>(1000 + i)), key("frames");
                    m_piece += ']';
                    memoize();
                    if (i == 0) {
                        frameMemo = m_memo; // the dict's slot
                        dict([&] { key("name"), str("train_step"), key("filename"), str("big.py"), key("line"), small(7); });
                    } else {
                        get(frameMemo);
                    }
                    m_piece += 'a';
                });
                if (i % 1000 == 999 || i + 1 == 3 * cycles)
                    m_piece += 'e'; // APPENDS
                flushFrameIfFull(out);
            }
            m_piece += 'a'; // the device's list into device_traces
        });
        m_piece += '.';
        flushFrameIfFull(out, true);
        return out;
    }

private:
    template <typename F> void dict(F&& items)
    {
        m_piece += '}';
        memoize();
        m_piece += '(';
        items();
        m_piece += 'u';
    }
    void memoize()
    {
        m_piece += '\x94';
        ++m_memo;
    }
    void get(std::size_t index)
    {
        if (index < 256) {
            m_piece += 'h';
            m_piece += static_cast<char>(index);
        } else {
            m_piece += 'j';
            for (int b = 0; b < 4; ++b)
                m_piece += static_cast<char>((index >> (8 * b)) & 0xff);
        }
    }
    int str(const std::string& s)
    {
        if (auto it = m_strings.find(s); it != m_strings.end()) {
            get(it->second);
            return 0;
        }
        m_piece += '\x8c';
        m_piece += static_cast<char>(s.size());
        m_piece += s;
        m_strings[s] = m_memo;
        memoize();
        return 0;
    }
    int key(const std::string& s) { return str(s); }
    int small(int v)
    {
        m_piece += 'K';
        m_piece += static_cast<char>(v);
        return 0;
    }
    int integer(std::int64_t v) // LONG1 of 8 bytes (a valid encoding of any int64)
    {
        m_piece += "\x8a\x08";
        for (int b = 0; b < 8; ++b)
            m_piece += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff);
        return 0;
    }
    void flushFrameIfFull(std::string& out, bool last = false)
    {
        if (m_piece.size() < (64 << 10) && !last)
            return;
        out += '\x95';
        for (int b = 0; b < 8; ++b)
            out += static_cast<char>((m_piece.size() >> (8 * b)) & 0xff);
        out += m_piece;
        m_piece.clear();
    }
    std::string m_piece;
    std::size_t m_memo = 0;
    std::map<std::string, std::size_t> m_strings;
};
} // namespace

TEST(SnapshotImporter, StreamedImportOfAMappedPickleReadsTheStringsOfPagesItGaveBack)
{
    // 240,000 entries, about 11 MB: the file is mapped, and the parse gives back the pages behind it
    // every 8 MiB, the first ones (with the frame's strings, read again by the import) included.
    const std::string bytes = SnapshotPickleWriter().write(80'000);
    ASSERT_GT(bytes.size(), std::size_t(10) << 20);
    const std::string path = ::testing::TempDir() + "gpumem_streamed_mapped.pickle";
    {
        std::ofstream f(path, std::ios::binary);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    Trace streamed = importPytorchSnapshot(path);
    Trace whole = importPytorchSnapshot(readSnapshotDocument(path));
    std::filesystem::remove(path);
    expectSameMemory(streamed, whole);
    EXPECT_EQ(anomalyList(streamed), anomalyList(whole));
    const auto& m = streamed.memory();
    ASSERT_EQ(m.count(), 240'001u); // the segment rebuilt before the window, then the entries
    EXPECT_EQ(m.kind[0], EventKind::SegmentAlloc);
    EXPECT_EQ(m.size[0], Bytes(64) << 20);
    EXPECT_EQ(m.kind[239'998], EventKind::Alloc);
    EXPECT_EQ(m.address[239'998], SnapshotPickleWriter::kBase);
    EXPECT_EQ(m.size[239'998], Bytes(1) << 20);
    EXPECT_EQ(m.time[240'000], (1000 + 239'999) * 1000);
    EXPECT_EQ(streamed.stats().count("alloc_not_at_free_block"), 0u);
    const auto frames = streamed.siteFrames(m.site[240'000]);
    ASSERT_EQ(frames.size(), 1u);
    const Frame& frame = streamed.frames()[frames[0]];
    EXPECT_EQ(streamed.str(frame.name), "train_step");
    EXPECT_EQ(streamed.str(frame.file), "big.py");
    EXPECT_EQ(frame.line, 7);
}
