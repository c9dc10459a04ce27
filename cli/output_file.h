#pragma once
// Where a verb writes its output file (`-o OUT`) so that a failure or an interrupt never leaves a
// partial file and nothing but the named file changes: a regular file (or a new one) is written to a
// temporary file beside it and renamed over it on commit(); a symlink is followed and its target
// replaced the same way; a FIFO or device (e.g. /dev/stdout) is written directly. While a temporary
// file exists, SIGINT/SIGTERM/SIGHUP remove it before the process dies. One OutputFile at a time.
#include <string>

namespace gpumem::cli {

class OutputFile {
public:
    // Throws UsageError for an empty path or "-", IoError when the folder does not exist.
    explicit OutputFile(const std::string& path);
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
