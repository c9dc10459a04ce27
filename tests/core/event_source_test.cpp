// Memory event sources (core/event_source.h): the chunks of a pass put together are the trace's
// memory columns, on every hand-written trace of tests/data, whatever the chunk size.
#include "core/event_source.h"
#include "core/jsonl_format.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

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

} // namespace
