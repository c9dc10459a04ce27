#pragma once
// Devices and streams that a foreign-format importer discovers while reading, shared by the xplane and
// nsys importers. Devices are kept aside and handed to the TraceBuilder at the end (commit()), so a
// device first met in one table can still be named from another read later; streams are looked up or
// added with a name. One per import; not thread-safe.
#include "core/error.h"
#include "core/trace_builder.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::detail {

class DeviceTables {
public:
    DeviceTables(TraceBuilder& builder, const std::string& source)
        : m_builder(builder)
        , m_source(source)
    {
    }

    // Adds a device; throws FormatError (naming the source) past the kNoDevice limit.
    DeviceId addDevice(const Device& device)
    {
        if (m_devices.size() >= kNoDevice)
            throw FormatError(m_source + ": more than " + std::to_string(kNoDevice) + " devices; not a trace gpumem can hold");
        m_devices.push_back(device);
        return static_cast<DeviceId>(m_devices.size() - 1);
    }
    Device& device(DeviceId id) { return m_devices[id]; }

    // The stream (device, handle), added with `name` (may be empty) the first time it is asked for.
    StreamId stream(DeviceId device, std::uint64_t handle, std::string_view name = {})
    {
        auto key = std::make_pair(device, handle);
        if (auto it = m_streams.find(key); it != m_streams.end())
            return it->second;
        StreamId id = m_builder.addStream(Stream { device, handle, name.empty() ? 0 : m_builder.intern(name) });
        m_streams.emplace(key, id);
        return id;
    }

    // Hands the devices to the builder in id order; call once, before TraceBuilder::build().
    void commit()
    {
        for (const Device& d : m_devices)
            m_builder.addDevice(d);
    }

private:
    TraceBuilder& m_builder;
    const std::string& m_source;
    std::vector<Device> m_devices;
    std::map<std::pair<DeviceId, std::uint64_t>, StreamId> m_streams;
};

} // namespace gpumem::detail
