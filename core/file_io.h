#pragma once
// File access shared by the readers and importers: whole-file reads with transparent gzip, and a
// read-only memory map. Every failure is an IoError (OS refused) or FormatError (bad gzip stream)
// whose message names the path.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace gpumem {

// The most bytes a compressed input may decompress to: half of the machine's memory, or
// GPUMEM_MAX_INPUT_MIB when set. Beyond it gunzip() throws FormatError (a gzip bomb or a forged size).
std::size_t maxDecompressedBytes();

// True if `bytes` start with the gzip magic 1f 8b.
bool isGzip(std::string_view bytes);

// Spare capacity (bytes) that readFileMaybeGzip() and gunzip() leave after the content, so a SIMD JSON
// parser (simdjson needs SIMDJSON_PADDING = 64) can read the buffer in place without a copy.
inline constexpr std::size_t kReadPadding = 64;

// The whole file; if it is gzip (by magic, not extension), its decompressed content. Concatenated
// gzip members are all decompressed. The result has at least kReadPadding bytes of spare capacity.
// Single-member gzip goes through libdeflate when built with it (whole-buffer, ~3× zlib), else zlib.
// Throws IoError / FormatError naming the path and offset.
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

// Up to `limit` bytes from the start of the file as stored. Throws IoError if unreadable.
std::string readFileHead(const std::string& path, std::size_t limit);

// Up to `limit` bytes from the start of the file's content (decompressed if gzip): what importers
// sniff. A corrupt gzip head yields what could be decompressed. Throws IoError if unreadable.
std::string readContentHead(const std::string& path, std::size_t limit = 64 * 1024);

// Decompresses a whole gzip/zlib buffer; `source` names it in errors. The result has at least
// kReadPadding bytes of spare capacity.
std::string gunzip(std::string_view compressed, std::string_view source);

// A read-only memory map of a whole file (an empty file maps to an empty span). Move-only.
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

} // namespace gpumem
