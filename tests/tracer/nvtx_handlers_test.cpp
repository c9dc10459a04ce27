// The tracer as an NVTX tool, driven through NVTX's own injection interface: fake export tables
// stand for the per-shared-object NVTX state (each DSO hands the tool its own tables), the
// handlers the tracer installs are called through those tables as NVTX would call them.
#include "tracer/nvtx_handlers.h"
#include "tracer/range_recorder.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <thread>

using namespace gpumem;
using namespace gpumem::tracer;
using namespace gpumem::tracer::test;

namespace {

// One shared object's NVTX callback tables.
struct FakeDso {
    std::vector<NvtxFunctionPointer> core = std::vector<NvtxFunctionPointer>(NVTX_CBID_CORE_SIZE);
    std::vector<NvtxFunctionPointer> core2 = std::vector<NvtxFunctionPointer>(NVTX_CBID_CORE2_SIZE);
    std::vector<NvtxFunctionPointer*> coreTable, core2Table;
    FakeDso()
    {
        for (auto& p : core)
            coreTable.push_back(&p);
        for (auto& p : core2)
            core2Table.push_back(&p);
    }
    template <typename Fn> Fn coreFn(int id) const { return reinterpret_cast<Fn>(core[id]); }
    template <typename Fn> Fn core2Fn(int id) const { return reinterpret_cast<Fn>(core2[id]); }

    int push(const char* m) const { return coreFn<nvtxRangePushA_impl_fntype>(NVTX_CBID_CORE_RangePushA)(m); }
    int pop() const { return coreFn<nvtxRangePop_impl_fntype>(NVTX_CBID_CORE_RangePop)(); }
};

FakeDso* g_offering = nullptr;

int getModuleFunctionTable(NvtxCallbackModule module, NvtxFunctionTable* out, unsigned int* size)
{
    if (module == NVTX_CB_MODULE_CORE) {
        *out = g_offering->coreTable.data();
        *size = static_cast<unsigned int>(g_offering->coreTable.size());
        return 1;
    }
    if (module == NVTX_CB_MODULE_CORE2) {
        *out = g_offering->core2Table.data();
        *size = static_cast<unsigned int>(g_offering->core2Table.size());
        return 1;
    }
    return 0;
}

const void* getExportTable(uint32_t id)
{
    static const NvtxExportTableCallbacks callbacks { sizeof(NvtxExportTableCallbacks), getModuleFunctionTable };
    return id == NVTX_ETID_CALLBACKS ? &callbacks : nullptr;
}

void attach(FakeDso& dso)
{
    g_offering = &dso;
    ASSERT_EQ(installNvtxHandlers(getExportTable), 1);
    g_offering = nullptr;
}

struct RecorderScope {
    explicit RecorderScope(RangeRecorder& r) { setNvtxRecorder(&r); }
    ~RecorderScope() { setNvtxRecorder(nullptr); }
};

// "a/b/c" for a scope of the sink's (not yet written) scope table.
std::string sinkScopePath(TraceSink& sink, ScopeId id)
{
    return sink.update([&](SinkTables& t, PendingEvents&) {
        std::string path;
        while (id != 0) {
            const Scope& s = t.scopes()[id];
            path = std::string(t.strings().at(s.name)) + (path.empty() ? "" : "/" + path);
            id = s.parent;
        }
        return path;
    });
}

std::vector<std::string> annotationNames(const Trace& t)
{
    std::vector<std::string> names;
    for (const auto& a : t.annotations())
        names.emplace_back(t.str(a.name));
    return names;
}

} // namespace

TEST(NvtxHandlers, RangesFromTwoLibrariesNestOnOneThreadStack)
{
    TraceSink sink;
    TimeNs clock = 1000;
    RangeRecorder recorder(sink, [&] { return clock += 10; });
    RecorderScope active(recorder);
    FakeDso app, library;
    attach(app);
    attach(library); // NVTX calls the tool once per shared object, each with its own tables

    EXPECT_EQ(app.push("step"), 0);
    EXPECT_EQ(library.push("cublas:gemm"), 1);
    EXPECT_EQ(app.push("inner"), 2);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step/cublas:gemm/inner");
    EXPECT_EQ(library.pop(), 2);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step/cublas:gemm");
    EXPECT_EQ(app.pop(), 1);
    EXPECT_EQ(app.pop(), 0);
    EXPECT_EQ(recorder.currentScope(), 0u);
    EXPECT_EQ(app.pop(), -1); // unbalanced

    TempDir dir;
    Trace t = roundTrip(sink, dir);
    // Closed ranges become annotations with their host times and thread.
    ASSERT_EQ(t.annotations().size(), 3u);
    EXPECT_EQ(annotationNames(t), (std::vector<std::string> { "step", "cublas:gemm", "inner" }));
    EXPECT_EQ(t.annotations()[0].start, 1010);
    EXPECT_EQ(t.annotations()[0].end, 1060);
    EXPECT_EQ(t.annotations()[2].start, 1030);
    EXPECT_EQ(t.annotations()[2].end, 1040);
    EXPECT_EQ(t.annotations()[0].thread, currentThreadId());
    EXPECT_EQ(t.stats().count("nvtx_unbalanced_pop"), 1u);
    // The scope tree keeps the nesting.
    ASSERT_EQ(t.scopes().size(), 4u);
    EXPECT_EQ(scopePath(t, 3), "step/cublas:gemm/inner");
}

TEST(NvtxHandlers, EachThreadHasItsOwnStack)
{
    TraceSink sink;
    RangeRecorder recorder(sink);
    RecorderScope active(recorder);
    FakeDso app;
    attach(app);
    app.push("main:step");
    std::uint64_t workerThread = 0;
    ScopeId workerScope = 0;
    std::thread([&] {
        workerThread = currentThreadId();
        EXPECT_EQ(app.push("autograd:backward"), 0); // a fresh stack, not nested in main's
        app.push("bwd:mod:Net.fc1");
        workerScope = recorder.currentScope();
        app.pop();
        app.pop();
        EXPECT_EQ(recorder.depth(), 0u);
    }).join();
    EXPECT_EQ(sinkScopePath(sink, workerScope), "autograd:backward/bwd:mod:Net.fc1");
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "main:step");
    EXPECT_EQ(recorder.depth(), 1u);
    EXPECT_NE(workerThread, currentThreadId());
    app.pop();
}

TEST(NvtxHandlers, DomainsRegisteredStringsUnicodeMarksAndStartEndRanges)
{
    TraceSink sink;
    RangeRecorder recorder(sink);
    RecorderScope active(recorder);
    FakeDso lib;
    attach(lib);
    auto createDomain = lib.core2Fn<nvtxDomainCreateA_impl_fntype>(NVTX_CBID_CORE2_DomainCreateA);
    auto registerString = lib.core2Fn<nvtxDomainRegisterStringA_impl_fntype>(NVTX_CBID_CORE2_DomainRegisterStringA);
    auto domainPush = lib.core2Fn<nvtxDomainRangePushEx_impl_fntype>(NVTX_CBID_CORE2_DomainRangePushEx);
    auto domainPop = lib.core2Fn<nvtxDomainRangePop_impl_fntype>(NVTX_CBID_CORE2_DomainRangePop);
    auto pushW = lib.coreFn<nvtxRangePushW_impl_fntype>(NVTX_CBID_CORE_RangePushW);
    auto markA = lib.coreFn<nvtxMarkA_impl_fntype>(NVTX_CBID_CORE_MarkA);
    auto startA = lib.coreFn<nvtxRangeStartA_impl_fntype>(NVTX_CBID_CORE_RangeStartA);
    auto endFn = lib.coreFn<nvtxRangeEnd_impl_fntype>(NVTX_CBID_CORE_RangeEnd);
    ASSERT_TRUE(createDomain && registerString && domainPush && domainPop && pushW && markA && startA && endFn);

    nvtxDomainHandle_t nccl = createDomain("NCCL");
    EXPECT_EQ(createDomain("NCCL"), nccl); // one handle per name
    nvtxEventAttributes_t a {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registerString(nccl, "ncclAllReduce");

    const nvtxRangeId_t span = startA("epoch 1");
    EXPECT_EQ(lib.push("step"), 0);
    EXPECT_EQ(domainPush(nccl, &a), 1);
    EXPECT_EQ(pushW(L"größe"), 2);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step/[NCCL] ncclAllReduce/größe");
    // A domain pop closes that domain's innermost range even with a default-domain range above it.
    EXPECT_EQ(domainPop(nccl), 1);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step/[NCCL] ncclAllReduce/größe");
    EXPECT_EQ(lib.pop(), 1);
    EXPECT_EQ(lib.pop(), 0);
    markA("checkpoint");
    std::thread([&] { endFn(span); }).join(); // start/end ranges may end on another thread
    endFn(987654);                           // never started

    TempDir dir;
    Trace t = roundTrip(sink, dir);
    EXPECT_EQ(annotationNames(t), (std::vector<std::string> { "epoch 1", "step", "[NCCL] ncclAllReduce", "größe", "checkpoint" }));
    const Annotation& mark = t.annotations()[4];
    EXPECT_EQ(mark.kind, AnnotationKind::Instant);
    EXPECT_EQ(mark.start, mark.end);
    EXPECT_EQ(t.annotations()[0].thread, currentThreadId()); // the thread that started it
    EXPECT_EQ(t.stats().count("nvtx_unknown_range_end"), 1u);
}

TEST(NvtxHandlers, DoNothingWhenTheTracerIsOff)
{
    TraceSink sink;
    RangeRecorder recorder(sink);
    FakeDso app;
    attach(app);
    setNvtxRecorder(nullptr);
    EXPECT_EQ(app.push("ignored"), -1);
    EXPECT_EQ(app.pop(), -1);
    EXPECT_EQ(recorder.depth(), 0u);
}

TEST(NvtxHandlers, RefuseAnExportTableWithoutCallbacks)
{
    EXPECT_EQ(installNvtxHandlers(nullptr), 0);
    EXPECT_EQ(installNvtxHandlers([](uint32_t) -> const void* { return nullptr; }), 0);
}

// The payload extension as NVTX hands it to the tool (nvtx3/nvtxDetail/nvtxExtImplPayload_v1.h):
// one segment of 63 slots, indexed by NVTX3EXT_CBID_*, 0 where the tool set nothing.
namespace {
struct FakePayloadModule {
    std::vector<intptr_t> slots = std::vector<intptr_t>(63, 0);
    nvtxExtModuleSegment_t segment { 0, 63, nullptr };
    nvtxExtModuleInfo_t info {};
    explicit FakePayloadModule(uint16_t moduleId = NVTX_EXT_PAYLOAD_MODULEID, uint16_t compatId = NVTX_EXT_PAYLOAD_COMPATID)
    {
        segment.functionSlots = slots.data();
        info = { NVTX_VERSION, sizeof(nvtxExtModuleInfo_t), moduleId, compatId, 1, &segment, nullptr, nullptr };
    }
    template <typename Fn> Fn fn(int id) const { return reinterpret_cast<Fn>(slots[id]); }
};
} // namespace

TEST(NvtxHandlers, APayloadPopClosesTheRangeItsDomainPushed)
{
    // NCCL 2.2x pushes ncclCommInitAll's range with nvtxDomainRangePushEx and pops it with
    // nvtxRangePopPayload (src/include/nvtx.h); the first GPU run had that pop unhandled, so every
    // later range of the program nested under "[NCCL] ncclCommInitAll".
    TraceSink sink;
    RangeRecorder recorder(sink);
    RecorderScope active(recorder);
    FakeDso lib;
    attach(lib);
    FakePayloadModule payload;
    ASSERT_EQ(installNvtxExtension(&payload.info), 1);
    using PopPayload = int (*)(nvtxDomainHandle_t, const nvtxPayloadData_t*, size_t);
    using PushPayload = int (*)(nvtxDomainHandle_t, const nvtxPayloadData_t*, size_t);
    using StartPayload = nvtxRangeId_t (*)(nvtxDomainHandle_t, const nvtxPayloadData_t*, size_t);
    using EndPayload = void (*)(nvtxDomainHandle_t, nvtxRangeId_t, const nvtxPayloadData_t*, size_t);
    using MarkPayload = void (*)(nvtxDomainHandle_t, const nvtxPayloadData_t*, size_t);
    auto popPayload = payload.fn<PopPayload>(NVTX3EXT_CBID_nvtxRangePopPayload);
    auto pushPayload = payload.fn<PushPayload>(NVTX3EXT_CBID_nvtxRangePushPayload);
    auto startPayload = payload.fn<StartPayload>(NVTX3EXT_CBID_nvtxRangeStartPayload);
    auto endPayload = payload.fn<EndPayload>(NVTX3EXT_CBID_nvtxRangeEndPayload);
    auto markPayload = payload.fn<MarkPayload>(NVTX3EXT_CBID_nvtxMarkPayload);
    ASSERT_TRUE(popPayload && pushPayload && startPayload && endPayload && markPayload);
    // Schema registration, enums, scopes and deferred events stay NVTX's no-ops.
    EXPECT_EQ(payload.slots[NVTX3EXT_CBID_nvtxPayloadSchemaRegister], 0);
    EXPECT_EQ(payload.slots[NVTX3EXT_CBID_nvtxDomainIsEnabled], 0);

    auto createDomain = lib.core2Fn<nvtxDomainCreateA_impl_fntype>(NVTX_CBID_CORE2_DomainCreateA);
    auto domainPush = lib.core2Fn<nvtxDomainRangePushEx_impl_fntype>(NVTX_CBID_CORE2_DomainRangePushEx);
    auto domainPop = lib.core2Fn<nvtxDomainRangePop_impl_fntype>(NVTX_CBID_CORE2_DomainRangePop);
    nvtxDomainHandle_t nccl = createDomain("NCCL");
    nvtxEventAttributes_t a {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "ncclCommInitAll";
    const std::uint64_t result[2] = { 0x5eed, 1 };
    const nvtxPayloadData_t data { NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 1, sizeof(result), result };

    EXPECT_EQ(lib.push("setup"), 0);
    EXPECT_EQ(domainPush(nccl, &a), 1);
    EXPECT_EQ(lib.push("inside"), 2);
    EXPECT_EQ(popPayload(nccl, &data, 1), 1); // the domain's innermost range, as nvtxDomainRangePop
    EXPECT_EQ(lib.pop(), 1);
    EXPECT_EQ(lib.pop(), 0);
    EXPECT_EQ(lib.push("step 0"), 0);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step 0"); // not under ncclCommInitAll
    // A range opened through the extension has its message in a schema the tracer does not read:
    // it is "[domain] (payload)" and still pairs with its pop.
    EXPECT_EQ(pushPayload(nccl, &data, 1), 1);
    EXPECT_EQ(sinkScopePath(sink, recorder.currentScope()), "step 0/[NCCL] (payload)");
    EXPECT_EQ(domainPop(nccl), 1);
    EXPECT_EQ(lib.pop(), 0);
    const nvtxRangeId_t span = startPayload(nccl, &data, 1);
    markPayload(nccl, &data, 1);
    endPayload(nccl, span, &data, 1);
    EXPECT_EQ(popPayload(nccl, &data, 1), -1); // nothing of the domain open

    TempDir dir;
    Trace t = roundTrip(sink, dir);
    EXPECT_EQ(annotationNames(t),
        (std::vector<std::string> { "setup", "[NCCL] ncclCommInitAll", "inside", "step 0", "[NCCL] (payload)",
            "[NCCL] (payload)", "[NCCL] (payload)" }));
    EXPECT_EQ(t.stats().count("nvtx_unbalanced_pop"), 1u);
}

TEST(NvtxHandlers, LeaveOtherExtensionModulesToNvtxAndRefuseAMalformedOne)
{
    FakePayloadModule counters(/*moduleId=*/3);
    EXPECT_EQ(installNvtxExtension(&counters.info), 1);
    EXPECT_EQ(std::count(counters.slots.begin(), counters.slots.end(), 0), 63);
    FakePayloadModule later(NVTX_EXT_PAYLOAD_MODULEID, 0x0200); // an incompatible slot layout
    EXPECT_EQ(installNvtxExtension(&later.info), 1);
    EXPECT_EQ(std::count(later.slots.begin(), later.slots.end(), 0), 63);
    FakePayloadModule shortSegment;
    shortSegment.segment.slotCount = NVTX3EXT_CBID_nvtxRangePopPayload; // slots 0..3 only
    EXPECT_EQ(installNvtxExtension(&shortSegment.info), 1);
    EXPECT_NE(shortSegment.slots[NVTX3EXT_CBID_nvtxRangePushPayload], 0);
    EXPECT_EQ(shortSegment.slots[NVTX3EXT_CBID_nvtxRangePopPayload], 0);
    EXPECT_EQ(installNvtxExtension(nullptr), 0);
    FakePayloadModule noSegments;
    noSegments.info.segments = nullptr;
    EXPECT_EQ(installNvtxExtension(&noSegments.info), 0);
    FakePayloadModule oldStruct; // a description too short to hold the segments is not read past its end
    oldStruct.info.structSize = offsetof(nvtxExtModuleInfo_t, segmentsCount);
    EXPECT_EQ(installNvtxExtension(&oldStruct.info), 0);
    EXPECT_EQ(std::count(oldStruct.slots.begin(), oldStruct.slots.end(), 0), 63);
    // Only the payload module's one segment holds the v1 slots: a second one is not written.
    FakePayloadModule two;
    std::vector<intptr_t> other(63, 0);
    nvtxExtModuleSegment_t segments[2] = { two.segment, { 1, 63, other.data() } };
    two.info.segments = segments;
    two.info.segmentsCount = 2;
    EXPECT_EQ(installNvtxExtension(&two.info), 1);
    EXPECT_NE(two.slots[NVTX3EXT_CBID_nvtxRangePopPayload], 0);
    EXPECT_EQ(std::count(other.begin(), other.end(), 0), 63);
}
