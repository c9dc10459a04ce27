#include "tracer/launcher.h"

#include "core/error.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <filesystem>
#include <iostream>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace gpumem::tracer {

namespace {
    bool isFile(const std::string& p)
    {
        struct stat st {};
        return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    }
    bool isDir(const std::string& p)
    {
        struct stat st {};
        return !p.empty() && ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    std::string exeDir()
    {
        char buf[4096];
        ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n <= 0)
            return {};
        std::string p(buf, static_cast<std::size_t>(n));
        auto slash = p.rfind('/');
        return slash == std::string::npos ? std::string() : p.substr(0, slash);
    }
    std::string absolute(const std::string& p)
    {
        if (!p.empty() && p[0] == '/')
            return p;
        char cwd[4096];
        if (::getcwd(cwd, sizeof cwd) == nullptr)
            return p;
        return p.empty() || p == "." ? std::string(cwd) : std::string(cwd) + "/" + p;
    }
    void makeDirs(const std::string& dir)
    {
        std::string path;
        std::size_t pos = 0;
        while (pos != std::string::npos) {
            pos = dir.find('/', pos + 1);
            path = dir.substr(0, pos);
            if (!path.empty() && ::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
                throw Error("gpumem record: cannot create the output folder " + path + ": " + std::strerror(errno));
        }
        if (!isDir(dir))
            throw Error("gpumem record: " + dir + " is not a folder; give -o an existing or new folder");
    }
    std::atomic<pid_t> g_child { 0 };
    constexpr int kForwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

    void forward(int sig, siginfo_t* info, void*)
    {
        // A terminal sends SIGINT/SIGQUIT/SIGHUP to the whole foreground group (si_code SI_KERNEL);
        // the child got it already. Forward only what was sent to gpumem alone.
        if (info != nullptr && info->si_code == SI_KERNEL)
            return;
        pid_t child = g_child.load();
        if (child > 0)
            ::kill(child, sig);
    }
} // namespace

std::string locateTracerLibrary()
{
    if (const char* env = std::getenv("GPUMEM_TRACER_LIBRARY"); env && *env)
        return isFile(env) ? absolute(env) : std::string();
    const std::string dir = exeDir();
    for (const std::string& candidate : { dir + "/libgpumem_tracer.so", dir + "/" GPUMEM_LIBDIR_FROM_BINDIR "/libgpumem_tracer.so",
             std::string(GPUMEM_TRACER_BUILD_PATH), std::string(GPUMEM_TRACER_INSTALL_PATH) })
        if (isFile(candidate))
            return std::filesystem::path(candidate).lexically_normal().string(); // bin/../lib → lib
    return {};
}

std::string locatePythonHelperDir()
{
    if (const char* env = std::getenv("GPUMEM_PYTHON_HELPER_DIR"); env && *env)
        return isFile(std::string(env) + "/sitecustomize.py") ? absolute(env) : std::string();
    const std::string dir = exeDir();
    for (const std::string& candidate : { dir + "/" GPUMEM_PYTHON_HELPER_FROM_BINDIR, std::string(GPUMEM_PYTHON_HELPER_SOURCE_DIR) })
        if (isFile(candidate + "/sitecustomize.py"))
            return std::filesystem::path(candidate).lexically_normal().string();
    return {};
}

TraceFileState traceFiles(const std::string& dir)
{
    TraceFileState files;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr)
        return files;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name.size() < 5 || name.compare(name.size() - 4, 4, ".gmt") != 0)
            continue;
        std::string path = dir + "/" + name;
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        const long long mtime = static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec;
        files[path] = { mtime, static_cast<long long>(st.st_size) };
    }
    ::closedir(d);
    return files;
}

std::vector<std::string> changedTraceFiles(const TraceFileState& before, const TraceFileState& after)
{
    std::vector<std::string> changed;
    for (const auto& [path, state] : after) {
        auto it = before.find(path);
        if (it == before.end() || it->second != state)
            changed.push_back(path);
    }
    return changed; // std::map keeps them sorted
}

int runRecorded(const RecordOptions& options)
{
    if (options.command.empty())
        throw UsageError("gpumem record: no command given; usage: gpumem record [-o DIR] [--annotate-modules] -- CMD ARGS...");
    std::ostream& diag = options.diagnostics ? *options.diagnostics : std::cerr;
    const std::string library = options.tracerLibrary.empty() ? locateTracerLibrary() : absolute(options.tracerLibrary);
    if (!isFile(library))
        throw Error("gpumem record: cannot find libgpumem_tracer.so" + (library.empty() ? std::string() : " at " + library)
            + "; build it (GPUMEM_BUILD_TRACER=ON) or set GPUMEM_TRACER_LIBRARY to its path");
    const std::string outDir = absolute(options.outputDir.empty() ? std::string(".") : options.outputDir);
    makeDirs(outDir);

    std::vector<std::string> env;
    auto skip = [&](std::string_view entry) {
        for (std::string_view name : { "CUDA_INJECTION64_PATH=", "NVTX_INJECTION64_PATH=", "GPUMEM_TRACE_DIR=" })
            if (entry.starts_with(name))
                return true;
        return options.annotateModules && (entry.starts_with("PYTHONPATH=") || entry.starts_with("GPUMEM_ANNOTATE_MODULES="));
    };
    for (char** e = environ; e && *e; ++e) {
        std::string_view entry(*e);
        if (entry.starts_with("CUDA_INJECTION64_PATH=") && entry.substr(22) != library)
            diag << "gpumem record: replacing CUDA_INJECTION64_PATH=" << entry.substr(22) << " (only one CUDA injection can be active)\n";
        if (!skip(entry))
            env.emplace_back(entry);
    }
    env.push_back("CUDA_INJECTION64_PATH=" + library);
    env.push_back("NVTX_INJECTION64_PATH=" + library);
    env.push_back("GPUMEM_TRACE_DIR=" + outDir);
    if (options.annotateModules) {
        const std::string helper = options.pythonHelperDir.empty() ? locatePythonHelperDir() : absolute(options.pythonHelperDir);
        if (helper.empty())
            throw Error("gpumem record: --annotate-modules needs the Python helper (sitecustomize.py); set GPUMEM_PYTHON_HELPER_DIR to tracer/python");
        const char* old = std::getenv("PYTHONPATH");
        env.push_back("PYTHONPATH=" + helper + (old && *old ? ":" + std::string(old) : std::string()));
        env.push_back("GPUMEM_ANNOTATE_MODULES=1");
    }
    std::vector<char*> envp;
    for (auto& s : env)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = options.command;
    std::vector<char*> argv;
    for (auto& s : args)
        argv.push_back(s.data());
    argv.push_back(nullptr);

    const TraceFileState before = traceFiles(outDir);
    // Handlers go in before the spawn so no signal slips between the two; they only forward.
    struct sigaction old[std::size(kForwarded)] {};
    for (std::size_t i = 0; i < std::size(kForwarded); ++i) {
        struct sigaction act {};
        act.sa_sigaction = forward;
        act.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&act.sa_mask);
        ::sigaction(kForwarded[i], &act, &old[i]);
    }
    auto restore = [&] {
        for (std::size_t i = 0; i < std::size(kForwarded); ++i)
            ::sigaction(kForwarded[i], &old[i], nullptr);
        g_child.store(0);
    };
    // The child must start with default dispositions for the forwarded signals.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : kForwarded)
        sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t child = 0;
    const int rc = ::posix_spawnp(&child, argv[0], nullptr, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        restore();
        diag << "gpumem record: cannot run " << options.command[0] << ": " << std::strerror(rc) << "\n";
        return 127;
    }
    g_child.store(child);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    restore();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;

    const TraceFileState after = traceFiles(outDir);
    const auto files = changedTraceFiles(before, after);
    if (files.empty()) {
        diag << "gpumem record: no trace file was written to " << outDir
             << " (the program did not initialise CUDA or NVTX, or the tracer switched itself off)\n";
    } else if (options.listing) {
        for (const auto& f : files)
            *options.listing << f << "\t" << after.at(f).second << " bytes\n";
    }
    return code;
}

} // namespace gpumem::tracer
