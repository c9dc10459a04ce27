#include "core/outside_memory.h"

#include "core/import_stats.h"
#include "core/message_quote.h"
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

AllocationSourcePeak::AllocationSourcePeak(const Trace& tables, DeviceId device)
    : m_tables(&tables)
    , m_device(device)
{
}

// The tracer's allocation source (docs/tracer.md): a one-frame site whose file is the requesting shared
// object's or program's path. A cuMemMap'd range has one too since the tracer names the library that called cuMemMap
// (tracer/caller_library.h): NCCL 2.2x takes its buffers so (194 × 2 MiB on the first GPU run); an
// unmap at a mapped address ends that mapping.
void AllocationSourcePeak::add(const MemoryEventColumns& m, std::size_t i)
{
    if (m.device[i] != m_device)
        return;
    const EventKind kind = m.kind[i];
    if ((kind == EventKind::SegmentAlloc || kind == EventKind::SegmentMap) && m.site[i] != 0) {
        const auto frames = m_tables->siteFrames(m.site[i]);
        if (frames.size() != 1)
            return;
        // The frame's file is CUPTI's source: a shared object's path (its function is the file's name, or a
        // __device__ variable's), or the program's own path, whose cudaMalloc is no allocator's either
        // (review finding, 2026-12-04: the GPU check's 94 MiB of weights were in neither layer, and `fit`
        // answered below what the run held).
        const Frame& frame = m_tables->frames()[frames[0]];
        const std::string_view file = m_tables->str(frame.file);
        std::string_view lib = m_tables->str(frame.name);
        if (file.find(".so") != std::string_view::npos || (file.starts_with('/') && file.size() > 1))
            lib = file;
        else if (lib.find(".so") == std::string_view::npos)
            return;
        m_sourced = true;
        if (isAllocatorLibrary(lib) || !m_live.emplace(m.address[i], m.size[i]).second)
            return;
        m_now += m.size[i];
        m_peak = std::max(m_peak, m_now);
    } else if (kind == EventKind::SegmentFree) {
        if (auto it = m_live.find(m.address[i]); it != m_live.end()) {
            m_now -= it->second;
            m_live.erase(it);
        }
    } else if (kind == EventKind::SegmentUnmap) {
        // An unmap may take any part of a mapping (cuMemUnmap of a sub-range): what it covers of the
        // live range holding its address is cut out, the parts before and after stay live.
        const Address a = m.address[i];
        auto it = m_live.upper_bound(a);
        if (it == m_live.begin())
            return;
        --it;
        const Address start = it->first;
        const Bytes length = it->second;
        if (a - start >= length)
            return; // not inside that range
        const Bytes cut = std::min<Bytes>(m.size[i], length - (a - start));
        const Address after = a + cut;
        const Bytes tail = length - (a - start) - cut;
        m_now -= cut;
        if (a == start)
            m_live.erase(it);
        else
            it->second = a - start;
        if (tail > 0)
            m_live.emplace(after, tail);
    }
}

std::optional<Bytes> AllocationSourcePeak::peak() const { return m_sourced ? std::optional<Bytes>(m_peak) : std::nullopt; }

bool outsideMemoryNeedsEvents(const Trace& trace)
{
    const auto& meta = trace.metadata();
    auto it = meta.find("outside_allocator");
    if (it != meta.end() && it->is_array())
        return false;
    auto source = meta.find("allocation_source");
    return source != meta.end() && source->is_boolean() && source->get<bool>();
}

std::optional<OutsideMemory> outsideMemory(const Trace& trace, DeviceId device)
{
    if (device >= trace.devices().size() || !outsideMemoryNeedsEvents(trace))
        return outsideMemory(trace, device, nullptr);
    AllocationSourcePeak peak(trace, device);
    const auto& m = trace.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        peak.add(m, i);
    return outsideMemory(trace, device, &peak);
}

std::optional<OutsideMemory> outsideMemory(const Trace& trace, DeviceId device, const AllocationSourcePeak* fromEvents)
{
    const auto& meta = trace.metadata();
    if (device >= trace.devices().size())
        return std::nullopt;
    auto it = meta.find("outside_allocator");
    if (it == meta.end() || !it->is_array()) {
        if (!outsideMemoryNeedsEvents(trace) || !fromEvents)
            return std::nullopt;
        auto bytes = fromEvents->peak();
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

void checkOutsideMemoryMetadata(const nlohmann::json& metadata, const std::vector<Device>& devices, ImportStats& stats)
{
    constexpr const char* kCode = "outside_allocator_ignored";
    if (!metadata.is_object() || stats.find(kCode))
        return;
    auto it = metadata.find("outside_allocator");
    if (it == metadata.end())
        return;
    std::vector<std::string> problems;
    auto shown = [](const nlohmann::json& v) { return quoteForMessage(v.dump(), 40); };
    if (!it->is_array())
        problems.push_back("metadata \"outside_allocator\" is " + shown(*it)
            + ", not an array of {\"device\": ORDINAL, \"process_bytes\": N, ...}: ignored (docs/trace-format.md)");
    else
        for (std::size_t i = 0; i < it->size(); ++i) {
            const auto& e = (*it)[i];
            const std::string where = "metadata outside_allocator[" + std::to_string(i) + "]";
            if (!e.is_object()) {
                problems.push_back(where + " is " + shown(e) + ", not an object: ignored");
                continue;
            }
            auto d = e.find("device");
            if (d == e.end() || !d->is_number_integer()) {
                problems.push_back(where + (d == e.end() ? " has no \"device\"" : " \"device\" is " + shown(*d))
                    + ", not a device ordinal (an integer): ignored");
                continue;
            }
            const std::int64_t ordinal = d->get<std::int64_t>();
            if (std::none_of(devices.begin(), devices.end(), [&](const Device& x) { return x.ordinal == ordinal; })) {
                problems.push_back(where + " names device ordinal " + std::to_string(ordinal)
                    + ", which no device of this trace has: ignored");
                continue;
            }
            for (const char* key : { "bytes", "process_bytes", "other_processes_bytes" })
                if (auto f = e.find(key); f != e.end() && !f->is_number_unsigned())
                    problems.push_back(where + " \"" + key + "\" is " + shown(*f)
                        + ", not a byte count (a non-negative integer): read as 0");
        }
    stats.addEach(kCode, Severity::Warning, problems);
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
