#pragma once
// Where a verb writes its output file (`-o OUT`) so that a failure or an interrupt never leaves a
// partial file and nothing but the named file changes: a regular file (or a new one) is written to a
// temporary file beside it and renamed over it on commit(); a symlink is followed and its target
// replaced the same way; a FIFO or device (e.g. /dev/stdout) is written directly. While a temporary
// file exists, SIGINT/SIGTERM/SIGHUP remove it before the process dies. One OutputFile at a time.
// Every verb that writes a file goes through it, so the checks below apply to all of them alike.
#include <string>
#include <vector>

namespace gpumem::cli {

class OutputFile {
public:
    // Checks the destination before any work: throws UsageError for an empty path, "-", a directory, or a
    // path that is one of `inputs` (the same file by device and inode, also through links: writing it
    // would destroy the input); IoError when the folder does not exist or when the file exists and is
    // write-protected (the user may not write it, or it has no write permission bit at all, as after
    // `chmod 444` — refused even for root, like rm's "write-protected" check). A writable existing
    // file is replaced.
    explicit OutputFile(const std::string& path, const std::vector<std::string>& inputs = {});
    ~OutputFile(); // removes the temporary file unless committed; never throws
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    // The path to write to now.
    const std::string& writePath() const { return m_writePath; }
    // Moves the finished file into place. Throws IoError.
    void commit();

private:
    std::string m_target;
    std::string m_writePath;
    bool m_direct = false;
    bool m_committed = false;
};

} // namespace gpumem::cli
