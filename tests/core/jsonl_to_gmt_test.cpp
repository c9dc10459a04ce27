// `gpumem convert X.jsonl -o Y.gmt` while reading (core/jsonl_to_gmt.h): the file written is, byte for
// byte, writeGmt(readJsonl(X)) — on every .jsonl of the tests, on generated traces whose chunks break at
// awkward places, and on inputs out of order (read whole again); the reader's errors are the same.
#include "core/error.h"
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/jsonl_to_gmt.h"
#include "core/trace_builder.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace gpumem;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void spit(const fs::path& p, const std::string& bytes)
{
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
}

fs::path scratchPath() { return fs::temp_directory_path() / ("gpumem-jsonl-to-gmt-" + std::to_string(::getpid())); }

fs::path scratch()
{
    fs::create_directories(scratchPath());
    return scratchPath();
}

struct Cleanup {
    ~Cleanup()
    {
        std::error_code ec;
        fs::remove_all(scratchPath(), ec);
    }
} cleanup;

// What convert wrote before it streamed: the whole trace, then writeGmt.
std::string wholeGmt(const fs::path& jsonl, std::size_t perChunk = 65536)
{
    const fs::path out = scratch() / "whole.gmt";
    writeGmt(readJsonl(jsonl.string()), out.string(), perChunk);
    return slurp(out);
}

struct Streamed {
    std::string bytes;
    JsonlToGmtResult result;
};
Streamed streamedGmt(const fs::path& jsonl, std::size_t perChunk = 65536, bool strict = false)
{
    const fs::path out = scratch() / "streamed.gmt";
    JsonlToGmtOptions options;
    options.eventsPerChunk = perChunk;
    options.strict = strict;
    Streamed s;
    s.result = writeGmtFromJsonl(jsonl.string(), out.string(), options);
    s.bytes = slurp(out);
    return s;
}

std::string errorOf(const auto& f)
{
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::vector<fs::path> jsonlOfTheTests()
{
    std::vector<fs::path> files;
    for (const char* dir : { "tests", "traces" })
        for (const auto& e : fs::recursive_directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / dir))
            if (e.is_regular_file() && (e.path().extension() == ".jsonl" || e.path().string().ends_with(".jsonl.gz")))
                files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

// A trace with every kind of record, strings first met after the events (kernel and annotation
// names), pools and empty_cache (MEVX chunks), in trace order.
Trace generated(std::size_t events, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    TraceBuilder b;
    b.metadata()["source_format"] = "generated";
    b.addDevice(Device { DeviceType::Cuda, 0, b.intern("gpu0"), 80ull << 30 });
    b.addDevice(Device { DeviceType::Cuda, 1, 0, 0 });
    b.addStream(Stream { 0, 0, 0 });
    b.addStream(Stream { 1, 7, b.intern("side") });
    const FrameId f1 = b.frame("forward", "model.py", 10), f2 = b.frame("backward", "model.py", 20);
    const FrameId frames[] = { f1, f2 };
    const SiteId site = b.site(frames);
    const ScopeId scope = b.scope(0, "layer", ScopeKind::Range);
    const PoolId pool = b.pool(PoolKind::Graph, 1, 2);
    const auto series = b.addCounterSeries(CounterSeries { b.intern("reserved"), 0 });
    std::vector<std::pair<DeviceId, Address>> live;
    TimeNs t = 1000;
    for (std::size_t i = 0; i < events; ++i) {
        t += rng() % 3; // ties: the sequence orders them
        MemoryEvent e;
        e.time = t;
        e.device = static_cast<DeviceId>(rng() % 2);
        e.stream = e.device;
        if (!live.empty() && rng() % 2) {
            std::swap(live[rng() % live.size()], live.back());
            e.kind = EventKind::Free;
            e.device = live.back().first;
            e.address = live.back().second;
            live.pop_back();
        } else if (rng() % 50 == 0) {
            e.kind = EventKind::EmptyCache;
        } else {
            e.kind = EventKind::Alloc;
            e.address = 0x7f0000000000ull + i * 512;
            live.emplace_back(e.device, e.address);
        }
        e.size = 512 * (1 + rng() % 8);
        e.requestedSize = e.size - rng() % 100;
        e.site = rng() % 3 ? site : 0;
        e.scope = rng() % 2 ? scope : 0;
        e.pool = rng() % 10 == 0 ? pool : 0;
        e.thread = rng() % 4;
        e.category = static_cast<Category>(rng() % kCategoryCount);
        b.add(e);
        if (i % 3 == 0)
            b.add(Kernel { t, t + 5, 0, 0, b.intern("kernel_" + std::to_string(i % 11)), i });
        if (i % 17 == 0)
            b.add(Annotation { t, t + 40, b.intern("step " + std::to_string(i / 17)), AnnotationKind::Step, kNoDevice, 1 });
        if (i % 5 == 0)
            b.add(CounterSample { t, series, static_cast<std::int64_t>(i) });
    }
    b.stats().add("example", Severity::Info, "an anomaly carried by the file");
    return b.build();
}

fs::path writeJsonlFile(const Trace& trace, const std::string& name)
{
    const fs::path p = scratch() / name;
    writeJsonl(trace, p.string());
    return p;
}

} // namespace

TEST(JsonlToGmt, WritesWhatTheWholeTraceWroteForEveryJsonlOfTheTests)
{
    std::size_t compared = 0, refused = 0;
    for (const auto& file : jsonlOfTheTests()) {
        SCOPED_TRACE(file.string());
        std::string wholeError = errorOf([&] { wholeGmt(file); });
        if (!wholeError.empty()) { // a trace the tests keep for its error: the same error
            EXPECT_EQ(errorOf([&] { streamedGmt(file); }), wholeError);
            ++refused;
            continue;
        }
        for (std::size_t perChunk : { std::size_t(65536), std::size_t(1), std::size_t(2), std::size_t(7) }) {
            Streamed s = streamedGmt(file, perChunk);
            EXPECT_EQ(s.bytes, wholeGmt(file, perChunk)) << perChunk << " events per chunk";
            EXPECT_EQ(s.result.memoryEvents, readJsonl(file.string()).memory().count());
        }
        ++compared;
    }
    EXPECT_GE(compared, 40u);
    std::cout << compared << " .jsonl files written alike, " << refused << " refused alike\n";
}

TEST(JsonlToGmt, ChunksThatBreakAnywhereChangeNoByte)
{
    const Trace trace = generated(300, 1);
    const fs::path jsonl = writeJsonlFile(trace, "generated.jsonl");
    for (std::size_t perChunk : { 1, 2, 3, 5, 16, 64, 99, 100, 101, 299, 300, 301, 65536 }) {
        Streamed s = streamedGmt(jsonl, perChunk);
        EXPECT_TRUE(s.result.streamed);
        EXPECT_TRUE(s.result.fallback.empty());
        EXPECT_EQ(s.result.memoryEvents, 300u);
        EXPECT_EQ(s.bytes, wholeGmt(jsonl, perChunk)) << perChunk << " events per chunk";
    }
    // And the file reads back as the trace.
    Streamed s = streamedGmt(jsonl, 7);
    spit(scratch() / "back.gmt", s.bytes);
    const Trace back = readGmt((scratch() / "back.gmt").string());
    std::ostringstream a, b;
    writeJsonl(back, a);
    writeJsonl(trace, b);
    EXPECT_EQ(a.str(), b.str());
}

TEST(JsonlToGmt, AGzipInputIsWrittenAlike)
{
    const fs::path jsonl = writeJsonlFile(generated(2000, 2), "generated2.jsonl");
    const fs::path gz = scratch() / "generated2.jsonl.gz";
    spit(gz, test::gzipOf(slurp(jsonl)));
    for (std::size_t perChunk : { 3, 65536 })
        EXPECT_EQ(streamedGmt(gz, perChunk).bytes, wholeGmt(jsonl, perChunk));
}

TEST(JsonlToGmt, ACutGzipIsTheReadersErrorAndWritesNothing)
{
    const std::string gz = test::gzipOf(slurp(writeJsonlFile(generated(3000, 3), "generated3.jsonl")));
    const fs::path dir = scratch() / "cut";
    fs::create_directories(dir);
    const fs::path cut = dir / "cut.jsonl.gz";
    for (std::size_t keep : { gz.size() / 2, gz.size() - test::kGzipTrailerBytes }) {
        spit(cut, gz.substr(0, keep));
        const fs::path out = dir / "out.gmt";
        const std::string error = errorOf([&] { writeGmtFromJsonl(cut.string(), out.string()); });
        EXPECT_EQ(error, errorOf([&] { readJsonl(cut.string()); }));
        EXPECT_NE(error.find(cut.string()), std::string::npos) << error;
        EXPECT_FALSE(fs::exists(out)) << "the output is written only once the input was read whole";
        std::size_t entries = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
            ++entries;
        EXPECT_EQ(entries, 1u) << "no spool file is left beside the output";
    }
}

TEST(JsonlToGmt, TheReadersErrorsAreKeptWordForWord)
{
    // A bad line after several chunks were spooled, of each kind the reader's tests check.
    const std::string good = slurp(writeJsonlFile(generated(200, 4), "generated4.jsonl"));
    const std::size_t cutAt = good.find("\"type\":\"kernel\""); // between the memory events and the kernels
    const std::string head = good.substr(0, good.rfind('\n', cutAt) + 1);
    const std::string lines[] = {
        R"({"type":"mem","t":5,"kind":"alloc","size":512})",
        R"({"type":"mem","t":99999999,"kind":"malloc","addr":1,"size":512})",
        R"({"type":"mem","t":99999999,"kind":"alloc","addr":1,"size":512,"device":9})",
        R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512)",
        R"({"type":"kernel","start":1,"end":2,"name":"k","stream":40})",
        R"([1,2])",
    };
    const fs::path bad = scratch() / "bad.jsonl";
    for (const auto& line : lines) {
        spit(bad, head + line + "\n");
        const std::string error = errorOf([&] { streamedGmt(bad, 3); });
        EXPECT_FALSE(error.empty()) << line;
        EXPECT_EQ(error, errorOf([&] { readJsonl(bad.string()); })) << line;
    }
}

TEST(JsonlToGmt, MemoryEventsOutOfOrderAreReadWholeAndSaySo)
{
    // tests/data/tiny_alloc_free.jsonl with its last two memory events swapped: the whole path sorts
    // them and records "unsorted_input"; the streamed one finds out at the line and reads the file again.
    std::string text = slurp(fs::path(GPUMEM_SOURCE_DIR) / "tests/data/tiny_alloc_free.jsonl");
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::size_t last = lines.size();
    while (last > 0 && lines[last - 1].find("\"type\":\"mem\"") == std::string::npos)
        --last;
    ASSERT_GE(last, 3u);
    std::swap(lines[last - 1], lines[last - 2]);
    std::string swapped;
    for (const auto& l : lines)
        swapped += l + "\n";
    const fs::path file = scratch() / "unsorted.jsonl";
    spit(file, swapped);
    for (std::size_t perChunk : { 1, 65536 }) {
        Streamed s = streamedGmt(file, perChunk);
        EXPECT_FALSE(s.result.streamed);
        EXPECT_EQ(s.result.fallback, file.string() + ":" + std::to_string(last)
                + ": a memory event earlier than the one before it (by time, then seq): the trace is read again whole, to be "
                  "sorted; its memory grows with the event count");
        EXPECT_EQ(s.bytes, wholeGmt(file, perChunk));
        EXPECT_EQ(readJsonl(file.string()).importStats().count("unsorted_input"), 2u);
    }
}

TEST(JsonlToGmt, KernelsOutOfOrderAreReadWholeToo)
{
    const std::string text = std::string(R"({"format":"gpumem-jsonl","version":1,"metadata":{}})") + "\n"
        + R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" + "\n" + R"({"type":"stream","id":0,"device":0,"handle":0})" + "\n"
        + R"({"type":"mem","t":5,"kind":"alloc","addr":1,"size":512})" + "\n"
        + R"({"type":"kernel","start":10,"end":20,"name":"b"})" + "\n"
        + R"({"type":"kernel","start":10,"end":12,"name":"c"})" + "\n" // a tie keeps its place: still in order
        + R"({"type":"kernel","start":3,"end":4,"name":"a"})" + "\n";
    const fs::path file = scratch() / "kernels.jsonl";
    spit(file, text);
    Streamed s = streamedGmt(file, 1);
    EXPECT_FALSE(s.result.streamed);
    EXPECT_EQ(s.result.fallback.rfind(file.string() + ":7: a kernel earlier than the one before it (by start)", 0), 0u) << s.result.fallback;
    EXPECT_EQ(s.bytes, wholeGmt(file, 1));
}

TEST(JsonlToGmt, StrictFailsOnThePairingAnomaliesAsTheWholeTraceDoes)
{
    // A free whose size differs from its alloc's (free_size_mismatch, a warning), found by pairing only.
    const std::string text = std::string(R"({"format":"gpumem-jsonl","version":1,"metadata":{}})") + "\n"
        + R"({"type":"device","id":0,"kind":"cuda","ordinal":0})" + "\n" + R"({"type":"stream","id":0,"device":0,"handle":0})" + "\n"
        + R"({"type":"anomaly","code":"note","severity":"info","detail":"from the file"})" + "\n"
        + R"({"type":"mem","t":5,"kind":"alloc","addr":4096,"size":512})" + "\n"
        + R"({"type":"mem","t":6,"kind":"free","addr":4096,"size":1024})" + "\n"
        + R"({"type":"mem","t":7,"kind":"free","addr":8192,"size":1024})" + "\n";
    const fs::path file = scratch() / "mismatch.jsonl";
    spit(file, text);
    const Trace whole = readJsonl(file.string());
    const std::string expected = errorOf([&] { whole.stats().throwIfStrictViolated(file.string()); });
    ASSERT_NE(expected.find("free_size_mismatch"), std::string::npos) << expected;
    for (std::size_t perChunk : { 1, 65536 })
        EXPECT_EQ(errorOf([&] { streamedGmt(file, perChunk, true); }), expected);
    // Without the mismatch, --strict passes and writes the same file.
    spit(file, text.substr(0, text.find(R"({"type":"mem","t":6)")));
    EXPECT_EQ(streamedGmt(file, 1, true).bytes, wholeGmt(file, 1));
}

TEST(JsonlToGmt, TheWholeOptionIsTheBaseline)
{
    const fs::path jsonl = writeJsonlFile(generated(100, 5), "generated5.jsonl");
    JsonlToGmtOptions options;
    options.whole = true;
    const fs::path out = scratch() / "baseline.gmt";
    JsonlToGmtResult r = writeGmtFromJsonl(jsonl.string(), out.string(), options);
    EXPECT_FALSE(r.streamed);
    EXPECT_TRUE(r.fallback.empty());
    EXPECT_EQ(r.memoryEvents, 100u);
    EXPECT_EQ(slurp(out), wholeGmt(jsonl));
}
