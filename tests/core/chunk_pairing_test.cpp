// ChunkPairing (core/chunk_pairing.h) rebuilds Trace::allocations() and the pairing anomalies of
// Trace::stats() from chunks, on every .jsonl trace of tests/data, in slices of 3 events.
#include "core/chunk_pairing.h"
#include "core/error.h"
#include "core/event_source.h"
#include "core/jsonl_format.h"
#include "core/trace_builder.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

std::string anomalyText(const ImportStats& stats)
{
    std::string s;
    for (const auto& a : stats.anomalies())
        s += a.code + " " + std::to_string(static_cast<int>(a.severity)) + " " + std::to_string(a.count) + " " + a.detail + "\n";
    return s;
}

struct Paired {
    std::vector<Allocation> allocations;
    ImportStats stats;
    std::size_t liveAtEnd = 0;
};

Paired pairInChunks(const Trace& trace, bool completions)
{
    Paired p;
    p.stats = trace.importStats();
    ChunkPairing pairing(p.stats, completions);
    memorySource(trace, 3)->forEachChunk([&](const MemoryEventColumns& chunk, std::uint64_t first) {
        for (std::size_t i = 0; i < chunk.count(); ++i) {
            const auto o = pairing.step(chunk, i, first + i);
            switch (o.pairing) {
            case ChunkPairing::Pairing::Opened:
                EXPECT_EQ(o.block.allocation, p.allocations.size());
                p.allocations.push_back(Allocation { first + i, kNoIndex, kNoIndex });
                break;
            case ChunkPairing::Pairing::Closed:
                p.allocations[o.block.allocation].freeEvent = first + i;
                break;
            case ChunkPairing::Pairing::Completed:
                p.allocations[o.block.allocation].freeCompletedEvent = first + i;
                break;
            default:
                break;
            }
        }
    });
    pairing.finish();
    EXPECT_EQ(pairing.allocations(), p.allocations.size());
    pairing.forEachLive([&](const ChunkPairing::Block& b) {
        ++p.liveAtEnd;
        EXPECT_EQ(p.allocations[b.allocation].freeEvent, kNoIndex);
        EXPECT_EQ(trace.memory().address[b.allocEvent], b.address);
    });
    return p;
}

TEST(ChunkPairing, RebuildsTheAllocationsAndAnomaliesOfEveryDataTrace)
{
    std::size_t traces = 0, withCompletions = 0, withAnomalies = 0;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / "tests/data")) {
        if (e.path().extension() != ".jsonl")
            continue;
        SCOPED_TRACE(e.path().string());
        Trace trace;
        try {
            trace = readJsonl(e.path().string());
        } catch (const Error&) {
            continue; // the damaged inputs
        }
        const auto whole = trace.allocations();
        const Paired p = pairInChunks(trace, true);
        ASSERT_EQ(p.allocations.size(), whole.size());
        for (std::size_t a = 0; a < whole.size(); ++a) {
            EXPECT_EQ(p.allocations[a].allocEvent, whole[a].allocEvent) << "allocation " << a;
            EXPECT_EQ(p.allocations[a].freeEvent, whole[a].freeEvent) << "allocation " << a;
            EXPECT_EQ(p.allocations[a].freeCompletedEvent, whole[a].freeCompletedEvent) << "allocation " << a;
        }
        EXPECT_EQ(anomalyText(p.stats), anomalyText(trace.stats()));
        // Without completions tracked, the same frees and anomalies.
        const Paired q = pairInChunks(trace, false);
        for (std::size_t a = 0; a < whole.size(); ++a)
            EXPECT_EQ(q.allocations[a].freeEvent, whole[a].freeEvent) << "allocation " << a;
        EXPECT_EQ(anomalyText(q.stats), anomalyText(trace.stats()));
        ++traces;
        withCompletions += std::any_of(whole.begin(), whole.end(), [](const Allocation& a) { return a.freeCompletedEvent != kNoIndex; });
        withAnomalies += trace.stats().anomalies().size() > trace.importStats().anomalies().size();
    }
    EXPECT_GE(traces, 20u);
    EXPECT_GE(withCompletions, 1u);
    EXPECT_GE(withAnomalies, 1u); // the foreign-format traces with more: tests/analyze/streaming_summary_test.cpp
}

TEST(ChunkPairing, RepeatedAnomaliesAreCountedWithTheFirstDetail)
{
    TraceBuilder b;
    for (Address a = 1; a <= 5; ++a)
        b.free(TimeNs(a), a * 4096, 512); // five frees of blocks allocated before the trace
    b.alloc(10, 4096, 512);
    b.alloc(11, 4096, 256); // at a live address
    const Trace trace = b.build();
    const Paired p = pairInChunks(trace, false);
    EXPECT_EQ(anomalyText(p.stats), anomalyText(trace.stats()));
    ASSERT_NE(p.stats.find("unmatched_free"), nullptr);
    EXPECT_EQ(p.stats.find("unmatched_free")->count, 5u);
    EXPECT_EQ(p.stats.find("unmatched_free")->detail,
        "memory event 0: free of address 4096 with no alloc in the trace (allocated before the recording began)");
    EXPECT_EQ(p.stats.count("alloc_at_live_address"), 1u);
    EXPECT_EQ(p.liveAtEnd, 1u); // the later block; the earlier one was reported as replaced
}

// A review's finding (the inlined step named the alloc's address): a free on device 1 whose key folds onto a live
// block of device 0 (detail::blockKey: device << 52 ^ address) closes it, and its free_size_mismatch names the
// free's own address, as TraceBody::pair does.
TEST(ChunkPairing, ASizeMismatchNamesTheFreesAddressWhereKeysCollide)
{
    TraceBuilder b;
    const DeviceId d0 = b.device(DeviceType::Cuda, 0), d1 = b.device(DeviceType::Cuda, 1);
    const StreamId s0 = b.stream(d0, 0), s1 = b.stream(d1, 0);
    const Address allocAt = 0xFFF0000000000000ull, freeAt = allocAt ^ (std::uint64_t(1) << 52);
    b.add(MemoryEvent { .time = 1000, .kind = EventKind::Alloc, .device = d0, .stream = s0, .address = allocAt, .size = 512 });
    b.add(MemoryEvent { .time = 2000, .kind = EventKind::Free, .device = d1, .stream = s1, .address = freeAt, .size = 1024 });
    const Trace trace = b.build();
    const Paired p = pairInChunks(trace, false);
    EXPECT_EQ(anomalyText(p.stats), anomalyText(trace.stats()));
    ASSERT_NE(p.stats.find("free_size_mismatch"), nullptr);
    EXPECT_EQ(p.stats.find("free_size_mismatch")->detail,
        "memory event 1: free of 1024 bytes at address " + std::to_string(freeAt) + ", whose alloc (event 0) was of 512 bytes");
}

} // namespace
