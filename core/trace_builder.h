#pragma once
// Builds an immutable Trace. Used by importers, the .gmt/.jsonl readers and tests. Tables are
// deduplicated (strings, frames, sites, scopes); memory events, kernels, annotations and counter
// samples may arrive in any order and are sorted by time in build() — memory events by
// (time, sequence), so a source's own event index breaks ties (PyTorch profiler's "Ev Idx").
// Not thread-safe; one builder per import.
#include "core/trace.h"

#include <map>
#include <string_view>
#include <unordered_map>

namespace gpumem {

class TraceBuilder {
public:
    TraceBuilder();
    ~TraceBuilder();
    TraceBuilder(const TraceBuilder&) = delete;
    TraceBuilder& operator=(const TraceBuilder&) = delete;

    nlohmann::json& metadata();
    StringId intern(std::string_view text);
    ImportStats& stats();

    DeviceId addDevice(const Device& device);
    // Finds the device with this type and ordinal, adding it (unnamed, size unknown) if absent.
    DeviceId device(DeviceType type, std::int32_t ordinal);
    StreamId addStream(const Stream& stream);
    // Finds the stream with this device and handle, adding it if absent.
    StreamId stream(DeviceId device, std::uint64_t handle);
    FrameId frame(std::string_view name, std::string_view file, std::int32_t line);
    // Interns a call stack (frames innermost first); the empty stack is site 0.
    SiteId site(std::span<const FrameId> frames);
    // Interns a scope by (parent, name, kind).
    ScopeId scope(ScopeId parent, std::string_view name, ScopeKind kind);

    // Appends raw table rows without deduplication (the .gmt/.jsonl readers, whose ids are given).
    FrameId appendFrame(const Frame& frame);
    SiteId appendSite(std::span<const FrameId> frames);
    ScopeId appendScope(const Scope& scope);
    // A pool row (ids from 1; pool 0, the default pool, is implicit). pool() finds the row with this
    // kind and source id, adding it if absent; (0,0) is pool 0.
    PoolId appendPool(const MemoryPool& pool);
    PoolId pool(PoolKind kind, std::int64_t idFirst, std::int64_t idSecond);

    void add(const MemoryEvent& event);
    void add(const Kernel& kernel) { kernels().push_back(kernel); }
    void add(const Annotation& annotation) { annotations().push_back(annotation); }
    std::uint32_t addCounterSeries(const CounterSeries& series);
    void add(const CounterSample& sample) { counterSamples().push_back(sample); }

    // Shorthands for tests: request-level events on device 0, stream 0.
    void alloc(TimeNs time, Address address, Bytes size, Bytes requested = 0);
    void free(TimeNs time, Address address, Bytes size);

    // Bulk access for readers that fill columns directly.
    MemoryEventColumns& memoryColumns();
    std::vector<Kernel>& kernels();
    std::vector<Annotation>& annotations();
    std::vector<CounterSample>& counterSamples();

    std::size_t memoryEventCount() const;
    std::size_t deviceCount() const;
    std::size_t streamCount() const;
    std::size_t frameCount() const;
    std::size_t siteCount() const;
    std::size_t scopeCount() const;
    std::size_t poolCount() const;

    // Sorts, checks references, and hands over the data; the builder is empty afterwards.
    // Out-of-range device/stream/scope/site ids are a FormatError naming the event index.
    Trace build();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace gpumem
