#include "core/error.h"
#include "importers/importer_registry.h"
#include "importers/xplane_importer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

using namespace gpumem;

namespace {

const std::string kPublicXplane = std::string(GPUMEM_PUBLIC_TRACES) + "/tracelens/jax-xplane/jax_conv_minimal_legacy.xplane.pb";

// A minimal protobuf wire-format writer, enough to build XSpace messages by hand (field numbers from
// SOURCES.md §D), so the tests do not depend on the generated classes.
struct Pb {
    std::string bytes;
    static std::string varint(std::uint64_t v)
    {
        std::string s;
        while (v >= 0x80) {
            s += static_cast<char>((v & 0x7f) | 0x80);
            v >>= 7;
        }
        s += static_cast<char>(v);
        return s;
    }
    Pb& num(int field, std::int64_t v)
    {
        bytes += varint(static_cast<std::uint64_t>(field) << 3) + varint(static_cast<std::uint64_t>(v));
        return *this;
    }
    Pb& dbl(int field, double v)
    {
        bytes += varint(static_cast<std::uint64_t>(field) << 3 | 1);
        char raw[8];
        std::memcpy(raw, &v, 8);
        bytes.append(raw, 8);
        return *this;
    }
    Pb& str(int field, const std::string& v)
    {
        bytes += varint(static_cast<std::uint64_t>(field) << 3 | 2) + varint(v.size()) + v;
        return *this;
    }
    Pb& msg(int field, const Pb& m) { return str(field, m.bytes); }
};

Pb metadataEntry(std::int64_t id, const std::string& name) { return Pb().num(1, id).msg(2, Pb().num(1, id).str(2, name)); }
Pb intStat(std::int64_t id, std::int64_t v) { return Pb().num(1, id).num(4, v); }
Pb refStat(std::int64_t id, std::int64_t ref) { return Pb().num(1, id).num(7, ref); }

// A host plane with one allocator event per (kind, address, offset) row, stats in the order TSL writes.
enum StatId : std::int64_t { kAllocator = 1, kGpu3 = 2, kAddr = 3, kRequested = 4, kAllocated = 5, kBytesAllocated = 6, kFrag = 7, kTfOp = 8, kOpName = 9, kNull = 10 };
Pb hostPlane(std::int64_t lineNs, const std::vector<std::tuple<bool, std::int64_t, std::int64_t>>& events, bool withAllocator = true)
{
    Pb plane;
    plane.str(2, "/host:CPU");
    Pb line;
    line.num(1, 77).str(2, "tf_pjrt_thread_pool/1").num(3, lineNs);
    for (auto [isAlloc, address, offsetPs] : events) {
        Pb e;
        e.num(1, isAlloc ? 1 : 2).num(2, offsetPs);
        if (withAllocator)
            e.msg(4, refStat(kAllocator, kGpu3));
        e.msg(4, intStat(kAddr, address)).msg(4, intStat(kRequested, 1000)).msg(4, intStat(kAllocated, 1024));
        e.msg(4, intStat(kBytesAllocated, isAlloc ? 1024 : 0)).msg(4, Pb().num(1, kFrag).dbl(2, 0.25));
        e.msg(4, refStat(kTfOp, isAlloc ? kOpName : kNull));
        line.msg(4, e);
    }
    plane.msg(3, line);
    plane.msg(4, metadataEntry(1, "MemoryAllocation")).msg(4, metadataEntry(2, "MemoryDeallocation"));
    const std::pair<std::int64_t, const char*> stats[] = { { kAllocator, "allocator_name" }, { kGpu3, "GPU_3_bfc" },
        { kAddr, "addr" }, { kRequested, "requested_bytes" }, { kAllocated, "allocation_bytes" },
        { kBytesAllocated, "bytes_allocated" }, { kFrag, "fragmentation" }, { kTfOp, "tf_op" },
        { kOpName, "jit(f)/dot_general" }, { kNull, "(null)" } };
    for (auto [id, name] : stats)
        plane.msg(5, metadataEntry(id, name));
    return plane;
}

std::string space(const std::vector<Pb>& planes)
{
    Pb s;
    for (const auto& p : planes)
        s.msg(1, p);
    return s.bytes;
}

std::set<std::int32_t> ordinals(const Trace& t, auto&& deviceIds)
{
    std::set<std::int32_t> out;
    for (DeviceId d : deviceIds)
        out.insert(t.devices()[d].ordinal);
    return out;
}

} // namespace

TEST(XplaneImporter, ImportsThePublicJaxProfile)
{
    if (!std::filesystem::exists(kPublicXplane))
        GTEST_SKIP() << "public trace not found: " << kPublicXplane;
    const Importer* importer = detectFormat(kPublicXplane);
    ASSERT_NE(importer, nullptr);
    EXPECT_EQ(importer->name(), "xplane");
    Trace t = loadTrace(kPublicXplane);
    EXPECT_EQ(t.metadata().at("source_format"), "xplane");
    EXPECT_EQ(t.metadata().at("device_vendor"), "AMD");

    // SOURCES.md §4: 230 MemoryAllocation + 230 MemoryDeallocation over GPU_0_bfc…GPU_7_bfc, 33.8 ms.
    const auto& m = t.memory();
    ASSERT_EQ(m.count(), 460u);
    EXPECT_EQ(std::count(m.kind.begin(), m.kind.end(), EventKind::Alloc), 230);
    EXPECT_EQ(std::count(m.kind.begin(), m.kind.end(), EventKind::Free), 230);
    std::set<std::string> allocators;
    for (DeviceId d : m.device) {
        EXPECT_EQ(t.devices()[d].type, DeviceType::Hip); // the device planes' device_vendor is "AMD"
        allocators.insert(std::string(t.str(t.devices()[d].name)));
    }
    EXPECT_EQ(allocators, (std::set<std::string> { "GPU_0_bfc", "GPU_1_bfc", "GPU_2_bfc", "GPU_3_bfc", "GPU_4_bfc", "GPU_5_bfc", "GPU_6_bfc", "GPU_7_bfc" }));
    EXPECT_EQ(ordinals(t, m.device), (std::set<std::int32_t> { 0, 1, 2, 3, 4, 5, 6, 7 }));
    // First and last allocator events by time (decoded independently with protoc --decode).
    EXPECT_EQ(m.time.front(), 1633704060);
    EXPECT_EQ(m.time.back(), 1667519919);
    EXPECT_NEAR(static_cast<double>(m.time.back() - m.time.front()) / 1e6, 33.8, 0.05);

    // The first event of the first host thread line: GPU_6_bfc allocates 572026880 bytes at
    // 0x7ec5e0000000 (line ts 1632920073 ns + 2147680000 ps), fragmentation 0.320125.
    auto it = std::find(m.address.begin(), m.address.end(), Address { 139388075900928 });
    ASSERT_NE(it, m.address.end());
    std::size_t i = static_cast<std::size_t>(it - m.address.begin());
    EXPECT_EQ(m.kind[i], EventKind::Alloc);
    EXPECT_EQ(m.time[i], 1632920073 + 2147680);
    EXPECT_EQ(m.size[i], 572026880u);
    EXPECT_EQ(m.requestedSize[i], 572026880u);
    const Device& gpu6 = t.devices()[m.device[i]];
    EXPECT_EQ(t.str(gpu6.name), "GPU_6_bfc");
    EXPECT_EQ(gpu6.ordinal, 6);
    EXPECT_EQ(m.scope[i], 0u); // tf_op "(null)"

    std::map<std::string, std::int64_t> atFirst;
    for (const auto& s : t.counterSamples())
        if (s.time == m.time[i] && t.counterSeries()[s.series].device == m.device[i])
            atFirst[std::string(t.str(t.counterSeries()[s.series].name))] = s.value;
    EXPECT_EQ(atFirst["Bytes Allocated"], 1153097728);
    EXPECT_EQ(atFirst["Bytes Reserved"], 0);
    EXPECT_EQ(atFirst["Peak Bytes In Use"], 1739215104);
    EXPECT_EQ(atFirst["Fragmentation (ppm)"], 320125);
    EXPECT_EQ(t.counterSeries().size(), 8u * 4u);

    // The window starts mid-run: on each of the 8 allocators one buffer allocated before it is freed
    // inside it, and one allocated inside it is still live at the end (the same address, re-allocated).
    std::size_t liveAtEnd = 0;
    for (const auto& a : t.allocations())
        liveAtEnd += a.freeEvent == kNoIndex;
    EXPECT_EQ(t.allocations().size(), 230u);
    EXPECT_EQ(liveAtEnd, 8u);
    EXPECT_EQ(t.stats().count("unmatched_free"), 8u);
    EXPECT_EQ(t.stats().count("unsorted_input"), 0u); // per-line order is the format, not an anomaly
    LoadOptions strict;
    strict.strict = true;
    EXPECT_NO_THROW(loadTrace(kPublicXplane, strict));
}

TEST(XplaneImporter, ImportsTheDevicePlaneEventsAsKernelsPerStream)
{
    if (!std::filesystem::exists(kPublicXplane))
        GTEST_SKIP() << "public trace not found: " << kPublicXplane;
    Trace t = loadTrace(kPublicXplane);
    // SOURCES.md §4: 78 GPU events (kernels and memcpy) on /device:GPU:0 and :7.
    auto kernels = t.kernels();
    ASSERT_EQ(kernels.size(), 78u);
    std::map<std::int32_t, int> perDevice;
    for (const auto& k : kernels)
        ++perDevice[t.devices()[k.device].ordinal];
    EXPECT_EQ(perDevice, (std::map<std::int32_t, int> { { 0, 53 }, { 7, 25 } }));

    // GPU:0's first copy: line "Stream #8(MemcpyOther)" ts 1633193266 ns, offset 1257425000 ps,
    // duration 17907000 ps, correlation_id 61.
    auto k = std::find_if(kernels.begin(), kernels.end(), [](const Kernel& x) { return x.correlation == 61; });
    ASSERT_NE(k, kernels.end());
    EXPECT_EQ(k->start, 1633193266 + 1257425);
    EXPECT_EQ(k->end - k->start, 17907);
    EXPECT_EQ(t.str(k->name), "CopyDeviceToDevice");
    const Stream& s = t.streams()[k->stream];
    EXPECT_EQ(s.handle, 8u);
    EXPECT_EQ(t.str(s.name), "Stream #8(MemcpyOther)");
    const Device& gpu0 = t.devices()[k->device];
    EXPECT_EQ(gpu0.ordinal, 0);
    EXPECT_EQ(t.str(gpu0.name), "GPU_0_bfc"); // the device plane and the allocator are one device
    EXPECT_EQ(gpu0.totalMemory, 206141652992u); // memory_size of /device:GPU:0

    std::set<std::string> gpu7Names;
    for (const auto& x : kernels)
        if (t.devices()[x.device].ordinal == 7)
            gpu7Names.insert(std::string(t.str(x.name)));
    EXPECT_TRUE(gpu7Names.count("input_transpose_fusion_1"));
    EXPECT_TRUE(gpu7Names.count("Im3d2Col"));
}

TEST(XplaneImporter, SniffsTheProtobufButNotOtherFormats)
{
    if (std::filesystem::exists(kPublicXplane)) {
        std::ifstream in(kPublicXplane, std::ios::binary);
        std::string head(4096, '\0');
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        EXPECT_TRUE(looksLikeXplane(head));
    }
    EXPECT_TRUE(looksLikeXplane(space({ hostPlane(0, {}) })));
    EXPECT_TRUE(looksLikeXplane(space({ Pb().num(1, 3).str(2, "/device:GPU:3") })));
    EXPECT_FALSE(looksLikeXplane(""));
    EXPECT_FALSE(looksLikeXplane(space({ Pb().str(2, "/home/user") })));
    EXPECT_FALSE(looksLikeXplane(std::string("\x80\x02}q\x00(X\x08\x00\x00\x00segments", 20))); // pickle
    EXPECT_FALSE(looksLikeXplane(std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8)));            // gzip
    EXPECT_FALSE(looksLikeXplane("{\"traceEvents\": []}"));
    EXPECT_FALSE(looksLikeXplane("\n\n/host:CPU")); // text starting with a newline
    EXPECT_FALSE(looksLikeXplane("Thread,Time,Action,Pointer,Size,Stream\n"));
    std::uint64_t state = 0x9e3779b97f4a7c15ull;
    for (int trial = 0; trial < 2000; ++trial) {
        std::string random(256, '\0');
        for (char& c : random) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            c = static_cast<char>(state >> 56);
        }
        random[0] = '\x0a'; // even with the right first tag
        EXPECT_FALSE(looksLikeXplane(random)) << "trial " << trial;
    }
}

TEST(XplaneImporter, ConvertsLineNanosecondsPlusOffsetPicosecondsToNanoseconds)
{
    // An epoch-based line timestamp: ts·1000 would overflow int64 picoseconds, the import must not.
    const std::int64_t lineNs = 1757516928109201518;
    Trace t = importXplane(space({ hostPlane(lineNs, { { true, 0x1000, 2500 }, { false, 0x1000, 7999 } }) }), "synthetic.xplane.pb");
    ASSERT_EQ(t.memory().count(), 2u);
    EXPECT_EQ(t.memory().time[0], lineNs + 2);
    EXPECT_EQ(t.memory().time[1], lineNs + 7);
    EXPECT_EQ(t.memory().size[0], 1024u);
    EXPECT_EQ(t.memory().requestedSize[0], 1000u);
    EXPECT_EQ(t.devices()[t.memory().device[0]].type, DeviceType::Cuda); // no device plane says AMD
    EXPECT_EQ(t.devices()[t.memory().device[0]].ordinal, 3);
    // tf_op becomes an Op scope; "(null)" is no scope.
    ScopeId scope = t.memory().scope[0];
    ASSERT_NE(scope, 0u);
    EXPECT_EQ(t.str(t.scopes()[scope].name), "jit(f)/dot_general");
    EXPECT_EQ(t.scopes()[scope].kind, ScopeKind::Op);
    EXPECT_EQ(t.memory().scope[1], 0u);
    std::int64_t fragmentation = -1;
    for (const auto& s : t.counterSamples())
        if (t.str(t.counterSeries()[s.series].name) == "Fragmentation (ppm)")
            fragmentation = s.value;
    EXPECT_EQ(fragmentation, 250000);

    // A timestamp at the edge of int64 makes the event unrepresentable: counted, not wrapped.
    Trace edge = importXplane(space({ hostPlane(INT64_MAX - 1, { { true, 0x1000, 5000 } }) }), "edge.xplane.pb");
    EXPECT_EQ(edge.memory().count(), 0u);
    EXPECT_EQ(edge.stats().count("xplane_time_out_of_range"), 1u);
}

TEST(XplaneImporter, CountsMemoryEventsWithoutAllocatorAsAnomalies)
{
    Trace t = importXplane(space({ hostPlane(1000, { { true, 0x1000, 0 }, { false, 0x1000, 1000 } }, false) }), "noalloc.xplane.pb");
    EXPECT_EQ(t.memory().count(), 0u);
    EXPECT_EQ(t.stats().count("xplane_missing_field"), 2u);
    EXPECT_NE(t.stats().find("xplane_missing_field")->detail.find("allocator_name"), std::string::npos);
    EXPECT_THROW(t.stats().throwIfStrictViolated("noalloc.xplane.pb"), FormatError);
    // Every allocator event was rejected: say how many and the first reason, not the host_tracer_level
    // hint (the profile did trace the allocator).
    EXPECT_EQ(t.stats().find("xplane_no_memory_events"), nullptr);
    const Anomaly* rejected = t.stats().find("xplane_memory_events_rejected");
    ASSERT_NE(rejected, nullptr);
    EXPECT_EQ(rejected->severity, Severity::Error);
    EXPECT_EQ(rejected->detail,
        "noalloc.xplane.pb: all 2 MemoryAllocation/MemoryDeallocation events were rejected, so the trace has no memory "
        "events; the first: plane 0 line 77: a MemoryAllocation event has no usable allocator_name stat; event skipped");

    // One event whose time overflows: its own reason.
    Trace edge = importXplane(space({ hostPlane(INT64_MAX - 1, { { true, 0x1000, 5000 } }) }), "edge.xplane.pb");
    ASSERT_NE(edge.stats().find("xplane_memory_events_rejected"), nullptr);
    EXPECT_EQ(edge.stats().find("xplane_memory_events_rejected")->detail,
        "edge.xplane.pb: the 1 MemoryAllocation/MemoryDeallocation event was rejected, so the trace has no memory events; "
        "the first: plane 0 line 77: timestamp_ns + offset_ps/1000 overflows int64 ns; event skipped");
    EXPECT_EQ(edge.stats().find("xplane_no_memory_events"), nullptr);

    // Some imported: the per-event anomalies say enough.
    Trace some = importXplane(space({ hostPlane(1000, { { true, 0x1000, 0 } }), hostPlane(1000, { { true, 0x2000, 0 } }, false) }),
        "some.xplane.pb");
    EXPECT_EQ(some.memory().count(), 1u);
    EXPECT_EQ(some.stats().count("xplane_missing_field"), 1u);
    EXPECT_EQ(some.stats().find("xplane_memory_events_rejected"), nullptr);
    EXPECT_EQ(some.stats().find("xplane_no_memory_events"), nullptr);
}

TEST(XplaneImporter, RejectsTruncatedAndEmptyInputWithFormatError)
{
    std::string whole = space({ hostPlane(1000, { { true, 0x1000, 0 } }) });
    try {
        importXplane(std::string_view(whole).substr(0, whole.size() - 7), "cut.xplane.pb");
        FAIL() << "a truncated XSpace was accepted";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("cut.xplane.pb"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("not a valid XSpace"), std::string::npos);
    }
    EXPECT_THROW(importXplane("", "empty.xplane.pb"), FormatError);
}

TEST(XplaneImporter, TurnsStepsAndModulesIntoAnnotationsAndSkipsOtherDerivedLines)
{
    auto line = [](std::int64_t id, const std::string& name, std::int64_t metadata) {
        return Pb().num(1, id).str(2, name).num(3, 5000).msg(4, Pb().num(1, metadata).num(2, 1'000'000).num(3, 3'000'000));
    };
    Pb plane;
    plane.num(1, 2).str(2, "/device:GPU:1");
    plane.msg(3, line(4, "Stream #4(Kernel)", 1)).msg(3, line(100, "Steps", 2)).msg(3, line(101, "XLA Modules", 3));
    plane.msg(3, line(102, "XLA Ops", 1));
    plane.msg(4, metadataEntry(1, "fusion.3")).msg(4, metadataEntry(2, "12")).msg(4, metadataEntry(3, "jit_train_step"));
    Trace t = importXplane(space({ plane }), "derived.xplane.pb");

    ASSERT_EQ(t.kernels().size(), 1u);
    EXPECT_EQ(t.str(t.kernels()[0].name), "fusion.3");
    EXPECT_EQ(t.kernels()[0].start, 5000 + 1000);
    EXPECT_EQ(t.kernels()[0].end, 5000 + 4000);
    EXPECT_EQ(t.devices()[t.kernels()[0].device].ordinal, 1);
    EXPECT_EQ(t.streams()[t.kernels()[0].stream].handle, 4u);

    ASSERT_EQ(t.annotations().size(), 2u);
    std::map<std::string, AnnotationKind> kinds;
    for (const auto& a : t.annotations())
        kinds[std::string(t.str(a.name))] = a.kind;
    EXPECT_EQ(kinds.at("12"), AnnotationKind::Step);
    EXPECT_EQ(kinds.at("jit_train_step"), AnnotationKind::Range);
    EXPECT_EQ(t.stats().count("xplane_derived_line_skipped"), 1u);
    EXPECT_EQ(t.stats().count("xplane_no_memory_events"), 1u);
    EXPECT_NE(t.stats().find("xplane_no_memory_events")->detail.find("host_tracer_level >= 2"), std::string::npos);
    EXPECT_EQ(t.stats().find("xplane_memory_events_rejected"), nullptr);
}
