#include "tracer/nvtx_handlers.h"

#include "core/detail/utf8_encode.h"
#include "tracer/range_recorder.h"

#include <atomic>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace gpumem::tracer {

namespace {
    std::atomic<RangeRecorder*> g_recorder { nullptr };

    // Domains and registered strings live as long as the process (NVTX hands their addresses
    // back to us as opaque handles).
    struct Registry {
        std::mutex mutex;
        std::map<std::string, std::string*> domains; // name → stable name storage (the handle)
        std::deque<std::string> strings;             // registered strings (handles point here)
    };
    Registry& registry()
    {
        static auto* r = new Registry; // leaked on purpose: handlers may run during exit
        return *r;
    }

    std::string utf8(const wchar_t* text)
    {
        std::string out;
        if (text == nullptr)
            return out;
        for (; *text; ++text) {
            auto c = static_cast<std::uint32_t>(*text);
            if (c < 0x110000) {
                gpumem::detail::appendUtf8(out, c);
            } else {
                out += "\xEF\xBF\xBD";
            }
        }
        return out;
    }

    std::string message(const nvtxEventAttributes_t* a)
    {
        if (a == nullptr)
            return {};
        switch (a->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII:
            return a->message.ascii ? std::string(a->message.ascii) : std::string();
        case NVTX_MESSAGE_TYPE_UNICODE:
            return utf8(a->message.unicode);
        case NVTX_MESSAGE_TYPE_REGISTERED:
            return a->message.registered ? *reinterpret_cast<const std::string*>(a->message.registered) : std::string();
        default:
            return {};
        }
    }

    std::uint64_t domainKey(nvtxDomainHandle_t d) { return reinterpret_cast<std::uint64_t>(d); }

    std::string inDomain(nvtxDomainHandle_t d, std::string msg)
    {
        if (d == nullptr)
            return msg;
        return "[" + *reinterpret_cast<const std::string*>(d) + "] " + msg;
    }

    // Runs f(recorder) when a recorder is set, swallowing every exception (we run inside the app).
    template <typename R, typename F> R withRecorder(R fallback, F&& f) noexcept
    {
        RangeRecorder* r = g_recorder.load(std::memory_order_acquire);
        if (r == nullptr)
            return fallback;
        try {
            return f(*r);
        } catch (...) {
            return fallback;
        }
    }

    // ------------------------------------------------------------------ core module handlers
    void markA(const char* m) { withRecorder(0, [&](RangeRecorder& r) { return r.mark(m ? m : ""), 0; }); }
    void markW(const wchar_t* m) { withRecorder(0, [&](RangeRecorder& r) { return r.mark(utf8(m)), 0; }); }
    void markEx(const nvtxEventAttributes_t* a) { withRecorder(0, [&](RangeRecorder& r) { return r.mark(message(a)), 0; }); }
    nvtxRangeId_t startA(const char* m) { return withRecorder<nvtxRangeId_t>(0, [&](RangeRecorder& r) { return r.start(m ? m : ""); }); }
    nvtxRangeId_t startW(const wchar_t* m) { return withRecorder<nvtxRangeId_t>(0, [&](RangeRecorder& r) { return r.start(utf8(m)); }); }
    nvtxRangeId_t startEx(const nvtxEventAttributes_t* a)
    {
        return withRecorder<nvtxRangeId_t>(0, [&](RangeRecorder& r) { return r.start(message(a)); });
    }
    void end(nvtxRangeId_t id) { withRecorder(0, [&](RangeRecorder& r) { return r.end(id), 0; }); }
    int pushA(const char* m) { return withRecorder(-1, [&](RangeRecorder& r) { return r.push(m ? m : ""); }); }
    int pushW(const wchar_t* m) { return withRecorder(-1, [&](RangeRecorder& r) { return r.push(utf8(m)); }); }
    int pushEx(const nvtxEventAttributes_t* a) { return withRecorder(-1, [&](RangeRecorder& r) { return r.push(message(a)); }); }
    int pop() { return withRecorder(-1, [&](RangeRecorder& r) { return r.pop(0); }); }

    // ------------------------------------------------------------------ core2 (domain) handlers
    void domainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
    {
        withRecorder(0, [&](RangeRecorder& r) { return r.mark(inDomain(d, message(a))), 0; });
    }
    nvtxRangeId_t domainStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
    {
        return withRecorder<nvtxRangeId_t>(0, [&](RangeRecorder& r) { return r.start(inDomain(d, message(a))); });
    }
    void domainEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
    int domainPushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a)
    {
        return withRecorder(-1, [&](RangeRecorder& r) { return r.push(inDomain(d, message(a)), domainKey(d)); });
    }
    int domainPop(nvtxDomainHandle_t d) { return withRecorder(-1, [&](RangeRecorder& r) { return r.pop(domainKey(d)); }); }

    // ------------------------------------------------------------------ payload extension handlers
    // The payloads carry no message the tracer reads (see nvtx_handlers.h).
    std::string payloadName(nvtxDomainHandle_t d) { return inDomain(d, "(payload)"); }
    void markPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t*, size_t)
    {
        withRecorder(0, [&](RangeRecorder& r) { return r.mark(payloadName(d)), 0; });
    }
    int pushPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t*, size_t)
    {
        return withRecorder(-1, [&](RangeRecorder& r) { return r.push(payloadName(d), domainKey(d)); });
    }
    int popPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t*, size_t) { return domainPop(d); }
    nvtxRangeId_t startPayload(nvtxDomainHandle_t d, const nvtxPayloadData_t*, size_t)
    {
        return withRecorder<nvtxRangeId_t>(0, [&](RangeRecorder& r) { return r.start(payloadName(d)); });
    }
    void endPayload(nvtxDomainHandle_t, nvtxRangeId_t id, const nvtxPayloadData_t*, size_t) { end(id); }

    nvtxDomainHandle_t domainCreate(std::string name) noexcept
    {
        try {
            auto& reg = registry();
            std::lock_guard lock(reg.mutex);
            auto it = reg.domains.find(name);
            if (it == reg.domains.end())
                it = reg.domains.emplace(name, new std::string(name)).first;
            return reinterpret_cast<nvtxDomainHandle_t>(it->second);
        } catch (...) {
            return nullptr;
        }
    }
    nvtxDomainHandle_t domainCreateA(const char* name) { return domainCreate(name ? name : ""); }
    nvtxDomainHandle_t domainCreateW(const wchar_t* name)
    {
        try {
            return domainCreate(utf8(name));
        } catch (...) {
            return nullptr;
        }
    }
    void domainDestroy(nvtxDomainHandle_t) { }

    nvtxStringHandle_t registerString(std::string text) noexcept
    {
        try {
            auto& reg = registry();
            std::lock_guard lock(reg.mutex);
            reg.strings.push_back(std::move(text));
            return reinterpret_cast<nvtxStringHandle_t>(&reg.strings.back());
        } catch (...) {
            return nullptr;
        }
    }
    nvtxStringHandle_t registerStringA(nvtxDomainHandle_t, const char* s) { return registerString(s ? s : ""); }
    nvtxStringHandle_t registerStringW(nvtxDomainHandle_t, const wchar_t* s)
    {
        try {
            return registerString(utf8(s));
        } catch (...) {
            return nullptr;
        }
    }

    template <typename Fn> void put(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn)
    {
        if (id < size && table[id] != nullptr)
            *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
    }
} // namespace

void setNvtxRecorder(RangeRecorder* recorder) { g_recorder.store(recorder, std::memory_order_release); }
RangeRecorder* nvtxRecorder() { return g_recorder.load(std::memory_order_acquire); }

int installNvtxHandlers(NvtxGetExportTableFunc_t getExportTable) noexcept
{
    if (getExportTable == nullptr)
        return 0;
    const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
    if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || callbacks->GetModuleFunctionTable == nullptr)
        return 0;
    NvtxFunctionTable table = nullptr;
    unsigned int size = 0;
    if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || table == nullptr)
        return 0;
    put(table, size, NVTX_CBID_CORE_MarkEx, &markEx);
    put(table, size, NVTX_CBID_CORE_MarkA, &markA);
    put(table, size, NVTX_CBID_CORE_MarkW, &markW);
    put(table, size, NVTX_CBID_CORE_RangeStartEx, &startEx);
    put(table, size, NVTX_CBID_CORE_RangeStartA, &startA);
    put(table, size, NVTX_CBID_CORE_RangeStartW, &startW);
    put(table, size, NVTX_CBID_CORE_RangeEnd, &end);
    put(table, size, NVTX_CBID_CORE_RangePushEx, &pushEx);
    put(table, size, NVTX_CBID_CORE_RangePushA, &pushA);
    put(table, size, NVTX_CBID_CORE_RangePushW, &pushW);
    put(table, size, NVTX_CBID_CORE_RangePop, &pop);
    table = nullptr;
    size = 0;
    if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) && table != nullptr) {
        put(table, size, NVTX_CBID_CORE2_DomainMarkEx, &domainMarkEx);
        put(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &domainStartEx);
        put(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &domainEnd);
        put(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &domainPushEx);
        put(table, size, NVTX_CBID_CORE2_DomainRangePop, &domainPop);
        put(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &registerStringA);
        put(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, &registerStringW);
        put(table, size, NVTX_CBID_CORE2_DomainCreateA, &domainCreateA);
        put(table, size, NVTX_CBID_CORE2_DomainCreateW, &domainCreateW);
        put(table, size, NVTX_CBID_CORE2_DomainDestroy, &domainDestroy);
    }
    return 1;
}

int installNvtxExtension(nvtxExtModuleInfo_t* module) noexcept
{
    // NVTX describes the module in a struct whose size it gives: one older than the fields read here
    // is not read past its end.
    if (module == nullptr || module->structSize < offsetof(nvtxExtModuleInfo_t, segments) + sizeof(module->segments)
        || (module->segmentsCount > 0 && module->segments == nullptr))
        return 0;
    // Slot numbers are those of payload extension v1; a later incompatible layout changes the
    // compatibility id's high byte.
    if (module->moduleId != NVTX_EXT_PAYLOAD_MODULEID || (module->compatId >> 8) != (NVTX_EXT_PAYLOAD_COMPATID >> 8))
        return 1;
    // The payload module has one segment (nvtxExtImplPayload_v1.h); the slot numbers are its.
    if (module->segmentsCount == 0 || module->segments[0].functionSlots == nullptr)
        return 1;
    nvtxExtModuleSegment_t& segment = module->segments[0];
    auto slot = [&](std::size_t id, auto fn) {
        if (id < segment.slotCount)
            segment.functionSlots[id] = reinterpret_cast<intptr_t>(fn);
    };
    slot(NVTX3EXT_CBID_nvtxMarkPayload, &markPayload);
    slot(NVTX3EXT_CBID_nvtxRangePushPayload, &pushPayload);
    slot(NVTX3EXT_CBID_nvtxRangePopPayload, &popPayload);
    slot(NVTX3EXT_CBID_nvtxRangeStartPayload, &startPayload);
    slot(NVTX3EXT_CBID_nvtxRangeEndPayload, &endPayload);
    return 1;
}

} // namespace gpumem::tracer
