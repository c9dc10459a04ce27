// gpumem explain's diagnosis (analyze/diagnosis.h): one hand-written trace per mechanism
// (tests/data/explain/*.jsonl, each described in its header), asserting the finding, its evidence and
// its bytes; every listed remedy replayed again must do what the diagnosis says; public traces where present.
#include "analyze/analysis.h"
#include "analyze/diagnosis.h"
#include "core/display_width.h"
#include "core/jsonl_format.h"
#include "importers/importer_registry.h"
#include "importers/oom_text_importer.h"
#include "replay/replayer.h"
#include "tests/analyze/public_trace_support.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

using namespace gpumem;
using analyze::Diagnosis;
using analyze::DiagnosisOptions;
using analyze::Finding;
using analyze::Remedy;

namespace {

constexpr Bytes MiB = Bytes(1) << 20;
constexpr Bytes GiB = Bytes(1) << 30;

Trace load(const std::string& name) { return loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/explain/" + name); }

Diagnosis run(const Trace& t, Bytes capacity, std::string policy = "", std::optional<TimeNs> at = {})
{
    DiagnosisOptions o;
    o.capacity = capacity;
    o.policy = std::move(policy);
    o.at = at;
    o.jobs = 2;
    return analyze::diagnose(t, o);
}

const Finding* find(const Diagnosis& d, std::string_view id)
{
    for (const auto& f : d.findings)
        if (f.id == id)
            return &f;
    return nullptr;
}

bool anyEvidence(const Finding& f, std::string_view text)
{
    return std::any_of(f.evidence.begin(), f.evidence.end(), [&](const auto& e) { return e.find(text) != std::string::npos; });
}

// Replays every remedy the diagnosis lists with the same options and checks what it says.
void expectRemediesHold(const Trace& t, const Diagnosis& d)
{
    for (const auto& r : d.remedies) {
        replay::ReplayOptions o;
        o.capacity = d.capacity;
        o.totalMemory = d.capacityOrigin == "given" ? d.capacity : 0;
        o.device = d.device;
        o.onOom = replay::OnOom::Stop;
        if (!r.emptyCacheAt.empty()) // the remedy is the calls added, not a setting
            o.addEmptyCache = replay::parseEmptyCacheSchedule(r.emptyCacheAt);
        const auto res = replay::Replayer(o).run(t, replay::parsePolicySpec(r.spec));
        EXPECT_EQ(res.ooms, r.ooms) << r.spec;
        if (r.removesOom)
            EXPECT_TRUE(res.failures.empty()) << r.spec << " was listed as removing the OOM";
        else
            EXPECT_LT(res.peakReserved.bytes, d.peakReserved) << r.spec << " was listed as lowering the peak";
        EXPECT_EQ(res.peakReserved.bytes, r.peakReserved) << r.spec;
        EXPECT_EQ(res.deviceCalls(), r.deviceCalls) << r.spec;
    }
}

} // namespace

TEST(Diagnosis, CapacityWhenLiveBytesExceedTheDevice)
{
    const Trace t = load("capacity.jsonl");
    const auto d = run(t, 100 * MiB);
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.moment.request, 50 * MiB);
    ASSERT_FALSE(d.findings.empty());
    EXPECT_EQ(d.findings.front().id, "capacity");
    EXPECT_EQ(d.findings.front().bytes, 10 * MiB);
    EXPECT_TRUE(d.noSettingHelps);
    EXPECT_TRUE(d.remedies.empty());
    const auto& c = d.findings.front().contributors;
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(c.front().bytes, 60 * MiB);
    EXPECT_TRUE(anyEvidence(d.findings.front(), "load_weights (model.py:12) 60.00 MiB"));
    EXPECT_TRUE(anyEvidence(d.findings.front(), "category: parameter 60.00 MiB"));
    EXPECT_NE(d.verdict.find("no allocator setting can help"), std::string::npos) << d.verdict;
    EXPECT_NE(d.verdict.find("(capacity)"), std::string::npos) << d.verdict;
}

TEST(Diagnosis, ExternalFragmentationListsFreeBlocksPerSegmentAndThePinningBlocks)
{
    const Trace t = load("external_fragmentation.jsonl");
    const auto d = run(t, 100 * MiB);
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.moment.request, 30 * MiB);
    const Finding* f = find(d, "external_fragmentation");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 70 * MiB);
    EXPECT_EQ(d.findings.front().id, "external_fragmentation");
    ASSERT_EQ(f->segments.size(), 5u);
    // The pinning blocks are the five `keep` allocations (the 2nd, 5th, … of the trace): their allocation
    // index leads to the recorded address the viewer's memory map draws (0x7f0000800000 + k · 24 MiB).
    std::vector<Address> recorded;
    for (const auto& s : f->segments) {
        EXPECT_EQ(s.size, 20 * MiB);
        EXPECT_EQ(s.freeBlocks, (std::vector<Bytes> { 8 * MiB, 6 * MiB }));
        ASSERT_EQ(s.pinning.size(), 1u);
        EXPECT_EQ(s.pinning.front().size, 6 * MiB);
        EXPECT_EQ(s.pinning.front().site, "keep (train.py:9)");
        ASSERT_TRUE(s.pinning.front().allocation);
        const auto& al = t.allocations()[*s.pinning.front().allocation];
        recorded.push_back(t.memory().address[al.allocEvent]);
    }
    std::sort(recorded.begin(), recorded.end());
    EXPECT_EQ(recorded, (std::vector<Address> { 0x7f0000800000, 0x7f0002000000, 0x7f0003800000, 0x7f0005000000,
                            0x7f0006800000 }));
    EXPECT_TRUE(anyEvidence(*f, "free blocks: 10; largest 8.00 MiB"));
    EXPECT_EQ(find(d, "capacity"), nullptr);
    expectRemediesHold(t, d);
}

TEST(Diagnosis, OversizeSplitAndTheMaxSplitSizeRemedyProvenByReplay)
{
    const Trace t = load("oversize_split.jsonl");
    const auto d = run(t, 100 * MiB);
    const Finding* f = find(d, "oversize_split");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 60 * MiB);
    ASSERT_EQ(f->segments.size(), 1u);
    EXPECT_EQ(f->segments.front().pinningBlocks, 4u);
    EXPECT_EQ(f->segments.front().pinning.front().site, "small_op (model.py:60)");
    ASSERT_NE(find(d, "external_fragmentation"), nullptr);
    EXPECT_EQ(find(d, "external_fragmentation")->bytes, 40 * MiB);
    std::vector<std::string> settings;
    for (const auto& r : d.remedies)
        settings.push_back(r.setting);
    EXPECT_NE(std::find(settings.begin(), settings.end(), "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32"), settings.end());
    EXPECT_NE(std::find(settings.begin(), settings.end(), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        settings.end());
    for (const auto& r : d.remedies) {
        EXPECT_TRUE(r.removesOom);
        EXPECT_EQ(r.peakReserved, 80 * MiB) << r.spec;
    }
    expectRemediesHold(t, d);
    EXPECT_NE(d.verdict.find("removes the OOM (proven by replay)"), std::string::npos) << d.verdict;
    // Requests above 1 MiB reach the large pool, where max_split_size acts: every candidate is replayed.
    EXPECT_EQ(d.remedyReplaysSkipped, 0u);
}

TEST(Diagnosis, StreamStrandedNamesPerStreamReservedAndFree)
{
    const Trace t = load("stream_stranded.jsonl");
    const auto d = run(t, 60 * MiB);
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.moment.stream, 0u);
    const Finding* f = find(d, "stream_stranded");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 14 * MiB);
    ASSERT_EQ(f->streams.size(), 2u);
    EXPECT_EQ(f->streams[0], (replay::StreamMemory { 0, 30 * MiB, 0 }));
    EXPECT_EQ(f->streams[1], (replay::StreamMemory { 7, 20 * MiB, 14 * MiB }));
    EXPECT_TRUE(anyEvidence(*f, "stream 7: reserved 20.00 MiB, free 14.00 MiB"));
    EXPECT_EQ(find(d, "capacity"), nullptr);
}

TEST(Diagnosis, PendingFreesSayHowLongTheBlockWaited)
{
    // At the free: the block waits on the comm stream. (The 12 MiB request after it does not fail: PyTorch's
    // OOM recovery synchronises the pending frees first, allocators.md §1.10, and the replay does so too.)
    const Trace t = load("pending_frees.jsonl");
    const TimeNs freed = t.memory().time[3];
    ASSERT_EQ(t.memory().kind[3], EventKind::Free);
    const auto d = run(t, 50 * MiB, "", freed);
    EXPECT_EQ(d.moment.kind, analyze::Moment::Kind::Time);
    const Finding* f = find(d, "pending_frees");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 20 * MiB);
    EXPECT_EQ(d.findings.front().id, "pending_frees");
    ASSERT_EQ(f->blocks.size(), 1u);
    EXPECT_EQ(f->blocks.front().site, "all_reduce_buffer (ddp.py:88)");
    EXPECT_TRUE(anyEvidence(*f, "freed +0.000003 s, reusable after 0.005001 s")) << f->evidence.front();
    EXPECT_EQ(find(d, "capacity"), nullptr);
    // One block, in the singular (review finding: "1 block … were not reusable yet: they were used").
    EXPECT_EQ(f->statement.rfind("1 block (20.00 MiB) had been freed by the program but was not reusable yet: it was used on "
                                 "another stream (record_stream) and waits for its work to finish (the longest for 0.005001 s).", 0),
        0u) << f->statement;
}

// Review finding (2026-12-04): a wait below a microsecond (flexgen's 1.3b snapshot: a state rebuilt from before the
// window, its events nanoseconds apart) printed "reusable after 0.000000 s" and "(the longest for 0.000000 s)".
// Smallest input: pending_frees.jsonl with the 12 MiB request 200 ns and the free_completed 500 ns after the free
// (a completion that is the device's next event after its free makes no pending block: request_feeder.h).
TEST(Diagnosis, APendingWaitBelowAMicrosecondIsNotPrintedAsZeroSeconds)
{
    std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/explain/pending_frees.jsonl");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string late = "\"t\":1732000000005005000,\"kind\":\"free_completed\"";
    ASSERT_NE(text.find(late), std::string::npos);
    text.replace(text.find(late), late.size(), "\"t\":1732000000000004500,\"kind\":\"free_completed\"");
    const std::string request = "\"t\":1732000000000005000,\"kind\":\"alloc\"";
    ASSERT_NE(text.find(request), std::string::npos);
    text.replace(text.find(request), request.size(), "\"t\":1732000000000004200,\"kind\":\"alloc\"");
    const Trace t = readJsonlText(text, "pending_500ns.jsonl");
    const auto d = run(t, 50 * MiB, "", t.memory().time[3]);
    const Finding* f = find(d, "pending_frees");
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(anyEvidence(*f, "freed +0.000003 s, its free_completed recorded within 1 µs of the free")) << f->evidence.front();
    EXPECT_EQ(f->statement.find("0.000000 s"), std::string::npos) << f->statement;
    EXPECT_EQ(f->statement.find("the longest"), std::string::npos) << f->statement;
}

TEST(Diagnosis, AllocatorLimitNamesTheFractionAndItsValue)
{
    const Trace t = load("allocator_limit.jsonl");
    const auto d = run(t, 0, "pytorch:per_process_memory_fraction:0.5");
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.moment.refusedBy, "pytorch's per_process_memory_fraction 0.5, 100.00 MiB of the device's 200.00 MiB");
    const Finding* f = find(d, "allocator_limit");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 60 * MiB);
    ASSERT_FALSE(d.remedies.empty());
    EXPECT_EQ(d.remedies.front().spec, "pytorch");
    EXPECT_EQ(d.remedies.front().setting, "PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's defaults)");
    expectRemediesHold(t, d);
}

TEST(Diagnosis, RefusedByNamesRmmMaximumPoolSizeAndBfcMemoryLimit)
{
    const Trace t = load("capacity.jsonl");
    replay::ReplayOptions o;
    o.onOom = replay::OnOom::Stop;
    auto r = replay::Replayer(o).run(t, replay::parsePolicySpec("rmm-pool:initial_pool_size:0,maximum_pool_size:64MiB"));
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures.front().refusedBy, "rmm-pool's maximum_pool_size, 64.00 MiB");
    ASSERT_EQ(r.failureDetails.size(), 1u);
    EXPECT_TRUE(r.failureDetails.front().refusedByPolicy);
    r = replay::Replayer(o).run(t, replay::parsePolicySpec("tf-bfc:memory_limit:100MiB"));
    ASSERT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.failures.front().refusedBy, "tf-bfc's memory_limit, 100.00 MiB");
}

TEST(Diagnosis, SegmentChurnCountsRetriesAndCudaFreeBursts)
{
    const Trace t = load("segment_churn.jsonl");
    const auto d = run(t, 40 * MiB);
    EXPECT_FALSE(d.moment.isOom());
    EXPECT_EQ(d.allocRetries, 3u);
    const Finding* f = find(d, "segment_churn");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, (20 + 30 + 36) * MiB);
    EXPECT_EQ(f->statement.rfind("3 cudaMalloc retries", 0), 0u) << f->statement;
    EXPECT_NE(f->statement.find("3 cudaFree calls of 86.00 MiB in 3 bursts"), std::string::npos) << f->statement;
}

TEST(Diagnosis, SegmentChurnLeavesOutTheFailingRequestsOwnFlushAndRanksAfterTheCapacity)
{
    // At 40 MiB, with 12 MiB live, requests of 20, 22 and 24 MiB each free the cache and retry cudaMalloc; the
    // 30 MiB request then frees the 24 MiB segment, retries and fails. PyTorch counts 3 retries; the churn
    // before the failure is 2 retries and 2 cudaFrees of 42 MiB (20 + 22). Before, the replay's retry count
    // missed the failing request's (2, less 1: "1 cudaMalloc retry") while its cudaFree was counted (3 of
    // 66 MiB), and the churn led the verdict ahead of the live memory over the capacity.
    const Trace t = load("oom_after_churn.jsonl");
    const auto d = run(t, 40 * MiB);
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.allocRetries, 3u);
    const Finding* f = find(d, "segment_churn");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 42 * MiB);
    EXPECT_EQ(f->statement.rfind("2 cudaMalloc retries after freeing the whole cache and 2 cudaFree calls of 42.00 MiB "
                                 "in 2 bursts before the failure (num_alloc_retries 3 with the failing request's own retry)",
                  0),
        0u)
        << f->statement;
    ASSERT_EQ(d.findings.size(), 2u);
    EXPECT_EQ(d.findings.front().id, "capacity");
    EXPECT_EQ(d.findings.front().bytes, 2 * MiB);
    EXPECT_GT(d.verdict.find("(segment_churn)"), d.verdict.find("(capacity)")) << d.verdict;
}

TEST(Diagnosis, ExpandableSegmentsWithMaxSplitSizeLeaveHolesUnusable)
{
    const Trace t = load("expandable_max_split.jsonl");
    const TimeNs afterFree = t.memory().time.back();
    const auto d = run(t, 0, "pytorch:expandable_segments:True,max_split_size_mb:32", afterFree);
    const Finding* f = find(d, "expandable_max_split");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 40 * MiB);
    ASSERT_EQ(f->segments.size(), 1u);
    EXPECT_TRUE(f->segments.front().expandable);
    EXPECT_EQ(f->segments.front().freeBlocks.front(), 40 * MiB);
}

TEST(Diagnosis, RoundingOverheadNamesTheRequestSizes)
{
    const Trace t = load("rounding_overhead.jsonl");
    const auto d = run(t, 0);
    const Finding* f = find(d, "rounding_overhead");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 4 * MiB);
    EXPECT_TRUE(anyEvidence(*f, "requests of 15728640 B: 4.00 MiB over 4 blocks"));
}

TEST(Diagnosis, GrowthAcrossStepsNamesTheGrowingSite)
{
    const Trace t = load("growth_across_steps.jsonl");
    const auto analysis = analyze::analyzeTrace(t);
    ASSERT_TRUE(analysis.leaks.leaking) << analysis.leaks.reason;
    DiagnosisOptions o;
    o.analysis = &analysis;
    const auto d = analyze::diagnose(t, o);
    const Finding* f = find(d, "growth_across_steps");
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(anyEvidence(*f, "cache_append (train.py:14)"));
    EXPECT_GE(f->bytes, 3 * MiB);
}

TEST(Diagnosis, BeforeTraceMakesTheVerdictSayLowerBounds)
{
    const Trace t = load("before_trace.jsonl");
    const auto d = run(t, 0);
    const Finding* f = find(d, "before_trace");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, GiB);
    EXPECT_NE(d.verdict.find("figures are lower bounds"), std::string::npos) << d.verdict;
    EXPECT_NE(d.recordNext.find("_record_memory_history"), std::string::npos);
}

TEST(Diagnosis, CountersOnlyGivesLayersOutsideAllocatorAndUnprovenFragmentation)
{
    const Trace t = load("counters_fragmented.jsonl");
    const auto d = run(t, 0);
    EXPECT_TRUE(d.countersOnly);
    ASSERT_TRUE(d.layers);
    EXPECT_EQ(d.layers->allocated, 70 * GiB);
    EXPECT_EQ(d.layers->reserved, 75 * GiB);
    EXPECT_EQ(d.layers->process, 78 * GiB);
    EXPECT_EQ(d.layers->deviceFree, 1 * GiB);
    EXPECT_EQ(d.layers->request, 2 * GiB);
    const Finding* out = find(d, "outside_allocator");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->bytes, 3 * GiB);
    const Finding* frag = find(d, "external_fragmentation");
    ASSERT_NE(frag, nullptr);
    EXPECT_EQ(frag->bytes, 5 * GiB);
    EXPECT_FALSE(frag->proven);
    EXPECT_NE(frag->statement.find("without a trace no replay can prove"), std::string::npos);
    EXPECT_EQ(find(d, "capacity"), nullptr);
    EXPECT_TRUE(d.remedies.empty());
    EXPECT_NE(d.recordNext.find("torch.cuda.memory._dump_snapshot"), std::string::npos);
}

TEST(Diagnosis, CountersOnlyCapacityWhenTheRequestExceedsAllFreeMemory)
{
    const Trace t = load("counters_capacity.jsonl");
    const auto d = run(t, 0);
    const Finding* f = find(d, "capacity");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 4 * GiB); // 10 GiB − 1 GiB device free − 5 GiB reserved but unallocated
    EXPECT_TRUE(d.noSettingHelps);
}

TEST(Diagnosis, JsonCarriesEveryFindingWithItsRuleAndSource)
{
    const Trace t = load("oversize_split.jsonl");
    const auto d = run(t, 100 * MiB);
    const auto j = analyze::diagnosisToJson(d, 0);
    EXPECT_EQ(j["verdict"], d.verdict);
    ASSERT_EQ(j["findings"].size(), d.findings.size());
    for (const auto& f : j["findings"]) {
        EXPECT_FALSE(f["rule"].get<std::string>().empty());
        EXPECT_FALSE(f["source"].get<std::string>().empty());
    }
    EXPECT_EQ(j["moment"]["kind"], "replayed_oom");
    EXPECT_EQ(j["remedies"].size(), d.remedies.size());
}

TEST(Diagnosis, TextFitsOneHundredColumns)
{
    for (const char* name : { "oversize_split.jsonl", "external_fragmentation.jsonl", "counters_fragmented.jsonl" }) {
        const Trace t = load(name);
        const auto d = run(t, 100 * MiB);
        std::ostringstream out;
        analyze::writeDiagnosis(d, "text", 0, out);
        std::istringstream lines(out.str());
        for (std::string l; std::getline(lines, l);)
            EXPECT_LE(displayWidth(l), 100u) << name << ": " << l;
    }
}

// ---- public traces (skipped where absent) ----

namespace {
Diagnosis publicAtFractionOfPeak(const std::string& relative, double fraction, const Trace& t)
{
    replay::ReplayOptions o;
    const auto unlimited = replay::Replayer(o).run(t, replay::parsePolicySpec("pytorch"));
    const Bytes capacity = Bytes(double(unlimited.peakReserved.bytes) * fraction) / MiB * MiB;
    (void)relative;
    return run(t, capacity);
}
} // namespace

TEST(DiagnosisPublic, Magma27At13GiBNamesTheMechanismAndAFixOrCapacity)
{
    const std::string path = test::publicTrace("cs336-magma27/memory_snapshot.pickle");
    REQUIRE_PUBLIC_TRACE(path);
    const Trace t = loadTrace(path);
    const auto d = run(t, 13 * GiB);
    ASSERT_TRUE(d.moment.isOom());
    EXPECT_EQ(d.moment.kind, analyze::Moment::Kind::ReplayedOom);
    ASSERT_FALSE(d.findings.empty());
    EXPECT_NE(d.verdict.find("(" + d.findings.front().id + ")"), std::string::npos) << d.verdict;
    EXPECT_TRUE(!d.remedies.empty() || d.noSettingHelps) << d.verdict;
    expectRemediesHold(t, d);
}

TEST(DiagnosisPublic, Cs336SnapshotsBelowTheirPeaks)
{
    for (const char* rel : { "cs336-bcrafton/memory_snapshot.pickle", "cs336-silmont2000/memory_forward_bf16_128.pickle" }) {
        const std::string path = test::publicTrace(rel);
        REQUIRE_PUBLIC_TRACE(path);
        const Trace t = loadTrace(path);
        const auto d = publicAtFractionOfPeak(rel, 0.9, t);
        ASSERT_TRUE(d.moment.isOom()) << rel << ": " << d.verdict;
        ASSERT_FALSE(d.findings.empty()) << rel;
        EXPECT_NE(d.verdict.find("(" + d.findings.front().id + ")"), std::string::npos) << d.verdict;
        EXPECT_TRUE(!d.remedies.empty() || d.noSettingHelps) << rel << ": " << d.verdict;
        expectRemediesHold(t, d);
    }
}

TEST(DiagnosisPublic, ProfilerWindowsSayWhatTheyLeaveUnknown)
{
    for (const char* rel : { "tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz",
             "hta/memory_timeline.raw.gz" }) {
        const std::string path = test::publicTrace(rel);
        REQUIRE_PUBLIC_TRACE(path);
        const Trace t = loadTrace(path);
        DiagnosisOptions o;
        o.remedies = false;
        const auto d = analyze::diagnose(t, o);
        EXPECT_NE(find(d, "before_trace"), nullptr) << rel;
        EXPECT_NE(d.verdict.find("figures are lower bounds"), std::string::npos) << rel << ": " << d.verdict;
    }
}

TEST(Diagnosis, DocsExplainNamesEveryJsonFieldAndFindingId)
{
    std::ifstream in(std::string(GPUMEM_SOURCE_DIR) + "/docs/explain.md");
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string doc = buf.str();
    auto documented = [&](const std::string& key) {
        for (const std::string& form : { "`" + key + "`", "." + key + "`", "." + key + "[]`", "`" + key + ",", " `" + key })
            if (doc.find(form) != std::string::npos)
                return true;
        return false;
    };
    for (const char* name : { "oversize_split.jsonl", "counters_fragmented.jsonl", "pending_frees.jsonl" }) {
        const Trace t = load(name);
        const auto j = analyze::diagnosisToJson(run(t, 100 * MiB), 0);
        for (const auto& [key, value] : j.items()) {
            EXPECT_TRUE(documented(key)) << key;
            if (value.is_object()) {
                for (const auto& [sub, v2] : value.items()) {
                    EXPECT_TRUE(documented(sub)) << key << "." << sub;
                }
            }
        }
        for (const auto& f : j["findings"]) {
            EXPECT_TRUE(documented(f["id"].get<std::string>())) << f["id"];
            for (const auto& [key, value] : f.items()) {
                EXPECT_TRUE(documented(key)) << "findings[]." << key;
            }
        }
        for (const auto& r : j["remedies"]) {
            for (const auto& [key, value] : r.items()) {
                EXPECT_TRUE(documented(key)) << "remedies[]." << key;
            }
        }
    }
}

TEST(Diagnosis, ARecordedOomTheReplayDoesNotReproduceIsMemoryOutsideTheAllocator)
{
    const Trace t = load("recorded_oom.jsonl");
    const auto d = run(t, 0);
    EXPECT_EQ(d.moment.kind, analyze::Moment::Kind::RecordedOom);
    EXPECT_EQ(d.moment.request, 40 * GiB);
    EXPECT_EQ(d.capacity, 80 * GiB); // the device's total memory
    const Finding* f = find(d, "outside_allocator");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->bytes, 80 * GiB - 110 * MiB - 40 * GiB);
    EXPECT_TRUE(d.remedies.empty());
    EXPECT_TRUE(d.rejected.empty());
}

// ---- OOM messages from issues (tests/data/oom, verbatim; SOURCES.md) ----

namespace {
Trace loadOom(const std::string& name) { return loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/oom/" + name); }
// A figure as the OOM-message importer stores it: the nearest byte (docs/importers.md, Rounding).
Bytes figure(double value, Bytes unit) { return Bytes(std::llround(value * double(unit))); }
} // namespace

TEST(Diagnosis, FreeAboveTheRequestWithRetriesAndCachedFreeAboveTheRequest)
{
    // fairseq#2442: 246.00 MiB request, 460.38 MiB free, 26.00 GiB allocated of 27.88 GiB reserved,
    // and its memory_summary's "cudaMalloc retries: 6".
    const auto d = run(loadOom("message_and_summary_fairseq2442.txt"), 0);
    const Finding* f = find(d, "free_exceeds_request");
    ASSERT_NE(f, nullptr) << d.verdict;
    EXPECT_EQ(f->bytes, 246 * MiB);
    EXPECT_FALSE(f->proven);
    EXPECT_NE(f->statement.find("The device reported 460.38 MiB free, more than the 246.00 MiB request: the "
                                "failed cudaMalloc was not for want of free bytes"),
        std::string::npos)
        << f->statement;
    EXPECT_TRUE(anyEvidence(*f, "release_cached_blocks"));
    EXPECT_TRUE(anyEvidence(*f, "num_alloc_retries 6: the run did so 6 times"));
    EXPECT_TRUE(anyEvidence(*f, "another process allocating at the same moment"));
    EXPECT_TRUE(anyEvidence(*f, "no \"allowed\" figure"));
    EXPECT_FALSE(anyEvidence(*f, "broken CUDA setup")); // 27.88 GiB of a 31.75 GiB GPU is not almost empty
    EXPECT_NE(f->source.find("DeviceCachingAllocator::malloc"), std::string::npos);
    // 1.88 GiB reserved but unallocated ≥ the request: the cache had the bytes, not one block of them.
    const Finding* frag = find(d, "external_fragmentation");
    ASSERT_NE(frag, nullptr) << d.verdict;
    EXPECT_EQ(frag->bytes, figure(27.88, GiB) - 26 * GiB);
    EXPECT_NE(frag->statement.find("more than the 246.00 MiB request by itself"), std::string::npos) << frag->statement;
    EXPECT_EQ(d.findings.front().id, "external_fragmentation"); // ranked by bytes: 1.88 GiB, then 246 MiB
    EXPECT_NE(d.verdict.find("(free_exceeds_request)"), std::string::npos) << d.verdict;
}

TEST(Diagnosis, FreeAboveTheRequestOnAnAlmostEmptyGpuPointsToTheSetup)
{
    // pytorch#16417's title: 12.50 MiB request; 10.92 GiB total; 8.57 MiB allocated; 9.28 GiB free; 4.68 MiB cached.
    const auto d = run(loadOom("old_cached_issue16417.txt"), 0);
    ASSERT_EQ(d.findings.size(), 1u) << d.verdict;
    const Finding& f = d.findings.front();
    EXPECT_EQ(f.id, "free_exceeds_request");
    EXPECT_EQ(f.bytes, figure(12.50, MiB));
    EXPECT_NE(f.statement.find("reported 9.28 GiB free, more than the 12.50 MiB request"), std::string::npos);
    EXPECT_TRUE(anyEvidence(f, "PyTorch holds 13.25 MiB (8.57 MiB allocated) of an almost empty 10.92 GiB GPU: a "
                               "broken CUDA setup"));
    EXPECT_FALSE(anyEvidence(f, "num_alloc_retries")); // the message alone has no summary
    EXPECT_EQ(find(d, "external_fragmentation"), nullptr); // 4.68 MiB cached < 12.50 MiB, and free suffices
}

TEST(Diagnosis, AnOomWithoutMemoryFiguresNamesTheRequestAndWhatToRecord)
{
    // Azure/MachineLearningNotebooks#880: TF "OOM when allocating tensor with shape[16,112,112,147] and
    // type float … by allocator GPU_0_bfc", no figures. 16·112·112·147 floats of 4 bytes.
    const auto d = run(loadOom("tf_oom_azure880.txt"), 0);
    EXPECT_TRUE(d.countersOnly);
    EXPECT_EQ(d.moment.kind, analyze::Moment::Kind::RecordedOom);
    ASSERT_EQ(d.findings.size(), 1u);
    const Finding& f = d.findings.front();
    EXPECT_EQ(f.id, "no_memory_figures");
    EXPECT_EQ(f.bytes, Bytes(16) * 112 * 112 * 147 * 4);
    EXPECT_NE(f.statement.find("A 112.55 MiB request failed (a tensor of shape[16,112,112,147], type float, "
                               "allocator GPU_0_bfc), but the message has no memory figures"),
        std::string::npos)
        << f.statement;
    EXPECT_EQ(d.policy, "tf-bfc");
    EXPECT_NE(d.recordNext.find("TF_CPP_MIN_LOG_LEVEL=0"), std::string::npos);
    EXPECT_NE(d.recordNext.find("tf.config.experimental.get_memory_info(\"GPU:0\")"), std::string::npos);
    EXPECT_NE(d.recordNext.find("tf.profiler.experimental.start"), std::string::npos);
    EXPECT_EQ(d.recordNext.find("torch."), std::string::npos);
    // A PyTorch message cut after "Tried to allocate 3725.29 GiB. GPU" (pytorch#126766).
    const auto cut = run(loadOom("truncated_issue126766.txt"), 0);
    ASSERT_EQ(cut.findings.size(), 1u);
    EXPECT_EQ(cut.findings.front().id, "no_memory_figures");
    EXPECT_EQ(cut.findings.front().bytes, figure(3725.29, GiB));
    EXPECT_NE(cut.recordNext.find("torch.cuda.memory._dump_snapshot"), std::string::npos);
}

TEST(Diagnosis, CountersWithoutARequestSayWhatWasHeld)
{
    // pytorch#35901: a memory_summary alone, 1062 MB allocated of 12420 MB reserved, 1 OOM, 1 retry.
    const auto d = run(loadOom("summary_cut_issue35901.txt"), 0);
    ASSERT_EQ(d.findings.size(), 1u);
    const Finding& f = d.findings.front();
    EXPECT_EQ(f.id, "no_request");
    EXPECT_EQ(f.bytes, 12420 * MiB);
    EXPECT_NE(f.statement.find("(11.09 GiB of it cached but unallocated)"), std::string::npos) << f.statement;
    EXPECT_TRUE(anyEvidence(f, "cudaMalloc retries: 1"));
}

TEST(Diagnosis, FreeAboveTheRequestUnderAMemoryFractionNamesTheAllowedLimit)
{
    // Written from CUDACachingAllocator.cpp's malloc (no issue has one): "X allowed; " is printed when
    // set_per_process_memory_fraction is in force, and alloc_block refuses reserved + size > allowed.
    const Trace t = importTorchOomMessage("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                                          "of 79.15 GiB of which 40.00 GiB is free. Including non-PyTorch memory, "
                                          "this process has 39.00 GiB memory in use. 39.57 GiB allowed; Of the "
                                          "allocated memory 37.00 GiB is allocated by PyTorch, and 1.00 GiB is "
                                          "reserved by PyTorch but unallocated.",
        "allowed.txt");
    const auto d = run(t, 0);
    const Finding* f = find(d, "free_exceeds_request");
    ASSERT_NE(f, nullptr) << d.verdict;
    EXPECT_EQ(f->bytes, 2 * GiB);
    EXPECT_TRUE(anyEvidence(*f, "a per-process memory fraction allows 39.57 GiB (\"allowed\")"));
    EXPECT_TRUE(anyEvidence(*f, "reserved 38.00 GiB + the request > 39.57 GiB: the fraction refused it"));
    EXPECT_FALSE(anyEvidence(*f, "no \"allowed\" figure"));
}

// tests/data/empty_cache_helps.jsonl: steps of 8 MiB, 30 MiB, 8 MiB (each freed in its step), no
// empty_cache(). PyTorch's rules (allocators.md §1.4-1.5, §1.10): the 20 MiB segment of step 1 stays
// cached and is too small for 30 MiB, so step 2 reserves 30 MiB more: peak 50 MiB, 2 cudaMalloc. With
// empty_cache() after each step: before step 2 the 20 MiB segment goes, before step 3 the 30 MiB one:
// peak 30 MiB, 3 cudaMalloc (the last 8 MiB needs a new 20 MiB segment).
TEST(Diagnosis, EmptyCacheAfterEachStepIsARemedyWithItsProvenEffect)
{
    const Trace t = loadTrace(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/empty_cache_helps.jsonl");
    const auto d = run(t, 0);
    EXPECT_EQ(d.peakReserved, 50 * MiB);
    const auto it = std::find_if(d.remedies.begin(), d.remedies.end(), [](const Remedy& r) { return !r.emptyCacheAt.empty(); });
    ASSERT_NE(it, d.remedies.end());
    EXPECT_EQ(it->emptyCacheAt, "step-end");
    EXPECT_EQ(it->setting, "torch.cuda.empty_cache() after each step");
    EXPECT_EQ(it->peakReserved, 30 * MiB);
    EXPECT_NE(it->changes.find("empty_cache after each step: peak reserved −20.00 MiB, 1 more cudaMalloc calls"), std::string::npos)
        << it->changes;
    expectRemediesHold(t, d);
}

TEST(Diagnosis, MaxSplitSizeCandidatesAreNotReplayedWhereEveryRequestIsSmall)
{
    // Every request of small_pool_only.jsonl is at most 1 MiB: the six max_split_size_mb candidates replay
    // exactly as the baseline, so their outcome is the baseline's; only expandable_segments and
    // roundup_power2_divisions are replayed. Each skipped candidate, replayed here, agrees.
    const Trace t = load("small_pool_only.jsonl");
    const auto d = run(t, 0);
    EXPECT_EQ(d.peakReserved, 4 * MiB);
    EXPECT_FALSE(d.moment.isOom());
    EXPECT_EQ(d.remedyReplays, 2u);
    EXPECT_EQ(d.remedyReplaysSkipped, 6u);
    EXPECT_EQ(d.remedyReplaysStoppedEarly, 0u);
    EXPECT_TRUE(d.remedies.empty());
    ASSERT_EQ(d.rejected.size(), 8u);
    std::size_t maxSplit = 0;
    for (const auto& r : d.rejected) {
        EXPECT_EQ(r.why, "peak reserved 4.00 MiB, not 1 % below 4.00 MiB") << r.spec;
        if (r.spec.find("max_split_size_mb") == std::string::npos)
            continue;
        ++maxSplit;
        replay::ReplayOptions o;
        o.device = d.device;
        o.onOom = replay::OnOom::Stop;
        const auto res = replay::Replayer(o).run(t, replay::parsePolicySpec(r.spec));
        EXPECT_EQ(res.peakReserved.bytes, d.peakReserved) << r.spec;
        EXPECT_EQ(res.deviceCalls(), d.deviceCalls) << r.spec;
        EXPECT_TRUE(res.failures.empty()) << r.spec;
    }
    EXPECT_EQ(maxSplit, 6u);
}

TEST(Diagnosis, TheVerdictAloneStopsRejectedCandidatesAndSaysWhatTheFullDiagnosisSays)
{
    // analyze's verdict (DiagnosisOptions::verdictOnly): a candidate meant to lower the peak stops once its
    // peak reaches the baseline's less 1 %. On small_pool_only.jsonl both replayed candidates reach 4 MiB at
    // the third request and stop there; on every hand-written trace the verdict is the full diagnosis's.
    {
        const Trace t = load("small_pool_only.jsonl");
        DiagnosisOptions o;
        o.jobs = 2;
        o.verdictOnly = true;
        const auto d = analyze::diagnose(t, o);
        EXPECT_EQ(d.remedyReplays, 2u);
        EXPECT_EQ(d.remedyReplaysStoppedEarly, 2u);
        EXPECT_EQ(d.verdict, run(t, 0).verdict);
    }
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/explain"))
        files.push_back(e.path().string());
    for (const char* name : { "empty_cache_helps.jsonl", "empty_cache_steps.jsonl", "compaction_saves.jsonl", "annotated_step.jsonl" })
        files.push_back(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/" + name);
    std::sort(files.begin(), files.end());
    std::size_t compared = 0, confirmed = 0;
    for (const auto& path : files) {
        const Trace t = loadTrace(path);
        for (const Bytes capacity : { Bytes(0), 100 * MiB }) {
            DiagnosisOptions o;
            o.capacity = capacity;
            o.jobs = 2;
            Diagnosis full, alone;
            try {
                full = analyze::diagnose(t, o);
            } catch (const Error&) {
                continue; // nothing to explain (counters without a device figure, …): the verdict is absent too
            }
            o.verdictOnly = true;
            alone = analyze::diagnose(t, o);
            EXPECT_EQ(alone.verdict, full.verdict) << path << " at capacity " << capacity;
            EXPECT_LE(alone.remedyReplays, full.remedyReplays) << path;
            ++compared;
            confirmed += full.remedies.empty() ? 0 : 1;
        }
    }
    EXPECT_GE(compared, 20u);
    EXPECT_GE(confirmed, 3u); // some verdicts name a proven fix: their figures come from a whole replay
}
