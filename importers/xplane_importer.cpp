#include "importers/xplane_importer.h"

#include "core/detail/varint.h"
#include "core/file_io.h"
#include "importers/detail/device_tables.h"
#include "importers/xplane.pb.h"
#include "core/trace_builder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>
#include <optional>

namespace gpumem {

namespace {
    namespace pb = gpumem::xplane;

    constexpr std::string_view kPlanePrefixes[] = { "/host:", "/device:", "Task Environment" };

    // Derived lines that XProf adds to device planes (tsl/profiler/utils/xplane_schema.h); they repeat
    // information of the stream lines and are not kernels.
    constexpr std::string_view kStepsLine = "Steps";
    constexpr std::string_view kModulesLine = "XLA Modules";
    constexpr std::string_view kOtherDerivedLines[]
        = { "XLA Ops", "Framework Ops", "Framework Name Scope", "Source code", "XLA TraceMe", "Launch Stats" };

    // "<prefix><digits>[<suffix>]" → the digits as an ordinal; nullopt unless the whole text matches.
    std::optional<std::int32_t> ordinalBetween(std::string_view text, std::string_view prefix, std::string_view suffix)
    {
        if (!text.starts_with(prefix) || !text.ends_with(suffix) || text.size() <= prefix.size() + suffix.size())
            return std::nullopt;
        std::string_view digits = text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
        std::int32_t value = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (ec != std::errc() || end != digits.data() + digits.size() || value < 0)
            return std::nullopt;
        return value;
    }

    // A stat's value, resolved against its plane (a ref names a stat_metadata entry).
    class PlaneView {
    public:
        explicit PlaneView(const pb::XPlane& plane)
            : m_plane(plane)
        {
        }
        std::string_view statName(std::int64_t id) const
        {
            auto it = m_plane.stat_metadata().find(id);
            return it == m_plane.stat_metadata().end() ? std::string_view() : std::string_view(it->second.name());
        }
        std::string_view eventName(std::int64_t id) const
        {
            auto it = m_plane.event_metadata().find(id);
            return it == m_plane.event_metadata().end() ? std::string_view() : std::string_view(it->second.name());
        }
        // Integer value of a numeric stat; nullopt for strings, refs and out-of-range values.
        static std::optional<std::int64_t> integer(const pb::XStat& s)
        {
            switch (s.value_case()) {
            case pb::XStat::kInt64Value:
                return s.int64_value();
            case pb::XStat::kUint64Value:
                if (s.uint64_value() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                    return std::nullopt;
                return static_cast<std::int64_t>(s.uint64_value());
            default:
                return std::nullopt;
            }
        }
        static std::optional<std::uint64_t> unsignedValue(const pb::XStat& s)
        {
            if (s.value_case() == pb::XStat::kUint64Value)
                return s.uint64_value();
            if (s.value_case() == pb::XStat::kInt64Value && s.int64_value() >= 0)
                return static_cast<std::uint64_t>(s.int64_value());
            return std::nullopt;
        }
        std::optional<std::string_view> text(const pb::XStat& s) const
        {
            if (s.value_case() == pb::XStat::kStrValue)
                return std::string_view(s.str_value());
            if (s.value_case() == pb::XStat::kRefValue)
                return statName(static_cast<std::int64_t>(s.ref_value()));
            return std::nullopt;
        }
        const pb::XStat* find(const google::protobuf::RepeatedPtrField<pb::XStat>& stats, std::string_view name) const
        {
            for (const auto& s : stats)
                if (statName(s.metadata_id()) == name)
                    return &s;
            return nullptr;
        }

    private:
        const pb::XPlane& m_plane;
    };

    // ns = floor((lineNs·1000 + offsetPs) / 1000), computed without forming the picosecond product
    // (an epoch-based line timestamp times 1000 would overflow int64).
    std::optional<TimeNs> eventTime(std::int64_t lineNs, std::int64_t offsetPs)
    {
        std::int64_t q = offsetPs / 1000;
        if (offsetPs % 1000 < 0)
            --q;
        TimeNs t = 0;
        if (__builtin_add_overflow(lineNs, q, &t))
            return std::nullopt;
        return t;
    }

    class XplaneReader {
    public:
        XplaneReader(const pb::XSpace& space, const std::string& source, const LoadOptions& options)
            : m_space(space)
            , m_source(source)
            , m_options(options)
            , m_tables(m_builder, source)
        {
        }

        Trace read()
        {
            m_builder.metadata()["source_format"] = "xplane";
            m_builder.metadata()["time_base"] = "profiler clock of the XSpace (ns)";
            scanDevicePlanes();
            const int planes = m_space.planes_size();
            for (int i = 0; i < planes; ++i) {
                if (m_options.progress && !m_options.progress(static_cast<double>(i) / planes))
                    throw Cancelled();
                readPlane(m_space.planes(i), i);
            }
            // An XSpace holds events per thread line, so file order is not time order by design: sort
            // here (stable, so equal times keep file order) rather than report "unsorted_input".
            std::stable_sort(m_memory.begin(), m_memory.end(), [](const MemoryEvent& a, const MemoryEvent& b) { return a.time < b.time; });
            for (const MemoryEvent& e : m_memory)
                m_builder.add(e);
            // The host_tracer_level hint fits only a profile without allocator events at all; when there
            // were some and every one was rejected, say how many and why.
            if (m_memory.empty() && m_allocatorEvents == 0)
                m_builder.stats().add("xplane_no_memory_events", Severity::Info,
                    m_source + ": no MemoryAllocation/MemoryDeallocation events; the profile was taken without "
                               "host tracing of the allocator (jax.profiler / tf.profiler host_tracer_level >= 2)");
            else if (m_memory.empty())
                m_builder.stats().add("xplane_memory_events_rejected", Severity::Error,
                    m_source + ": " + (m_allocatorEvents == 1 ? std::string("the 1 MemoryAllocation/MemoryDeallocation event was")
                                          : "all " + std::to_string(m_allocatorEvents) + " MemoryAllocation/MemoryDeallocation events were")
                        + " rejected, so the trace has no memory events; the first: " + m_firstRejection);
            // Devices are added last so that a GPU first met on its device plane still gets the name of
            // its allocator, met later on the host plane (DeviceTables).
            m_tables.commit();
            return m_builder.build();
        }

    private:
        struct GpuPlaneInfo {
            Bytes totalMemory = 0;
        };

        // First pass: the device planes say which vendor the GPUs are and how much memory they have.
        void scanDevicePlanes()
        {
            for (const auto& plane : m_space.planes()) {
                auto ordinal = ordinalBetween(std::string_view(plane.name()), "/device:GPU:", "");
                if (plane.name() == "Task Environment") {
                    PlaneView view(plane);
                    if (const auto* s = view.find(plane.stats(), "profile_start_time"))
                        if (auto v = PlaneView::unsignedValue(*s))
                            m_builder.metadata()["profile_start_time_ns"] = *v;
                }
                if (!ordinal)
                    continue;
                PlaneView view(plane);
                GpuPlaneInfo info;
                if (const auto* s = view.find(plane.stats(), "memory_size"))
                    info.totalMemory = PlaneView::unsignedValue(*s).value_or(0);
                if (const auto* s = view.find(plane.stats(), "device_vendor")) {
                    auto vendor = view.text(*s).value_or("");
                    // Metadata is JSON: keep only a printable ASCII vendor so that writers never meet bad UTF-8.
                    if (!vendor.empty() && std::all_of(vendor.begin(), vendor.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
                        m_builder.metadata()["device_vendor"] = std::string(vendor);
                    if (vendor == "AMD")
                        m_gpuType = DeviceType::Hip;
                }
                m_gpuPlanes[*ordinal] = info;
            }
        }

        DeviceId gpuDevice(std::int32_t ordinal, std::string_view name = {})
        {
            auto it = m_gpuDevices.find(ordinal);
            if (it != m_gpuDevices.end()) {
                if (!name.empty() && m_tables.device(it->second).name == 0)
                    m_tables.device(it->second).name = m_builder.intern(name);
                return it->second;
            }
            Device d;
            d.type = m_gpuType;
            d.ordinal = ordinal;
            d.name = name.empty() ? 0 : m_builder.intern(name);
            if (auto p = m_gpuPlanes.find(ordinal); p != m_gpuPlanes.end())
                d.totalMemory = p->second.totalMemory;
            DeviceId id = m_tables.addDevice(d);
            m_gpuDevices.emplace(ordinal, id);
            return id;
        }

        // The device of an allocator: GPU_N_bfc is GPU N; any other allocator (a host BFC such as
        // GPU_host_bfc or a TPU allocator) gets a DeviceType::Other device of its own, named after it.
        DeviceId allocatorDevice(std::string_view allocator)
        {
            if (auto ordinal = ordinalBetween(allocator, "GPU_", "_bfc"))
                return gpuDevice(*ordinal, allocator);
            auto it = m_otherAllocators.find(std::string(allocator));
            if (it != m_otherAllocators.end())
                return it->second;
            Device d;
            d.type = DeviceType::Other;
            d.ordinal = static_cast<std::int32_t>(m_otherAllocators.size());
            d.name = m_builder.intern(allocator);
            DeviceId id = m_tables.addDevice(d);
            m_otherAllocators.emplace(std::string(allocator), id);
            m_builder.stats().add("xplane_non_gpu_allocator", Severity::Info,
                m_source + ": allocator \"" + std::string(allocator) + "\" is not GPU_<N>_bfc; its events are on a device of type other named after it");
            return id;
        }

        std::uint32_t counter(DeviceId device, std::string_view name)
        {
            auto key = std::make_pair(device, std::string(name));
            if (auto it = m_counters.find(key); it != m_counters.end())
                return it->second;
            auto id = m_builder.addCounterSeries(CounterSeries { m_builder.intern(name), device });
            m_counters.emplace(std::move(key), id);
            return id;
        }

        void readPlane(const pb::XPlane& plane, int planeIndex)
        {
            PlaneView view(plane);
            std::string_view planeName(plane.name());
            auto gpuOrdinal = ordinalBetween(planeName, "/device:GPU:", "");
            for (const auto& line : plane.lines()) {
                std::string_view lineName(line.name());
                const bool derived = std::find(std::begin(kOtherDerivedLines), std::end(kOtherDerivedLines), lineName) != std::end(kOtherDerivedLines);
                for (const auto& event : line.events()) {
                    std::string_view eventName = view.eventName(event.metadata_id());
                    const bool isAlloc = eventName == "MemoryAllocation";
                    if (isAlloc || eventName == "MemoryDeallocation") {
                        readMemoryEvent(view, line, event, isAlloc, planeIndex);
                        continue;
                    }
                    if (!gpuOrdinal)
                        continue;
                    if (derived) {
                        m_builder.stats().add("xplane_derived_line_skipped", Severity::Info,
                            m_source + ": plane \"" + std::string(planeName) + "\" line \"" + std::string(lineName)
                                + "\" repeats the stream lines and is not imported");
                        continue;
                    }
                    readDeviceEvent(view, *gpuOrdinal, line, event, eventName);
                }
            }
        }

        // Counts an allocator event that cannot be imported (`detail` without the source) as `code`.
        void reject(std::string_view code, const std::string& detail)
        {
            if (m_firstRejection.empty())
                m_firstRejection = detail;
            m_builder.stats().add(code, Severity::Warning, m_source + ": " + detail);
        }

        std::optional<TimeNs> timeOf(const pb::XLine& line, const pb::XEvent& event, int planeIndex)
        {
            auto t = eventTime(line.timestamp_ns(), event.offset_ps());
            if (!t)
                reject("xplane_time_out_of_range",
                    "plane " + std::to_string(planeIndex) + " line " + std::to_string(line.id())
                        + ": timestamp_ns + offset_ps/1000 overflows int64 ns; event skipped");
            return t;
        }

        void readDeviceEvent(const PlaneView& view, std::int32_t ordinal, const pb::XLine& line, const pb::XEvent& event, std::string_view name)
        {
            auto start = eventTime(line.timestamp_ns(), event.offset_ps());
            if (!start) {
                m_builder.stats().add("xplane_time_out_of_range", Severity::Warning,
                    m_source + ": device plane GPU:" + std::to_string(ordinal) + " line " + std::to_string(line.id())
                        + ": timestamp_ns + offset_ps/1000 overflows int64 ns; event skipped");
                return;
            }
            std::int64_t durationNs = event.duration_ps() / 1000;
            TimeNs end = *start;
            if (durationNs < 0 || __builtin_add_overflow(*start, durationNs, &end)) {
                m_builder.stats().add("xplane_bad_duration", Severity::Warning,
                    m_source + ": device plane GPU:" + std::to_string(ordinal) + " line " + std::to_string(line.id())
                        + ": duration_ps " + std::to_string(event.duration_ps()) + " is negative or too large; event kept with zero duration");
                end = *start;
            }
            DeviceId device = gpuDevice(ordinal);
            std::string_view lineName(line.name());
            if (lineName == kStepsLine || lineName == kModulesLine) {
                Annotation a;
                a.start = *start;
                a.end = end;
                a.name = m_builder.intern(name);
                a.kind = lineName == kStepsLine ? AnnotationKind::Step : AnnotationKind::Range;
                a.device = device;
                m_builder.add(a);
                return;
            }
            Kernel k;
            k.start = *start;
            k.end = end;
            k.device = device;
            k.stream = m_tables.stream(device, static_cast<std::uint64_t>(line.id()), lineName);
            k.name = m_builder.intern(name);
            if (const auto* s = view.find(event.stats(), "correlation_id"))
                k.correlation = PlaneView::unsignedValue(*s).value_or(0);
            m_builder.add(k);
        }

        void missing(std::string_view field, bool isAlloc, int planeIndex, const pb::XLine& line)
        {
            reject("xplane_missing_field",
                "plane " + std::to_string(planeIndex) + " line " + std::to_string(line.id()) + ": a "
                    + (isAlloc ? "MemoryAllocation" : "MemoryDeallocation") + " event has no usable " + std::string(field)
                    + " stat; event skipped");
        }

        void readMemoryEvent(const PlaneView& view, const pb::XLine& line, const pb::XEvent& event, bool isAlloc, int planeIndex)
        {
            ++m_allocatorEvents;
            auto time = timeOf(line, event, planeIndex);
            if (!time)
                return;
            std::optional<std::string_view> allocator;
            std::optional<std::uint64_t> address, requested, allocated;
            std::optional<std::int64_t> bytesAllocated, bytesReserved, peak;
            std::optional<double> fragmentation;
            std::string_view tfOp;
            for (const auto& s : event.stats()) {
                std::string_view name = view.statName(s.metadata_id());
                if (name == "allocator_name")
                    allocator = view.text(s);
                else if (name == "addr")
                    address = PlaneView::unsignedValue(s);
                else if (name == "requested_bytes")
                    requested = PlaneView::unsignedValue(s);
                else if (name == "allocation_bytes")
                    allocated = PlaneView::unsignedValue(s);
                else if (name == "bytes_allocated")
                    bytesAllocated = PlaneView::integer(s);
                else if (name == "bytes_reserved")
                    bytesReserved = PlaneView::integer(s);
                else if (name == "peak_bytes_in_use")
                    peak = PlaneView::integer(s);
                else if (name == "fragmentation" && s.value_case() == pb::XStat::kDoubleValue)
                    fragmentation = s.double_value();
                else if (name == "tf_op")
                    tfOp = view.text(s).value_or("");
            }
            if (!allocator || allocator->empty())
                return missing("allocator_name", isAlloc, planeIndex, line);
            if (!address)
                return missing("addr", isAlloc, planeIndex, line);
            if (!allocated)
                return missing("allocation_bytes", isAlloc, planeIndex, line);

            DeviceId device = allocatorDevice(*allocator);
            MemoryEvent e;
            e.time = *time;
            e.kind = isAlloc ? EventKind::Alloc : EventKind::Free;
            e.device = device;
            e.stream = m_tables.stream(device, 0);
            e.address = *address;
            e.size = *allocated;
            e.requestedSize = requested.value_or(0);
            e.thread = static_cast<std::uint64_t>(line.id());
            // TensorFlow writes "(null)" when the allocation has no op (tsl ScopedMemoryDebugAnnotation).
            if (!tfOp.empty() && tfOp != "(null)")
                e.scope = m_builder.scope(0, tfOp, ScopeKind::Op);
            m_memory.push_back(e);

            auto sample = [&](std::string_view series, std::optional<std::int64_t> value) {
                if (value)
                    m_builder.add(CounterSample { *time, counter(device, series), *value });
            };
            sample("Bytes Allocated", bytesAllocated);
            sample("Bytes Reserved", bytesReserved);
            sample("Peak Bytes In Use", peak);
            if (fragmentation) {
                if (*fragmentation >= 0.0 && *fragmentation <= 1.0)
                    sample("Fragmentation (ppm)", std::llround(*fragmentation * 1e6));
                else
                    m_builder.stats().add("xplane_fragmentation_out_of_range", Severity::Warning,
                        m_source + ": allocator " + std::string(*allocator) + " recorded fragmentation "
                            + std::to_string(*fragmentation) + ", outside 0–1; sample skipped");
            }
        }

        const pb::XSpace& m_space;
        const std::string& m_source;
        const LoadOptions& m_options;
        TraceBuilder m_builder;
        detail::DeviceTables m_tables;
        DeviceType m_gpuType = DeviceType::Cuda;
        std::map<std::int32_t, GpuPlaneInfo> m_gpuPlanes;
        std::map<std::int32_t, DeviceId> m_gpuDevices;
        std::map<std::string, DeviceId> m_otherAllocators;
        std::map<std::pair<DeviceId, std::string>, std::uint32_t> m_counters;
        std::vector<MemoryEvent> m_memory; // added to the builder in time order at the end
        std::uint64_t m_allocatorEvents = 0; // MemoryAllocation/MemoryDeallocation events met, imported or not
        std::string m_firstRejection; // why the first of them that was not imported was rejected
    };
} // namespace

bool looksLikeXplane(std::string_view head)
{
    detail::Cursor c(head.data(), head.data() + head.size());
    if (c.byte() != 0x0a) // XSpace.planes: field 1, wire type 2
        return false;
    std::uint64_t planeLength = c.varint();
    if (c.failed() || planeLength < 2)
        return false;
    std::uint8_t tag = c.byte();
    if (tag == 0x08) { // XPlane.id, varint
        c.varint();
        tag = c.byte();
    }
    if (c.failed() || tag != 0x12) // XPlane.name: field 2, wire type 2
        return false;
    std::uint64_t nameLength = c.varint();
    if (c.failed() || nameLength == 0 || nameLength > 4096 || nameLength >= planeLength)
        return false;
    std::string_view rest = head.substr(head.size() - c.remaining());
    std::string_view name = rest.substr(0, static_cast<std::size_t>(nameLength));
    for (std::string_view prefix : kPlanePrefixes)
        if (name.starts_with(prefix))
            return true;
    return false;
}

Trace importXplane(std::string_view bytes, const std::string& source, const LoadOptions& options)
{
    if (bytes.size() > kMaxXplaneBytes)
        throw FormatError(source + ": " + std::to_string(bytes.size()) + " bytes is more than the "
            + std::to_string(kMaxXplaneBytes) + " an .xplane.pb may have in gpumem; profile a shorter window");
    pb::XSpace space;
    if (!space.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        throw FormatError(source + ": not a valid XSpace protobuf (libprotobuf rejected the " + std::to_string(bytes.size())
            + " bytes: truncated or not an .xplane.pb); copy the file again from the profiler's plugins/profile/<run>/ folder");
    if (space.planes_size() == 0)
        throw FormatError(source + ": the XSpace has no planes (field 1); nothing to import");
    return XplaneReader(space, source, options).read();
}

Trace readXplane(const std::string& path, const LoadOptions& options)
{
    // Refuse an oversized plain file before reading it into memory (importXplane checks again after
    // gzip decompression).
    if (!isGzip(readFileHead(path, 2))) {
        std::error_code ec;
        auto size = std::filesystem::file_size(path, ec);
        if (!ec && size > kMaxXplaneBytes)
            throw FormatError(path + ": " + std::to_string(size) + " bytes is more than the " + std::to_string(kMaxXplaneBytes)
                + " an .xplane.pb may have in gpumem; profile a shorter window");
    }
    std::string content = readFileMaybeGzip(path);
    return importXplane(content, path, options);
}

namespace {
    class XplaneImporter final : public Importer {
    public:
        std::string_view name() const override { return "xplane"; }
        std::string_view description() const override
        {
            return "XLA/JAX/TensorFlow profiler XSpace protobuf (.xplane.pb): BFC allocator events, kernels";
        }
        bool sniff(const SniffInput& in) const override { return looksLikeXplane(in.content); }
        Trace load(const std::string& path, const LoadOptions& options) const override { return readXplane(path, options); }
    };
} // namespace

std::unique_ptr<Importer> makeXplaneImporter() { return std::make_unique<XplaneImporter>(); }

} // namespace gpumem
