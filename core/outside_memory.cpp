#include "core/outside_memory.h"

#include "core/trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace gpumem {

namespace {
    Bytes bytesField(const nlohmann::json& entry, const char* key)
    {
        auto it = entry.find(key);
        return it != entry.end() && it->is_number_unsigned() ? it->get<Bytes>() : 0;
    }
}

bool isAllocatorLibrary(std::string_view libraryFile)
{
    if (auto slash = libraryFile.rfind('/'); slash != std::string_view::npos)
        libraryFile.remove_prefix(slash + 1);
    for (std::string_view prefix : { "libc10_cuda", "libc10_hip", "librmm", "libtensorflow_framework",
             "_pywrap_tensorflow_internal", "xla_extension" })
        if (libraryFile.starts_with(prefix))
            return true;
    return false;
}

namespace {
    // The tracer's allocation source (docs/tracer.md): a one-frame site whose function is a shared
    // object's file name. Peak live bytes of the segments a non-allocator library took; nullopt when no
    // segment_alloc of the device has such a site.
    std::optional<Bytes> outsideFromSources(const Trace& trace, DeviceId device)
    {
        const auto& m = trace.memory();
        std::map<Address, Bytes> live;
        Bytes now = 0, peak = 0;
        bool sourced = false;
        for (std::size_t i = 0; i < m.count(); ++i) {
            if (m.device[i] != device)
                continue;
            if (m.kind[i] == EventKind::SegmentAlloc && m.site[i] != 0) {
                const auto frames = trace.siteFrames(m.site[i]);
                if (frames.size() != 1)
                    continue;
                const std::string_view lib = trace.str(trace.frames()[frames[0]].name);
                if (lib.find(".so") == std::string_view::npos)
                    continue;
                sourced = true;
                if (isAllocatorLibrary(lib) || !live.emplace(m.address[i], m.size[i]).second)
                    continue;
                now += m.size[i];
                peak = std::max(peak, now);
            } else if (m.kind[i] == EventKind::SegmentFree) {
                if (auto it = live.find(m.address[i]); it != live.end()) {
                    now -= it->second;
                    live.erase(it);
                }
            }
        }
        return sourced ? std::optional<Bytes>(peak) : std::nullopt;
    }
}

std::optional<OutsideMemory> outsideMemory(const Trace& trace, DeviceId device)
{
    const auto& meta = trace.metadata();
    if (device >= trace.devices().size())
        return std::nullopt;
    auto it = meta.find("outside_allocator");
    if (it == meta.end() || !it->is_array()) {
        auto source = meta.find("allocation_source");
        if (source == meta.end() || !source->is_boolean() || !source->get<bool>())
            return std::nullopt;
        auto bytes = outsideFromSources(trace, device);
        if (!bytes)
            return std::nullopt;
        return OutsideMemory { *bytes, 0, "tracer_allocation_source" };
    }
    const std::int32_t ordinal = trace.devices()[device].ordinal;
    for (const auto& e : *it) {
        if (!e.is_object() || !e.contains("device") || !e["device"].is_number_integer()
            || e["device"].get<std::int64_t>() != ordinal)
            continue;
        OutsideMemory out;
        out.process = bytesField(e, "process_bytes");
        out.otherProcesses = bytesField(e, "other_processes_bytes");
        if (out.bytes() == 0 && bytesField(e, "bytes") != 0)
            out.process = bytesField(e, "bytes"); // a writer that gives only the total
        if (auto s = e.find("source"); s != e.end() && s->is_string())
            out.source = s->get<std::string>();
        return out;
    }
    return std::nullopt;
}

void setOutsideMemory(nlohmann::json& metadata, std::int32_t ordinal, const OutsideMemory& outside)
{
    auto& list = metadata["outside_allocator"];
    if (!list.is_array())
        list = nlohmann::json::array();
    nlohmann::json entry = { { "device", ordinal }, { "bytes", outside.bytes() }, { "process_bytes", outside.process },
        { "other_processes_bytes", outside.otherProcesses }, { "source", outside.source } };
    for (auto& e : list)
        if (e.is_object() && e.value("device", std::int64_t(-1)) == ordinal) {
            e = std::move(entry);
            return;
        }
    list.push_back(std::move(entry));
}

} // namespace gpumem
