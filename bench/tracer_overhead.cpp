// Costs of the tracer on the program's side, each against a baseline in the same run:
//   nvtx      — ns per nvtxRangePushA/nvtxRangePop pair (3 levels deep) on 1 and 4 threads. Run it
//               twice (bench/tracer_overhead.sh): without a tool (NVTX's no-op path, the baseline)
//               and with NVTX_INJECTION64_PATH=libgpumem_tracer.so.
//   convert   — ns per MEMORY2 record for ActivityConverter (the work done on CUPTI's buffer thread)
//               against walking the same buffer with cuptiActivityGetNextRecord alone.
// Prints one "name value" line per figure.
#include "tracer/activity_converter.h"

#include <algorithm>
#include <chrono>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// The real NVTX loader for this program (the tracer library is the tool, not this program).
#undef NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

namespace {
using Clock = std::chrono::steady_clock;

double nvtxPairs(int threads, int pairsPerThread)
{
    auto work = [pairsPerThread] {
        nvtxRangePushA("bench:outer");
        nvtxRangePushA("bench:middle");
        for (int i = 0; i < pairsPerThread; ++i) {
            nvtxRangePushA("bench:inner");
            nvtxRangePop();
        }
        nvtxRangePop();
        nvtxRangePop();
    };
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back(work);
    for (auto& t : pool)
        t.join();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    return ns / pairsPerThread; // wall ns per pair per thread
}

void convert(int records)
{
    std::vector<std::uint64_t> words(records * sizeof(CUpti_ActivityMemory4) / 8);
    auto* bytes = reinterpret_cast<std::uint8_t*>(words.data());
    for (int i = 0; i < records; ++i) {
        CUpti_ActivityMemory4 r;
        std::memset(&r, 0, sizeof r);
        r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
        r.memoryOperationType = i % 2 ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
        r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        r.address = 0x7f0000000000 + std::uint64_t(i / 2) * 4096;
        r.bytes = 4096;
        r.timestamp = 1'700'000'000'000'000'000ull + std::uint64_t(i) * 100;
        r.correlationId = static_cast<std::uint32_t>(i + 1);
        r.isAsync = 1;
        r.streamId = 7;
        r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        r.memoryPoolConfig.pool.size = 2 << 20;
        std::memcpy(bytes + std::size_t(i) * sizeof r, &r, sizeof r);
    }
    const std::size_t size = words.size() * 8;
    auto t0 = Clock::now();
    std::size_t walked = 0;
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(bytes, size, &rec) == CUPTI_SUCCESS)
        walked += rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2;
    const double walkNs = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / records;

    // As in a traced run: CUPTI hands over 8 MiB buffers (65536 MEMORY2 records) and the writer
    // thread drains the sink between them (its time is not counted: it runs on its own thread).
    gpumem::tracer::TraceSink sink;
    gpumem::tracer::CorrelationMap correlations;
    gpumem::tracer::ActivityConverter converter(sink, correlations);
    char path[] = "/tmp/gpumem-bench-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd >= 0)
        ::close(fd);
    gpumem::GmtWriter writer(path, nlohmann::json::object());
    constexpr std::size_t kPerBuffer = (std::size_t(8) << 20) / sizeof(CUpti_ActivityMemory4);
    double convertTotal = 0;
    for (std::size_t first = 0; first < std::size_t(records); first += kPerBuffer) {
        const std::size_t n = std::min(kPerBuffer, std::size_t(records) - first);
        t0 = Clock::now();
        converter.convertBuffer(bytes + first * sizeof(CUpti_ActivityMemory4), n * sizeof(CUpti_ActivityMemory4), cuptiActivityGetNextRecord);
        convertTotal += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
        sink.drainTo(writer);
    }
    writer.finish();
    ::unlink(path);
    const double convertNs = convertTotal / records;
    std::printf("walk_ns_per_record %.1f\nconvert_ns_per_record %.1f\nconvert_over_walk %.2f\nrecords %zu\n", walkNs, convertNs,
        convertNs / walkNs, walked);
}
} // namespace

int main(int argc, char** argv)
{
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "nvtx") {
        nvtxPairs(1, 1000); // warm-up: NVTX loads the tool on the first call
        std::printf("nvtx_ns_per_pair_1_thread %.1f\n", nvtxPairs(1, 1'000'000));
        std::printf("nvtx_ns_per_pair_4_threads %.1f\n", nvtxPairs(4, 250'000));
        return 0;
    }
    if (mode == "convert") {
        convert(1'000'000);
        return 0;
    }
    std::fprintf(stderr, "usage: %s nvtx|convert\n", argv[0]);
    return 2;
}
