#pragma once
// File access shared by the readers and importers: whole-file reads with transparent gzip, and a
// read-only memory map. Every failure is an IoError (OS refused) or FormatError (bad gzip stream)
// whose message names the path.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace gpumem {

// The most bytes any compressed input may decompress to: GPUMEM_MAX_INPUT_MIB MiB when set, else half of
// the machine's memory. A cap above inflateLimit()'s ratio rule.
std::size_t maxDecompressedBytes();

// How many times its compressed size a gzip input may inflate to: the public traces of every format
// inflate 9–30× (../traces/public, measured), a whitespace or zero bomb about 1,000×. GPUMEM_INFLATE_RATIO
// overrides it (a whole number ≥ 1).
inline constexpr std::size_t kDefaultInflateRatio = 200;
std::size_t inflateRatio();

// The most bytes a gzip input of `compressedBytes` may decompress to (docs/cli-options.md, "Input size"):
// min(inflateRatio() × compressedBytes + 16 MiB, maxDecompressedBytes()). The 16 MiB keep a small file
// of any ratio readable. Past it every reader stops inflating at once and throws FormatError with
// inflateLimitMessage(): a 913 KB whitespace bomb stops after about 200 MB instead of 1.8 GB.
std::size_t inflateLimit(std::size_t compressedBytes);

// "decompresses to more than N MiB, the limit for a gzip input of C bytes (R× …); … set …": the words
// of the FormatError past inflateLimit(), naming the limit that applied and the variable that raises it.
std::string inflateLimitMessage(std::size_t compressedBytes);

// True if `bytes` start with the gzip magic 1f 8b.
bool isGzip(std::string_view bytes);

// Spare capacity (bytes) that readFileMaybeGzip() and gunzip() leave after the content, so a SIMD JSON
// parser (simdjson needs SIMDJSON_PADDING = 64) can read the buffer in place without a copy.
inline constexpr std::size_t kReadPadding = 64;

// The whole file; if it is gzip (by magic, not extension), its decompressed content. Concatenated
// gzip members are all decompressed. The result has at least kReadPadding bytes of spare capacity.
// Single-member gzip goes through libdeflate when built with it (whole-buffer, ~3× zlib), else zlib.
// Throws IoError / FormatError naming the path and offset; FormatError past inflateLimit().
std::string readFileMaybeGzip(const std::string& path);

// A whole file as stored, read straight into one heap buffer (no zero fill and no copy through an
// intermediate buffer, unlike readFileMaybeGzip()'s std::string; at least kReadPadding spare bytes
// follow the content), or, for a regular file larger than `mapAbove` bytes, mapped read-only (no
// copy; no padding). Shared, so a document that views the bytes can keep them alive.
struct FileBuffer {
    std::shared_ptr<const char> data;
    std::size_t size = 0;
    std::string_view bytes() const { return { data.get(), size }; }
};
// Throws IoError naming the path (cannot open, is a directory, read error, cannot map).
FileBuffer readFileBuffer(const std::string& path, std::size_t mapAbove = static_cast<std::size_t>(-1));

// How a gzip stream read by the GzipEnd overloads of readFileMaybeGzip() and gunzip() ended.
struct GzipEnd {
    // True when the compressed bytes stop before the stream's end (inside the deflate data or its
    // 8-byte trailer, RFC 1952 §2.3): the content returned is everything they inflate to, a prefix of
    // the file's real content, whose CRC-32 could not be checked.
    bool endsEarly = false;
    std::size_t compressedBytes = 0; // the compressed bytes read (with endsEarly: where the stream is cut)
};

// As readFileMaybeGzip(path), but a gzip stream that ENDS EARLY (a file cut short, e.g. a profiler killed
// while writing it) yields what it inflates to and sets `end.endsEarly` instead of throwing. A corrupt
// stream still throws FormatError naming the compressed offset: a bad or cut header (nothing to recover
// from), invalid deflate data, a CRC-32 or size mismatch on a complete stream, or more than
// maxDecompressedBytes(). A plain file: `end` stays { false, 0 }. Only for importers that can use a prefix
// (the Kineto importer, docs/kineto-import.md "Damaged files").
std::string readFileMaybeGzip(const std::string& path, GzipEnd& end);
// The same for a buffer; `source` names it in errors.
std::string gunzip(std::string_view compressed, std::string_view source, GzipEnd& end);
// "the gzip stream ends early at compressed byte N": how every message names where a cut stream stops.
std::string gzipEndsEarlyAt(std::size_t compressedBytes);

// Up to `limit` bytes from the start of the file as stored. Throws IoError if unreadable.
std::string readFileHead(const std::string& path, std::size_t limit);

// Up to `limit` bytes from the start of the file's content (decompressed if gzip): what importers
// sniff. A corrupt gzip head yields what could be decompressed. Throws IoError if unreadable.
std::string readContentHead(const std::string& path, std::size_t limit = 64 * 1024);

// The folder for temporary files: $TMPDIR (std::filesystem::temp_directory_path), else /tmp.
std::string temporaryFolder();

// Copies bytes [0, `bytes`) of the regular file open at `from` to `to`, written at `to`'s own offset, which
// advances (O_APPEND respected): a regular file, a pipe, a terminal. `from` is read at explicit offsets; its own
// offset is neither used nor moved. In the kernel (copy_file_range: no copy through user space, a reflink on
// filesystems that share extents) where the two descriptors allow it, else read and written 1 MiB at a time
// (pread, write: a pipe, a terminal, an O_APPEND `to`, an old kernel). Throws IoError "FROM_NAME: cannot read: …"
// when a read fails or `from` holds fewer than `bytes` bytes, "TO_NAME: cannot write: …" when a write fails
// (strerror's words); `to` may then hold part of the bytes.
void copyDescriptor(int from, std::uint64_t bytes, int to, std::string_view fromName, std::string_view toName);

// Decompresses a whole gzip/zlib buffer; `source` names it in errors. The result has at least
// kReadPadding bytes of spare capacity.
std::string gunzip(std::string_view compressed, std::string_view source);

// A file's content (decompressed if gzip, by magic) one line at a time, so that a line-oriented reader
// (.jsonl) never holds the whole inflated text: a gzip file is inflated 64 KiB at a time as lines are
// asked for from its mapped bytes; a plain regular file is read 8 MiB at a time through one buffer, so that
// neither memory nor address space grows with the file; a pipe is read whole. The same errors and
// inflateLimit() as readFileMaybeGzip(path). Move-only; not thread-safe.
class LineReader {
public:
    explicit LineReader(const std::string& path); // throws IoError naming the path
    ~LineReader();
    LineReader(LineReader&&) noexcept;
    LineReader& operator=(LineReader&&) noexcept;

    // The next line without its '\n' (a last line without one included), valid until the next call;
    // false after the last. Throws FormatError naming the path (damaged or cut gzip, past the limit).
    bool next(std::string_view& line);
    // How much of the file as stored has been read, 0–1 (for progress).
    double fractionRead() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// A read-only memory map of a whole file (an empty file maps to an empty span). Move-only.
// A whole file mapped read-only. A file cut while it is mapped makes the next read of a page past its new end
// raise SIGBUS: MappedFile turns that into the file's error instead of a crash (exit 1, "PATH: the file was cut
// while it was read", after the hook of setBeforeFatalReadError), for the maps it made; a SIGBUS elsewhere
// keeps the action that was installed before.
class MappedFile {
public:
    explicit MappedFile(const std::string& path); // throws IoError
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::string_view bytes() const { return { static_cast<const char*>(m_data), m_size }; }
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
    void* m_data = nullptr;
    std::size_t m_size = 0;
};

// A function MappedFile's SIGBUS handler calls before it ends the process (async-signal-safe calls only: the CLI
// removes the temporary of the output it was writing, cli/output_file.cpp). nullptr: none.
void setBeforeFatalReadError(void (*hook)());
// What that message opens with before ": error: " (default "gpumem"; the CLI sets "gpumem VERB", as its other
// errors read). Not thread-safe: set it before the work starts.
void setFatalReadErrorPrefix(const std::string& prefix);

// A file read through one reused buffer, a window of it at a time (openGmtSource): what it holds is
// the window, not the file. A map of the whole file would count against `prlimit --as` and its
// touched pages against the resident set, both the size of the file. Move-only.
class FileWindow {
public:
    static constexpr std::size_t kWindowBytes = 8 << 20; // bytes read at once, unless one view is larger
    explicit FileWindow(const std::string& path); // throws IoError (the messages of MappedFile)
    ~FileWindow();
    FileWindow(FileWindow&& other) noexcept;
    FileWindow& operator=(FileWindow&& other) = delete;
    FileWindow(const FileWindow&) = delete;
    FileWindow& operator=(const FileWindow&) = delete;

    std::size_t size() const { return m_size; } // bytes of the file when it was opened
    // Bytes [offset, offset + length), which must lie within size(); valid until the next call.
    // Throws IoError naming the path and offset when the read fails or the file has shrunk.
    std::string_view view(std::size_t offset, std::size_t length) const;
    // view() for a few bytes in a file read by jumps (the chunk headers of a .gmt index): where they lie
    // outside the window, only kPeekBytes are read from `offset`, not kWindowBytes (issue 22: each opening
    // of a 89 MB .gmt read the whole file to index its 153 chunk headers). Same rules and errors as view().
    static constexpr std::size_t kPeekBytes = 4096;
    std::string_view peek(std::size_t offset, std::size_t length) const;
    const std::string& path() const { return m_path; }

private:
    void fill(std::size_t offset, std::size_t length, std::size_t readAhead = kWindowBytes) const;
    std::string m_path;
    int m_fd = -1;
    std::size_t m_size = 0;
    mutable std::unique_ptr<char[]> m_buffer;
    mutable std::size_t m_capacity = 0, m_begin = 0, m_filled = 0;
};

} // namespace gpumem
