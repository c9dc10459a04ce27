// Tests of the PyTorch memory-snapshot importer: the public snapshots of SOURCES.md §3 (counts, and the
// reconstructed state replayed to the recorded `segments`), a hand-made JSON snapshot that exercises
// every reconstruction rule, and hostile input.
#include "core/gmt_format.h"
#include "core/importer.h"
#include "core/importers/snapshot_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <fstream>

using namespace gpumem;

namespace {

std::string publicTrace(const std::string& relative)
{
    return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative;
}

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
    { "cs336-bcrafton/memory_snapshot.pickle", "D", 96, 550, 447, 6486, 2162, 2162, 2162, 0, 222, 96, 447, 0, 1, 4238344192 },
    { "cs336-magma27/memory_snapshot.pickle", "D", 216, 455, 229, 5163, 1721, 1721, 1721, 0, 2, 216, 229, 0, 0, 14180941824 },
    { "cs336-silmont2000/mem_snapshot.pickle", "C", 9, 20, 10, 97, 36, 26, 26, 9, 0, 0, 0, 0, 0, 3781165056 },
    { "cs336-silmont2000/memory_forward_bf16_128.pickle", "C", 43, 178, 137, 2811, 937, 937, 937, 0, 0, 43, 137, 0, 1, 861929472 },
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
    auto dir = std::filesystem::temp_directory_path() / "gpumem_snapshot_test";
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
    EXPECT_EQ(t.metadata()["segments_at_dump"].size(), p.segments);

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
    EXPECT_TRUE(replayStats.empty()) << replayStats.anomalies().front().code << ": " << replayStats.anomalies().front().detail;
    auto diffs = compareSnapshotState(recorded, replayed);
    std::string all;
    for (const auto& d : diffs)
        all += d + "\n";
    EXPECT_TRUE(diffs.empty()) << all;
    EXPECT_EQ(replayed.size(), p.segments);
}

TEST_P(PublicSnapshots, GmtRoundTripKeepsEveryMemoryColumn)
{
    const auto& p = GetParam();
    const std::string& path = m_path;
    Trace t = importPytorchSnapshot(path);
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
    EXPECT_EQ(t.metadata()["segments_at_dump"][0]["segment_pool_id"], nlohmann::json::parse("[0,0]"));
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
        return json { { "address", a }, { "size", size }, { "requested_size", req }, { "state", state }, { "frames", json::array() } };
    };
    auto entry = [](const char* action, Address a, Bytes size) {
        return json { { "action", action }, { "addr", a }, { "size", size }, { "stream", 0 },
            { "frames", json::array({ json { { "name", "f" }, { "filename", "m.py" }, { "line", 3 } } }) } };
    };
    json segs = json::array();
    segs.push_back(json { { "device", 0 }, { "address", kS1 }, { "total_size", 20 * kMiB }, { "stream", 0 }, { "segment_type", "large" },
        { "blocks", json::array({ block(kS1, 4 * kMiB, 4 * kMiB, "active_allocated"), block(kS1 + 4 * kMiB, 2 * kMiB, 2 * kMiB - 100, "active_allocated"),
                        block(kS1 + 6 * kMiB, 14 * kMiB, 0, "inactive") }) } });
    segs.push_back(json { { "device", 0 }, { "address", kS2 }, { "total_size", 20 * kMiB }, { "stream", 0 }, { "segment_type", "large" },
        { "blocks", json::array({ block(kS2, 20 * kMiB, 39 * kMiB / 2, "active_allocated") }) } });
    segs.push_back(json { { "device", 0 }, { "address", kE }, { "total_size", 4 * kMiB }, { "stream", 0 }, { "segment_type", "large" },
        { "is_expandable", true },
        { "blocks", json::array({ block(kE, 2 * kMiB, 2 * kMiB, "active_allocated"), block(kE + 2 * kMiB, 3 * kMiB / 2, 3 * kMiB / 2, "active_allocated"),
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
    EXPECT_EQ(rec["segments_before_trace"], 3);   // S1 and two mapped ranges of E
    EXPECT_EQ(rec["blocks_before_trace"], 4);     // the untouched block, P, the pending Q, E's first block
    EXPECT_EQ(rec["pending_blocks_before_trace"], 1);
    EXPECT_EQ(rec["blocks_grown_unsplit"], 1);
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
        { EventKind::Alloc, kS1 },
        { EventKind::Alloc, kS1 + 8 * kMiB },
        { EventKind::Alloc, kS1 + 12 * kMiB },
        { EventKind::Alloc, kE },
        { EventKind::Free, kS1 + 12 * kMiB },
    };
    EXPECT_EQ(pre, expected);
    EXPECT_EQ(m.size[4], 4 * kMiB) << "3 MiB rounded, grown over the 1 MiB gap before Q";
    EXPECT_EQ(m.size[5], 3 * kMiB / 2);
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

TEST(SnapshotImporter, CountsAnAllocTheEndStateDoesNotExplain)
{
    nlohmann::json j = handMadeSnapshot();
    j["segments"][1]["blocks"][0]["state"] = "inactive"; // X is allocated in the trace but never freed
    Trace t = importJson(j, "handmade_unexplained.json");
    EXPECT_EQ(t.importStats().count("alloc_not_live_after"), 1u);
    EXPECT_FALSE(compareSnapshotState(snapshotSegments(PickleDocument::fromJson(j, "x")), replaySnapshotState(t, 0)).empty());
}

TEST(SnapshotImporter, RefusesAPickleThatNamesAGlobal)
{
    // A snapshot-looking pickle that builds an object: PROTO 4, EMPTY_DICT, 'segments', then
    // SHORT_BINUNICODE 'os', 'system', STACK_GLOBAL at byte offset 25.
    const std::string bytes("\x80\x04\x7d\x8c\x08segments\x8c\x02os\x8c\x06system\x93\x73\x2e", 28);
    auto path = tempFile("hostile.pickle");
    {
        std::ofstream f(path, std::ios::binary);
        f << bytes;
    }
    const Importer* importer = detectFormat(path.string());
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "pytorch-snapshot");
    try {
        loadTrace(path.string());
        ADD_FAILURE() << "a pickle with STACK_GLOBAL was accepted";
    } catch (const FormatError& e) {
        EXPECT_EQ(std::string(e.what()),
            path.string() + ": pickle opcode STACK_GLOBAL (0x93) at byte offset 25 is not allowed: gpumem reads only plain-data "
                            "pickles and never runs code from them");
    }
    std::filesystem::remove(path);
}

TEST(SnapshotImporter, NamesTheFieldOfAMalformedSnapshot)
{
    nlohmann::json j = handMadeSnapshot();
    j["segments"][1]["blocks"][0].erase("size");
    try {
        importPytorchSnapshot(PickleDocument::fromJson(j, "bad.json"));
        ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("bad.json: segments[1].blocks[0]: the field 'size' is missing"), std::string::npos) << e.what();
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
