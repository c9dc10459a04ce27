#include "cli/output_file.h"

#include "core/error.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumem::cli {

namespace {
    // The temporary file to remove if a signal ends the process (async-signal-safe access only).
    char g_tempPath[4096];
    std::atomic<bool> g_tempActive { false };

    extern "C" void removeTempAndDie(int sig)
    {
        if (g_tempActive.load())
            ::unlink(g_tempPath);
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }

    void armSignals(const std::string& temp)
    {
        std::snprintf(g_tempPath, sizeof g_tempPath, "%s", temp.c_str());
        g_tempActive = true;
        for (int sig : { SIGINT, SIGTERM, SIGHUP })
            std::signal(sig, removeTempAndDie);
    }

    void disarmSignals()
    {
        g_tempActive = false;
        for (int sig : { SIGINT, SIGTERM, SIGHUP })
            std::signal(sig, SIG_DFL);
    }
} // namespace

OutputFile::OutputFile(const std::string& path, const std::vector<std::string>& inputs)
{
    namespace fs = std::filesystem;
    if (path.empty())
        throw UsageError("the output file name is empty; give -o FILE");
    if (path == "-")
        throw UsageError("-o - (standard output) is not supported; give -o FILE");
    m_target = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) { // follows symlinks
        if (S_ISDIR(st.st_mode))
            throw UsageError("the output '" + path + "' is a directory; give a file name");
        for (const auto& input : inputs) {
            struct stat in {};
            if (::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
                throw UsageError("the output '" + path + "' is the input; choose another output file");
        }
        if (S_ISREG(st.st_mode) && (::access(path.c_str(), W_OK) != 0 || (st.st_mode & 0222) == 0))
            throw IoError(path + ": the output file exists and is write-protected; not replacing it "
                                 "(make it writable or choose another output file)");
        if (!S_ISREG(st.st_mode)) { // a FIFO or a device: write straight into it
            m_direct = true;
            m_writePath = path;
            return;
        }
        std::error_code ec;
        if (fs::is_symlink(path, ec))
            m_target = fs::canonical(path, ec).string(); // replace the link's target, keep the link
        if (ec)
            m_target = path;
    }
    fs::path parent = fs::path(m_target).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec))
        throw IoError(path + ": cannot write: the folder " + parent.string() + " does not exist");
    m_writePath = m_target + ".tmp-" + std::to_string(::getpid());
    armSignals(m_writePath);
}

OutputFile::~OutputFile()
{
    if (!m_direct && !m_committed) {
        std::remove(m_writePath.c_str());
        disarmSignals();
    }
}

void OutputFile::commit()
{
    if (m_direct || m_committed)
        return;
    if (std::rename(m_writePath.c_str(), m_target.c_str()) != 0) {
        int err = errno;
        std::remove(m_writePath.c_str());
        disarmSignals();
        m_committed = true;
        throw IoError(m_target + ": cannot write (moving the finished file into place failed: " + std::strerror(err) + ")");
    }
    m_committed = true;
    disarmSignals();
}

} // namespace gpumem::cli
