#include "cli/output_file.h"

#include "core/error.h"
#include "core/file_io.h"
#include "core/message_quote.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <iostream>
#include <random>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

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

    // Before a read error ends the process from a signal handler (a mapped input cut while read: MappedFile).
    extern "C" void removeTemp()
    {
        if (g_tempActive.load())
            ::unlink(g_tempPath);
    }

    // Every signal whose default action ends the process and that a user or the system may send while an output
    // is written: a closed pipe on stderr (SIGPIPE), a timer, a CPU or file-size limit (`ulimit -f`: SIGXFSZ).
    // Before, only INT, TERM and HUP removed the temporary (review finding). A signal the process was started
    // ignoring (`nohup`: HUP; a shell's SIGPIPE) stays ignored, and each keeps its earlier action afterwards.
    constexpr int kEndingSignals[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ,
        SIGVTALRM, SIGPROF };
    struct sigaction g_previous[std::size(kEndingSignals)];
    bool g_armed[std::size(kEndingSignals)] = {};

    void armSignals(const std::string& temp)
    {
        std::snprintf(g_tempPath, sizeof g_tempPath, "%s", temp.c_str());
        g_tempActive = true;
        for (std::size_t i = 0; i < std::size(kEndingSignals); ++i) {
            if (g_armed[i] || ::sigaction(kEndingSignals[i], nullptr, &g_previous[i]) != 0
                || g_previous[i].sa_handler != SIG_DFL || (g_previous[i].sa_flags & SA_SIGINFO))
                continue;
            struct sigaction act {};
            act.sa_handler = removeTempAndDie;
            ::sigemptyset(&act.sa_mask);
            g_armed[i] = ::sigaction(kEndingSignals[i], &act, nullptr) == 0;
        }
        setBeforeFatalReadError(removeTemp);
    }

    void disarmSignals()
    {
        g_tempActive = false;
        for (std::size_t i = 0; i < std::size(kEndingSignals); ++i)
            if (g_armed[i]) {
                ::sigaction(kEndingSignals[i], &g_previous[i], nullptr);
                g_armed[i] = false;
            }
        setBeforeFatalReadError(nullptr);
    }

    constexpr std::string_view kTempInfix = ".gpumem-tmp-";
    constexpr std::size_t kRandomChars = 6;

    bool isAlnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

    std::string randomSuffix()
    {
        static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        unsigned char bytes[kRandomChars];
        if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
            std::random_device rd;
            for (auto& b : bytes)
                b = static_cast<unsigned char>(rd());
        }
        std::string s;
        for (unsigned char b : bytes)
            s += kChars[b % (sizeof kChars - 1)];
        return s;
    }

    // Removes the temporary files an earlier gpumem left for `outName` in the folder `dirFd` (the rule
    // in output_file.h). Never follows a link: lstat-like fstatat, and unlinkat removes a name, never
    // what a link points to, so a name swapped for a link between the check and the removal costs only
    // that link.
    void removeStaleTemps(int dirFd, const std::string& outName)
    {
        int scanFd = ::openat(dirFd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (scanFd < 0)
            return;
        DIR* dir = ::fdopendir(scanFd);
        if (!dir) {
            ::close(scanFd);
            return;
        }
        const std::time_t now = std::time(nullptr);
        while (const dirent* e = ::readdir(dir)) {
            long pid = 0;
            if (!isOutputTempName(e->d_name, outName, pid) || pid == ::getpid())
                continue;
            struct stat st {};
            if (::fstatat(dirFd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)
                || st.st_uid != ::geteuid())
                continue;
            const bool dead = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
            const bool old = now - st.st_mtime > kStaleTempSeconds;
            if (dead || old)
                ::unlinkat(dirFd, e->d_name, 0);
        }
        ::closedir(dir);
    }

    TempSuffixSource g_suffixSource = nullptr;

    bool isDevicePath(const std::string& path) { return path.rfind("/dev/", 0) == 0; }

    // The descriptor number `path` names (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/<this
    // pid>/fd/N); else -1. Whether it is open on the file is isOpenOn's question.
    int descriptorNamedBy(const std::string& path)
    {
        if (path == "/dev/stdout")
            return 1;
        if (path == "/dev/stderr")
            return 2;
        for (const std::string& prefix : { std::string("/dev/fd/"), std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"),
                 "/proc/" + std::to_string(::getpid()) + "/fd/" })
            if (path.size() > prefix.size() && path.size() <= prefix.size() + 6 && path.rfind(prefix, 0) == 0
                && path.find_first_not_of("0123456789", prefix.size()) == std::string::npos)
                return std::stoi(path.substr(prefix.size()));
        return -1;
    }

    // Whether this process's descriptor `fd` is open on the file `st` describes.
    bool isOpenOn(int fd, const struct stat& st)
    {
        struct stat open {};
        return ::fstat(fd, &open) == 0 && open.st_dev == st.st_dev && open.st_ino == st.st_ino;
    }
} // namespace

void setTempSuffixSource(TempSuffixSource source) { g_suffixSource = source; }

bool isOutputTempName(std::string_view name, std::string_view outName, long& pid)
{
    if (name.size() <= outName.size() + kTempInfix.size() || name.substr(0, outName.size()) != outName
        || name.substr(outName.size(), kTempInfix.size()) != kTempInfix)
        return false;
    std::string_view rest = name.substr(outName.size() + kTempInfix.size());
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash > 10 || rest.size() != dash + 1 + kRandomChars)
        return false;
    long value = 0;
    for (char c : rest.substr(0, dash)) {
        if (c < '0' || c > '9')
            return false;
        value = value * 10 + (c - '0');
    }
    for (char c : rest.substr(dash + 1))
        if (!isAlnum(c))
            return false;
    pid = value;
    return true;
}

OutputFile::OutputFile(const std::string& path, const std::vector<std::string>& inputs)
{
    namespace fs = std::filesystem;
    if (path.empty())
        throw UsageError("the output file name is empty; give -o FILE");
    if (path == "-")
        throw UsageError("-o - (standard output) is not supported; give -o FILE");
    m_target = path;
    const std::string shown = textForTerminal(path);
    struct stat linkStat {};
    const bool exists = ::lstat(path.c_str(), &linkStat) == 0;
    struct stat st {};
    const bool resolves = ::stat(path.c_str(), &st) == 0; // follows symlinks
    if (resolves) {
        if (S_ISDIR(st.st_mode))
            throw UsageError("the output '" + path + "' is a directory; give a file name");
        for (const auto& input : inputs) {
            struct stat in {};
            if (::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
                throw UsageError("the output '" + path + "' is the input; choose another output file");
        }
        m_standardOutput = isOpenOn(1, st);
    }
    if (resolves && S_ISREG(st.st_mode))
        // A descriptor of this process open on that file (standard output's was looked at above).
        if (const int fd = descriptorNamedBy(path); fd >= 0 && (fd == 1 ? m_standardOutput : isOpenOn(fd, st))) {
            // Review finding (2026-12-02): `-o /dev/stdout` with standard output redirected to a file opened the
            // file again, at offset 0 and truncated, so the output overwrote what was written before it and
            // the "wrote" line overwrote its start. It is written to a temporary file and copied through the
            // descriptor at commit, at the descriptor's offset.
            const int mode = ::fcntl(fd, F_GETFL);
            if (mode < 0 || (mode & O_ACCMODE) == O_RDONLY)
                throw IoError(shown + ": descriptor " + std::to_string(fd) + " is not open for writing; give a file name");
            m_throughFd = fd;
            createTemporary((fs::path(temporaryFolder()) / ("gpumem-fd" + std::to_string(fd))).string());
            return;
        }
    if ((resolves && !S_ISREG(st.st_mode)) || (isDevicePath(path) && !resolves)) { // a FIFO or a device: write straight into it
        m_direct = true;
        m_writePath = path;
        return;
    }
    if (exists && S_ISLNK(linkStat.st_mode)) {
        std::error_code ec;
        const std::string to = fs::read_symlink(path, ec).string();
        throw IoError(shown + ": the output is a symbolic link (to " + textForTerminal(to)
            + "); gpumem does not write through links (a link planted in a shared folder could redirect the "
              "write): remove the link or give the file's own path");
    }
    if (resolves) {
        if (::access(path.c_str(), W_OK) != 0 || (st.st_mode & 0222) == 0)
            throw IoError(path + ": the output file exists and is write-protected; not replacing it "
                                 "(make it writable or choose another output file)");
        m_mode = st.st_mode & 07777;
        m_uid = static_cast<long>(st.st_uid);
        m_gid = static_cast<long>(st.st_gid);
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        m_mode = 0666 & ~mask;
    }
    fs::path parent = fs::path(m_target).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec))
        throw IoError(path + ": cannot write: the folder " + parent.string() + " does not exist");
    createTemporary(m_target);
}

void OutputFile::createTemporary(const std::string& beside)
{
    namespace fs = std::filesystem;
    const fs::path parent = fs::path(beside).parent_path();
    const std::string folder = parent.empty() ? std::string(".") : parent.string();
    // The temporary's name is the output's, shortened where the infix, a pid of up to 10 digits and the random
    // characters would take it past NAME_MAX (a 245-byte output name failed with "File name too long"; review
    // finding); cut at a UTF-8 character boundary.
    std::string base = fs::path(beside).filename().string();
    constexpr std::size_t kNameMax = 255, kAdded = kTempInfix.size() + 10 + 1 + kRandomChars;
    if (base.size() + kAdded > kNameMax) {
        std::size_t keep = kNameMax - kAdded;
        while (keep > 0 && (static_cast<unsigned char>(base[keep]) & 0xC0) == 0x80)
            --keep;
        base.resize(keep);
    }
    int dirFd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirFd >= 0) {
        removeStaleTemps(dirFd, base);
        ::close(dirFd);
    }
    const std::string prefix = (parent.empty() ? fs::path(base) : parent / base).string() + std::string(kTempInfix)
        + std::to_string(::getpid()) + "-";
    for (int attempt = 0; attempt < 100 && m_fd < 0; ++attempt) {
        std::string candidate = prefix + (g_suffixSource ? g_suffixSource() : randomSuffix());
        m_fd = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (m_fd >= 0)
            m_writePath = std::move(candidate);
        else if (errno != EEXIST)
            break;
    }
    if (m_fd < 0)
        throw IoError(textForTerminal(m_target) + ": cannot create a temporary file in " + textForTerminal(folder) + ": "
            + std::strerror(errno) + " (check that the folder is writable)");
    armSignals(m_writePath);
}

OutputFile::~OutputFile()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (!m_direct && !m_committed && !m_writePath.empty()) {
        ::unlink(m_writePath.c_str());
        disarmSignals();
    }
}

void OutputFile::commit()
{
    if (m_direct || m_committed)
        return;
    auto removeTemporary = [&] { // nothing is renamed
        ::unlink(m_writePath.c_str());
        disarmSignals();
        m_committed = true;
    };
    auto fail = [&](const std::string& why) {
        removeTemporary();
        throw IoError(m_target + ": cannot write (" + why + ")");
    };
    // The writer opened the temporary file by name: it must still be the file created above (a name
    // swapped for a link in between would have redirected the write, and must not be renamed into place).
    struct stat mine {}, named {};
    if (::fstat(m_fd, &mine) != 0 || ::lstat(m_writePath.c_str(), &named) != 0 || mine.st_dev != named.st_dev
        || mine.st_ino != named.st_ino)
        fail("the temporary file " + m_writePath + " was replaced while gpumem wrote it; nothing was renamed");
    if (m_throughFd >= 0) {
        // What the verb printed to the same descriptor before comes first.
        (m_throughFd == 1 ? std::cout : std::cerr).flush();
        try {
            copyDescriptor(m_fd, static_cast<std::uint64_t>(mine.st_size), m_throughFd, m_writePath,
                m_target + " (descriptor " + std::to_string(m_throughFd) + ")");
        } catch (const IoError&) {
            removeTemporary();
            throw;
        }
        removeTemporary(); // copied: it has done its work
        return;
    }
    if (m_uid >= 0 && (static_cast<long>(mine.st_uid) != m_uid || static_cast<long>(mine.st_gid) != m_gid)) {
        // Root keeps the owner; another user keeps the group where it is one of theirs. Best effort.
        if (::fchown(m_fd, static_cast<uid_t>(m_uid), static_cast<gid_t>(m_gid)) != 0)
            (void)!::fchown(m_fd, static_cast<uid_t>(-1), static_cast<gid_t>(m_gid));
    }
    if (::fchmod(m_fd, static_cast<mode_t>(m_mode)) != 0)
        fail(std::string("setting the mode failed: ") + std::strerror(errno));
    if (::fsync(m_fd) != 0)
        fail(std::string("flushing to disk failed: ") + std::strerror(errno));
    if (std::rename(m_writePath.c_str(), m_target.c_str()) != 0)
        fail(std::string("moving the finished file into place failed: ") + std::strerror(errno));
    m_committed = true;
    disarmSignals();
    const std::string folder = std::filesystem::path(m_target).parent_path().string();
    int dirFd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirFd >= 0) { // the rename itself survives a power loss; best effort
        (void)::fsync(dirFd);
        ::close(dirFd);
    }
}

} // namespace gpumem::cli
