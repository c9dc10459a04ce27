// The out-of-memory text importers (importers/oom_text_importer.h) on messages taken verbatim
// from public issues (tests/data/oom/SOURCES.md). Each expected byte count is derived in a comment:
// PyTorch's format_size prints two decimals of the unit, so "22.90 GiB" is 2290/100 × 2^30 =
// 24588687769.6 B, stored as the nearest byte, 24588687770, ± half a hundredth of a GiB (5368710 B).
#include "core/error.h"
#include "core/outside_memory.h"
#include "importers/importer_registry.h"
#include "importers/oom_text_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

using namespace gpumem;

namespace {

const std::string kDir = std::string(GPUMEM_SOURCE_DIR) + "/tests/data/oom/";
constexpr Bytes kMiB = Bytes(1) << 20;
constexpr Bytes kGiB = Bytes(1) << 30;
constexpr Bytes kHalfHundredthGiB = 5368710; // ceil(2^30 / 200)
constexpr Bytes kHalfHundredthMiB = 5243; // ceil(2^20 / 200)

// Counter name → its one sample (all at time 0 on device 0 of the trace).
std::map<std::string, std::int64_t> counters(const Trace& t)
{
    std::map<std::string, std::int64_t> out;
    for (const auto& s : t.counterSamples()) {
        EXPECT_EQ(s.time, 0);
        EXPECT_EQ(t.counterSeries()[s.series].device, 0);
        out[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    }
    EXPECT_EQ(out.size(), t.counterSamples().size()) << "one sample per series";
    return out;
}

Trace load(const std::string& name, std::string_view format)
{
    const Importer* importer = detectFormat(kDir + name);
    EXPECT_NE(importer, nullptr) << name;
    if (importer) {
        EXPECT_EQ(importer->name(), format) << name;
    }
    Trace t = loadTrace(kDir + name);
    EXPECT_EQ(t.metadata().at("source_format"), format);
    return t;
}

// The one Oom event of a message trace: time 0, device 0, the request as size.
void expectOneOom(const Trace& t, Bytes size, Bytes requested = 0)
{
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 1u);
    EXPECT_EQ(m.kind[0], EventKind::Oom);
    EXPECT_EQ(m.time[0], 0);
    EXPECT_EQ(m.device[0], 0);
    EXPECT_EQ(m.size[0], size);
    EXPECT_EQ(m.requestedSize[0], requested);
    EXPECT_TRUE(t.allocations().empty());
}

std::string errorOf(std::string_view text,
    Trace (*import)(std::string_view, const std::string&, const LoadOptions&) = importTorchOomMessage)
{
    try {
        import(text, "oom.txt", {});
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

TEST(TorchOomMessage, ImportsTheCurrentWordingFromIssue16417)
{
    Trace t = load("current_issue16417.txt", "pytorch-oom-message");
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].type, DeviceType::Cuda);
    EXPECT_EQ(t.devices()[0].ordinal, 0);
    EXPECT_EQ(t.devices()[0].totalMemory, 25393994138u); // 23.65 GiB = 2365/100 × 2^30 = 25393994137.6
    expectOneOom(t, 22 * kMiB); // "Tried to allocate 22.00 MiB" = 23068672
    auto c = counters(t);
    EXPECT_EQ(c.size(), 4u);
    EXPECT_EQ(c["Total Allocated"], 24588687770); // 22.90 GiB = 24588687769.6
    EXPECT_EQ(c["Total Reserved"], 24588687770 + 204336005); // + 194.87 MiB = 19487/100 × 2^20 = 204336005.1
    EXPECT_EQ(c["Process In Use"], 25340307046); // 23.60 GiB = 25340307046.4
    EXPECT_EQ(c["Device Free"], 11597251); // 11.06 MiB = 11597250.6
    const auto& meta = t.metadata();
    EXPECT_EQ(meta.at("oom_wording"), "current");
    EXPECT_EQ(meta.at("alloc_conf_hint"), "expandable_segments:True");
    EXPECT_EQ(meta.at("self_process_listed"), true);
    EXPECT_TRUE(meta.at("oom_message_line")
                    .get<std::string>()
                    .starts_with("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB."));
    EXPECT_EQ(meta.at("oom_message_line_number"), 2);
    EXPECT_TRUE(
        meta.at("oom_message")
            .get<std::string>()
            .ends_with(
                "is reserved by PyTorch but unallocated. If reserved but unallocated memory "
                "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."));
    const auto& figures = meta.at("oom_figures");
    EXPECT_EQ(figures.at("Tried to allocate").at("text"), "22.00 MiB");
    EXPECT_EQ(figures.at("Tried to allocate").at("plus_minus_bytes"), kHalfHundredthMiB);
    EXPECT_EQ(figures.at("Total Allocated").at("plus_minus_bytes"), kHalfHundredthGiB);
    EXPECT_EQ(figures.at("Total Reserved").at("text"), "22.90 GiB + 194.87 MiB");
    EXPECT_EQ(figures.at("Total Reserved").at("plus_minus_bytes"), kHalfHundredthGiB + kHalfHundredthMiB);
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().detail;
}

TEST(TorchOomMessage, ReadsTheCapactyTypoWrappedOverLinesWithAnotherProcess)
{
    // PR 99699's description: the first message with NVML figures, wrapped by hand, "total capacty".
    Trace t = load("capacty_wrapped_pr99699.txt", "pytorch-oom-message");
    EXPECT_EQ(t.devices()[0].totalMemory, 17072495002u); // 15.90 GiB = 17072495001.6
    expectOneOom(t, 138 * kMiB);
    auto c = counters(t);
    EXPECT_EQ(c["Other Process 1246069 In Use"], 577 * std::int64_t(kMiB)); // 577.00 MiB
    EXPECT_EQ(c["Process In Use"], 16449724744); // 15.32 GiB = 16449724743.7
    EXPECT_EQ(c["Total Allocated"], 15161234555); // 14.12 GiB = 15161234554.9
    EXPECT_EQ(c["Total Reserved"], 15161234555 + 430346076); // + 410.41 MiB = 430346076.2
    EXPECT_EQ(c["Device Free"], 8849981); // 8.44 MiB = 8849981.4
    EXPECT_EQ(t.metadata().at("oom_wording"), "current-capacty-typo");
    EXPECT_EQ(t.metadata().at("alloc_conf_hint"), "max_split_size_mb");
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().detail;
}

TEST(TorchOomMessage, ListsTheOwnProcessAsAnotherWhenNvmlSeesADifferentPid)
{
    // Inside a container PyTorch's getpid() is not NVML's pid: no "this process" clause.
    Trace t = load("container_process_generateu10.txt", "pytorch-oom-message");
    expectOneOom(t, 496 * kMiB);
    auto c = counters(t);
    EXPECT_EQ(c.count("Process In Use"), 0u);
    EXPECT_EQ(c["Other Process 20398 In Use"], 15590731284); // 14.52 GiB = 15590731284.5 → 15590731284 (…284.48)
    EXPECT_EQ(c["Total Allocated"], 15096810045); // 14.06 GiB
    EXPECT_EQ(c["Device Free"], 246478275); // 235.06 MiB
    EXPECT_EQ(t.metadata().at("self_process_listed"), false);
    EXPECT_EQ(t.metadata().at("oom_message_line_number"), 3); // after two traceback lines
}

TEST(TorchOomMessage, TakesTheDeviceOrdinalFromTheMessage)
{
    Trace t = load("gpu3_issue126766.txt", "pytorch-oom-message");
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].ordinal, 3);
    EXPECT_EQ(t.devices()[0].totalMemory, 42337640120u); // 39.43 GiB
    expectOneOom(t, 31213674824u); // 29.07 GiB = 31213674823.7
    EXPECT_EQ(counters(t)["Device Free"], 27004606874); // 25.15 GiB = 27004606873.6
}

TEST(TorchOomMessage, KeepsTheRequestOfAMessageCutAfterIt)
{
    // Issue 126766: PyTorch itself printed only "… Tried to allocate 3725.29 GiB. GPU".
    Trace t = load("truncated_issue126766.txt", "pytorch-oom-message");
    expectOneOom(t, 3999999679529u); // 3725.29 GiB = 372529/100 × 2^30; the tensor was 10^12 floats = 4e12 B
    EXPECT_LE(4000000000000u - 3999999679529u, kHalfHundredthGiB) << "within the rounding bound";
    EXPECT_TRUE(counters(t).empty());
    EXPECT_EQ(t.devices()[0].totalMemory, 0u);
    const Anomaly* cut = t.stats().find("oom_message_truncated");
    ASSERT_NE(cut, nullptr);
    EXPECT_EQ(cut->severity, Severity::Warning);
    EXPECT_NE(
        cut->detail.find(":4: the out-of-memory message stops after \"Tried to allocate\" (the GPU number is unknown"),
        std::string::npos)
        << cut->detail;
}

TEST(TorchOomMessage, ReadsTheOlderReservedInTotalWording)
{
    Trace t = load("old_reserved_issue59778.txt", "pytorch-oom-message");
    EXPECT_EQ(t.devices()[0].totalMemory, 6 * kGiB);
    expectOneOom(t, 2426656522u); // 2.26 GiB = 2426656522.2
    auto c = counters(t);
    EXPECT_EQ(c.size(), 3u);
    EXPECT_EQ(c["Total Allocated"], 819556516); // 781.59 MiB = 819556515.8
    EXPECT_EQ(c["Total Reserved"], 1331439862); // 1.24 GiB = 1331439861.8
    EXPECT_EQ(c["Device Free"], 3253437727); // 3.03 GiB = 3253437726.7
    EXPECT_EQ(t.metadata().at("oom_wording"), "older-reserved");
    EXPECT_FALSE(t.metadata().contains("alloc_conf_hint"));
    EXPECT_TRUE(t.stats().empty());
}

TEST(TorchOomMessage, ReadsTheOldestCachedWordingAsReservedButUnallocated)
{
    // PR 13751: "cached" is memory held by the allocator but not used by the program.
    Trace t = load("old_cached_issue16417.txt", "pytorch-oom-message");
    auto c = counters(t);
    EXPECT_EQ(c["Total Allocated"], 8986296); // 8.57 MiB = 8986296.3
    EXPECT_EQ(c["Total Reserved"], 8986296 + 4907336); // + 4.68 MiB = 4907335.7
    EXPECT_EQ(c["Device Free"], 9964324127); // 9.28 GiB
    EXPECT_EQ(t.metadata().at("oom_wording"), "oldest-cached");
    expectOneOom(t, 13107200); // 12.50 MiB
}

TEST(TorchOomMessage, TakesTheOlderHintsSetting)
{
    Trace t = load("old_hint_zerodce52.txt", "pytorch-oom-message");
    EXPECT_EQ(t.metadata().at("alloc_conf_hint"), "max_split_size_mb");
    EXPECT_EQ(t.metadata().at("oom_hint"),
        "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.");
    EXPECT_EQ(counters(t)["Total Reserved"], 3758096384); // 3.50 GiB
}

TEST(TorchOomMessage, AddsTheMemorySummaryPrintedWithTheMessage)
{
    // fairseq issue 2442: the message inside a fairseq log line, then memory_summary() as a 2020 PyTorch printed it.
    Trace t = load("message_and_summary_fairseq2442.txt", "pytorch-oom-message");
    expectOneOom(t, 246 * kMiB);
    auto c = counters(t);
    EXPECT_EQ(c["Total Allocated"], 26 * std::int64_t(kGiB)); // the message's 26.00 GiB, not the summary's 26377 MB
    EXPECT_EQ(c["Total Reserved"], 29935922053); // 27.88 GiB
    EXPECT_EQ(c["num_ooms (count)"], 1);
    EXPECT_EQ(c["num_alloc_retries (count)"], 6);
    EXPECT_EQ(c["allocated_bytes.all.peak"], 26988 * std::int64_t(kMiB)); // "26988 MB": binary MB before PyTorch 1.12
    EXPECT_EQ(c["allocated_bytes.large_pool.current"], 25981 * std::int64_t(kMiB));
    EXPECT_EQ(c["allocated_bytes.all.allocated"], 767743 * std::int64_t(kGiB)); // "767743 GB"
    EXPECT_EQ(c["allocated_bytes.small_pool.freed"], 29175 * std::int64_t(kGiB));
    EXPECT_EQ(t.metadata().at("oom_figures").at("allocated_bytes.all.peak").at("up_to_bytes"), kMiB - 1);
    EXPECT_EQ(t.metadata().at("memory_summary").at("complete"), false);
    EXPECT_NE(t.stats().find("memory_summary_truncated"), nullptr); // the excerpt stops after the Allocated rows
}

TEST(TorchMemorySummary, ImportsATableWithoutAMessage)
{
    // Issue 35901: the table as posted, up to its "GPU reserved memory" row.
    Trace t = load("summary_cut_issue35901.txt", "pytorch-memory-summary");
    EXPECT_EQ(t.memory().count(), 0u) << "no request size: no OOM event";
    auto c = counters(t);
    EXPECT_EQ(c["Total Allocated"], 1062 * std::int64_t(kMiB));
    EXPECT_EQ(c["Total Reserved"], 12420 * std::int64_t(kMiB));
    EXPECT_EQ(c["reserved_bytes.all.freed"], 4504 * std::int64_t(kMiB));
    EXPECT_EQ(c["active_bytes.small_pool.peak"], 14 * std::int64_t(kMiB));
    EXPECT_EQ(c["num_ooms (count)"], 1);
    EXPECT_EQ(c["num_alloc_retries (count)"], 1);
    EXPECT_EQ(c.count("reserved_bytes.large_pool.current"), 0u) << "that row is not in the excerpt";
    const Anomaly* cut = t.stats().find("memory_summary_truncated");
    ASSERT_NE(cut, nullptr);
    EXPECT_NE(cut->detail.find(":17: the memory_summary table ends before its closing"), std::string::npos)
        << cut->detail;
}

TEST(TorchMemorySummary, ReadsCountsAndCurrentUnits)
{
    // Written from torch/cuda/memory.py memory_summary (current units KiB…TiB, count suffixes K and M).
    const std::string table = "|===========================================================================|\n"
                              "|                  PyTorch CUDA memory summary, device ID 1                 |\n"
                              "|---------------------------------------------------------------------------|\n"
                              "|            CUDA OOMs: 2            |        cudaMalloc retries: 17        |\n"
                              "|===========================================================================|\n"
                              "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
                              "|---------------------------------------------------------------------------|\n"
                              "| Allocated memory      |  39858 MiB |  41230 MiB |   1911 TiB |   1911 TiB |\n"
                              "|---------------------------------------------------------------------------|\n"
                              "| GPU reserved memory   |  73728 MiB |  73728 MiB |  73728 MiB |      0 B   |\n"
                              "|---------------------------------------------------------------------------|\n"
                              "| Allocations           |    4102    |    4118    |    9203 K  |    9199 K  |\n"
                              "|---------------------------------------------------------------------------|\n"
                              "| Oversize allocations  |       3    |       5    |     812    |     809    |\n"
                              "|===========================================================================|\n";
    Trace t = importTorchMemorySummary(table, "summary.txt");
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].ordinal, 1);
    std::map<std::string, std::int64_t> c;
    for (const auto& s : t.counterSamples())
        c[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    EXPECT_EQ(c["Total Allocated"], 39858 * std::int64_t(kMiB));
    EXPECT_EQ(c["allocated_bytes.all.allocated"], 1911 * (std::int64_t(1) << 40));
    EXPECT_EQ(c["Total Reserved"], 73728 * std::int64_t(kMiB));
    EXPECT_EQ(c["reserved_bytes.all.freed"], 0);
    EXPECT_EQ(c["allocation.all.allocated (count)"], 9203000);
    EXPECT_EQ(c["oversize_allocations.peak (count)"], 5);
    EXPECT_EQ(c["num_alloc_retries (count)"], 17);
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().detail;
}

TEST(TfOomReport, ComputesTheRequestFromShapeAndType)
{
    // Azure MachineLearningNotebooks issue 880: "shape[16,112,112,147] and type float" = 29503488 floats × 4 B.
    Trace t = load("tf_oom_azure880.txt", "tf-oom-report");
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].ordinal, 0);
    expectOneOom(t, 118013952, 118013952);
    EXPECT_EQ(t.metadata().at("allocator"), "GPU_0_bfc");
    EXPECT_EQ(t.metadata().at("tensor_dtype"), "float");
    EXPECT_EQ(t.metadata().at("tensor_shape"), nlohmann::json({ 16, 112, 112, 147 }));
    EXPECT_EQ(t.metadata().at("tf_device"), "/job:localhost/replica:0/task:0/device:GPU:0");
    const Anomaly* repeated = t.stats().find("oom_message_repeated");
    ASSERT_NE(repeated, nullptr); // the "(1)" root error repeats the "(0)" one
    EXPECT_EQ(repeated->count, 1u);
}

TEST(TfOomReport, ReadsTheBfcStatsExactly)
{
    // mozilla/DeepSpeech issue 1940: the end of the BFC dump.
    Trace t = load("tf_bfc_stats_deepspeech1940.txt", "tf-oom-report");
    auto c = counters(t);
    EXPECT_EQ(c["Total Allocated"], 7613320960); // Stats InUse, exact (not "Sum Total of in-use chunks: 7.09GiB")
    EXPECT_EQ(c["MaxInUse"], 7613320960);
    EXPECT_EQ(t.metadata().at("memory_limit"), 10925244416);
    EXPECT_EQ(t.metadata().at("oom_figures").at("Sum Total of in-use chunks").at("bytes"),
        7612829532u); // 7.09GiB = 709/100 × 2^30 = 7612829532.2
    EXPECT_EQ(t.memory().count(), 0u);
    EXPECT_NE(t.stats().find("oom_request_unknown"), nullptr);
}

TEST(TfOomReport, TakesTheAllocatorsRoundedSizeAndPoolFigures)
{
    // Written from tsl/framework/bfc_allocator.cc (AllocateRawInternal's warning and DumpMemoryLog).
    const std::string log
        = "W bfc_allocator.cc:479] Allocator (GPU_1_bfc) ran out of memory trying to allocate 1.21GiB (rounded to "
          "1300000000)requested by op MatMul\n"
          "I bfc_allocator.cc:1107] Sum Total of in-use chunks: 37.35GiB\n"
          "I bfc_allocator.cc:1109] Total bytes in pool: 40231108608 memory_limit_: 40231108608 available bytes: 0 "
          "curr_region_allocation_bytes_: 80462217216\n"
          "I bfc_allocator.cc:1114] Stats: \n"
          "Limit:                     40231108608\n"
          "InUse:                     40106093568\n"
          "MaxInUse:                  40230617088\n"
          "NumAllocs:                     2268042\n"
          "MaxAllocSize:              13200000000\n"
          "Reserved:                            0\n"
          "PeakReserved:                        0\n"
          "LargestFreeBlock:                    0\n"
          "\n"
          "W op_kernel.cc:1828] OP_REQUIRES failed at conv_ops_fused_impl.h:568 : RESOURCE_EXHAUSTED: OOM when "
          "allocating tensor with "
          "shape[32,256,62,62] and type float on /job:localhost/replica:0/task:0/device:GPU:1 by allocator GPU_1_bfc\n";
    Trace t = importTfOomReport(log, "tf.log");
    EXPECT_EQ(t.devices()[0].ordinal, 1);
    ASSERT_EQ(t.memory().count(), 1u);
    EXPECT_EQ(t.memory().size[0], 1300000000u); // the allocator's rounded size
    EXPECT_EQ(t.memory().requestedSize[0], 32u * 256 * 62 * 62 * 4); // the tensor: 125960192 B
    std::map<std::string, std::int64_t> c;
    for (const auto& s : t.counterSamples())
        c[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    EXPECT_EQ(c["Total Allocated"], 40106093568);
    EXPECT_EQ(c["Total Reserved"], 40231108608);
    EXPECT_EQ(c["NumAllocs (count)"], 2268042);
    EXPECT_EQ(c["MaxAllocSize"], 13200000000);
    EXPECT_EQ(t.metadata().at("memory_limit"), 40231108608);
    EXPECT_EQ(t.metadata().at("bfc_available_bytes"), 0);
    EXPECT_TRUE(t.stats().empty()) << t.stats().anomalies().front().detail;
}

TEST(TorchOomMessage, ReadsAllowedAndPrivatePools)
{
    // Written from CUDACachingAllocator.cpp's malloc: set_per_process_memory_fraction adds "X allowed; ", CUDA Graph
    // pools "with X allocated in private pools (e.g., CUDA Graphs), ".
    Trace t
        = importTorchOomMessage("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 "
                                "GiB of which 1.50 GiB is free. "
                                "Including non-PyTorch memory, this process has 77.64 GiB memory in use. 39.57 GiB "
                                "allowed; Of the allocated memory "
                                "30.00 GiB is allocated by PyTorch, with 4.00 GiB allocated in private pools (e.g., "
                                "CUDA Graphs), and 5.50 GiB is reserved "
                                "by PyTorch but unallocated. If reserved but unallocated memory is large try setting",
            "oom.txt");
    EXPECT_EQ(t.devices()[0].ordinal, 1);
    EXPECT_EQ(t.metadata().at("allowed_bytes"), 42487963976u); // 39.57 GiB = 42487963975.7
    std::map<std::string, std::int64_t> c;
    for (const auto& s : t.counterSamples())
        c[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    EXPECT_EQ(c["Allocated In Private Pools"], 4 * std::int64_t(kGiB));
    EXPECT_EQ(c["Total Allocated"], 30 * std::int64_t(kGiB));
    EXPECT_EQ(c["Total Reserved"], 35 * std::int64_t(kGiB) + std::int64_t(kGiB) / 2);
}

TEST(TorchOomMessage, ReadsHipMessagesAsHipDevices)
{
    Trace t = importTorchOomMessage(
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
        "191.98 GiB of which 0 bytes is free. Of the allocated memory 190.10 GiB is allocated by PyTorch, and "
        "1.12 GiB is reserved by PyTorch but unallocated.",
        "hip.txt");
    EXPECT_EQ(t.devices()[0].type, DeviceType::Hip);
    std::map<std::string, std::int64_t> c;
    for (const auto& s : t.counterSamples())
        c[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    EXPECT_EQ(c["Device Free"], 0); // "0 bytes": format_size writes bytes up to 1 KiB
    EXPECT_FALSE(t.metadata().contains("self_process_listed")) << "no NVML clause at all";
}

TEST(TorchOomMessage, CountsContradictoryFigures)
{
    Trace t = importTorchOomMessage(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 9.00 GiB "
        "is free. Including non-PyTorch memory, this process has 1.00 GiB memory in use. Of the allocated memory "
        "3.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.",
        "bad.txt");
    const Anomaly* a = t.stats().find("oom_figures_inconsistent");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->count, 3u); // free > total; reserved 4 GiB > 1 GiB in use; 1 + 9 GiB > 8 GiB total
    EXPECT_NE(a->detail.find("bad.txt:1: the device has 9.00 GiB free, more than its total capacity of 8.00 GiB"),
        std::string::npos)
        << a->detail;
}

TEST(TorchOomMessage, RefusesMalformedFiguresNamingLineAndField)
{
    EXPECT_NE(errorOf("log\nCUDA out of memory. Tried to allocate 1.5 XiB. GPU 0 has")
                  .find("oom.txt:2: the figure \"Tried to allocate\" has an unknown unit \"XiB\" in \"1.5 XiB\""),
        std::string::npos)
        << errorOf("log\nCUDA out of memory. Tried to allocate 1.5 XiB. GPU 0 has");
    EXPECT_NE(errorOf("CUDA out of memory. Tried to allocate 20.")
                  .find("oom.txt:1: the figure \"Tried to allocate\" is cut off: \"20.\" has no digits"),
        std::string::npos);
    EXPECT_NE(errorOf("CUDA out of memory. Tried to allocate 20.00").find("is cut off: \"20.00\" has no unit"),
        std::string::npos);
    EXPECT_NE(errorOf("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.5 GB of which")
                  .find("the figure \"total capacity\" has an unknown unit \"GB\""),
        std::string::npos);
    EXPECT_NE(errorOf("CUDA out of memory. Tried to allocate 1.5 bytes. GPU").find("is not a whole number of bytes"),
        std::string::npos);
    EXPECT_NE(
        errorOf("CUDA out of memory. Tried to allocate lots").find("\"Tried to allocate\" is not followed by a size"),
        std::string::npos);
    EXPECT_NE(
        errorOf("CUDA out of memory. Tried to allocate 99999999999999999999.99 GiB.").find("more than 2^64 - 1 bytes"),
        std::string::npos);
    EXPECT_NE(errorOf("no message here").find("no PyTorch out-of-memory message found"), std::string::npos);
}

TEST(TorchMemorySummary, RefusesAMalformedCellNamingRowAndColumn)
{
    const std::string table = "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
                              "| Allocated memory      |     512 B  |     1.5 XiB  |     512 B  |       0 B  |\n";
    EXPECT_NE(errorOf(table, importTorchMemorySummary)
                  .find("oom.txt:2: memory_summary row \"Allocated memory\", column Peak Usage: expected a whole "
                        "number and a unit"),
        std::string::npos)
        << errorOf(table, importTorchMemorySummary);
    const std::string unit = "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
                             "| GPU reserved memory   |     512 XiB  |     512 B  |     512 B  |       0 B  |\n";
    EXPECT_NE(
        errorOf(unit, importTorchMemorySummary).find("column Cur Usage: unknown unit \"XiB\""), std::string::npos);
    EXPECT_NE(errorOf("Stats: \nLimit: 100\nInUse: lots\n", importTfOomReport)
                  .find("oom.txt:3: the BFC Stats field \"InUse\" is \"lots\""),
        std::string::npos)
        << errorOf("Stats: \nLimit: 100\nInUse: lots\n", importTfOomReport);
}

TEST(OomTextImporters, FindAMessagePastTheHeadOfALongLog)
{
    const std::string path = (std::filesystem::temp_directory_path() / "gpumem_long_log_oom.txt").string();
    {
        std::ofstream out(path);
        for (int i = 0; i < 4000; ++i)
            out << "step " << i << " loss 0.25 lr 0.001 tokens/s 12345.6\n";
        std::ifstream msg(kDir + "current_issue16417.txt");
        out << msg.rdbuf();
    }
    ASSERT_GT(std::filesystem::file_size(path), 64u * 1024);
    const Importer* importer = detectFormat(path);
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "pytorch-oom-message");
    Trace t = loadTrace(path);
    EXPECT_EQ(t.metadata().at("oom_message_line_number"), 4002);
    std::filesystem::remove(path);
}

TEST(OomTextImporters, DoNotClaimTheOtherFormatsTestInputs)
{
    // Every other test input keeps its own importer (or none); the OOM texts are asked last.
    const std::string mine[] = { "pytorch-oom-message", "pytorch-memory-summary", "tf-oom-report" };
    std::size_t checked = 0;
    for (const auto& e :
        std::filesystem::recursive_directory_iterator(std::string(GPUMEM_SOURCE_DIR) + "/tests/data")) {
        if (!e.is_regular_file() || e.file_size() == 0 || e.path().parent_path().filename() == "oom")
            continue;
        const Importer* importer = detectFormat(e.path().string());
        if (importer) {
            for (const auto& name : mine)
                EXPECT_NE(importer->name(), name) << e.path();
        }
        ++checked;
    }
    EXPECT_GT(checked, 20u);
    for (const auto& e : std::filesystem::directory_iterator(kDir)) {
        if (e.path().extension() != ".txt")
            continue;
        const Importer* importer = detectFormat(e.path().string());
        ASSERT_NE(importer, nullptr) << e.path();
        EXPECT_TRUE(importer->name() == mine[0] || importer->name() == mine[1] || importer->name() == mine[2])
            << e.path();
    }
}

TEST(TorchOomMessage, ImportsTheFirstOfSeveralMessagesAndCountsTheRest)
{
    // Regression: the search for further messages restarted inside the one it had found and never ended
    // (out of memory). Two ranks, as torchrun prefixes their lines; written from the current wording.
    Trace t = importTorchOomMessage("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 1 has a "
                                    "total capacity of 93.02 GiB of which 1.18 GiB is free.\n"
                                    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a "
                                    "total capacity of 93.02 GiB of which 1.18 GiB is free.\n",
        "ranks.txt");
    ASSERT_EQ(t.devices().size(), 1u);
    EXPECT_EQ(t.devices()[0].ordinal, 1);
    const Anomaly* repeated = t.stats().find("oom_message_repeated");
    ASSERT_NE(repeated, nullptr);
    EXPECT_EQ(repeated->count, 1u);
    EXPECT_NE(repeated->detail.find("ranks.txt: the text holds 1 more of the out-of-memory messages (line 2); only the first"), std::string::npos) << repeated->detail;
    // The first message stops after "is free." at its line end: the figures after it are missing.
    EXPECT_NE(t.stats().find("oom_message_truncated"), nullptr);
}

TEST(TorchOomMessage, RecordsTheMemoryOutsideTheAllocator)
{
    // core/outside_memory.h: this process's memory outside PyTorch = "this process has 23.60 GiB memory in
    // use" − reserved (allocated 22.90 GiB + 194.87 MiB reserved but unallocated), the figures as stored
    // above: 25340307046 − (24588687770 + 204336005) = 547283271 B (about 521.9 MiB; each figure ± its
    // rounding). No other process is listed.
    Trace t = load("current_issue16417.txt", "pytorch-oom-message");
    auto o = outsideMemory(t, 0);
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->process, 547283271u);
    EXPECT_EQ(o->otherProcesses, 0u);
    EXPECT_EQ(o->source, "oom_message");
    // GPU 3: 14.27 GiB in use − (11.74 GiB + 932.02 MiB): 1427/100 × 2^30 = 15322295828.48 -> 15322295828,
    // 1174/100 × 2^30 = 12605729013.76 -> 12605729014, 93202/100 × 2^20 = 977293803.52 -> 977293804;
    // 15322295828 − 12605729014 − 977293804 = 1739273010 B, on the device of ordinal 3.
    Trace g = load("gpu3_issue126766.txt", "pytorch-oom-message");
    auto o3 = outsideMemory(g, 0);
    ASSERT_TRUE(o3.has_value());
    EXPECT_EQ(g.devices()[0].ordinal, 3);
    EXPECT_EQ(o3->process, 1739273010u);
    // Without the "this process" line (a container's pid namespace lists it as "Process N"), one of the
    // listed processes may be this one: no figure rather than a double count.
    Trace c = load("container_process_generateu10.txt", "pytorch-oom-message");
    EXPECT_FALSE(outsideMemory(c, 0).has_value());
}
