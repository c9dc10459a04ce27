// gpu_check_tracer_replay: feeds the tracer's own code (RangeRecorder, ApiCallbacks,
// ActivityConverter, TraceWriterThread from gpumem::tracer_core) the NVTX calls, API callbacks
// and CUPTI activity records that a run of tests/gpu/gpu_check.cu would produce, following
// CUPTI's documented behaviour (../../shared/docs/cupti.md §2, §3), and writes the .gmt the tracer
// would write. scripts/gpu-check.sh --cpu-only then checks that file with check_trace.py. This
// ties the checker's model of the tracer (docs/tracer.md "Events") to what the tracer's code
// really writes: scope paths, memory kinds, pool and VMM counter names, annotations, sites.
//
//   gpu_check_tracer_replay RUN.jsonl OUT.gmt [--nccl-cumem]
//
// RUN.jsonl is a run list with addresses and call times (check_trace.py synth writes one from a
// plan). What CUPTI is assumed to do: one MEMORY2 record per allocation and free at the middle of
// its call, carrying the runtime call's correlation id and, as allocation source, the path of the
// library that called (the program, libcublasLt, libnccl); pool records for pool create, trim and
// destroy; one kernel record per launch. cuBLAS takes a 32 MiB workspace at the first GEMM, and
// its module brings a __device__ variable (a DEVICE_STATIC record with the variable's name); NCCL
// takes 2 buffers in ncclCommInitAll through cudaMalloc, or with --nccl-cumem through
// cuMemCreate + cuMemMap (NCCL's default where the driver allows it), which the tracer sees
// through driver callbacks; the tracer names their library from the calling stack, which the
// replay stands in for by naming the run list's caller. Exit status: 0 written, 1 unreadable input.
#include "tests/tracer/tracer_test_util.h" // ActivityBuffer, memoryRecord, kernelRecord
#include "tracer/activity_converter.h"
#include "tracer/api_callbacks.h"
#include "tracer/range_recorder.h"
#include "tracer/trace_writer_thread.h"

#include <cupti.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace gpumem;
using namespace gpumem::tracer;
using nlohmann::json;

namespace {

constexpr std::uint64_t kPoolBase = 0x7f2000000000;
constexpr const char* kProgram = "/work/build/ci/gpu_check/gpu_check";
constexpr const char* kCublas = "/usr/local/cuda/lib64/libcublasLt.so.13";
constexpr const char* kNccl = "/usr/local/cuda/lib64/libnccl.so.2";

std::vector<std::string> split(const std::string& path)
{
    std::vector<std::string> parts;
    std::size_t at = 0;
    while (at <= path.size() && !path.empty()) {
        const std::size_t slash = path.find('/', at);
        parts.push_back(path.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
        if (slash == std::string::npos)
            break;
        at = slash + 1;
    }
    return parts;
}

class Replay {
public:
    explicit Replay(bool ncclCumem)
        : m_ncclCumem(ncclCumem)
    {
    }

    void run(const std::vector<json>& lines, const std::string& out)
    {
        json header, kernels;
        std::vector<json> ops;
        for (const auto& l : lines) {
            const std::string type = l.value("type", "");
            if (type == "header")
                header = l;
            else if (type == "op")
                ops.push_back(l);
            else if (type == "kernels")
                kernels = l;
        }
        if (ops.empty() || kernels.is_null())
            throw std::runtime_error("the run list has no operations or no kernels line");
        json metadata = processMetadata();
        metadata["command"] = { "gpu_check" };
        TraceWriterThread writer(m_sink, out, metadata, std::chrono::milliseconds(60000));
        bool cublasDone = false;
        for (const auto& op : ops) {
            const std::string api = op["api"], range = op["range"];
            m_now = op["t0"].get<TimeNs>() - 10;
            enter(range);
            m_now = op["t0"].get<TimeNs>();
            this->op(op);
            if (!cublasDone && api == "cudaMallocAsync" && range.ends_with("/forward/layer 1")) {
                library(kCublas, 32 << 20, 0x7b0000000000);
                // Its module's __device__ variable, loaded at the first GEMM: a static record that
                // names the variable (the site's function) and the library (the site's file).
                memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
                    0x7b1000000000, 4096, m_now + 1, next(), kCublas, -1, "cublasLt_static_state");
                cublasDone = true;
            }
            if (api == "cuMemSetAccess" && header.value("nccl", false)) {
                enter("gpu_check/setup/nccl");
                for (int i = 0; i < 2; ++i)
                    nccl(0x7c0000000000 + std::uint64_t(i) * (8 << 20), 4 << 20);
            }
        }
        const TimeNs end = m_now;
        enter("");
        for (auto [address, source] : m_libraryLive)
            memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, address, 0, end,
                next(), source);
        launchKernels(kernels, ops.front()["t0"].get<TimeNs>());
        m_converter.convertBuffer(m_records.data(), m_records.size(), cuptiActivityGetNextRecord);
        m_sink.update([](SinkTables&, PendingEvents& p) {
            p.metadataPatch.merge_patch(json { { "cupti_runtime_version", 130001 },
                { "cupti_api_version", CUPTI_API_VERSION }, { "allocation_source", true } });
            return 0;
        });
        writer.stop({ { "exit", "normal" } });
        if (writer.failed())
            throw std::runtime_error("cannot write " + out);
    }

private:
    std::uint32_t next() { return ++m_correlation; }

    // Moves the calling thread's NVTX stack to `path` (pops, then pushes), as the program's
    // Range objects would have.
    void enter(const std::string& path)
    {
        const auto want = split(path);
        std::size_t keep = 0;
        while (keep < m_stack.size() && keep < want.size() && m_stack[keep] == want[keep])
            ++keep;
        while (m_stack.size() > keep) {
            m_ranges.pop();
            m_stack.pop_back();
        }
        for (std::size_t i = keep; i < want.size(); ++i) {
            m_ranges.push(want[i]);
            m_stack.push_back(want[i]);
        }
    }

    void callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, CUpti_ApiCallbackSite site,
        std::uint32_t correlation, void* params)
    {
        CUpti_CallbackData d;
        std::memset(&d, 0, sizeof d);
        CUresult ok = CUDA_SUCCESS;
        d.callbackSite = site;
        d.correlationId = correlation;
        d.functionParams = params;
        d.functionReturnValue = &ok;
        m_api.onApi(domain, cbid, d);
    }

    void memory(CUpti_ActivityMemoryOperationType type, CUpti_ActivityMemoryKind kind, std::uint64_t address,
        std::uint64_t bytes, TimeNs t, std::uint32_t correlation, const char* source, std::int64_t stream = -1,
        const char* variable = nullptr)
    {
        auto r = test::memoryRecord(type, kind, address, bytes, static_cast<std::uint64_t>(t), correlation);
        if (stream >= 0)
            r.streamId = static_cast<std::uint32_t>(stream);
        r.source = source;
        r.name = variable;
        if (stream >= 0) {
            r.isAsync = 1;
            r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
            r.memoryPoolConfig.address = kPoolBase;
            r.memoryPoolConfig.releaseThreshold = UINT64_MAX;
            m_poolUsed += type == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION ? bytes : -bytes;
            m_poolReserved = std::max(m_poolReserved, (m_poolUsed + (2 << 20) - 1) / (2 << 20) * (2 << 20));
            r.memoryPoolConfig.pool.size = m_poolReserved;
            r.memoryPoolConfig.utilizedSize = m_poolUsed;
        }
        m_records.add(r);
    }

    void pool(CUpti_ActivityMemoryPoolOperationType type, TimeNs t)
    {
        CUpti_ActivityMemoryPool3 r;
        std::memset(&r, 0, sizeof r);
        r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
        r.memoryPoolOperationType = type;
        r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        r.address = kPoolBase;
        r.timestamp = static_cast<std::uint64_t>(t);
        if (type == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED)
            m_poolReserved = m_poolUsed;
        r.size = m_poolReserved;
        r.utilizedSize = m_poolUsed;
        r.releaseThreshold = UINT64_MAX;
        m_records.add(r);
    }

    // One planned operation, inside its call window [t0, t1].
    void op(const json& op)
    {
        const std::string api = op["api"], memoryKind = op["memory"], id = op["id"];
        const std::uint64_t size = op["size"], address = op.value("addr", std::uint64_t(0));
        const TimeNs mid = (op["t0"].get<TimeNs>() + op["t1"].get<TimeNs>()) / 2;
        const std::int64_t stream = memoryKind == "pool" ? op.value("stream", std::int64_t(13)) : -1;
        const auto kind
            = memoryKind == "pinned" ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        static const std::map<std::string, CUpti_CallbackId> kAllocCbid = {
            { "cudaMalloc", CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 },
            { "cudaMallocHost", CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020 },
            { "cudaMallocAsync", CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020 },
            { "cudaMallocFromPoolAsync", CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020 },
        };
        if (auto it = kAllocCbid.find(api); it != kAllocCbid.end()) {
            const std::uint32_t c = next();
            callback(CUPTI_CB_DOMAIN_RUNTIME_API, it->second, CUPTI_API_ENTER, c, nullptr);
            memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, kind, address, size, mid, c, kProgram, stream);
        } else if (api == "cudaFree" || api == "cudaFreeHost" || api == "cudaFreeAsync") {
            memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, kind, address, size, mid, next(), kProgram, stream);
        } else if (api == "cuMemCreate" || api == "cuMemRelease") {
            const auto handle = m_handles.emplace(id, CUmemGenericAllocationHandle(m_handles.size() + 1)).first->second;
            m_now = mid;
            if (api == "cuMemCreate")
                vmmCreate(handle, size);
            else
                vmmRelease(handle);
        } else if (api == "cuMemMap" || api == "cuMemUnmap") {
            m_now = mid;
            m_caller = kProgram;
            if (api == "cuMemMap")
                vmmMap(address, size, m_handles.at(id));
            else
                vmmUnmap(address, size);
        } else if (api == "cudaMemPoolCreate") {
            pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, mid);
        } else if (api == "cudaMemPoolTrimTo") {
            pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, mid);
        } else if (api == "cudaMemPoolDestroy") {
            pool(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, mid);
        }
        // cuMemAddressReserve, cuMemSetAccess, cuMemAddressFree: the tracer enables no callback for them.
        m_now = op["t1"].get<TimeNs>();
    }

    void vmmCreate(CUmemGenericAllocationHandle handle, std::size_t size)
    {
        CUmemAllocationProp prop {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        cuMemCreate_params p { &handle, size, &prop, 0 };
        callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, CUPTI_API_EXIT, next(), &p);
    }
    void vmmRelease(CUmemGenericAllocationHandle handle)
    {
        cuMemRelease_params p { handle };
        callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, CUPTI_API_EXIT, next(), &p);
    }
    void vmmMap(std::uint64_t address, std::size_t size, CUmemGenericAllocationHandle handle)
    {
        cuMemMap_params p { address, size, 0, handle, 0 };
        callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap, CUPTI_API_EXIT, next(), &p);
    }
    void vmmUnmap(std::uint64_t address, std::size_t size)
    {
        cuMemUnmap_params p { address, size };
        callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, CUPTI_API_EXIT, next(), &p);
    }

    // A library's cudaMalloc (its statically linked runtime): the allocation source names it.
    void library(const char* source, std::uint64_t size, std::uint64_t address)
    {
        const std::uint32_t c = next();
        m_now += 1;
        callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, CUPTI_API_ENTER, c, nullptr);
        memory(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, address, size, m_now,
            c, source);
        m_libraryLive.emplace_back(address, source);
    }
    void nccl(std::uint64_t address, std::uint64_t size)
    {
        if (!m_ncclCumem)
            return library(kNccl, size, address);
        m_now += 1;
        m_caller = kNccl;
        const auto handle = CUmemGenericAllocationHandle(1000 + address % 997);
        vmmCreate(handle, size);
        vmmMap(address, size, handle);
    }

    void launchKernels(const json& kernels, TimeNs start)
    {
        static std::vector<std::string> names; // CUPTI owns kernel names; these live to the end
        names.clear();
        for (const auto& [name, count] : kernels["own"].items())
            for (int i = 0; i < count.get<int>(); ++i)
                names.push_back(name);
        for (int i = 0; i < kernels.value("gemm_calls", 0); ++i)
            names.push_back("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
                            "alignc4_execute_kernel__51_cublas");
        for (int i = 0; i < kernels.value("allreduce_calls", 0); ++i)
            names.push_back("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
        TimeNs t = start + 1000;
        for (const auto& name : names) {
            const auto begin = static_cast<std::uint64_t>(t);
            m_records.add(test::kernelRecord(name.c_str(), begin, begin + 4000, 13, next()));
            t += 5000;
        }
    }

    bool m_ncclCumem;
    TimeNs m_now = 0;
    TraceSink m_sink;
    RangeRecorder m_ranges { m_sink, [this] { return m_now; } };
    CorrelationMap m_correlations;
    ActivityConverter m_converter { m_sink, m_correlations };
    std::string m_caller; // the library making the current driver call (the tracer walks the stack)
    ApiCallbacks m_api { m_sink, m_ranges, m_correlations, [this] { return m_now; }, [this] { return m_caller; } };
    test::ActivityBuffer m_records; // walked at the end, as CUPTI delivers records: later, in a buffer
    std::vector<std::string> m_stack;
    std::uint32_t m_correlation = 0;
    std::uint64_t m_poolUsed = 0, m_poolReserved = 0;
    std::map<std::string, CUmemGenericAllocationHandle> m_handles;
    std::vector<std::pair<std::uint64_t, const char*>> m_libraryLive;
};

} // namespace

int main(int argc, char** argv)
{
    if (argc < 3 || argc > 4 || (argc == 4 && std::strcmp(argv[3], "--nccl-cumem") != 0)) {
        std::fprintf(stderr, "usage: %s RUN.jsonl OUT.gmt [--nccl-cumem]\n", argv[0]);
        return 2;
    }
    try {
        std::ifstream in(argv[1]);
        if (!in)
            throw std::runtime_error(std::string(argv[1]) + ": cannot read");
        std::vector<json> lines;
        std::string text;
        for (int n = 1; std::getline(in, text); ++n) {
            if (text.empty())
                continue;
            try {
                lines.push_back(json::parse(text));
            } catch (const json::exception& e) {
                throw std::runtime_error(
                    std::string(argv[1]) + ":" + std::to_string(n) + ": not valid JSON (" + e.what() + ")");
            }
        }
        Replay(argc == 4).run(lines, argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gpu_check_tracer_replay: %s\n", e.what());
        return 1;
    }
    return 0;
}
