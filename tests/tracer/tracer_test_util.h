#pragma once
// Helpers for the tracer tests: real CUPTI activity buffers filled with hand-made records, a
// temporary folder, sink → .gmt → Trace round trips, and running child processes.
#include "core/gmt_format.h"
#include "tracer/trace_sink.h"

#include <cupti.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <filesystem>
#include <string>
#include <vector>

namespace gpumem::tracer::test {

// An 8-byte-aligned buffer of consecutive activity records, laid out as CUPTI lays them out.
class ActivityBuffer {
public:
    template <typename Record> void add(const Record& r)
    {
        static_assert(sizeof(Record) % 8 == 0);
        const std::size_t at = m_bytes;
        m_bytes += sizeof(Record);
        m_words.resize(m_bytes / 8);
        std::memcpy(reinterpret_cast<std::uint8_t*>(m_words.data()) + at, &r, sizeof(Record));
    }
    std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(m_words.data()); }
    std::size_t size() const { return m_bytes; }

private:
    std::vector<std::uint64_t> m_words;
    std::size_t m_bytes = 0;
};

inline CUpti_ActivityMemory4 memoryRecord(CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind,
    std::uint64_t address, std::uint64_t bytes, std::uint64_t timestamp, std::uint32_t correlation)
{
    CUpti_ActivityMemory4 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = op;
    r.memoryKind = kind;
    r.correlationId = correlation;
    r.address = address;
    r.bytes = bytes;
    r.timestamp = timestamp;
    r.processId = 4242;
    r.deviceId = 0;
    r.contextId = 1;
    r.streamId = CUPTI_INVALID_STREAM_ID;
    return r;
}

inline CUpti_ActivityKernel10 kernelRecord(const char* name, std::uint64_t start, std::uint64_t end, std::uint32_t stream,
    std::uint32_t correlation, std::uint32_t device = 0)
{
    CUpti_ActivityKernel10 r;
    std::memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = start;
    r.end = end;
    r.deviceId = device;
    r.streamId = stream;
    r.correlationId = correlation;
    r.name = name;
    return r;
}

class TempDir {
public:
    TempDir()
    {
        std::string tmpl = (std::filesystem::temp_directory_path() / "gpumem-tracer-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        m_path = tmpl;
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    const std::string& path() const { return m_path; }
    std::vector<std::string> files(const std::string& suffix = ".gmt") const
    {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(m_path))
            if (e.path().string().ends_with(suffix))
                out.push_back(e.path().string());
        return out;
    }

private:
    std::string m_path;
};

// Drains `sink` into a new .gmt file in `dir` and reads it back with the real reader.
inline Trace roundTrip(TraceSink& sink, const TempDir& dir)
{
    const std::string path = dir.path() + "/roundtrip.gmt";
    {
        GmtWriter w(path, nlohmann::json { { "tool", "test" } });
        sink.drainTo(w);
        w.finish();
    }
    return readGmt(path);
}

// "outer/inner" for a scope id (empty for scope 0).
inline std::string scopePath(const Trace& t, ScopeId id)
{
    std::string path;
    while (id != 0) {
        const Scope& s = t.scopes()[id];
        path = std::string(t.str(s.name)) + (path.empty() ? "" : "/" + path);
        id = s.parent;
    }
    return path;
}

struct ProcessResult {
    int exitCode = -1;
    std::string out;
    std::string err;
};

inline std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `command` through /bin/sh (environment assignments may prefix it: "A=1 cmd"), capturing
// stdout and stderr in files of `scratch`.
inline ProcessResult runShell(const std::string& command, const TempDir& scratch)
{
    const std::string out = scratch.path() + "/stdout.txt", err = scratch.path() + "/stderr.txt";
    const std::string full = "(" + command + ") >" + out + " 2>" + err;
    const int status = std::system(full.c_str());
    ProcessResult r;
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = readText(out);
    r.err = readText(err);
    return r;
}

} // namespace gpumem::tracer::test
