// Kineto / PyTorch-profiler importer. The public-trace figures come from SOURCES.md and were checked
// independently with tests/importers/kineto_reference.py (plain json/gzip, brute-force containment).
#include "core/error.h"
#include "core/gmt_format.h"
#include "importers/importer_registry.h"
#include "importers/kineto_importer.h"
#include "tests/importers/kineto_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

using namespace gpumem;
using namespace gpumem::test;

namespace {

const std::string kHta = "hta/df_index_resolver.json.gz";
const std::string kLegacy = "kineto-tb-plugin/worker0.1623143089861.pt.trace.json.gz";
const std::string kOwl = "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz";
const std::string kBert = "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz";
const std::string kQwen = "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz";
const std::string kNorm = "tracelens/mi300-normalization/normalization_layer_test.json.gz";
const std::string kVllm
    = "tracelens/mi300-vllm-graph-capture/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz";

std::uint64_t pairedCount(const Trace& t, DeviceId device)
{
    std::uint64_t n = 0;
    for (const auto& a : t.allocations())
        n += a.freeEvent != kNoIndex && t.memory().device[a.allocEvent] == device;
    return n;
}

std::uint64_t liveAtEnd(const Trace& t, DeviceId device)
{
    std::uint64_t n = 0;
    for (const auto& a : t.allocations())
        n += a.freeEvent == kNoIndex && a.allocEvent != kNoIndex && t.memory().device[a.allocEvent] == device;
    return n;
}

void expectAllocsAndFrees(const Trace& t, DeviceId device, std::uint64_t allocs, std::uint64_t frees)
{
    EXPECT_EQ(countEvents(t, device, EventKind::Alloc), allocs) << "allocs on device " << device;
    EXPECT_EQ(countEvents(t, device, EventKind::Free), frees) << "frees on device " << device;
}

std::size_t countAnnotations(const Trace& t, AnnotationKind kind)
{
    return static_cast<std::size_t>(std::count_if(
        t.annotations().begin(), t.annotations().end(), [&](const Annotation& a) { return a.kind == kind; }));
}

// Every sample of the device's "Total Allocated" differs from the one before by the ±size of the
// device's memory event at the same position: the sort by (ts, Ev Idx) put events and samples in the
// allocator's own order.
void expectAllocatedDeltasMatchEvents(const Trace& t, DeviceId device)
{
    const int series = findSeries(t, "Total Allocated", device);
    ASSERT_GE(series, 0);
    auto samples = seriesSamples(t, series);
    std::vector<std::int64_t> deltas;
    const auto& m = t.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.device[i] == device)
            deltas.push_back(m.kind[i] == EventKind::Alloc ? std::int64_t(m.size[i]) : -std::int64_t(m.size[i]));
    ASSERT_EQ(samples.size(), deltas.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 1; i < samples.size(); ++i)
        mismatches += samples[i].value - samples[i - 1].value != deltas[i];
    EXPECT_EQ(mismatches, 0u);
}

// SOURCES.md's counts of events, python_function events and nn.Module scopes in one file.
void expectEventCounts(const Trace& t, std::uint64_t events, std::uint64_t pythonFunctions, std::uint64_t modules)
{
    const auto& k = t.metadata()["kineto"];
    EXPECT_EQ(k["events"], events);
    EXPECT_EQ(k["events_by_category"].value("python_function", std::uint64_t(0)), pythonFunctions);
    EXPECT_EQ(k["module_events"], modules);
}

std::string kinetoJson(const std::string& events, const std::string& extra = {})
{
    return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1000}],)"
        + extra + R"( "traceEvents": [)" + events + "]}";
}

} // namespace

TEST(KinetoImporter, HtaDdpRankPairsEveryAllocationAfterSortingByTimeAndEvIdx)
{
    const auto path = publicTrace(kHta);
    GPUMEM_REQUIRE_PUBLIC(path);
    ASSERT_EQ(detectFormat(path)->name(), "kineto");
    Trace t = loadTrace(path);
    EXPECT_EQ(t.metadata()["source_format"], "kineto");
    const DeviceId gpu = findDevice(t, DeviceType::Cuda, 1);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    EXPECT_EQ(t.str(t.devices()[gpu].name), "Tesla V100-SXM2-32GB");
    EXPECT_EQ(t.devices()[gpu].totalMemory, 34089730048u);
    expectAllocsAndFrees(t, gpu, 13385, 13385);
    expectAllocsAndFrees(t, cpu, 620, 620);
    EXPECT_EQ(pairedCount(t, gpu), 13385u);
    EXPECT_EQ(pairedCount(t, cpu), 620u);
    EXPECT_EQ(t.stats().count("unmatched_free"), 0u);
    EXPECT_EQ(t.stats().count("alloc_at_live_address"), 0u);
    EXPECT_EQ(t.stats().count("unsorted_input"), 28007u); // two threads, written grouped (reference: 28,007 moved)
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", gpu)), 6629508096);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", gpu)), 12782141440);
    expectAllocatedDeltasMatchEvents(t, gpu);

    ASSERT_EQ(t.kernels().size(), 19370u);
    std::map<std::uint64_t, std::size_t> perStream;
    for (const auto& k : t.kernels()) {
        EXPECT_EQ(k.device, gpu);
        ++perStream[t.streams()[k.stream].handle];
    }
    EXPECT_EQ(perStream, (std::map<std::uint64_t, std::size_t> { { 7, 17350 }, { 14, 2020 } }));
    EXPECT_EQ(t.kernels().front().correlation, 73689u);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Range), 2030u);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Step), 5u);
    expectEventCounts(t, 216092, 0, 0);
    const auto& cats = t.metadata()["kineto"]["events_by_category"];
    EXPECT_EQ(cats["cuda_runtime"], 42373);
    EXPECT_EQ(cats["gpu_memcpy"], 2040);
    EXPECT_EQ(cats["gpu_memset"], 880);
    EXPECT_EQ(cats["user_annotation"], 2035);
    EXPECT_EQ(t.metadata()["kineto"]["distributed"]["rank"], 1);
}

TEST(KinetoImporter, LegacySchemaWithoutAddressesIsImportedAsCountersOnly)
{
    const auto path = publicTrace(kLegacy);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    EXPECT_EQ(t.memory().count(), 0u);
    EXPECT_TRUE(t.allocations().empty());
    const Anomaly* a = t.stats().find("no_addresses");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->severity, Severity::Info);
    EXPECT_EQ(a->count, 12838u);
    EXPECT_NE(a->detail.find("cuda:0 4110 allocs / 4110 frees"), std::string::npos) << a->detail;
    EXPECT_NE(a->detail.find("cpu 2310 allocs / 2308 frees"), std::string::npos) << a->detail;
    const auto& counts = t.metadata()["unaddressed_memory_events"];
    EXPECT_EQ(counts["cuda:0"]["alloc"], 4110);
    EXPECT_EQ(counts["cuda:0"]["free"], 4110);
    EXPECT_EQ(counts["cpu"]["alloc"], 2310);
    EXPECT_EQ(counts["cpu"]["free"], 2308);

    const DeviceId gpu = findDevice(t, DeviceType::Cuda, 0);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    const int gpuSum = findSeries(t, "Allocated (sum of Bytes)", gpu);
    const int cpuSum = findSeries(t, "Allocated (sum of Bytes)", cpu);
    EXPECT_EQ(seriesPeak(t, gpuSum), 2791636480);
    EXPECT_EQ(seriesSamples(t, gpuSum).back().value, 0);
    EXPECT_EQ(seriesPeak(t, cpuSum), 57803264);
    EXPECT_EQ(seriesSamples(t, cpuSum).back().value, 19267840);
    EXPECT_EQ(t.str(t.devices()[gpu].name), "Tesla V100-DGXS-32GB");

    ASSERT_EQ(t.kernels().size(), 8772u); // cat "Kernel", tid "stream 7"
    for (const auto& k : t.kernels()) {
        ASSERT_EQ(k.device, gpu);
        ASSERT_EQ(t.streams()[k.stream].handle, 7u);
    }
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Step), 6u); // ProfilerStep#N under cat "Operator"
    expectEventCounts(t, 75718, 0, 0);
    const auto& cats = t.metadata()["kineto"]["events_by_category"];
    EXPECT_EQ(cats["Operator"], 23646);
    EXPECT_EQ(cats["Runtime"], 11923);
}

TEST(KinetoImporter, OwlV2AttributesEachCudaAllocationToItsInnermostModule)
{
    const auto path = publicTrace(kOwl);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    const DeviceId gpu = findDevice(t, DeviceType::Cuda, 0);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    expectAllocsAndFrees(t, gpu, 6135, 6135);
    expectAllocsAndFrees(t, cpu, 602, 602);
    EXPECT_EQ(pairedCount(t, gpu), 6135u);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", gpu)), 2707847680);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", gpu)), 3600809984);
    expectAllocatedDeltasMatchEvents(t, gpu);
    EXPECT_EQ(t.kernels().size(), 4330u);
    EXPECT_EQ(t.kernels().front().correlation, 463374u);
    expectEventCounts(t, 132152, 65313, 2345);
    const auto& cats = t.metadata()["kineto"]["events_by_category"];
    EXPECT_EQ(cats["cuda_runtime"], 8567);
    EXPECT_EQ(cats["cuda_driver"], 725);
    EXPECT_EQ(cats["gpu_memset"], 750);
    EXPECT_EQ(cats["gpu_memcpy"], 85);

    // The reference script finds 20 CUDA allocations outside every nn.Module (inputs copied to the GPU
    // before the forward, post-processing after it): the other 6115 carry a module.
    const auto& m = t.memory();
    std::size_t withModule = 0, without = 0;
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.device[i] == gpu && m.kind[i] == EventKind::Alloc)
            (modulePath(t, m.scope[i]).empty() ? without : withModule)++;
    EXPECT_EQ(withModule, 6115u);
    EXPECT_EQ(without, 20u);

    struct Expected {
        std::uint64_t evIdx;
        TimeNs time;
        Bytes size;
        Address address;
        std::string modules;
    };
    const Expected cases[] = {
        { 24434, 1752829952235802607, 860295680, 137249672921088,
            "Owlv2ForObjectDetection_0 / Owlv2Model_0 / Owlv2VisionTransformer_0 / Owlv2Encoder_0 / "
            "Owlv2EncoderLayer_0 / Owlv2Attention_0" },
        { 30943, 1752829952730181396, 10618880, 137251495346176,
            "Owlv2ForObjectDetection_0 / Owlv2Model_0 / Owlv2VisionTransformer_0 / Owlv2Encoder_0 / "
            "Owlv2EncoderLayer_19 / Owlv2Attention_19" },
        { 37499, 1752829953309747109, 41472, 137278998568448, "Owlv2ForObjectDetection_0 / Sigmoid_0" },
        { 24391, 1752829952233434363, 512, 137278998387200, "" },
    };
    for (const auto& c : cases) {
        const std::size_t i = eventWithSequence(t, c.evIdx);
        ASSERT_NE(i, std::string::npos) << c.evIdx;
        EXPECT_EQ(m.time[i], c.time) << c.evIdx;
        EXPECT_EQ(m.size[i], c.size) << c.evIdx;
        EXPECT_EQ(m.address[i], c.address) << c.evIdx;
        EXPECT_EQ(m.device[i], gpu);
        EXPECT_EQ(modulePath(t, m.scope[i]), c.modules) << c.evIdx;
    }
    // with_stack: the innermost Python frame containing the allocation is its site's first frame
    // (reference: the python_function with the latest start that contains the ts on the same thread).
    const std::size_t big = eventWithSequence(t, 24434);
    ASSERT_NE(m.site[big], 0u);
    auto frames = t.siteFrames(m.site[big]);
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "<built-in method bmm of type object at 0x7ce6c2c1df60>");
    EXPECT_EQ(t.str(t.frames()[frames[0]].file), "");
    const auto owlFrames = std::count_if(frames.begin(), frames.end(),
        [&](FrameId f) { return t.str(t.frames()[f].file) == "transformers/models/owlv2/modeling_owlv2.py"; });
    EXPECT_GT(owlFrames, 0);
    const std::size_t sig = eventWithSequence(t, 37499);
    EXPECT_EQ(t.str(t.frames()[t.siteFrames(m.site[sig])[0]].name),
        "<built-in method sigmoid of type object at 0x7ce6c2c1df60>");
}

TEST(KinetoImporter, BertSmallKeepsNanosecondTimestampsExact)
{
    const auto path = publicTrace(kBert);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    const DeviceId gpu = findDevice(t, DeviceType::Cuda, 0);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    expectAllocsAndFrees(t, gpu, 109, 109);
    expectAllocsAndFrees(t, cpu, 9, 9);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", gpu)), 101305344);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", gpu)), 121634816);
    EXPECT_EQ(t.kernels().size(), 60u);
    expectEventCounts(t, 2551, 1385, 84);
    // baseTimeNanoseconds 1751410836000000000 + ts 1419247333400.919 µs.
    const std::size_t first = eventWithSequence(t, 480);
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(t.memory().time[first], 1752830083333400919);
    EXPECT_EQ(
        modulePath(t, t.memory().scope[first]), "BertLMHeadModel_0 / BertModel_0 / BertEmbeddings_0 / Embedding_0");
    const std::size_t last = eventWithSequence(t, 711);
    EXPECT_EQ(modulePath(t, t.memory().scope[last]),
        "BertLMHeadModel_0 / BertOnlyMLMHead_0 / BertLMPredictionHead_0 / Linear_25");
    EXPECT_EQ(t.metadata()["kineto"]["base_time_ns"], 1751410836000000000);
}

TEST(KinetoImporter, RocmKernelsJoinTheHipDeviceOfTheMemoryEvents)
{
    const auto path = publicTrace(kQwen);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    const DeviceId hip = findDevice(t, DeviceType::Hip, 0);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    EXPECT_EQ(t.devices().size(), 2u); // no phantom device 2 from the kernels' HSA agent id
    EXPECT_EQ(t.str(t.devices()[hip].name), "AMD Instinct MI300X VF");
    expectAllocsAndFrees(t, hip, 1294, 1294);
    expectAllocsAndFrees(t, cpu, 52, 52);
    EXPECT_EQ(pairedCount(t, hip), 1294u);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", hip)), 2219047936);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", hip)), 2533359616);
    expectEventCounts(t, 18090, 4266, 316);
    ASSERT_EQ(t.kernels().size(), 1516u);
    for (const auto& k : t.kernels())
        ASSERT_EQ(k.device, hip);
    EXPECT_EQ(t.stats().count("kernel_device_remapped"), 1u);
    EXPECT_EQ(t.metadata()["kernel_device_map"]["2"], 0);
    EXPECT_EQ(modulePath(t, t.memory().scope[eventWithSequence(t, 5936)]),
        "Qwen2Model_0 / Qwen2DecoderLayer_11 / Qwen2MLP_11 / Linear_83");
}

TEST(KinetoImporter, RocmNormalizationRunMatchesEveryFreeAcrossTwoThreads)
{
    const auto path = publicTrace(kNorm);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    const DeviceId hip = findDevice(t, DeviceType::Hip, 0);
    const DeviceId cpu = findDevice(t, DeviceType::Cpu, -1);
    expectAllocsAndFrees(t, hip, 213, 202);
    expectAllocsAndFrees(t, cpu, 30, 30);
    EXPECT_EQ(t.stats().count("unmatched_free"), 0u);
    EXPECT_EQ(liveAtEnd(t, hip), 11u);
    EXPECT_EQ(t.stats().count("unsorted_input"), 474u);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", hip)), 8154624);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", hip)), 8388608);
    expectAllocatedDeltasMatchEvents(t, hip);
    EXPECT_EQ(t.kernels().size(), 168u);
    expectEventCounts(t, 8500, 6004, 36);
    EXPECT_EQ(t.metadata()["kineto"]["events_by_category"]["fwdbwd"], 102);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Range), 30u);
    std::set<std::uint64_t> threads(t.memory().thread.begin(), t.memory().thread.end());
    EXPECT_EQ(threads, (std::set<std::uint64_t> { 2300490, 2300680 }));
    EXPECT_EQ(modulePath(t, t.memory().scope[eventWithSequence(t, 1286)]), "Net_0 / BatchNorm2d_0");
    EXPECT_EQ(modulePath(t, t.memory().scope[eventWithSequence(t, 1408)]), "MSELoss_0");
}

TEST(KinetoImporter, VllmGraphCaptureKeepsTheHugeAllocatedCounter)
{
    const auto path = publicTrace(kVllm);
    GPUMEM_REQUIRE_PUBLIC(path);
    Trace t = loadTrace(path);
    const DeviceId hip = findDevice(t, DeviceType::Hip, 0);
    EXPECT_EQ(t.devices().size(), 1u);
    expectAllocsAndFrees(t, hip, 592, 592);
    EXPECT_EQ(pairedCount(t, hip), 592u);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Allocated", hip)), 191628704768);
    EXPECT_EQ(seriesPeak(t, findSeries(t, "Total Reserved", hip)), 193621655552);
    expectEventCounts(t, 131243, 119876, 26);
    EXPECT_EQ(t.metadata()["kineto"]["events_by_category"]["cuda_runtime"], 3128);
    ASSERT_EQ(t.kernels().size(), 7u);
    EXPECT_EQ(t.streams()[t.kernels()[0].stream].handle, 1u);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Range), 26u);
    EXPECT_EQ(modulePath(t, t.memory().scope[eventWithSequence(t, 3845)]), "GptOssForCausalLM_0 / GraphModule_0");
}

TEST(KinetoImporter, GmtRoundTripKeepsColumnsCountersAndAnomalies)
{
    for (const auto& name : { kHta, kLegacy, kBert }) {
        const auto path = publicTrace(name);
        GPUMEM_REQUIRE_PUBLIC(path);
        Trace t = loadTrace(path);
        TempFile gmt("x.gmt");
        writeGmt(t, gmt.path());
        Trace back = loadTrace(gmt.path());
        SCOPED_TRACE(name);
        expectSameTrace(t, back);
    }
}

TEST(KinetoImporter, AttributesToInnermostOpAndParsesLegacyCallStacks)
{
    // 2021-style: tid as a string on ops, an int on [memory]; "Call stack" innermost first.
    std::string json = kinetoJson(R"(
      {"ph":"X","cat":"Operator","name":"aten::linear","pid":7,"tid":"7","ts":100,"dur":50,
       "args":{"Call stack":"model.py(40): forward;train.py(88): step;train.py(120): <module>"}},
      {"ph":"X","cat":"Operator","name":"aten::addmm","pid":7,"tid":"7","ts":110,"dur":20,"args":{}},
      {"ph":"i","s":"t","name":"[memory]","pid":7,"tid":7,"ts":115,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":7,"tid":7,"ts":140,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":-512}},
      {"ph":"i","s":"t","name":"[memory]","pid":7,"tid":8,"ts":140,"args":{"Device Type":1,"Device Id":0,"Addr":8192,"Bytes":256}},
      {"ph":"X","cat":"Kernel","name":"gemm","pid":0,"tid":"stream 7","ts":120,"dur":5,"args":{"correlation":3}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    // Event 0 at 115 µs lies in addmm inside linear; event 1 at 140 only in linear; event 2 on another thread.
    const Scope& addmm = t.scopes()[m.scope[0]];
    EXPECT_EQ(t.str(addmm.name), "aten::addmm");
    EXPECT_EQ(addmm.kind, ScopeKind::Op);
    EXPECT_EQ(t.str(t.scopes()[addmm.parent].name), "aten::linear");
    EXPECT_EQ(m.scope[1], addmm.parent);
    EXPECT_EQ(m.scope[2], 0u);
    EXPECT_EQ(m.time[0], 115000);
    ASSERT_NE(m.site[0], 0u);
    EXPECT_EQ(m.site[0], m.site[1]); // addmm has no stack of its own: linear's
    auto frames = t.siteFrames(m.site[0]);
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "forward");
    EXPECT_EQ(t.str(t.frames()[frames[0]].file), "model.py");
    EXPECT_EQ(t.frames()[frames[0]].line, 40);
    EXPECT_EQ(t.str(t.frames()[frames[2]].name), "<module>");
    EXPECT_EQ(m.site[2], 0u);
    ASSERT_EQ(t.kernels().size(), 1u);
    EXPECT_EQ(t.streams()[t.kernels()[0].stream].handle, 7u);
    EXPECT_EQ(t.kernels()[0].end - t.kernels()[0].start, 5000);
    EXPECT_EQ(t.str(t.devices()[m.device[0]].name), "Test GPU");
}

TEST(KinetoImporter, NestsModulesAndPythonFramesByIntervalOnTheSameThread)
{
    std::string json = kinetoJson(R"(
      {"ph":"X","cat":"python_function","name":"nn.Module: Net_0","pid":1,"tid":1,"ts":10.0,"dur":100.0},
      {"ph":"X","cat":"python_function","name":"model.py(12): forward","pid":1,"tid":1,"ts":10.5,"dur":99.0},
      {"ph":"X","cat":"python_function","name":"nn.Module: Linear_0","pid":1,"tid":1,"ts":20.0,"dur":10.0},
      {"ph":"X","cat":"python_function","name":"nn.Module: Linear_1","pid":1,"tid":1,"ts":40.0,"dur":10.0},
      {"ph":"X","cat":"cpu_op","name":"aten::empty","pid":1,"tid":1,"ts":41.0,"dur":1.0},
      {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":1,"tid":1,"ts":0,"dur":500},
      {"ph":"X","cat":"user_annotation","name":"warmup","pid":1,"tid":1,"ts":5,"dur":200},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":41.5,
       "args":{"Total Reserved":2097152,"Total Allocated":1024,"Bytes":1024,"Addr":64,"Device Id":0,"Device Type":1,"Ev Idx":9}},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":25.125,
       "args":{"Total Reserved":2097152,"Total Allocated":512,"Bytes":512,"Addr":32,"Device Id":0,"Device Type":1,"Ev Idx":8}},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":150,
       "args":{"Total Reserved":2097152,"Total Allocated":512,"Bytes":-1024,"Addr":64,"Device Id":0,"Device Type":1,"Ev Idx":10}}
    )",
        R"( "baseTimeNanoseconds": 1000000000000,)");
    Trace t = importKinetoJson(json, "hand.json");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m.time[0], 1000000000000 + 25125); // sorted: Ev Idx 8 at 25.125 µs first
    EXPECT_EQ(modulePath(t, m.scope[0]), "Net_0 / Linear_0");
    EXPECT_EQ(t.scopes()[m.scope[0]].kind, ScopeKind::Module);
    EXPECT_EQ(t.str(t.scopes()[m.scope[1]].name), "aten::empty");
    EXPECT_EQ(modulePath(t, m.scope[1]), "Net_0 / Linear_1");
    EXPECT_EQ(t.str(t.scopes()[m.scope[2]].name), "warmup");
    EXPECT_EQ(t.scopes()[m.scope[2]].kind, ScopeKind::Range);
    // The Python frame between Net_0 and the modules is the allocation's site.
    auto frames = t.siteFrames(m.site[0]);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(t.str(t.frames()[frames[0]].name), "forward");
    EXPECT_EQ(t.frames()[frames[0]].line, 12);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Step), 1u);
    EXPECT_EQ(countAnnotations(t, AnnotationKind::Range), 1u);
    const int reserved = findSeries(t, "Total Reserved", m.device[0]);
    EXPECT_EQ(seriesSamples(t, reserved).size(), 3u);
}

TEST(KinetoImporter, RejectsMalformedInputNamingTheFile)
{
    std::string notObject = "[1, 2, 3]";
    EXPECT_THROW(importKinetoJson(notObject, "a.json"), FormatError);
    std::string noEvents = R"({"schemaVersion": 1, "deviceProperties": []})";
    try {
        importKinetoJson(noEvents, "b.json");
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("b.json"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("traceEvents"), std::string::npos);
    }
    std::string garbage
        = R"({"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": 1}}, {"ph": tru}, {}]})";
    EXPECT_THROW(importKinetoJson(garbage, "c.json"), FormatError);
}

TEST(KinetoImporter, KeepsTheEventsBeforeATruncation)
{
    std::string json = R"({"traceEvents": [
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":10,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":20,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":-1024}},
      {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":15,"du)";
    Trace t = importKinetoJson(json, "cut.json");
    EXPECT_EQ(t.memory().count(), 2u);
    const Anomaly* a = t.stats().find("truncated");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->severity, Severity::Error);
    EXPECT_THROW(t.stats().throwIfStrictViolated("cut.json"), FormatError);
}

TEST(KinetoImporter, SniffsKinetoButNotOtherJson)
{
    TempFile kineto("t.json", kinetoJson(""));
    TempFile other("o.json", R"({"hello": [1, 2]})");
    TempFile list("l.json", "[[-1, 1, 4096, 7]]");
    ASSERT_NE(detectFormat(kineto.path()), nullptr);
    EXPECT_EQ(detectFormat(kineto.path())->name(), "kineto");
    EXPECT_EQ(detectFormat(other.path()), nullptr);
    ASSERT_NE(detectFormat(list.path()), nullptr);
    EXPECT_NE(detectFormat(list.path())->name(), "kineto");
}

TEST(KinetoImporter, SkipsAnEventWhoseDeviceOrBytesCannotBeWhatTheyName)
{
    // A "Device Id" and a kernel "device" beyond 32 bits used to wrap to cuda:1215752191; a fractional
    // "Bytes" was rounded. Each such event is skipped and counted, naming the event and the field.
    std::string json = kinetoJson(R"(
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":10,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":11,"args":{"Device Type":1,"Device Id":99999999999,"Addr":128,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":12,"args":{"Device Type":1,"Device Id":0,"Addr":256,"Bytes":8.5}},
      {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":13,"dur":5,"args":{"device":99999999999,"stream":7}},
      {"ph":"X","cat":"kernel","name":"gemv","pid":0,"tid":7,"ts":20,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":30,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":-1024}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 2u);
    EXPECT_EQ(m.address[0], 64u);
    EXPECT_EQ(m.address[1], 64u);
    ASSERT_EQ(t.kernels().size(), 1u);
    EXPECT_EQ(t.str(t.kernels()[0].name), "gemv");
    for (const auto& d : t.devices())
        EXPECT_NE(d.ordinal, 1215752191);
    ASSERT_EQ(t.importStats().count("bad_event_field"), 3u);
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail,
        "\"Device Id\" in 1 event (first traceEvents[1]: 99999999999, not a device ordinal (an integer of 32 bits)); "
        "\"Bytes\" in 1 event (first traceEvents[2]: 8.5, not a whole number); \"device\" in 1 event (first "
        "traceEvents[3]: 99999999999, not a device ordinal (32 bits)); those events were skipped");
}

TEST(KinetoImporter, CountsSkippedEventsPerBadField)
{
    // The fresh-user review's k_multi.json: six events bad in four different fields. The anomaly used to
    // name only the first ("Addr"); it now counts each field and names each one's first event.
    std::string json = kinetoJson(R"(
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":100,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":50,"args":{"Device Type":1,"Device Id":0,"Addr":1.5,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":51,"args":{"Device Type":1,"Device Id":0,"Addr":12288,"Bytes":1e+30}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":52,"args":{"Device Type":1,"Device Id":0,"Addr":12288,"Bytes":"big"}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":53,"args":{"Device Type":"cuda","Device Id":0,"Addr":12288,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1e+300,"args":{"Device Type":1,"Device Id":0,"Addr":12288,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":54,"args":{"Device Type":1,"Device Id":0,"Addr":2.5,"Bytes":512}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.memory().address[0], 4096u);
    ASSERT_EQ(t.importStats().count("bad_event_field"), 6u);
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail,
        "\"Addr\" in 2 events (first traceEvents[1]: 1.5, not a whole number); \"Bytes\" in 2 events (first "
        "traceEvents[2]: 1e+30, out of range (not a 64-bit integer); also: traceEvents[3]: \"big\", a string, not a "
        "number); \"Device Type\" in 1 event (first "
        "traceEvents[4]: \"cuda\", a string, not a number); \"ts\" in 1 event (first traceEvents[5]: 1e+300, out of "
        "range (in nanoseconds not a 64-bit integer)); those events were skipped");
}

TEST(KinetoImporter, SkipsACudaMemoryEventWithANegativeDeviceId)
{
    // "Device Id": -3 on a CUDA event made a device cuda:-3 (k_devid_neg.json). -1 stays the CPU's index.
    std::string json = kinetoJson(R"(
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":10,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":11,"args":{"Device Type":1,"Device Id":-3,"Addr":12288,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":12,"args":{"Device Type":6,"Device Id":-1,"Addr":8192,"Bytes":512}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":13,"args":{"Device Type":0,"Device Id":-1,"Addr":64,"Bytes":16}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.memory().address[0], 4096u);
    EXPECT_EQ(t.memory().address[1], 64u);
    ASSERT_EQ(t.devices().size(), 2u);
    for (const auto& d : t.devices())
        EXPECT_TRUE(d.type == DeviceType::Cpu || d.ordinal == 0) << d.ordinal;
    ASSERT_EQ(t.importStats().count("bad_event_field"), 2u);
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail,
        "traceEvents[1]: \"Device Id\" is -3, negative on a CUDA/HIP event (only a CPU event may have -1); the "
        "event was skipped");
}

namespace {
// One [memory] event on cuda:0 at ts 10 whose args are `args`, then a whole alloc/free pair at 64.
std::string withOneMemoryEvent(const std::string& args, const std::string& ts = "10")
{
    return kinetoJson(R"(
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":5,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":)"
        + ts + R"(,"args":{)" + args + R"(}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":30,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":-1024}}
    )");
}

// Imports withOneMemoryEvent(args, ts): the middle event must be skipped as bad_event_field, with
// this detail, and the pair around it kept.
void expectMiddleEventSkipped(const std::string& args, const std::string& expectedDetail, const std::string& ts = "10")
{
    std::string json = withOneMemoryEvent(args, ts);
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.memory().count(), 2u) << args;
    EXPECT_EQ(t.memory().address[0], 64u);
    EXPECT_EQ(t.memory().address[1], 64u);
    ASSERT_EQ(t.importStats().count("bad_event_field"), 1u) << args;
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail, expectedDetail);
    EXPECT_EQ(t.importStats().count("memory_event_without_size"), 0u);
    EXPECT_EQ(t.importStats().count("memory_event_without_time"), 0u);
    EXPECT_EQ(t.importStats().count("unknown_device_type"), 0u);
}

// expectMiddleEventSkipped() for each (args, detail).
void expectMiddleEventsSkipped(std::initializer_list<std::pair<std::string, std::string>> cases)
{
    for (const auto& [args, detail] : cases)
        expectMiddleEventSkipped(args, detail);
}
} // namespace

TEST(KinetoImporter, SkipsAMemoryEventWhoseAddrIsFractional)
{
    // "Addr": 1.5 was rounded to address 2; like a fractional "Bytes", the event is skipped and named.
    expectMiddleEventSkipped(R"("Device Type":1,"Device Id":0,"Addr":1.5,"Bytes":512)",
        "traceEvents[1]: \"Addr\" is 1.5, not a whole number; the event was skipped");
}

TEST(KinetoImporter, SkipsAMemoryEventWhoseNumberIsOutOfRangeAndKeepsTheRest)
{
    // "Bytes": 1e30 (or 30 digits) made the whole file fail; now only its event is skipped and counted.
    expectMiddleEventsSkipped({
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":1e30)",
            "traceEvents[1]: \"Bytes\" is 1e30, out of range (not a 64-bit integer); the event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":123456789012345678901234567890)",
            "traceEvents[1]: \"Bytes\" is 123456789012345678901234567890, out of range (not a 64-bit integer); the "
            "event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":1e400,"Bytes":512)",
            "traceEvents[1]: \"Addr\" is 1e400, out of range (not a 64-bit integer); the event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":512,"Total Allocated":-9.3e18)",
            "traceEvents[1]: \"Total Allocated\" is -9.3e18, out of range (not a 64-bit integer); the event was "
            "skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":1e-400)",
            "traceEvents[1]: \"Bytes\" is 1e-400, not a whole number; the event was skipped" },
    });
    // A whole number written with an exponent is that number.
    std::string json = withOneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":4e3,"Bytes":5.12e2)");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.memory().count(), 3u);
    EXPECT_EQ(t.memory().address[1], 4000u);
    EXPECT_EQ(t.memory().size[1], 512u);
    EXPECT_EQ(t.importStats().count("bad_event_field"), 0u);
}

TEST(KinetoImporter, SkipsAMemoryEventWhoseNumberIsAStringNamingTheType)
{
    // "Bytes": "big" was counted as "no or zero Bytes"; it is a wrongly typed field, named as such.
    expectMiddleEventsSkipped({
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":"big")",
            "traceEvents[1]: \"Bytes\" is \"big\", a string, not a number; the event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":"0x80","Bytes":512)",
            "traceEvents[1]: \"Addr\" is \"0x80\", a string, not a number; the event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":true)",
            "traceEvents[1]: \"Bytes\" is true, true/false, not a number; the event was skipped" },
        { R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":{"n": 1})",
            "traceEvents[1]: \"Bytes\" is {…}, an object, not a number; the event was skipped" },
        { R"("Device Type":1,"Device Id":[0],"Addr":128,"Bytes":512)",
            "traceEvents[1]: \"Device Id\" is […], a list, not a number; the event was skipped" },
    });
    // null is no value: the event has no Bytes, as before.
    std::string json = withOneMemoryEvent(R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":null)");
    Trace t = importKinetoJson(json, "hand.json");
    EXPECT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.importStats().count("bad_event_field"), 0u);
    EXPECT_EQ(t.importStats().count("memory_event_without_size"), 1u);
}

TEST(KinetoImporter, QuotesTheDeviceTypeItCannotUse)
{
    // "Device Type": "cuda" was reported as "Device Type -1"; it is a string, quoted as written.
    expectMiddleEventSkipped(R"("Device Type":"cuda","Device Id":0,"Addr":128,"Bytes":512)",
        "traceEvents[1]: \"Device Type\" is \"cuda\", a string, not a number; the event was skipped");
    // A number that is no c10 device type is kept on device type Other, naming the number; a missing
    // one says it is missing (it too was "Device Type -1").
    for (const auto& [args, detail] : std::vector<std::pair<std::string, std::string>> {
             { R"("Device Type":7,"Device Id":0,"Addr":128,"Bytes":512)",
                 "[memory] event Ev Idx 1: Device Type 7 is not CPU (0), CUDA (1) or HIP (6); imported as device type "
                 "other" },
             { R"("Device Id":0,"Addr":128,"Bytes":512)",
                 "[memory] event Ev Idx 1 has no \"Device Type\"; imported as device type other" },
         }) {
        std::string json = withOneMemoryEvent(args);
        Trace t = importKinetoJson(json, "hand.json");
        ASSERT_EQ(t.memory().count(), 3u);
        EXPECT_EQ(t.devices()[t.memory().device[1]].type, DeviceType::Other);
        ASSERT_EQ(t.importStats().count("unknown_device_type"), 1u);
        EXPECT_EQ(t.importStats().find("unknown_device_type")->detail, detail);
    }
}

TEST(KinetoImporter, SaysATimestampIsOutOfRangeRatherThanMissing)
{
    // "ts": 1e300 was reported as "no numeric ts"; it is out of range, and quoted.
    expectMiddleEventSkipped(R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":512)",
        "traceEvents[1]: \"ts\" is 1e300, out of range (in nanoseconds not a 64-bit integer); the event was skipped",
        "1e300");
    expectMiddleEventSkipped(R"("Device Type":1,"Device Id":0,"Addr":128,"Bytes":512)",
        "traceEvents[1]: \"ts\" is \"10\", a string, not a number; the event was skipped", "\"10\"");
    // A kernel's "ts" or "dur" likewise (it was dropped, or kept with zero duration, without a word).
    std::string json = kinetoJson(R"(
      {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1e300,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"X","cat":"kernel","name":"gemv","pid":0,"tid":7,"ts":20,"dur":-9e300,"args":{"device":0,"stream":7}},
      {"ph":"X","cat":"kernel","name":"relu","pid":0,"tid":7,"ts":30,"dur":5,"args":{"device":0,"stream":7}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"args":{"Device Type":1,"Device Id":0,"Addr":64,"Bytes":8}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.kernels().size(), 1u);
    EXPECT_EQ(t.str(t.kernels()[0].name), "relu");
    ASSERT_EQ(t.importStats().count("bad_event_field"), 2u);
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail,
        "\"ts\" in 1 event (first traceEvents[0]: 1e300, out of range (in nanoseconds not a 64-bit integer)); \"dur\" "
        "in 1 event (first traceEvents[1]: -9e300, out of range (in nanoseconds not a 64-bit integer)); those events "
        "were skipped");
    // A [memory] event with no "ts" at all is still the missing-time case.
    ASSERT_EQ(t.importStats().count("memory_event_without_time"), 1u);
    EXPECT_EQ(t.importStats().find("memory_event_without_time")->detail,
        "traceEvents[3]: a [memory] event has no \"ts\"; skipped");
}

// Brief esc item 4: one event is counted in the singular (core's counted()), smallest inputs.
TEST(KinetoImporter, CountsOneEventInTheSingular)
{
    const std::string mem = R"({"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":)";
    std::string j1 = kinetoJson(mem + R"(1,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":1024}},)"
        + mem + R"(2,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":-1024}},)"
        + mem + R"(5,"args":{"Device Type":1,"Device Id":0,"Bytes":32}})");
    Trace noAddr = importKinetoJson(j1, "noaddr.json");
    const Anomaly* a = noAddr.stats().find("memory_event_without_address");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->detail, "1 [memory] event has no \"Addr\" while others have one; skipped (without an address, a free cannot be paired)");
    std::string j2 = kinetoJson(mem + R"(1,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":1024}},)"
        + mem + R"(2,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":0}})");
    Trace noBytes = importKinetoJson(j2, "nobytes.json");
    const Anomaly* b = noBytes.stats().find("memory_event_without_size");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->detail, "1 [memory] event has no or zero \"Bytes\"; skipped, with the counters kept");
    std::string j3 = kinetoJson(mem + R"(1,"args":{"Device Type":1,"Device Id":0,"Bytes":1024}},)"
        + mem + R"(2,"args":{"Device Type":1,"Device Id":0,"Bytes":-1024}})");
    Trace legacy = importKinetoJson(j3, "leg1.json");
    const Anomaly* c = legacy.stats().find("no_addresses");
    ASSERT_NE(c, nullptr);
    const std::string end = "counter \"Allocated (sum of Bytes)\": cuda:0 1 alloc / 1 free";
    EXPECT_EQ(c->detail.substr(c->detail.size() - std::min(c->detail.size(), end.size())), end) << c->detail;
}

// Task "lim" item 6: a CPU event's "Device Id" below -1 and a CUDA event without one (null or absent)
// were kept silently (cuda:0); they are skipped and counted, and one field's other distinct reasons
// (up to 3 in all) are named after the first.
TEST(KinetoImporter, SkipsBadDeviceIdsAndNamesUpToThreeReasonsPerField)
{
    std::string json = kinetoJson(R"(
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":1,"args":{"Device Type":1,"Device Id":0,"Addr":4096,"Bytes":1024}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":2,"args":{"Device Type":0,"Device Id":-3,"Addr":8192,"Bytes":64}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":3,"args":{"Device Type":1,"Device Id":null,"Addr":12288,"Bytes":64}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":4,"args":{"Device Type":1,"Addr":16384,"Bytes":64}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":5,"args":{"Device Type":1,"Device Id":1099511627776,"Addr":20480,"Bytes":64}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":6,"args":{"Device Type":1,"Device Id":true,"Addr":24576,"Bytes":64}},
      {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":7,"args":{"Device Type":0,"Device Id":-1,"Addr":28672,"Bytes":64}}
    )");
    Trace t = importKinetoJson(json, "hand.json");
    ASSERT_EQ(t.memory().count(), 2u); // the CUDA alloc and the CPU one at -1
    ASSERT_EQ(t.importStats().count("bad_event_field"), 5u);
    EXPECT_EQ(t.importStats().find("bad_event_field")->detail,
        "traceEvents[1]: \"Device Id\" is -3, below -1 on a CPU event (only -1 is valid); also: traceEvents[2]: null "
        "or absent, a CUDA/HIP event must name its device ordinal; traceEvents[4]: 1099511627776, not a device ordinal "
        "(an integer of 32 bits); the event was skipped");
}
