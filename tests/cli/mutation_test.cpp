// The standing adversarial test (issue 21 item 6): a seeded mutation run over tests/data/, traces/ and
// the small public traces, a few hundred variants per format (.jsonl, .gmt, Kineto, snapshot JSON and
// pickle, RMM, memory timeline, nsys SQLite; not XPlane, whose seeds need protoc), each run through `gpumem info` in a
// child process with limits. It fails on a crash (a signal), an internal error, a timeout, memory
// above kMemoryLimit (setrlimit RLIMIT_AS in the child: the allocation fails, gpumem says "out of
// memory", which counts as a failure too), a raw control character on stdout or stderr, or a stderr
// line longer than kMaxMessageLine (an error quotes at most 120 bytes of its input:
// core/message_quote.h; docs/cli-options.md "Input size and damaged input").
//
// Reproduce a failure: the message names the format, the variant and the seed;
// GPUMEM_MUTATION_SEED=<seed> GPUMEM_MUTATION_VARIANTS=<n> GPUMEM_MUTATION_KEEP=<dir> build/ci/tests/test_cli
// --gtest_filter='Mutation.*' keeps every failing input in <dir>.
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "tests/cli/cli_runner.h"
#include "tests/core/gzip_test_support.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using gpumem::test::scratchDir;
using gpumem::test::slurp;

namespace {
constexpr std::size_t kMaxMessageLine = 4096; // bytes in one stderr line
constexpr rlim_t kMemoryLimit = rlim_t(2) << 30; // address space of one child (gpumem maps its libraries too)
constexpr int kTimeoutMs = 15000; // wall clock of one child, generous on a loaded 2-core machine

struct Rng {
    std::uint64_t s;
    std::uint64_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    std::size_t below(std::size_t n) { return n ? static_cast<std::size_t>(next() % n) : 0; }
};

std::uint64_t envNumber(const char* name, std::uint64_t fallback)
{
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// One variant of `seed` content: 1–4 edits of the kinds that found bugs (bit flips, a byte or token
// replaced, ranges dropped or repeated, the file cut).
std::string mutate(std::string s, Rng& rng)
{
    static const std::vector<std::string> kTokens = { "1e999", "-1", "18446744073709551616", "9223372036854775807",
        "nan", "null", "0x7f", "00012", "2p48", "\"\\u202e\"", "\x1b[2J", "\r\n", "\xff\xfe", "{", "}", "[", "]", ",",
        "\"", ":", "-9223372036854775808", "\xE2\x80\xAE", "\\", "\x80", "0" };
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits && !s.empty(); ++e) {
        const std::size_t at = rng.below(s.size());
        switch (rng.below(6)) {
        case 0:
            s[at] = static_cast<char>(s[at] ^ (1 << rng.below(8)));
            break;
        case 1: {
            const std::string& t = kTokens[rng.below(kTokens.size())];
            s.replace(at, std::min<std::size_t>(1 + rng.below(8), s.size() - at), t);
            break;
        }
        case 2:
            s.erase(at, std::min<std::size_t>(1 + rng.below(64), s.size() - at));
            break;
        case 3: {
            const std::size_t n = std::min<std::size_t>(1 + rng.below(256), s.size() - at);
            const std::string piece = s.substr(at, n);
            for (std::size_t k = 0, times = 1 + rng.below(8); k < times; ++k)
                s.insert(at, piece);
            break;
        }
        case 4:
            s.resize(at);
            break;
        default:
            s.insert(at, kTokens[rng.below(kTokens.size())]);
            break;
        }
    }
    return s;
}

struct Outcome {
    int status = 0;
    bool timedOut = false;
    std::string out, err;
};

// Runs `gpumem info FILE` with the limits above; stdout and stderr go to files beside it.
Outcome runInfo(const fs::path& file)
{
    const fs::path outPath = file.string() + ".out", errPath = file.string() + ".err";
    pid_t child = ::fork();
    if (child == 0) {
        rlimit as { kMemoryLimit, kMemoryLimit };
        ::setrlimit(RLIMIT_AS, &as);
        rlimit core { 0, 0 };
        ::setrlimit(RLIMIT_CORE, &core);
        const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int in = ::open("/dev/null", O_RDONLY);
        if (out < 0 || err < 0 || in < 0)
            ::_exit(126);
        ::dup2(in, 0), ::dup2(out, 1), ::dup2(err, 2);
        ::execl(GPUMEM_CLI, GPUMEM_CLI, "info", file.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    Outcome o;
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        int status = 0;
        const pid_t done = ::waitpid(child, &status, WNOHANG);
        if (done == child) {
            o.status = status;
            break;
        }
        if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(kTimeoutMs)) {
            ::kill(child, SIGKILL);
            ::waitpid(child, &status, 0);
            o.timedOut = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    o.out = slurp(outPath);
    o.err = slurp(errPath);
    fs::remove(outPath);
    fs::remove(errPath);
    return o;
}

// What is wrong with one outcome; "" when nothing.
std::string judge(const Outcome& o)
{
    if (o.timedOut)
        return "timed out after " + std::to_string(kTimeoutMs) + " ms";
    if (WIFSIGNALED(o.status))
        return "killed by signal " + std::to_string(WTERMSIG(o.status));
    const int code = WEXITSTATUS(o.status);
    if (code != 0 && code != 1)
        return "exit status " + std::to_string(code);
    if (o.err.find("internal error") != std::string::npos)
        return "internal error: " + o.err.substr(0, 300);
    if (o.err.find("out of memory") != std::string::npos)
        return "out of memory (above " + std::to_string(kMemoryLimit >> 20) + " MiB)";
    for (const std::string* text : { &o.out, &o.err })
        for (std::size_t i = 0; i < text->size(); ++i) {
            const auto b = static_cast<unsigned char>((*text)[i]);
            if ((b < 0x20 && b != '\n') || b == 0x7f)
                return "raw control byte " + std::to_string(b) + " at " + std::to_string(i);
        }
    for (const char* raw : { "\xE2\x80\xAE", "\xC2\x85", "\xE2\x80\xA8" })
        if (o.out.find(raw) != std::string::npos || o.err.find(raw) != std::string::npos)
            return "a raw bidi or line-separator character";
    std::size_t lineStart = 0;
    for (std::size_t i = 0; i <= o.err.size(); ++i)
        if (i == o.err.size() || o.err[i] == '\n') {
            if (i - lineStart > kMaxMessageLine)
                return "a message line of " + std::to_string(i - lineStart) + " bytes: " + o.err.substr(lineStart, 200) + "…";
            lineStart = i + 1;
        }
    return "";
}

struct Seed {
    std::string format; // for the report
    std::string name; // file name of variants (its extension matters to no importer, but reads well)
    std::string content; // uncompressed
    bool gzip = false; // variants are compressed after mutation
};

std::vector<Seed> seeds(const fs::path& scratch)
{
    std::vector<Seed> out;
    auto add = [&](const std::string& format, const fs::path& path, bool gzip = false) {
        if (!fs::exists(path))
            return;
        std::string content = slurp(path);
        if (content.size() >= 2 && static_cast<unsigned char>(content[0]) == 0x1f
            && static_cast<unsigned char>(content[1]) == 0x8b)
            content = gpumem::test::inflatedPrefix(content), gzip = true;
        out.push_back({ format, path.filename().string(), std::move(content), gzip });
    };
    const fs::path src = GPUMEM_SOURCE_DIR, pub = GPUMEM_PUBLIC_TRACES;
    add("jsonl", src / "tests/data/tiny_alloc_free.jsonl");
    add("jsonl", src / "tests/data/two_devices_streams.jsonl");
    add("jsonl", src / "tests/data/hostile_names.jsonl");
    add("jsonl", src / "tests/data/ring_buffer_window.jsonl", true);
    // .gmt: written here from the micro traces, in whole and in 3-event chunks.
    for (const char* name : { "tiny_alloc_free", "two_devices_streams" }) {
        gpumem::Trace t = gpumem::readJsonl((src / "tests/data" / (std::string(name) + ".jsonl")).string());
        const fs::path gmt = scratch / (std::string(name) + ".gmt");
        gpumem::writeGmt(t, gmt.string(), 3);
        add("gmt", gmt);
    }
    { // nsys: the hand-written export built into a database here
        const fs::path db = scratch / "memory_and_kernels.sqlite";
        fs::remove(db);
        sqlite3* handle = nullptr;
        if (sqlite3_open(db.c_str(), &handle) == SQLITE_OK)
            sqlite3_exec(handle, slurp(src / "tests/data/nsys/memory_and_kernels.sql").c_str(), nullptr, nullptr, nullptr);
        sqlite3_close(handle);
        add("nsys", db);
    }
    add("kineto", src / "tests/data/kineto/prewarm_a.json");
    add("kineto", src / "tests/data/kineto/legacy_counters_only.json", true);
    add("kineto", src / "tests/data/kineto/gzip_cut_small.json");
    add("snapshot-json", src / "tests/data/snapshot/entry_shapes.json");
    add("snapshot-json", src / "tests/data/snapshot/entry_big_int.json", true);
    add("snapshot-pickle", src / "tests/data/snapshot/protocol_2.pickle");
    add("snapshot-pickle", src / "tests/data/snapshot/protocol_4.pickle");
    add("snapshot-pickle", src / "tests/data/snapshot/entry_shapes.pickle", true);
    add("rmm", src / "tests/data/rmm/rmm_log.dev1.csv");
    add("rmm", src / "tests/data/rmm/rmm_log.dev1.csv", true);
    // Public traces small enough to read hundreds of times (SOURCES.md): the memory timeline export and
    // the smallest Kineto trace (1 MB of JSON; fewer variants, below).
    add("memory-timeline", pub / "hta/memory_timeline.raw.gz");
    if (!out.empty() && out.back().format == "memory-timeline") { // its first ~40 KB of records, closed: 15× faster
        std::string& c = out.back().content;
        if (const std::size_t at = c.rfind(", [", 40000); at != std::string::npos && c.size() > 40000)
            c = c.substr(0, at) + "]";
    }
    add("kineto-public", pub / "tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    return out;
}
} // namespace

TEST(Mutation, MutatedInputsOfEveryFormatNeverCrashHangOrPrintRawControls)
{
    const std::uint64_t seedValue = envNumber("GPUMEM_MUTATION_SEED", 20261201);
    const std::uint64_t perFormat = envNumber("GPUMEM_MUTATION_VARIANTS", 300);
    const char* keep = std::getenv("GPUMEM_MUTATION_KEEP");
    const fs::path dir = scratchDir("mutation");
    const auto all = seeds(dir);
    std::map<std::string, std::size_t> seedsPerFormat;
    for (const auto& s : all)
        ++seedsPerFormat[s.format];
    const unsigned workers = 4;
    std::vector<std::string> failures;
    std::mutex mutex;
    std::map<std::string, std::size_t> runs;
    auto work = [&](unsigned worker) {
        Rng rng { seedValue * 0x9E3779B97F4A7C15ull + worker + 1 };
        std::size_t index = 0;
        for (const auto& s : all) {
            // The public Kineto trace costs ~20 times a micro trace per run: a tenth of the variants.
            std::size_t variants = (perFormat + seedsPerFormat[s.format] - 1) / seedsPerFormat[s.format];
            if (s.format == "kineto-public")
                variants = std::max<std::size_t>(variants / 10, 2);
            for (std::size_t v = 0; v < variants; ++v, ++index) {
                if (index % workers != worker)
                    continue;
                std::string bytes = mutate(s.content, rng);
                if (s.gzip)
                    bytes = gpumem::test::gzipOf(bytes);
                const fs::path file = dir / ("w" + std::to_string(worker) + "-" + std::to_string(index) + "-" + s.name);
                std::ofstream(file, std::ios::binary) << bytes;
                const std::string problem = judge(runInfo(file));
                std::lock_guard lock(mutex);
                ++runs[s.format];
                if (!problem.empty()) {
                    failures.push_back(s.format + " variant " + std::to_string(index) + " of " + s.name + " (seed "
                        + std::to_string(seedValue) + "): " + problem);
                    if (keep)
                        fs::copy_file(file, fs::path(keep) / file.filename(), fs::copy_options::overwrite_existing);
                }
                fs::remove(file);
            }
        }
    };
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < workers; ++w)
        threads.emplace_back(work, w);
    for (auto& t : threads)
        t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string summary;
    std::size_t total = 0;
    for (const auto& [format, n] : runs)
        summary += " " + format + " " + std::to_string(n) + ",", total += n;
    RecordProperty("variants", static_cast<int>(total));
    std::printf("mutation run: %zu variants in %.1f s (%s seed %llu)\n", total, seconds, summary.c_str(),
        static_cast<unsigned long long>(seedValue));
    EXPECT_GE(runs["jsonl"], perFormat);
    std::string joined;
    for (std::size_t i = 0; i < failures.size() && i < 30; ++i)
        joined += failures[i] + "\n";
    EXPECT_TRUE(failures.empty()) << failures.size() << " failing variants:\n" << joined;
}
