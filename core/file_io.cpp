#include "core/file_io.h"

#include "core/error.h"

#include <zlib.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumem {

namespace {
    [[noreturn]] void throwIo(const std::string& path, const char* what)
    {
        throw IoError(path + ": cannot " + what + ": " + std::strerror(errno));
    }

    std::string readRaw(const std::string& path, std::size_t limit)
    {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            throwIo(path, "open");
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            ::close(fd);
            throw IoError(path + ": is a directory; give a trace file");
        }
        std::string out;
        char buf[1 << 16];
        while (out.size() < limit) {
            ssize_t n = ::read(fd, buf, std::min<std::size_t>(sizeof buf, limit - out.size()));
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                int saved = errno;
                ::close(fd);
                errno = saved;
                throwIo(path, "read");
            }
            if (n == 0)
                break;
            out.append(buf, static_cast<std::size_t>(n));
        }
        ::close(fd);
        return out;
    }

    // Inflates gzip members (windowBits 15+32: gzip or zlib, auto-detected) up to `limit` output bytes.
    // `partialOk`: return what was decoded instead of throwing on a corrupt or cut stream.
    std::string inflateAll(std::string_view in, std::string_view source, std::size_t limit, bool partialOk)
    {
        std::string out;
        z_stream zs {};
        if (inflateInit2(&zs, 15 + 32) != Z_OK)
            throw Error("zlib inflateInit2 failed");
        std::size_t fed = 0; // input bytes handed to zlib so far (zlib counts in 32 bits)
        char buf[1 << 16];
        auto fail = [&](const std::string& message) -> std::string {
            inflateEnd(&zs);
            if (partialOk)
                return out;
            throw FormatError(std::string(source) + ": " + message);
        };
        for (;;) {
            if (zs.avail_in == 0 && fed < in.size()) {
                std::size_t n = std::min<std::size_t>(in.size() - fed, std::size_t(1) << 30);
                zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + fed));
                zs.avail_in = static_cast<uInt>(n);
                fed += n;
            }
            zs.next_out = reinterpret_cast<Bytef*>(buf);
            zs.avail_out = sizeof buf;
            int rc = inflate(&zs, Z_NO_FLUSH);
            out.append(buf, sizeof buf - zs.avail_out);
            if (out.size() >= limit) {
                out.resize(limit);
                break;
            }
            std::size_t consumed = fed - zs.avail_in;
            if (rc == Z_STREAM_END) {
                // Another gzip member may follow (concatenated gzip is valid); other trailing bytes are ignored.
                if (isGzip(in.substr(consumed)) && inflateReset(&zs) == Z_OK)
                    continue;
                break;
            }
            if (rc == Z_OK)
                continue;
            if (rc == Z_BUF_ERROR && consumed >= in.size())
                return fail("the gzip stream ends early (after " + std::to_string(in.size())
                    + " compressed bytes): the file is truncated — copy it again");
            if (rc == Z_BUF_ERROR)
                continue;
            return fail("corrupt gzip data near compressed offset " + std::to_string(consumed) + " ("
                + (zs.msg ? zs.msg : "zlib error") + "): the file is damaged — copy it again");
        }
        inflateEnd(&zs);
        return out;
    }
} // namespace

bool isGzip(std::string_view bytes)
{
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f
        && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view compressed, std::string_view source)
{
    return inflateAll(compressed, source, std::string::npos, false);
}

std::string readFileMaybeGzip(const std::string& path)
{
    std::string raw = readRaw(path, std::string::npos);
    if (!isGzip(raw))
        return raw;
    return gunzip(raw, path);
}

std::string readFileHead(const std::string& path, std::size_t limit) { return readRaw(path, limit); }

std::string readContentHead(const std::string& path, std::size_t limit)
{
    // Compressed JSON shrinks about 10×: read enough compressed bytes to fill `limit`.
    std::string raw = readRaw(path, isGzip(readRaw(path, 2)) ? 16 * limit + 4096 : limit);
    if (!isGzip(raw))
        return raw;
    return inflateAll(raw, path, limit, true);
}

MappedFile::MappedFile(const std::string& path)
    : m_path(path)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throwIo(path, "open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        throwIo(path, "stat");
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw IoError(path + ": is a directory; give a trace file");
    }
    m_size = static_cast<std::size_t>(st.st_size);
    if (m_size > 0) {
        m_data = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m_data == MAP_FAILED) {
            m_data = nullptr;
            ::close(fd);
            throwIo(path, "map");
        }
    }
    ::close(fd);
}

MappedFile::~MappedFile()
{
    if (m_data)
        ::munmap(m_data, m_size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path))
    , m_data(std::exchange(other.m_data, nullptr))
    , m_size(std::exchange(other.m_size, 0))
{
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept
{
    if (this != &other) {
        if (m_data)
            ::munmap(m_data, m_size);
        m_path = std::move(other.m_path);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

} // namespace gpumem
