// gpu_check: the program behind scripts/gpu-check.sh (docs/gpu-check.md). It trains a 3-layer MLP
// with cuBLAS for a few SGD-with-momentum steps and allocates through every path the tracer claims
// to record: cudaMalloc, pinned cudaMallocHost, cudaMallocAsync and cudaMallocFromPoolAsync on a
// memory pool of its own, the VMM calls (cuMemCreate / cuMemMap, reached both through dlsym on
// libcuda and through cudaGetDriverEntryPointByVersion, the way PyTorch reaches them) and a
// one-rank NCCL all-reduce. Every allocation goes through a Ledger that writes the
// expected-allocation list: one JSON object a line (order, operation, API, size, NVTX range path,
// and in a real run the address and stream).
//
//   gpu_check --plan [--steps N] [-o FILE]   the list without touching the GPU (no CUDA call at
//                                            all; NCCL is probed with dlopen only)
//   gpu_check [--steps N] [-o FILE]          the real run: the same list with addresses, kernel
//                                            launch counts and per-step wall times
//
// The plan and the run are made by the same code path (Ledger decides whether to call CUDA), so
// the plan is what the run does, less addresses and times. NCCL is loaded with dlopen so that a
// machine without libnccl.so.2 still runs the rest; the header line says why NCCL was left out.
// A VMM or NCCL failure (a sandbox without them) is written as a {"type":"failed"} line and the
// run goes on without that part (momentum buffers then come from cudaMalloc), so one GPU run still
// checks the rest. Exit status: 0 ok, 1 a CUDA or cuBLAS call failed or the loss did not go down,
// 2 usage.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#if __has_include(<nccl.h>)
#include <nccl.h>
#define GPU_CHECK_HAVE_NCCL_HEADER 1
#else
#define GPU_CHECK_HAVE_NCCL_HEADER 0
#endif

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, const char* detail, const char* file, int line)
{
    std::fprintf(stderr, "gpu_check: %s failed: %s (%s:%d)\n", what, detail, file, line);
    std::exit(1);
}

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            die(#call, cudaGetErrorString(e_), __FILE__, __LINE__);                                                    \
    } while (0)
#define CKB(call)                                                                                                      \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                               \
            die(#call, cublasGetStatusString(s_), __FILE__, __LINE__);                                                 \
    } while (0)

// ------------------------------------------------------------------------------------ kernels
// extern "C" so that CUPTI's kernel records carry these names unmangled; the checker looks for
// them by name and counts their launches.

extern "C" __global__ void gc_init_uniform(float* p, std::uint64_t n, std::uint32_t seed, float scale)
{
    for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::uint64_t(gridDim.x) * blockDim.x) {
        std::uint32_t h = std::uint32_t(i) * 2654435761u ^ seed;
        h ^= h >> 16;
        h *= 0x7feb352du;
        h ^= h >> 15;
        p[i] = scale * (float(h & 0xffffff) / float(0x1000000) * 2.0f - 1.0f);
    }
}

// Z (rows x cols, column-major) += bias per row; ReLU when relu != 0.
extern "C" __global__ void gc_bias_act(float* z, const float* bias, int rows, int cols, int relu)
{
    const int n = rows * cols;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = z[i] + bias[i % rows];
        z[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

// dY = 2 (Y - T) / n and loss += sum (Y - T)^2 / n.
extern "C" __global__ void gc_mse_grad(const float* y, const float* t, float* dy, float* loss, int n)
{
    float local = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float d = y[i] - t[i];
        dy[i] = 2.0f * d / float(n);
        local += d * d / float(n);
    }
    atomicAdd(loss, local);
}

// dZ = dA where A > 0, else 0 (A is the ReLU output).
extern "C" __global__ void gc_relu_backward(float* da, const float* a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (a[i] <= 0.0f)
            da[i] = 0.0f;
}

// db[r] = sum over columns of dZ[r, c] (one thread per row).
extern "C" __global__ void gc_bias_grad(const float* dz, float* db, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s += dz[r + std::size_t(c) * rows];
    db[r] = s;
}

// v = mu v + g; w -= lr v.
extern "C" __global__ void gc_sgd_momentum(float* w, const float* g, float* v, std::uint64_t n, float lr, float mu)
{
    for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::uint64_t(gridDim.x) * blockDim.x) {
        v[i] = mu * v[i] + g[i];
        w[i] -= lr * v[i];
    }
}

// ------------------------------------------------------------------------------------- ledger

std::string jsonString(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
            continue;
        }
        out += c;
    }
    return out + "\"";
}

// The expected-allocation list and the NVTX range stack. In plan mode nothing reaches CUDA or
// NVTX; the same calls only write what a run would do.
class Ledger {
public:
    Ledger(bool plan, FILE* out)
        : m_plan(plan)
        , m_out(out)
    {
    }
    bool plan() const { return m_plan; }

    void push(const std::string& name)
    {
        m_ranges.push_back(name);
        if (!m_plan)
            nvtxRangePushA(name.c_str());
    }
    void pop()
    {
        if (!m_plan)
            nvtxRangePop();
        m_ranges.pop_back();
    }
    std::string path() const
    {
        std::string p;
        for (const auto& r : m_ranges)
            p += (p.empty() ? "" : "/") + r;
        return p;
    }

    // One line: {"type":"op","order":…,"op":…,"api":…,"id":…,"memory":…,"size":…,"range":…
    // [,"addr":…][,"stream":…][,"t0":…,"t1":…]} (address, stream and call times in a run only).
    // `memory` is device, pinned, pool or vmm; `extra` is appended verbatim (",\"path\":\"dlsym\"").
    // Host time (CLOCK_REALTIME ns, the tracer's and CUPTI's clock) just before the CUDA call of
    // the next op(); op() takes the time after it, so the run list brackets each call.
    static std::int64_t now()
    {
        timespec ts {};
        clock_gettime(CLOCK_REALTIME, &ts);
        return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    }
    void start() { m_t0 = m_plan ? 0 : now(); }

    void op(const char* op, const char* api, const std::string& id, const char* memory, std::uint64_t size,
        const void* addr, long long stream = -1, const std::string& extra = "")
    {
        const std::int64_t t1 = m_plan ? 0 : now();
        std::fprintf(m_out,
            "{\"type\":\"op\",\"order\":%d,\"op\":\"%s\",\"api\":\"%s\",\"id\":%s,\"memory\":\"%s\",\"size\":%" PRIu64
            ",\"range\":%s",
            m_order++, op, api, jsonString(id).c_str(), memory, size, jsonString(path()).c_str());
        if (!m_plan && addr != nullptr)
            std::fprintf(
                m_out, ",\"addr\":%" PRIu64, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(addr)));
        if (!m_plan && stream >= 0)
            std::fprintf(m_out, ",\"stream\":%lld", stream);
        if (!m_plan)
            std::fprintf(m_out, ",\"t0\":%" PRId64 ",\"t1\":%" PRId64, m_t0, t1);
        std::fprintf(m_out, "%s}\n", extra.c_str());
    }
    void line(const std::string& json) { std::fprintf(m_out, "%s\n", json.c_str()); }

    // Kernel launches are counted in both modes (the plan knows how many of each it will launch).
    void launched(const char* kernel) { ++m_launches[kernel]; }
    const std::map<std::string, int>& launches() const { return m_launches; }

private:
    bool m_plan;
    FILE* m_out;
    int m_order = 0;
    std::int64_t m_t0 = 0;
    std::vector<std::string> m_ranges;
    std::map<std::string, int> m_launches;
};

struct Range {
    Range(Ledger& l, const std::string& name)
        : m_l(l)
    {
        m_l.push(name);
    }
    ~Range() { m_l.pop(); }
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
    Ledger& m_l;
};

// ------------------------------------------------------------------------- driver entry points

struct Vmm {
    decltype(&cuMemCreate) create = nullptr;
    decltype(&cuMemRelease) release = nullptr;
    decltype(&cuMemMap) map = nullptr;
    decltype(&cuMemUnmap) unmap = nullptr;
    decltype(&cuMemAddressReserve) reserve = nullptr;
    decltype(&cuMemAddressFree) addressFree = nullptr;
    decltype(&cuMemSetAccess) setAccess = nullptr;
    decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
};

// Fills the table from `lookup(name)`; false (and `why`) when a function is missing.
template <class Lookup> bool fillVmm(Vmm& v, Lookup lookup, std::string& why)
{
    auto one = [&](const char* name, auto& f) {
        f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(lookup(name));
        if (f == nullptr && why.empty())
            why = std::string("no ") + name;
        return f != nullptr;
    };
    return one("cuMemCreate", v.create) & one("cuMemRelease", v.release) & one("cuMemMap", v.map)
        & one("cuMemUnmap", v.unmap) & one("cuMemAddressReserve", v.reserve) & one("cuMemAddressFree", v.addressFree)
        & one("cuMemSetAccess", v.setAccess) & one("cuMemGetAllocationGranularity", v.granularity);
}

// The symbols libcuda exports (what a program linked with -lcuda calls).
bool vmmByDlsym(Vmm& v, std::string& why)
{
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr)
        lib = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) {
        why = std::string("dlopen(libcuda.so.1): ") + ::dlerror();
        return false;
    }
    return fillVmm(
        v, [lib](const char* name) { return ::dlsym(lib, name); }, why);
}

// The entry points the runtime hands out (cuGetProcAddress): PyTorch's expandable segments path.
bool vmmByEntryPoint(Vmm& v, std::string& why)
{
    return fillVmm(
        v,
        [](const char* name) -> void* {
            void* p = nullptr;
            cudaDriverEntryPointQueryResult status {};
            if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) != cudaSuccess
                || status != cudaDriverEntryPointSuccess)
                return nullptr;
            return p;
        },
        why);
}

// ------------------------------------------------------------------------------------- NCCL

struct Nccl {
    bool available = false;
    std::string reason; // why not, when not
#if GPU_CHECK_HAVE_NCCL_HEADER
    decltype(&ncclCommInitAll) commInitAll = nullptr;
    decltype(&ncclAllReduce) allReduce = nullptr;
    decltype(&ncclCommDestroy) commDestroy = nullptr;
    decltype(&ncclGetErrorString) errorString = nullptr;
#endif
};

Nccl loadNccl(bool wanted)
{
    Nccl n;
    if (!wanted) {
        n.reason = "--no-nccl was given";
        return n;
    }
#if GPU_CHECK_HAVE_NCCL_HEADER
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW);
    if (lib == nullptr) {
        n.reason = std::string("libnccl.so.2 could not be loaded: ") + ::dlerror();
        return n;
    }
    n.commInitAll = reinterpret_cast<decltype(n.commInitAll)>(::dlsym(lib, "ncclCommInitAll"));
    n.allReduce = reinterpret_cast<decltype(n.allReduce)>(::dlsym(lib, "ncclAllReduce"));
    n.commDestroy = reinterpret_cast<decltype(n.commDestroy)>(::dlsym(lib, "ncclCommDestroy"));
    n.errorString = reinterpret_cast<decltype(n.errorString)>(::dlsym(lib, "ncclGetErrorString"));
    if (!n.commInitAll || !n.allReduce || !n.commDestroy || !n.errorString) {
        n.reason = "libnccl.so.2 lacks ncclCommInitAll/ncclAllReduce/ncclCommDestroy";
        return n;
    }
    n.available = true;
#else
    n.reason = "built without nccl.h (no NCCL headers in the CUDA toolkit)";
#endif
    return n;
}

// --------------------------------------------------------------------------------- the program

struct Options {
    bool plan = false;
    bool nccl = true;
    int steps = 20;
    int batch = 1024;
    int dims[4] = { 1024, 2048, 2048, 256 }; // input, hidden 1, hidden 2, output
    std::string out;
};

int usage(const char* argv0)
{
    std::fprintf(stderr,
        "usage: %s [--plan] [--steps N] [--batch N] [--no-nccl] [-o FILE]\n"
        "  --plan      write the expected-allocation list without touching the GPU\n"
        "  --steps N   training steps (default 20)\n"
        "  -o FILE     where the list goes (default stdout)\n",
        argv0);
    return 2;
}

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kVmmChunk = 16 * kMiB; // a multiple of every GPU's VMM granularity (2 MiB)

struct Buffer {
    float* p = nullptr;
    std::uint64_t bytes = 0;
    std::string id;
};

class Program {
public:
    Program(const Options& o, Ledger& l)
        : m_o(o)
        , m_l(l)
    {
    }

    int run()
    {
        m_nccl = loadNccl(m_o.nccl);
        header();
        {
            Range top(m_l, "gpu_check");
            setup();
            for (int s = 0; s < m_o.steps; ++s)
                step(s);
            teardown();
        }
        std::string k = "{\"type\":\"kernels\",\"own\":{";
        bool first = true;
        for (const auto& [name, count] : m_l.launches()) {
            k += (first ? "" : ",") + jsonString(name) + ":" + std::to_string(count);
            first = false;
        }
        k += "},\"gemm_calls\":" + std::to_string(m_gemms) + ",\"allreduce_calls\":" + std::to_string(m_allreduces)
            + "}";
        m_l.line(k);
        if (!m_l.plan()) {
            std::fprintf(stderr, "gpu_check: loss %.6f after step 0, %.6f after step %d\n", m_firstLoss, m_lastLoss,
                m_o.steps - 1);
            if (!(m_lastLoss < m_firstLoss)) {
                std::fprintf(stderr, "gpu_check: the loss did not go down; the MLP did not train\n");
                return 1;
            }
        }
        return 0;
    }

private:
    void header()
    {
        std::string h = "{\"type\":\"header\",\"program\":\"gpu_check\",\"version\":1,\"mode\":\"";
        h += m_l.plan() ? "plan" : "run";
        h += "\",\"steps\":" + std::to_string(m_o.steps) + ",\"batch\":" + std::to_string(m_o.batch) + ",\"dims\":["
            + std::to_string(m_o.dims[0]) + "," + std::to_string(m_o.dims[1]) + "," + std::to_string(m_o.dims[2]) + ","
            + std::to_string(m_o.dims[3]) + "],\"nccl\":" + (m_nccl.available ? "true" : "false");
        if (!m_nccl.available)
            h += ",\"nccl_reason\":" + jsonString(m_nccl.reason);
        h += ",\"libraries\":{\"cublas\":\"gpu_check/setup/cublas\"";
        if (m_nccl.available)
            h += ",\"nccl\":\"gpu_check/setup/nccl\"";
        h += "}";
        if (!m_l.plan()) {
            int device = 0;
            CK(cudaGetDevice(&device));
            cudaDeviceProp prop {};
            CK(cudaGetDeviceProperties(&prop, device));
            h += ",\"device\":" + jsonString(prop.name);
        }
        h += "}";
        m_l.line(h);
        if (!m_nccl.available)
            std::fprintf(stderr, "gpu_check: NCCL is left out: %s\n", m_nccl.reason.c_str());
    }

    // ------------------------------------------------------------------ allocation wrappers
    Buffer deviceMalloc(const std::string& id, std::uint64_t bytes)
    {
        Buffer b { nullptr, bytes, id };
        m_l.start();
        if (!m_l.plan())
            CK(cudaMalloc(reinterpret_cast<void**>(&b.p), bytes));
        m_l.op("alloc", "cudaMalloc", id, "device", bytes, b.p);
        return b;
    }
    void deviceFree(Buffer& b)
    {
        m_l.start();
        if (!m_l.plan())
            CK(cudaFree(b.p));
        m_l.op("free", "cudaFree", b.id, "device", b.bytes, b.p);
        b.p = nullptr;
    }
    Buffer poolMalloc(const std::string& id, std::uint64_t bytes, bool fromPool)
    {
        Buffer b { nullptr, bytes, id };
        m_l.start();
        if (!m_l.plan()) {
            if (fromPool)
                CK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&b.p), bytes, m_pool, m_stream));
            else
                CK(cudaMallocAsync(reinterpret_cast<void**>(&b.p), bytes, m_stream));
        }
        m_l.op("alloc", fromPool ? "cudaMallocFromPoolAsync" : "cudaMallocAsync", id, "pool", bytes, b.p, m_streamId);
        return b;
    }
    void poolFree(Buffer& b)
    {
        m_l.start();
        if (!m_l.plan())
            CK(cudaFreeAsync(b.p, m_stream));
        m_l.op("free", "cudaFreeAsync", b.id, "pool", b.bytes, b.p, m_streamId);
        b.p = nullptr;
    }

    static unsigned blocks(std::uint64_t n) { return unsigned(std::min<std::uint64_t>((n + 255) / 256, 4096)); }
    void initUniform(Buffer& b, std::uint32_t seed, float scale)
    {
        const std::uint64_t n = b.bytes / sizeof(float);
        m_l.launched("gc_init_uniform");
        if (!m_l.plan())
            gc_init_uniform<<<blocks(n), 256, 0, m_stream>>>(b.p, n, seed, scale);
    }
    // C (m x n) = op(A) op(B), column-major.
    void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a, int lda, const float* b,
        int ldb, float* c, int ldc)
    {
        ++m_gemms;
        if (m_l.plan())
            return;
        const float one = 1.0f, zero = 0.0f;
        CKB(cublasSgemm(m_blas, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc));
    }

    // ------------------------------------------------------------------------------ setup
    void setup()
    {
        Range r(m_l, "setup");
        const int B = m_o.batch;
        if (!m_l.plan()) {
            CK(cudaSetDevice(0));
            CK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
            unsigned long long id = 0;
            CK(cudaStreamGetId(m_stream, &id));
            m_streamId = static_cast<long long>(id);
        }
        {
            Range c(m_l, "cublas");
            if (!m_l.plan()) {
                CKB(cublasCreate(&m_blas));
                CKB(cublasSetStream(m_blas, m_stream));
            }
        }
        {
            Range p(m_l, "pool");
            m_l.start();
            if (!m_l.plan()) {
                cudaMemPoolProps props {};
                props.allocType = cudaMemAllocationTypePinned;
                props.location.type = cudaMemLocationTypeDevice;
                props.location.id = 0;
                CK(cudaMemPoolCreate(&m_pool, &props));
                std::uint64_t threshold = UINT64_MAX; // keep what it reserved, as PyTorch's backend does
                CK(cudaMemPoolSetAttribute(m_pool, cudaMemPoolAttrReleaseThreshold, &threshold));
                CK(cudaDeviceSetMemPool(0, m_pool)); // cudaMallocAsync now takes from it
            }
            m_l.op("pool_create", "cudaMemPoolCreate", "pool", "pool", 0, nullptr);
        }
        for (int l = 0; l < 3; ++l) {
            Range lr(m_l, "layer " + std::to_string(l + 1));
            const std::uint64_t w = std::uint64_t(m_o.dims[l + 1]) * m_o.dims[l] * sizeof(float);
            const std::uint64_t b = std::uint64_t(m_o.dims[l + 1]) * sizeof(float);
            const std::string n = "layer" + std::to_string(l + 1);
            m_w[l] = deviceMalloc(n + ".weight", w);
            m_b[l] = deviceMalloc(n + ".bias", b);
            m_gw[l] = deviceMalloc(n + ".weight.grad", w);
            m_gb[l] = deviceMalloc(n + ".bias.grad", b);
            initUniform(m_w[l], 17u + l, 1.0f / std::sqrt(float(m_o.dims[l])));
            initUniform(m_b[l], 71u + l, 0.01f);
        }
        {
            Range d(m_l, "data");
            const std::uint64_t x = std::uint64_t(m_o.dims[0]) * B * sizeof(float);
            m_hostX = Buffer { nullptr, x, "input.pinned" };
            m_l.start();
            if (!m_l.plan()) {
                CK(cudaMallocHost(reinterpret_cast<void**>(&m_hostX.p), x));
                for (std::uint64_t i = 0; i < x / sizeof(float); ++i)
                    m_hostX.p[i] = float((i * 2654435761u) % 1000) / 500.0f - 1.0f;
            }
            m_l.op("alloc", "cudaMallocHost", m_hostX.id, "pinned", x, m_hostX.p);
            m_x = deviceMalloc("input", x);
            m_t = deviceMalloc("target", std::uint64_t(m_o.dims[3]) * B * sizeof(float));
            initUniform(m_t, 99u, 1.0f);
            m_loss = deviceMalloc("loss", 256);
        }
        {
            Range v(m_l, "vmm");
            vmmSetup();
        }
        if (m_nccl.available) {
            Range n(m_l, "nccl");
#if GPU_CHECK_HAVE_NCCL_HEADER
            if (!m_l.plan()) {
                const int devices[1] = { 0 };
                ncclResult_t res = m_nccl.commInitAll(&m_comm, 1, devices);
                if (res != ncclSuccess) {
                    failed("nccl", std::string("ncclCommInitAll: ") + m_nccl.errorString(res));
                    m_nccl.available = false;
                }
            }
#endif
        }
        if (!m_l.plan())
            CK(cudaStreamSynchronize(m_stream));
    }

    // A part of the run that failed on this machine (a sandbox without VMM, NCCL that cannot
    // start): one line in the list, so the checker names it, and the rest of the run goes on.
    void failed(const char* part, const std::string& reason)
    {
        m_l.line(std::string("{\"type\":\"failed\",\"part\":\"") + part + "\",\"reason\":" + jsonString(reason) + "}");
        std::fprintf(stderr, "gpu_check: %s failed: %s; the run goes on without it\n", part, reason.c_str());
    }
    // True when a driver call succeeded (always in plan mode); else records the VMM failure.
    bool vmmCall(CUresult r, const char* what)
    {
        if (m_l.plan() || r == CUDA_SUCCESS)
            return true;
        failed("vmm", std::string(what) + " returned CUresult " + std::to_string(int(r)));
        return false;
    }

    // Momentum buffers for all six parameters live in one VMM range: 2 chunks of kVmmChunk, the
    // first created and mapped through libcuda's exported symbols, the second through the
    // runtime's driver entry points. Where VMM fails they go to one cudaMalloc block instead.
    void vmmSetup()
    {
        std::uint64_t need = 0;
        for (int l = 0; l < 3; ++l)
            need += m_w[l].bytes + m_b[l].bytes;
        if (need > 2 * kVmmChunk)
            die("vmmSetup", "the momentum buffers do not fit in two 16 MiB VMM chunks", __FILE__, __LINE__);
        CUmemAllocationProp prop {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        bool ok = true;
        m_l.start();
        if (!m_l.plan()) {
            std::string why;
            ok = vmmByDlsym(m_vmm[0], why) && vmmByEntryPoint(m_vmm[1], why);
            if (!ok)
                failed("vmm", why);
            std::size_t granularity = 0;
            ok = ok
                && vmmCall(m_vmm[0].granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                    "cuMemGetAllocationGranularity");
            if (ok && (granularity == 0 || kVmmChunk % granularity != 0)) {
                failed("vmm", "the VMM granularity " + std::to_string(granularity) + " does not divide 16 MiB");
                ok = false;
            }
            ok = ok && vmmCall(m_vmm[0].reserve(&m_vmmBase, 2 * kVmmChunk, 0, 0, 0), "cuMemAddressReserve");
        }
        if (ok) {
            m_vmmReserved = true;
            m_l.op("reserve", "cuMemAddressReserve", "momentum.va", "vmm", 2 * kVmmChunk,
                reinterpret_cast<void*>(m_vmmBase));
        }
        static const char* kPaths[2] = { "dlsym", "entry_point" };
        for (int c = 0; c < 2 && ok; ++c) {
            const std::string id = std::string("momentum.chunk") + std::to_string(c);
            const std::string extra = std::string(",\"path\":\"") + kPaths[c] + "\"";
            m_l.start();
            ok = m_l.plan() || vmmCall(m_vmm[c].create(&m_vmmHandle[c], kVmmChunk, &prop, 0), "cuMemCreate");
            if (!ok)
                break;
            m_vmmCreated[c] = true;
            m_l.op("create", "cuMemCreate", id, "vmm", kVmmChunk, nullptr, -1, extra);
            void* at = reinterpret_cast<void*>(m_vmmBase + c * kVmmChunk);
            m_l.start();
            ok = m_l.plan()
                || vmmCall(m_vmm[c].map(m_vmmBase + c * kVmmChunk, kVmmChunk, 0, m_vmmHandle[c], 0), "cuMemMap");
            if (!ok)
                break;
            m_vmmMapped[c] = true;
            m_l.op("map", "cuMemMap", id, "vmm", kVmmChunk, at, -1, extra);
        }
        if (ok) {
            m_l.start();
            CUmemAccessDesc access {};
            access.location = prop.location;
            access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            ok = m_l.plan() || vmmCall(m_vmm[0].setAccess(m_vmmBase, 2 * kVmmChunk, &access, 1), "cuMemSetAccess");
            if (ok)
                m_l.op("set_access", "cuMemSetAccess", "momentum.va", "vmm", 2 * kVmmChunk,
                    reinterpret_cast<void*>(m_vmmBase));
        }
        float* base = reinterpret_cast<float*>(m_vmmBase);
        if (!ok) {
            m_momentum = deviceMalloc("momentum.fallback", 2 * kVmmChunk);
            base = m_momentum.p;
        }
        if (!m_l.plan())
            CK(cudaMemsetAsync(base, 0, 2 * kVmmChunk, m_stream));
        std::uint64_t offset = 0;
        for (int l = 0; l < 3; ++l) {
            m_vw[l] = base + offset / sizeof(float);
            offset += m_w[l].bytes;
            m_vb[l] = base + offset / sizeof(float);
            offset += m_b[l].bytes;
        }
    }

    // ------------------------------------------------------------------------------- a step
    void step(int s)
    {
        const auto start = std::chrono::steady_clock::now();
        const int B = m_o.batch;
        const int* d = m_o.dims;
        Range sr(m_l, "step " + std::to_string(s));
        {
            Range r(m_l, "data");
            if (!m_l.plan())
                CK(cudaMemcpyAsync(m_x.p, m_hostX.p, m_x.bytes, cudaMemcpyHostToDevice, m_stream));
        }
        Buffer act[3];
        {
            Range f(m_l, "forward");
            const float* in = m_x.p;
            for (int l = 0; l < 3; ++l) {
                Range lr(m_l, "layer " + std::to_string(l + 1));
                act[l] = poolMalloc("step" + std::to_string(s) + ".layer" + std::to_string(l + 1) + ".activation",
                    std::uint64_t(d[l + 1]) * B * sizeof(float), false);
                gemm(CUBLAS_OP_N, CUBLAS_OP_N, d[l + 1], B, d[l], m_w[l].p, d[l + 1], in, d[l], act[l].p, d[l + 1]);
                m_l.launched("gc_bias_act");
                if (!m_l.plan()) {
                    const int n = d[l + 1] * B;
                    gc_bias_act<<<blocks(n), 256, 0, m_stream>>>(act[l].p, m_b[l].p, d[l + 1], B, l < 2 ? 1 : 0);
                }
                in = act[l].p;
            }
        }
        Buffer dy;
        {
            Range lr(m_l, "loss");
            dy = deviceMalloc("step" + std::to_string(s) + ".output.grad", std::uint64_t(d[3]) * B * sizeof(float));
            m_l.launched("gc_mse_grad");
            if (!m_l.plan()) {
                CK(cudaMemsetAsync(m_loss.p, 0, sizeof(float), m_stream));
                const int n = d[3] * B;
                gc_mse_grad<<<blocks(n), 256, 0, m_stream>>>(act[2].p, m_t.p, dy.p, m_loss.p, n);
            }
        }
        {
            Range br(m_l, "backward");
            Buffer dz = dy; // gradient at the output of the current layer
            for (int l = 2; l >= 0; --l) {
                Range lr(m_l, "layer " + std::to_string(l + 1));
                const float* in = l == 0 ? m_x.p : act[l - 1].p;
                if (l < 2) {
                    m_l.launched("gc_relu_backward");
                    if (!m_l.plan())
                        gc_relu_backward<<<blocks(std::uint64_t(d[l + 1]) * B), 256, 0, m_stream>>>(
                            dz.p, act[l].p, d[l + 1] * B);
                }
                gemm(CUBLAS_OP_N, CUBLAS_OP_T, d[l + 1], d[l], B, dz.p, d[l + 1], in, d[l], m_gw[l].p, d[l + 1]);
                m_l.launched("gc_bias_grad");
                if (!m_l.plan())
                    gc_bias_grad<<<(d[l + 1] + 255) / 256, 256, 0, m_stream>>>(dz.p, m_gb[l].p, d[l + 1], B);
                Buffer din;
                if (l > 0) {
                    din = poolMalloc("step" + std::to_string(s) + ".layer" + std::to_string(l) + ".activation.grad",
                        std::uint64_t(d[l]) * B * sizeof(float), true);
                    gemm(CUBLAS_OP_T, CUBLAS_OP_N, d[l], B, d[l + 1], m_w[l].p, d[l + 1], dz.p, d[l + 1], din.p, d[l]);
                }
                poolFree(act[l]);
                if (l == 2)
                    deviceFree(dz); // the output gradient came from cudaMalloc
                else
                    poolFree(dz);
                dz = din;
            }
        }
        if (m_nccl.available) {
            Range ar(m_l, "allreduce");
            ++m_allreduces;
#if GPU_CHECK_HAVE_NCCL_HEADER
            if (!m_l.plan()) {
                const ncclResult_t res = m_nccl.allReduce(
                    m_gw[2].p, m_gw[2].p, m_gw[2].bytes / sizeof(float), ncclFloat, ncclSum, m_comm, m_stream);
                if (res != ncclSuccess) {
                    failed("nccl", std::string("ncclAllReduce: ") + m_nccl.errorString(res));
                    m_nccl.available = false;
                }
            }
#endif
        }
        {
            Range o(m_l, "optimizer");
            for (int l = 0; l < 3; ++l) {
                m_l.launched("gc_sgd_momentum");
                m_l.launched("gc_sgd_momentum");
                if (!m_l.plan()) {
                    const std::uint64_t nw = m_w[l].bytes / sizeof(float), nb = m_b[l].bytes / sizeof(float);
                    gc_sgd_momentum<<<blocks(nw), 256, 0, m_stream>>>(m_w[l].p, m_gw[l].p, m_vw[l], nw, 0.05f, 0.9f);
                    gc_sgd_momentum<<<blocks(nb), 256, 0, m_stream>>>(m_b[l].p, m_gb[l].p, m_vb[l], nb, 0.05f, 0.9f);
                }
            }
        }
        if (!m_l.plan()) {
            CK(cudaGetLastError());
            float loss = 0.0f;
            CK(cudaMemcpyAsync(&loss, m_loss.p, sizeof loss, cudaMemcpyDeviceToHost, m_stream));
            CK(cudaStreamSynchronize(m_stream));
            if (s == 0)
                m_firstLoss = loss;
            m_lastLoss = loss;
            const auto ns
                = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                      .count();
            m_l.line("{\"type\":\"step\",\"step\":" + std::to_string(s) + ",\"ns\":" + std::to_string(ns)
                + ",\"loss\":" + std::to_string(loss) + "}");
        }
    }

    // --------------------------------------------------------------------------- teardown
    void teardown()
    {
        Range r(m_l, "teardown");
        if (!m_l.plan())
            CK(cudaStreamSynchronize(m_stream));
        if (m_nccl.available) {
            Range n(m_l, "nccl");
#if GPU_CHECK_HAVE_NCCL_HEADER
            if (!m_l.plan()) {
                const ncclResult_t res = m_nccl.commDestroy(m_comm);
                if (res != ncclSuccess)
                    failed("nccl", std::string("ncclCommDestroy: ") + m_nccl.errorString(res));
            }
#endif
        }
        {
            Range v(m_l, "vmm");
            // Undoes what vmmSetup did, as far as it got.
            for (int c = 1; c >= 0; --c) {
                const std::string id = std::string("momentum.chunk") + std::to_string(c);
                const std::string extra = std::string(",\"path\":\"") + (c == 0 ? "dlsym" : "entry_point") + "\"";
                void* at = reinterpret_cast<void*>(m_vmmBase + c * kVmmChunk);
                m_l.start();
                if (m_vmmMapped[c]
                    && vmmCall(
                        m_l.plan() ? CUDA_SUCCESS : m_vmm[c].unmap(m_vmmBase + c * kVmmChunk, kVmmChunk), "cuMemUnmap"))
                    m_l.op("unmap", "cuMemUnmap", id, "vmm", kVmmChunk, at, -1, extra);
                m_l.start();
                if (m_vmmCreated[c]
                    && vmmCall(m_l.plan() ? CUDA_SUCCESS : m_vmm[c].release(m_vmmHandle[c]), "cuMemRelease"))
                    m_l.op("release", "cuMemRelease", id, "vmm", kVmmChunk, nullptr, -1, extra);
            }
            m_l.start();
            if (m_vmmReserved
                && vmmCall(
                    m_l.plan() ? CUDA_SUCCESS : m_vmm[0].addressFree(m_vmmBase, 2 * kVmmChunk), "cuMemAddressFree"))
                m_l.op("address_free", "cuMemAddressFree", "momentum.va", "vmm", 2 * kVmmChunk,
                    reinterpret_cast<void*>(m_vmmBase));
            if (m_momentum.bytes != 0)
                deviceFree(m_momentum);
        }
        {
            Range d(m_l, "data");
            deviceFree(m_loss);
            deviceFree(m_t);
            deviceFree(m_x);
            m_l.start();
            if (!m_l.plan())
                CK(cudaFreeHost(m_hostX.p));
            m_l.op("free", "cudaFreeHost", m_hostX.id, "pinned", m_hostX.bytes, m_hostX.p);
        }
        for (int l = 2; l >= 0; --l) {
            Range lr(m_l, "layer " + std::to_string(l + 1));
            deviceFree(m_gb[l]);
            deviceFree(m_gw[l]);
            deviceFree(m_b[l]);
            deviceFree(m_w[l]);
        }
        // cuBLAS goes before the pool it may have taken stream-ordered memory from.
        {
            Range c(m_l, "cublas");
            if (!m_l.plan())
                CKB(cublasDestroy(m_blas));
        }
        {
            Range p(m_l, "pool");
            m_l.start();
            if (!m_l.plan()) {
                CK(cudaStreamSynchronize(m_stream));
                CK(cudaMemPoolTrimTo(m_pool, 0));
            }
            m_l.op("pool_trim", "cudaMemPoolTrimTo", "pool", "pool", 0, nullptr);
            m_l.start();
            if (!m_l.plan()) {
                int device = 0;
                cudaMemPool_t fallback {};
                CK(cudaDeviceGetDefaultMemPool(&fallback, device));
                CK(cudaDeviceSetMemPool(device, fallback));
                CK(cudaMemPoolDestroy(m_pool));
            }
            m_l.op("pool_destroy", "cudaMemPoolDestroy", "pool", "pool", 0, nullptr);
        }
        if (!m_l.plan()) {
            CK(cudaStreamDestroy(m_stream));
            CK(cudaDeviceSynchronize());
        }
    }

    const Options& m_o;
    Ledger& m_l;
    Nccl m_nccl;
#if GPU_CHECK_HAVE_NCCL_HEADER
    ncclComm_t m_comm = nullptr;
#endif
    cudaStream_t m_stream = nullptr;
    long long m_streamId = -1;
    cublasHandle_t m_blas = nullptr;
    cudaMemPool_t m_pool = nullptr;
    Buffer m_w[3], m_b[3], m_gw[3], m_gb[3];
    Buffer m_hostX, m_x, m_t, m_loss;
    Vmm m_vmm[2];
    CUdeviceptr m_vmmBase = 0;
    bool m_vmmReserved = false, m_vmmCreated[2] = {}, m_vmmMapped[2] = {};
    Buffer m_momentum; // the momentum buffers' cudaMalloc block where VMM failed
    CUmemGenericAllocationHandle m_vmmHandle[2] = {};
    float* m_vw[3] = {};
    float* m_vb[3] = {};
    int m_gemms = 0;
    int m_allreduces = 0;
    float m_firstLoss = 0.0f;
    float m_lastLoss = 0.0f;
};

} // namespace

int main(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (a == "--plan") {
            o.plan = true;
        } else if (a == "--no-nccl") {
            o.nccl = false;
        } else if (a == "--steps" || a == "--batch") {
            const char* v = value();
            char* end = nullptr;
            const long n = v ? std::strtol(v, &end, 10) : 0;
            if (v == nullptr || *end != '\0' || n < 2 || n > 100000)
                return usage(argv[0]);
            (a == "--steps" ? o.steps : o.batch) = int(n);
        } else if (a == "-o" || a == "--output") {
            const char* v = value();
            if (v == nullptr)
                return usage(argv[0]);
            o.out = v;
        } else {
            return usage(argv[0]);
        }
    }
    FILE* out = stdout;
    if (!o.out.empty() && (out = std::fopen(o.out.c_str(), "w")) == nullptr) {
        std::fprintf(stderr, "gpu_check: cannot write %s: %s\n", o.out.c_str(), std::strerror(errno));
        return 1;
    }
    Ledger ledger(o.plan, out);
    const int rc = Program(o, ledger).run();
    if (out != stdout && std::fclose(out) != 0) {
        std::fprintf(stderr, "gpu_check: cannot write %s: %s\n", o.out.c_str(), std::strerror(errno));
        return 1;
    }
    return rc;
}
