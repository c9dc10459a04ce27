#pragma once
// Helpers shared by the Kineto and memory-timeline importer tests: public-trace paths, per-device
// counts, counter peaks and a whole-trace equality check for the .gmt round trip.
#include "core/error.h"
#include "core/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

namespace gpumem::test {

inline std::string publicTrace(const std::string& relative)
{
    return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative;
}

#define GPUMEM_REQUIRE_PUBLIC(path)                                                                                    \
    if (!std::filesystem::exists(path))                                                                                \
    GTEST_SKIP() << "public trace " << (path) << " is absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)"

// A file in a fresh temporary directory, removed with the object.
class TempFile {
public:
    explicit TempFile(const std::string& name, const std::string& content = {})
    {
        m_dir = std::filesystem::temp_directory_path()
            / ("gpumem-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
        std::filesystem::create_directories(m_dir);
        m_path = (m_dir / name).string();
        if (!content.empty()) {
            std::ofstream out(m_path, std::ios::binary);
            out << content;
        }
    }
    ~TempFile() { std::filesystem::remove_all(m_dir); }
    const std::string& path() const { return m_path; }

private:
    static int& counter()
    {
        static int n = 0;
        return n;
    }
    std::filesystem::path m_dir;
    std::string m_path;
};

// What importing a Kineto file (or text) that may be cut short gave.
struct CutOutcome {
    bool error = false;
    std::string message; // the FormatError, or the "truncated" anomaly's detail ("" when none)
    std::uint64_t events = 0; // metadata kineto.events: the traceEvents entries read
    std::size_t memoryEvents = 0;
};

// Runs `import`; a "truncated" anomaly must have severity error and be counted once.
inline CutOutcome cutOutcomeOf(const std::function<Trace()>& import)
{
    CutOutcome o;
    try {
        Trace t = import();
        o.events = t.metadata()["kineto"]["events"].get<std::uint64_t>();
        o.memoryEvents = t.memory().count();
        if (const Anomaly* a = t.stats().find("truncated")) {
            o.message = a->detail;
            EXPECT_EQ(a->severity, Severity::Error);
            EXPECT_EQ(a->count, 1u) << "warned once";
        }
    } catch (const FormatError& e) {
        o.error = true;
        o.message = e.what();
    }
    return o;
}

inline DeviceId findDevice(const Trace& t, DeviceType type, std::int32_t ordinal)
{
    for (std::size_t i = 0; i < t.devices().size(); ++i)
        if (t.devices()[i].type == type && t.devices()[i].ordinal == ordinal)
            return static_cast<DeviceId>(i);
    ADD_FAILURE() << "no device " << toString(type) << ":" << ordinal;
    return kNoDevice;
}

inline std::uint64_t countEvents(const Trace& t, DeviceId device, EventKind kind)
{
    const auto& m = t.memory();
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < m.count(); ++i)
        n += m.device[i] == device && m.kind[i] == kind;
    return n;
}

// Index of the counter series with this name on this device, or -1.
inline int findSeries(const Trace& t, std::string_view name, DeviceId device)
{
    for (std::size_t i = 0; i < t.counterSeries().size(); ++i)
        if (t.str(t.counterSeries()[i].name) == name && t.counterSeries()[i].device == device)
            return static_cast<int>(i);
    return -1;
}

inline std::int64_t seriesPeak(const Trace& t, int series)
{
    std::int64_t peak = std::numeric_limits<std::int64_t>::min();
    for (const auto& s : t.counterSamples())
        if (static_cast<int>(s.series) == series)
            peak = std::max(peak, s.value);
    return peak;
}

inline std::vector<CounterSample> seriesSamples(const Trace& t, int series)
{
    std::vector<CounterSample> out;
    for (const auto& s : t.counterSamples())
        if (static_cast<int>(s.series) == series)
            out.push_back(s);
    return out;
}

// Names of the Module scopes from the outermost to the innermost enclosing `scope`, joined by " / ".
inline std::string modulePath(const Trace& t, ScopeId scope)
{
    std::vector<std::string> names;
    for (ScopeId s = scope; s != 0; s = t.scopes()[s].parent)
        if (t.scopes()[s].kind == ScopeKind::Module)
            names.emplace_back(t.str(t.scopes()[s].name));
    std::string out;
    for (auto it = names.rbegin(); it != names.rend(); ++it)
        out += (out.empty() ? "" : " / ") + *it;
    return out;
}

// Index of the memory event with this source sequence number ("Ev Idx"), or npos.
inline std::size_t eventWithSequence(const Trace& t, std::uint64_t sequence)
{
    const auto& m = t.memory();
    for (std::size_t i = 0; i < m.count(); ++i)
        if (m.sequence[i] == sequence)
            return i;
    return std::string::npos;
}

// Two traces hold the same data: tables, columns, kernels, annotations, counters and anomalies.
inline void expectSameTrace(const Trace& a, const Trace& b)
{
    ASSERT_EQ(a.memory().count(), b.memory().count());
    for (std::size_t i = 0; i < a.memory().count(); ++i)
        ASSERT_EQ(a.memory().row(i), b.memory().row(i)) << "memory event " << i;
    ASSERT_EQ(a.kernels().size(), b.kernels().size());
    for (std::size_t i = 0; i < a.kernels().size(); ++i) {
        const auto &x = a.kernels()[i], &y = b.kernels()[i];
        ASSERT_EQ(x.start, y.start);
        ASSERT_EQ(x.end, y.end);
        ASSERT_EQ(x.device, y.device);
        ASSERT_EQ(x.stream, y.stream);
        ASSERT_EQ(x.correlation, y.correlation);
        ASSERT_EQ(a.str(x.name), b.str(y.name));
    }
    ASSERT_EQ(a.annotations().size(), b.annotations().size());
    for (std::size_t i = 0; i < a.annotations().size(); ++i) {
        ASSERT_EQ(a.annotations()[i].start, b.annotations()[i].start);
        ASSERT_EQ(a.annotations()[i].end, b.annotations()[i].end);
        ASSERT_EQ(a.annotations()[i].kind, b.annotations()[i].kind);
        ASSERT_EQ(a.str(a.annotations()[i].name), b.str(b.annotations()[i].name));
    }
    ASSERT_EQ(a.counterSeries().size(), b.counterSeries().size());
    for (std::size_t i = 0; i < a.counterSeries().size(); ++i) {
        ASSERT_EQ(a.str(a.counterSeries()[i].name), b.str(b.counterSeries()[i].name));
        ASSERT_EQ(a.counterSeries()[i].device, b.counterSeries()[i].device);
    }
    ASSERT_TRUE(std::equal(
        a.counterSamples().begin(), a.counterSamples().end(), b.counterSamples().begin(), b.counterSamples().end()));
    ASSERT_EQ(a.scopes().size(), b.scopes().size());
    for (std::size_t i = 0; i < a.scopes().size(); ++i) {
        ASSERT_EQ(a.scopes()[i].parent, b.scopes()[i].parent);
        ASSERT_EQ(a.scopes()[i].kind, b.scopes()[i].kind);
        ASSERT_EQ(a.str(a.scopes()[i].name), b.str(b.scopes()[i].name));
    }
    ASSERT_EQ(a.siteCount(), b.siteCount());
    ASSERT_EQ(a.devices().size(), b.devices().size());
    for (std::size_t i = 0; i < a.devices().size(); ++i) {
        ASSERT_EQ(a.devices()[i].type, b.devices()[i].type);
        ASSERT_EQ(a.devices()[i].ordinal, b.devices()[i].ordinal);
        ASSERT_EQ(a.devices()[i].totalMemory, b.devices()[i].totalMemory);
        ASSERT_EQ(a.str(a.devices()[i].name), b.str(b.devices()[i].name));
    }
    ASSERT_EQ(a.stats().anomalies().size(), b.stats().anomalies().size());
    for (std::size_t i = 0; i < a.stats().anomalies().size(); ++i) {
        ASSERT_EQ(a.stats().anomalies()[i].code, b.stats().anomalies()[i].code);
        ASSERT_EQ(a.stats().anomalies()[i].count, b.stats().anomalies()[i].count);
    }
    ASSERT_EQ(a.metadata(), b.metadata());
}

} // namespace gpumem::test
