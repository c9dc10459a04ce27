#pragma once
// Where a verb writes its output file (`-o OUT`) so that a failure, an interrupt or a planted link never
// leaves a partial file and nothing but the named file changes (docs/cli-options.md, "Output files"):
// - a regular file (or a new one) is written to a fresh temporary file beside it, created with
//   O_CREAT|O_EXCL|O_NOFOLLOW under a random name `OUT.gpumem-tmp-<pid>-<6 random characters>` (mode 0600
//   while written), given OUT's mode (and owner where the OS allows), fsync'ed and renamed over OUT;
// - an OUT that is a symbolic link is refused (a link planted in a shared folder must not redirect
//   the write to the file it points to), unless it names a FIFO or device (/dev/stdout to a pipe or a
//   terminal, /dev/null): those are written directly, as is a FIFO or device, and a path under /dev/ that
//   does not exist;
// - an OUT that names one of the process's own descriptors open on a regular file (/dev/stdout, /dev/stderr,
//   /dev/fd/N, /proc/self/fd/N: standard output redirected to a file) is written to a temporary file in the
//   temporary folder and copied through that descriptor at commit, at its offset: opening the path again
//   would truncate the file and write from its start, over what the descriptor wrote;
// - temporary files of this pattern for the same OUT that an earlier gpumem left behind (SIGKILL, power
//   loss) are removed first when they are regular files owned by this user whose writer's pid no longer
//   runs, or that nobody touched for kStaleTempSeconds.
// While a temporary file exists, SIGINT/SIGTERM/SIGHUP remove it before the process dies. One OutputFile
// at a time. Every verb that writes a file goes through it, so the checks below apply to all of them alike.
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::cli {

// Age (seconds since last modification) after which a temporary file of a still-running pid counts as
// stale too: the pid may have been reused by an unrelated process.
inline constexpr long kStaleTempSeconds = 24 * 60 * 60;

// Whether `name` (a file name, no folder) is a temporary file name OutputFile uses for the output file
// named `outName`: `outName.gpumem-tmp-<decimal pid>-<6 characters of [A-Za-z0-9]>`; sets `pid`. (OutputFile
// shortens `outName` there to keep the temporary's name within NAME_MAX, 255 bytes.)
bool isOutputTempName(std::string_view name, std::string_view outName, long& pid);

// Where the 6 random characters of a temporary file name come from: getrandom() by default. Tests
// replace it to plant a link at every name OutputFile will try (it tries 100 names, then throws IoError).
using TempSuffixSource = std::string (*)();
void setTempSuffixSource(TempSuffixSource source); // nullptr restores the default

class OutputFile {
public:
    // Checks the destination before any work and creates the temporary file: throws UsageError for an
    // empty path, "-", a directory, or a path that is one of `inputs` (the same file by device and inode,
    // also through links: writing it would destroy the input); IoError when OUT is a symbolic link to a
    // regular file or to nothing (naming the link), when the folder does not exist or is not writable, or
    // when the file exists and is write-protected (the user may not write it, or it has no write
    // permission bit at all, as after `chmod 444` — refused even for root, like rm's "write-protected"
    // check). A writable existing file is replaced.
    explicit OutputFile(const std::string& path, const std::vector<std::string>& inputs = {});
    ~OutputFile(); // removes the temporary file unless committed; never throws
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    // The path to write to now (the temporary file, or OUT itself when written directly).
    const std::string& writePath() const { return m_writePath; }
    // Whether OUT is this process's standard output (-o /dev/stdout, to a pipe or a file): a verb then says
    // "wrote OUT" on stderr, not into its output.
    bool writesStandardOutput() const { return m_standardOutput; }
    // Where a verb says "wrote …": `err` when the output is standard output (not into what was written), else `out`.
    std::ostream& noticeStream(std::ostream& out, std::ostream& err) const { return m_standardOutput ? err : out; }
    // Moves the finished file into place: checks the temporary name still holds the file created (else
    // IoError, nothing renamed), sets OUT's mode and owner on it, fsyncs it, renames it over OUT and
    // fsyncs the folder; for one of the process's descriptors, flushes std::cout (std::cerr for 2), copies
    // the file through the descriptor and removes it. Throws IoError.
    void commit();

private:
    // Creates the temporary file `beside`.gpumem-tmp-<pid>-<6 characters> (after removing stale ones of the
    // same pattern) and arms the signal handlers. Throws IoError.
    void createTemporary(const std::string& beside);
    std::string m_target;
    std::string m_writePath;
    int m_fd = -1; // the temporary file as created (identity check, fchmod, fsync)
    unsigned m_mode = 0; // the mode OUT gets
    long m_uid = -1, m_gid = -1; // OUT's owner to keep, -1 when new
    bool m_direct = false;
    int m_throughFd = -1; // the process's descriptor OUT names, written through at commit; -1 otherwise
    bool m_standardOutput = false;
    bool m_committed = false;
};

} // namespace gpumem::cli
