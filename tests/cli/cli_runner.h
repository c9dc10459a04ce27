#pragma once
// Runs the gpumem binary from the source directory (so paths in outputs are relative and stable)
// and captures its exit code, stdout and stderr.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace gpumem::test {

struct CliResult {
    int exitCode = -1;
    std::string out;
    std::string err; // stderr with each error's wrapped lines joined again (joinWrappedErrors)
    std::string errRaw; // stderr as printed: every line within 100 columns
};

inline std::string slurp(const std::filesystem::path& p)
{
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// `s` with every `from` replaced by `to`, left to right (joining wrapped lines, escaping for HTML).
inline std::string replaceAll(std::string s, const std::string& from, const std::string& to)
{
    for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
        s.replace(at, from.size(), to);
    return s;
}

// `err` with the continuation lines ("  " + words) of each error and usage message joined to the line before
// with one blank, as the message was before cli/main.cpp's fitMessage wrapped it at 100 columns: the tests
// match the message's words, CliWidth tests the wrapping on `errRaw`. Notes and warnings, wrapped by their
// verbs, stay as printed.
inline std::string joinWrappedErrors(const std::string& err)
{
    std::string out;
    bool joining = false; // the line before belongs to an error or usage message
    std::istringstream lines(err);
    for (std::string line; std::getline(lines, line);) {
        if (joining && line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ') {
            out.back() = ' ';
            out += line.substr(2) + '\n';
            continue;
        }
        joining = line.compare(0, 7, "gpumem ") == 0 && line.find(": note: ") == std::string::npos
            && line.find(": warning: ") == std::string::npos;
        out += line + '\n';
    }
    if (!err.empty() && err.back() != '\n' && !out.empty())
        out.pop_back();
    return out;
}

inline CliResult runCli(const std::string& args)
{
    static int counter = 0;
    auto dir = std::filesystem::temp_directory_path() / ("gpumem-cli-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto outFile = dir / ("out" + std::to_string(counter) + ".txt");
    auto errFile = dir / ("err" + std::to_string(counter++) + ".txt");
    std::string cmd = "cd '" GPUMEM_SOURCE_DIR "' && '" GPUMEM_CLI "' " + args + " >'" + outFile.string() + "' 2>'"
        + errFile.string() + "' </dev/null";
    int status = std::system(cmd.c_str());
    CliResult r;
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(outFile);
    r.errRaw = slurp(errFile);
    r.err = joinWrappedErrors(r.errRaw);
    std::filesystem::remove(outFile);
    std::filesystem::remove(errFile);
    return r;
}

// runCli(args) with the environment variable `name` set to `value` for that run alone (unset after it): the
// switches the tests compare two ways of answering with (GPUMEM_REPLAY_IN_MEMORY, GPUMEM_ANALYZE_IN_MEMORY_EVENTS).
inline CliResult runCliWith(const char* name, const char* value, const std::string& args)
{
    ::setenv(name, value, 1);
    CliResult r = runCli(args);
    ::unsetenv(name);
    return r;
}

// f(path) for every bundled trace (tests/data and traces/, recursive: every format gpumem reads) that
// `gpumem convert` writes to `gmt`, once it is there.
template <typename F> void forEachBundledTraceAsGmt(const std::string& gmt, F&& f)
{
    for (const char* folder : { GPUMEM_SOURCE_DIR "/tests/data", GPUMEM_SOURCE_DIR "/traces" })
        for (const auto& e : std::filesystem::recursive_directory_iterator(folder)) {
            if (!e.is_regular_file() || e.path().extension() == ".md" || e.path().extension() == ".py")
                continue;
            const std::string trace = e.path().string();
            if (runCli("convert '" + trace + "' -o '" + gmt + "'").exitCode == 0)
                f(trace);
        }
}

inline std::filesystem::path scratchDir(const std::string& name)
{
    auto dir = std::filesystem::temp_directory_path() / ("gpumem-test-" + std::to_string(::getpid())) / name;
    std::filesystem::create_directories(dir);
    return dir;
}

// Removes this process's scratch folders when the test program ends.
struct ScratchCleanup {
    ~ScratchCleanup()
    {
        std::error_code ec;
        auto tmp = std::filesystem::temp_directory_path(ec);
        std::filesystem::remove_all(tmp / ("gpumem-test-" + std::to_string(::getpid())), ec);
        std::filesystem::remove_all(tmp / ("gpumem-cli-test-" + std::to_string(::getpid())), ec);
    }
};
inline ScratchCleanup g_scratchCleanup;

} // namespace gpumem::test
