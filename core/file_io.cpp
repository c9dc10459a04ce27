#include "core/file_io.h"

#include "core/error.h"
#include "core/message_quote.h"

#include <zlib.h>
#ifdef GPUMEM_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <atomic>
#include <csignal>
#include <mutex>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpumem {

namespace {
    [[noreturn]] void throwIo(const std::string& path, const char* what)
    {
        // Out of file descriptors: say what to do (review finding: the streamed verbs open a .gmt once more per
        // replay they run in parallel, so `ulimit -n 4` failed where reading it whole had not).
        if (errno == EMFILE || errno == ENFILE)
            throw IoError(path + ": cannot " + what + ": " + std::strerror(errno)
                + " (the process may open no more files: raise `ulimit -n`, or give --jobs 1 where the verb takes it: each "
                  "replay run in parallel reads a .gmt through a descriptor of its own)");
        throw IoError(path + ": cannot " + what + ": " + std::strerror(errno));
    }

    // A file mapped whole needs address space of its size: where mmap says ENOMEM, the process may not use that
    // much (a review finding: "cannot map: Cannot allocate memory" said nothing of what to do).
    [[noreturn]] void throwMapFailed(const std::string& path, std::size_t bytes)
    {
        if (errno == ENOMEM)
            throw IoError(path + ": cannot map its " + std::to_string(bytes)
                + " bytes: the process may not use that much address space; run where it may use more (ulimit -v, the "
                  "job's or container's memory limit)");
        throwIo(path, "map");
    }

    // Big buffers are touched once, front to back: transparent huge pages cut the page faults 512×
    // (half the import time of a 50 MB trace went to faults without them). Advisory only.
    void adviseHugePages(void* data, std::size_t size)
    {
        constexpr std::uintptr_t kHuge = 2u << 20;
        if (size < 4 * kHuge)
            return;
        const auto begin = (reinterpret_cast<std::uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
        const auto end = (reinterpret_cast<std::uintptr_t>(data) + size) & ~(kHuge - 1);
        if (end > begin)
            ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }

    // The error of a file that ends, while it is read, before the size it had when it was opened.
    std::string cutWhileRead(const std::string& path, std::uint64_t opened, std::uint64_t read)
    {
        return path + ": the file was cut while it was read (it had " + std::to_string(opened) + " bytes when it was opened; "
            + std::to_string(read) + " could be read): give it again once whatever writes it is done";
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
        if (S_ISREG(st.st_mode) && st.st_size > 0) {
            out.reserve(std::min<std::size_t>(limit, static_cast<std::size_t>(st.st_size)) + kReadPadding);
            adviseHugePages(out.data(), out.capacity());
        }
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
        // A whole read that ends before the size the file had when it was opened: something cut it meanwhile
        // (review finding: a JSON trace cut while read was taken for a damaged one, its page written, exit 0).
        if (S_ISREG(st.st_mode) && out.size() < limit && out.size() < static_cast<std::size_t>(st.st_size))
            throw IoError(cutWhileRead(path, static_cast<std::uint64_t>(st.st_size), out.size()));
        return out;
    }

    // What inflateAll() does with a stream it cannot finish.
    enum class OnDamage : std::uint8_t {
        Throw, // FormatError for a cut or corrupt stream
        ReturnPrefix, // return what was decoded, whatever the damage (sniffing a head)
        ReturnPrefixIfCut, // return what was decoded if the stream ends early past the first header
    };

    // One gzip/zlib stream (windowBits 15+32: auto-detected) inflated a step at a time, concatenated
    // members included: inflateAll() runs it to the end, LineReader a line at a time. Not copyable.
    class Inflater {
    public:
        enum class Status : std::uint8_t {
            More, // step() may be called again
            End, // the last member ended; trailing bytes that are no gzip member are ignored
            CutInHeader, // the bytes end inside the first member's header: nothing to recover
            Cut, // the bytes end early, past the first header (`message` says where)
            Damaged, // invalid data (`message` names the offset)
        };
        Inflater(std::string_view in, std::string_view source)
            : m_in(in)
            , m_source(source)
        {
            if (inflateInit2(&m_zs, 15 + 32) != Z_OK)
                throw Error("zlib inflateInit2 failed");
            inflateGetHeader(&m_zs, &m_header);
        }
        ~Inflater() { inflateEnd(&m_zs); }
        Inflater(const Inflater&) = delete;
        Inflater& operator=(const Inflater&) = delete;

        // Inflates up to 64 KiB more onto `out`. Past inflateLimit() of the compressed size (counted over
        // the whole stream) throws FormatError naming the source and the limit.
        Status step(std::string& out, std::string& message)
        {
            if (m_zs.avail_in == 0 && m_fed < m_in.size()) {
                std::size_t n = std::min<std::size_t>(m_in.size() - m_fed, std::size_t(1) << 30);
                m_zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(m_in.data() + m_fed));
                m_zs.avail_in = static_cast<uInt>(n);
                m_fed += n;
            }
            char buf[1 << 16];
            m_zs.next_out = reinterpret_cast<Bytef*>(buf);
            m_zs.avail_out = sizeof buf;
            int rc = inflate(&m_zs, Z_NO_FLUSH);
            const std::size_t n = sizeof buf - m_zs.avail_out;
            out.append(buf, n);
            m_produced += n;
            if (m_produced > m_cap)
                throw FormatError(std::string(m_source) + ": " + inflateLimitMessage(m_in.size()));
            const std::size_t consumed = m_fed - m_zs.avail_in;
            if (rc == Z_STREAM_END) {
                // Another gzip member may follow (concatenated gzip is valid); other trailing bytes are ignored.
                if (isGzip(m_in.substr(consumed)) && inflateReset(&m_zs) == Z_OK) {
                    m_firstMember = false;
                    return Status::More;
                }
                return Status::End;
            }
            if (rc == Z_OK)
                return Status::More;
            if (rc == Z_BUF_ERROR && consumed >= m_in.size()) {
                if (m_firstMember && m_header.done == 0) {
                    message = "the gzip stream ends inside its header (after " + std::to_string(m_in.size())
                        + " compressed bytes), so it holds nothing to read: the file is truncated — copy it again";
                    return Status::CutInHeader;
                }
                message = gzipEndsEarlyAt(m_in.size()) + ": the file is truncated — copy it again";
                return Status::Cut;
            }
            if (rc == Z_BUF_ERROR)
                return Status::More;
            message = "corrupt gzip data near compressed offset " + std::to_string(consumed) + " ("
                + (m_zs.msg ? m_zs.msg : "zlib error") + "): the file is damaged — copy it again";
            return Status::Damaged;
        }
        std::size_t compressedSize() const { return m_in.size(); }
        std::size_t consumed() const { return m_fed - m_zs.avail_in; }
        void unbounded() { m_cap = std::numeric_limits<std::size_t>::max(); } // a head read stops by itself

    private:
        std::string_view m_in;
        std::string_view m_source;
        z_stream m_zs {};
        gz_header m_header {};
        bool m_firstMember = true;
        std::size_t m_fed = 0; // input bytes handed to zlib so far (zlib counts in 32 bits)
        std::size_t m_produced = 0;
        std::size_t m_cap = inflateLimit(m_in.size());
    };

    // Inflates gzip members up to `limit` output bytes (npos: to the end, within inflateLimit()).
    // With ReturnPrefixIfCut, `end` tells whether the stream ended early.
    std::string inflateAll(
        std::string_view in, std::string_view source, std::size_t limit, OnDamage onDamage, GzipEnd* end = nullptr)
    {
        std::string out;
        Inflater inflater(in, source);
        if (limit != std::string::npos)
            inflater.unbounded();
        std::string message;
        for (;;) {
            const Inflater::Status status = inflater.step(out, message);
            if (out.size() >= limit) {
                out.resize(limit);
                return out;
            }
            switch (status) {
            case Inflater::Status::More:
                continue;
            case Inflater::Status::End:
                return out;
            case Inflater::Status::Cut:
                if (onDamage == OnDamage::ReturnPrefixIfCut) {
                    end->endsEarly = true;
                    end->compressedBytes = in.size();
                    return out; // gunzipWith() adds the padding
                }
                [[fallthrough]];
            case Inflater::Status::CutInHeader:
                if (status == Inflater::Status::CutInHeader && onDamage != OnDamage::ReturnPrefixIfCut)
                    message = gzipEndsEarlyAt(in.size()) + ": the file is truncated — copy it again";
                [[fallthrough]];
            case Inflater::Status::Damaged:
                if (onDamage == OnDamage::ReturnPrefix)
                    return out;
                throw FormatError(std::string(source) + ": " + message);
            }
        }
    }

#ifdef GPUMEM_HAVE_LIBDEFLATE
    // One-shot decompression of a single-member gzip file whose trailer (ISIZE, RFC 1952 §2.3.1)
    // gives the output size. Returns false (caller falls back to zlib) for anything else: several
    // members, a size beyond 4 GiB (ISIZE is mod 2^32), corrupt data — zlib then names the offset.
    // Compression ratio up to which the one-shot path trusts the gzip trailer's ISIZE enough to zero-fill
    // a buffer of that size (the public profiler traces inflate 9–30×).
    constexpr std::size_t kUsualGzipRatio = 64;

    bool gunzipOneShot(std::string_view in, std::string& out)
    {
        if (in.size() < 18)
            return false;
        const auto* t = reinterpret_cast<const unsigned char*>(in.data() + in.size() - 4);
        const std::size_t isize = std::size_t(t[0]) | std::size_t(t[1]) << 8 | std::size_t(t[2]) << 16 | std::size_t(t[3]) << 24;
        // Deflate cannot expand more than ~1032×: a smaller ISIZE than that bound is a wrapped size, and a
        // larger one is a lie (a cut or forged file) that must not make us allocate it. Either way the
        // streaming path decides.
        if (isize < in.size() / 1100 || isize > in.size() * 1032 + 1024 || isize > inflateLimit(in.size()))
            return false;
        std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(
            libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
        if (!d)
            return false;
        std::size_t inUsed = 0, outUsed = 0;
        if (isize <= in.size() * kUsualGzipRatio + (std::size_t(1) << 20)) {
            // The usual case: inflate straight into the result. resize() writes zeros over all of it, so
            // this is only done up to a ratio that real traces reach (a wrong ISIZE wastes ≤ 64× the file).
            out.reserve(isize + kReadPadding);
            adviseHugePages(out.data(), out.capacity());
            out.resize(isize + kReadPadding);
            auto rc = libdeflate_gzip_decompress_ex(d.get(), in.data(), in.size(), out.data(), isize, &inUsed, &outUsed);
            if (rc != LIBDEFLATE_SUCCESS || inUsed != in.size() || outUsed != isize) {
                out.clear();
                out.shrink_to_fit();
                return false;
            }
            out.resize(outUsed);
            return true;
        }
        // A larger ISIZE is rare in a whole file (whitespace, zeros) and common in a cut one, where the
        // trailer is whatever compressed bytes the cut left (a cut HTA trace claimed 2.2 GB, 1,000× its
        // size, and zeroing it took seconds). Inflate into memory that is not zero-filled, so only the
        // pages inflate() actually writes are committed, and copy the result once if it is whole.
        std::unique_ptr<char[]> scratch(new (std::nothrow) char[isize]);
        if (!scratch)
            return false;
        auto rc = libdeflate_gzip_decompress_ex(d.get(), in.data(), in.size(), scratch.get(), isize, &inUsed, &outUsed);
        if (rc != LIBDEFLATE_SUCCESS || inUsed != in.size() || outUsed != isize)
            return false;
        out.reserve(outUsed + kReadPadding);
        out.assign(scratch.get(), outUsed);
        return true;
    }
#endif

    // gunzip(): the one-shot path when it can, else zlib with `onDamage` (ReturnPrefixIfCut sets `*end`).
    std::string gunzipWith(std::string_view compressed, std::string_view source, OnDamage onDamage, GzipEnd* end)
    {
#ifdef GPUMEM_HAVE_LIBDEFLATE
        // A whole stream takes the one-shot path; a cut one fails it (its last 8 bytes are no trailer)
        // and the streaming path below keeps what it inflates to.
        std::string fast;
        if (isGzip(compressed) && gunzipOneShot(compressed, fast))
            return fast;
#endif
        std::string out = inflateAll(compressed, source, std::string::npos, onDamage, end);
        if (out.capacity() - out.size() < kReadPadding)
            out.reserve(out.size() + kReadPadding);
        return out;
    }
} // namespace

std::size_t maxDecompressedBytes()
{
    static const std::size_t limit = [] {
        if (const char* env = std::getenv("GPUMEM_MAX_INPUT_MIB"))
            if (long long mib = std::atoll(env); mib > 0)
                return static_cast<std::size_t>(mib) << 20;
        long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
        if (pages <= 0 || page <= 0)
            return std::size_t(8) << 30;
        return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) / 2;
    }();
    return limit;
}

std::size_t inflateRatio()
{
    static const std::size_t ratio = [] {
        if (const char* env = std::getenv("GPUMEM_INFLATE_RATIO"))
            if (long long r = std::atoll(env); r > 0)
                return static_cast<std::size_t>(r);
        return kDefaultInflateRatio;
    }();
    return ratio;
}

std::size_t inflateLimit(std::size_t compressedBytes)
{
    constexpr std::size_t kFloor = std::size_t(16) << 20;
    const std::size_t ratio = inflateRatio();
    const std::size_t byRatio = compressedBytes > (SIZE_MAX - kFloor) / ratio ? SIZE_MAX : ratio * compressedBytes + kFloor;
    return std::min(byRatio, maxDecompressedBytes());
}

std::string inflateLimitMessage(std::size_t compressedBytes)
{
    const std::size_t limit = inflateLimit(compressedBytes);
    std::string m = "decompresses to more than " + std::to_string(limit >> 20) + " MiB, ";
    if (limit < maxDecompressedBytes())
        return m + "gpumem's limit for a gzip input of " + std::to_string(compressedBytes) + " bytes ("
            + std::to_string(inflateRatio()) + "× its compressed size + 16 MiB; real traces inflate 9–30×, a gzip "
              "bomb 1,000×); if the trace is real, set GPUMEM_INFLATE_RATIO to a larger ratio (e.g. "
            + std::to_string(inflateRatio() * 4) + ")";
    if (std::getenv("GPUMEM_MAX_INPUT_MIB"))
        return m + "the limit GPUMEM_MAX_INPUT_MIB sets; if the trace is real, set it higher";
    return m + "half of this machine's memory, gpumem's limit for any input; if the trace is real, set "
               "GPUMEM_MAX_INPUT_MIB to allow more";
}

bool isGzip(std::string_view bytes)
{
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f
        && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view compressed, std::string_view source)
{
    return gunzipWith(compressed, source, OnDamage::Throw, nullptr);
}

std::string gunzip(std::string_view compressed, std::string_view source, GzipEnd& end)
{
    end = GzipEnd { false, compressed.size() };
    return gunzipWith(compressed, source, OnDamage::ReturnPrefixIfCut, &end);
}

std::string gzipEndsEarlyAt(std::size_t compressedBytes)
{
    return "the gzip stream ends early at compressed byte " + std::to_string(compressedBytes);
}

std::string readFileMaybeGzip(const std::string& path)
{
    std::string raw = readRaw(path, std::string::npos);
    if (!isGzip(raw))
        return raw;
    return gunzip(raw, path);
}

std::string readFileMaybeGzip(const std::string& path, GzipEnd& end)
{
    end = GzipEnd {};
    std::string raw = readRaw(path, std::string::npos);
    if (!isGzip(raw))
        return raw;
    return gunzip(raw, path, end);
}

FileBuffer readFileBuffer(const std::string& path, std::size_t mapAbove)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throwIo(path, "open");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
        const bool directory = S_ISDIR(st.st_mode);
        ::close(fd);
        if (directory)
            throw IoError(path + ": is a directory; give a trace file");
        // Not a regular file (a pipe, a device): its size is unknown, so read it as a stream.
        std::string streamed = readRaw(path, std::string::npos);
        auto copy = std::make_shared<std::string>(std::move(streamed));
        copy->reserve(copy->size() + kReadPadding);
        return FileBuffer { std::shared_ptr<const char>(copy, copy->data()), copy->size() };
    }
    if (static_cast<std::size_t>(st.st_size) > mapAbove) {
        void* mapped = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (mapped == MAP_FAILED) {
            int saved = errno;
            ::close(fd);
            errno = saved;
            throwMapFailed(path, static_cast<std::size_t>(st.st_size));
        }
        ::close(fd);
        const auto size = static_cast<std::size_t>(st.st_size);
        return FileBuffer { std::shared_ptr<const char>(static_cast<const char*>(mapped),
                                [size](const char* p) { ::munmap(const_cast<char*>(p), size); }),
            size };
    }
    // Freed on every exit; handed to the result's shared_ptr at the end.
    std::unique_ptr<char, decltype(&std::free)> buffer(nullptr, &std::free);
    auto fail = [&](const char* what) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        throwIo(path, what);
    };
    std::size_t capacity = 0;
    auto reserve = [&](std::size_t bytes) {
        char* grown = static_cast<char*>(std::realloc(buffer.get(), bytes));
        if (!grown) {
            errno = ENOMEM;
            fail("read");
        }
        (void)buffer.release(); // realloc took it over
        buffer.reset(grown);
        capacity = bytes;
    };
    reserve(static_cast<std::size_t>(st.st_size) + kReadPadding + 1);
    adviseHugePages(buffer.get(), capacity);
    std::size_t size = 0;
    for (;;) {
        if (capacity - size <= kReadPadding) // the file grew while we read it
            reserve(capacity * 2);
        ssize_t n = ::read(fd, buffer.get() + size, capacity - kReadPadding - size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail("read");
        }
        if (n == 0)
            break;
        size += static_cast<std::size_t>(n);
        if (size == static_cast<std::size_t>(st.st_size))
            break; // all of it as fstat saw it: saves the read() that would return 0
    }
    ::close(fd);
    return FileBuffer { std::shared_ptr<const char>(buffer.release(), &std::free), size };
}

std::string readFileHead(const std::string& path, std::size_t limit) { return readRaw(path, limit); }

std::string readContentHead(const std::string& path, std::size_t limit)
{
    // Compressed JSON shrinks about 10×: for gzip, read enough compressed bytes to fill `limit`
    // (a second read; a plain file is opened once).
    std::string raw = readRaw(path, std::max<std::size_t>(limit, 2));
    if (!isGzip(raw)) {
        raw.resize(std::min(raw.size(), limit));
        return raw;
    }
    raw = readRaw(path, 16 * limit + 4096);
    return inflateAll(raw, path, limit, OnDamage::ReturnPrefix);
}

// A plain regular file is read through a window of kWindowBytes (read(2) into one buffer that keeps the
// partial line at its end), so neither memory nor address space grows with the file (issue 22: a mapped
// 241 MB .jsonl could not be converted under `ulimit -v 250M`). A gzip file as stored is mapped, not read:
// its pages are read as the inflater reaches them, and every kReleaseBytes of it that has been inflated is
// given back to the kernel (MADV_DONTNEED: a private read-only file mapping rereads a page from the file if
// it is touched again), so resident memory stays near one window of it however large it is. A file that is
// not regular (a pipe) is read whole, as before.
struct LineReader::Impl {
    static constexpr std::size_t kReleaseBytes = std::size_t(8) << 20;
    static constexpr std::size_t kWindowBytes = std::size_t(8) << 20;
    std::string path;
    std::optional<MappedFile> map;
    std::string whole; // the file read whole where it is not regular
    std::string_view raw; // a gzip file as stored (the map or `whole`)
    std::size_t released = 0; // raw[0, released) has been given back to the kernel
    std::unique_ptr<Inflater> inflater; // null for a plain file
    std::string inflated; // gzip: inflated, not yet handed out (from `pos`)
    int fd = -1; // a plain regular file, read through `window`
    std::uint64_t fileSize = 0, dropped = 0; // its size at open; the bytes handed out before window[0]
    std::string window;
    std::string_view text; // what lines are cut from: `window`, `whole` or `inflated`
    std::size_t pos = 0;
    std::size_t searched = 0; // text[pos, searched) holds no '\n': a long line is scanned once, not per step
    bool streamEnded = false;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl()
    {
        if (fd >= 0)
            ::close(fd);
    }

    // Gives back the pages of raw[0, done) once a whole window of them has been read.
    void release(std::size_t done)
    {
        if (!map || done < released + kReleaseBytes)
            return;
        const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        const std::size_t end = done / page * page;
        if (end > released)
            ::madvise(const_cast<char*>(raw.data()) + released, end - released, MADV_DONTNEED);
        released = std::max(released, end);
    }

    // The next kWindowBytes of a plain file after the partial line at text[pos, end); streamEnded at its end.
    void readWindow()
    {
        window.erase(0, pos);
        searched -= pos;
        dropped += pos;
        pos = 0;
        if (window.capacity() < kWindowBytes)
            window.reserve(kWindowBytes);
        // Reads fill the window up to its size; a partial line longer than half of it doubles what is read.
        const std::size_t at = window.size(), room = at < kWindowBytes / 2 ? kWindowBytes - at : at;
        window.resize(at + room);
        ssize_t n;
        do
            n = ::read(fd, window.data() + at, room);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            throwIo(path, "read");
        window.resize(at + static_cast<std::size_t>(n));
        streamEnded = n == 0;
        if (streamEnded && dropped + window.size() < fileSize)
            throw IoError(cutWhileRead(path, fileSize, dropped + window.size()));
        text = window;
    }
};

LineReader::LineReader(const std::string& path)
    : m_impl(std::make_unique<Impl>())
{
    Impl& m = *m_impl;
    m.path = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        m.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (m.fd < 0)
            throwIo(path, "open");
        char magic[2] = {};
        ssize_t n;
        do
            n = ::pread(m.fd, magic, sizeof magic, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            throwIo(path, "read");
        if (!isGzip(std::string_view(magic, static_cast<std::size_t>(n)))) {
            m.fileSize = static_cast<std::uint64_t>(st.st_size);
            return; // read through the window from the first next()
        }
        ::close(m.fd);
        m.fd = -1;
        m.map.emplace(path);
        m.raw = m.map->bytes();
    } else {
        m.whole = readRaw(path, std::string::npos);
        m.raw = m.whole;
    }
    if (isGzip(m.raw)) {
        m.inflater = std::make_unique<Inflater>(m.raw, m.path);
        m.text = m.inflated;
    } else {
        m.text = m.raw, m.streamEnded = true;
    }
}

LineReader::~LineReader() = default;
LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;

bool LineReader::next(std::string_view& line)
{
    Impl& m = *m_impl;
    m.release(m.inflater ? m.inflater->consumed() : m.pos);
    for (;;) {
        if (const std::size_t nl = m.text.find('\n', std::max(m.pos, m.searched)); nl != std::string::npos) {
            line = m.text.substr(m.pos, nl - m.pos);
            m.pos = nl + 1;
            m.searched = m.pos;
            return true;
        }
        m.searched = m.text.size();
        if (m.streamEnded) {
            if (m.pos >= m.text.size())
                return false;
            line = m.text.substr(m.pos);
            m.pos = m.text.size();
            return true;
        }
        if (m.fd >= 0) {
            m.readWindow();
            continue;
        }
        m.inflated.erase(0, m.pos); // what was handed out; the partial line stays
        m.searched -= m.pos;
        m.pos = 0;
        std::string message;
        const Inflater::Status status = m.inflater->step(m.inflated, message);
        m.text = m.inflated;
        switch (status) {
        case Inflater::Status::More:
            break;
        case Inflater::Status::End:
            m.streamEnded = true;
            break;
        case Inflater::Status::CutInHeader:
        case Inflater::Status::Cut:
            throw FormatError(m.path + ": " + gzipEndsEarlyAt(m.raw.size()) + ": the file is truncated — copy it again");
        case Inflater::Status::Damaged:
            throw FormatError(m.path + ": " + message);
        }
    }
}

double LineReader::fractionRead() const
{
    const Impl& m = *m_impl;
    if (m.fd >= 0)
        return m.fileSize == 0 ? (m.streamEnded ? 1.0 : 0.0) : std::min(1.0, double(m.dropped + m.pos) / double(m.fileSize));
    if (!m.inflater)
        return m.text.empty() ? 1.0 : double(m.pos) / double(m.text.size());
    return m.raw.empty() ? 1.0 : double(m.inflater->consumed()) / double(m.raw.size());
}

namespace {
    // The maps MappedFile holds, for its SIGBUS handler (read there without locks: a slot's path is written
    // before its range is published, and the range cleared before the slot is reused).
    struct MappedRange {
        std::atomic<bool> used { false };
        std::atomic<std::uintptr_t> begin { 0 }, end { 0 };
        char path[1024] {};
    };
    constexpr std::size_t kMappedRanges = 64; // maps at once that a cut turns into an error (more: a crash, as before)
    MappedRange g_mapped[kMappedRanges];
    std::atomic<void (*)()> g_beforeFatal { nullptr };
    char g_fatalPrefix[256] = "gpumem"; // what precedes ": error: " (setFatalReadErrorPrefix)
    struct sigaction g_previousBusAction {};

    void writeAll(const char* s, std::size_t n)
    {
        while (n > 0) {
            const ssize_t w = ::write(2, s, n);
            if (w <= 0)
                return;
            s += w;
            n -= static_cast<std::size_t>(w);
        }
    }

    extern "C" void onBusError(int sig, siginfo_t* info, void* context)
    {
        const auto at = reinterpret_cast<std::uintptr_t>(info->si_addr);
        for (const MappedRange& r : g_mapped) {
            const std::uintptr_t b = r.begin.load(std::memory_order_acquire);
            if (b == 0 || at < b || at >= r.end.load(std::memory_order_acquire))
                continue;
            if (void (*hook)() = g_beforeFatal.load())
                hook();
            static constexpr char kHead[] = ": error: ";
            static constexpr char kTail[] = ": the file was cut while it was read (it is shorter than when gpumem opened "
                                            "it: something rewrote or truncated it); give it again once it is complete\n";
            writeAll(g_fatalPrefix, ::strnlen(g_fatalPrefix, sizeof g_fatalPrefix));
            writeAll(kHead, sizeof kHead - 1);
            writeAll(r.path, ::strnlen(r.path, sizeof r.path));
            writeAll(kTail, sizeof kTail - 1);
            ::_exit(1);
        }
        // Not a page of ours: the action installed before (raised again: it is delivered once this handler
        // returns, for a fault and for a signal sent alike).
        if ((g_previousBusAction.sa_flags & SA_SIGINFO) && g_previousBusAction.sa_sigaction) {
            g_previousBusAction.sa_sigaction(sig, info, context);
            return;
        }
        ::sigaction(SIGBUS, &g_previousBusAction, nullptr);
        ::raise(sig);
    }

    void installBusHandler()
    {
        static std::once_flag once;
        std::call_once(once, [] {
            struct sigaction action {};
            action.sa_sigaction = onBusError;
            action.sa_flags = SA_SIGINFO;
            sigemptyset(&action.sa_mask);
            ::sigaction(SIGBUS, &action, &g_previousBusAction);
        });
    }

    // The slot publishing [data, data + size) as `path`'s map; kMappedRanges when none is free.
    std::size_t publishMap(const void* data, std::size_t size, const std::string& path)
    {
        installBusHandler();
        for (std::size_t k = 0; k < kMappedRanges; ++k) {
            bool expected = false;
            if (!g_mapped[k].used.compare_exchange_strong(expected, true))
                continue;
            // As the CLI prints an error's words (no control characters reach the terminal from a file name).
            std::snprintf(g_mapped[k].path, sizeof g_mapped[k].path, "%s", messageForTerminal(path).c_str());
            const auto b = reinterpret_cast<std::uintptr_t>(data);
            g_mapped[k].end.store(b + size, std::memory_order_release);
            g_mapped[k].begin.store(b, std::memory_order_release);
            return k;
        }
        return kMappedRanges;
    }

    void withdrawMap(const void* data)
    {
        const auto b = reinterpret_cast<std::uintptr_t>(data);
        for (MappedRange& r : g_mapped)
            if (r.used.load() && r.begin.load() == b) {
                r.begin.store(0, std::memory_order_release);
                r.end.store(0, std::memory_order_release);
                r.used.store(false);
                return;
            }
    }
} // namespace

void setBeforeFatalReadError(void (*hook)()) { g_beforeFatal.store(hook); }

void setFatalReadErrorPrefix(const std::string& prefix)
{
    std::snprintf(g_fatalPrefix, sizeof g_fatalPrefix, "%s", messageForTerminal(prefix).c_str());
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
            const int saved = errno;
            ::close(fd);
            errno = saved;
            throwMapFailed(path, m_size);
        }
        publishMap(m_data, m_size, path);
    }
    ::close(fd);
}

MappedFile::~MappedFile()
{
    if (m_data) {
        withdrawMap(m_data);
        ::munmap(m_data, m_size);
    }
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
        if (m_data) {
            withdrawMap(m_data);
            ::munmap(m_data, m_size);
        }
        m_path = std::move(other.m_path);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

FileWindow::FileWindow(const std::string& path)
    : m_path(path)
{
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (m_fd < 0)
        throwIo(path, "open");
    struct stat st {};
    if (::fstat(m_fd, &st) != 0) {
        const int saved = errno;
        ::close(m_fd);
        errno = saved;
        throwIo(path, "stat");
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(m_fd);
        throw IoError(path + ": is a directory; give a trace file");
    }
    m_size = static_cast<std::size_t>(st.st_size);
}

FileWindow::~FileWindow()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

FileWindow::FileWindow(FileWindow&& other) noexcept
    : m_path(std::move(other.m_path))
    , m_fd(std::exchange(other.m_fd, -1))
    , m_size(other.m_size)
    , m_buffer(std::move(other.m_buffer))
    , m_capacity(std::exchange(other.m_capacity, 0))
    , m_begin(other.m_begin)
    , m_filled(std::exchange(other.m_filled, 0))
{
}

std::string_view FileWindow::view(std::size_t offset, std::size_t length) const
{
    if (offset < m_begin || offset - m_begin > m_filled || length > m_filled - (offset - m_begin))
        fill(offset, length);
    return { m_buffer.get() + (offset - m_begin), length };
}

std::string_view FileWindow::peek(std::size_t offset, std::size_t length) const
{
    if (offset < m_begin || offset - m_begin > m_filled || length > m_filled - (offset - m_begin))
        fill(offset, length, kPeekBytes);
    return { m_buffer.get() + (offset - m_begin), length };
}

void FileWindow::fill(std::size_t offset, std::size_t length, std::size_t readAhead) const
{
    const std::size_t want = std::min(std::max(length, readAhead), m_size - std::min(offset, m_size));
    if (want < length)
        throw IoError(m_path + ": cannot read " + std::to_string(length) + " bytes at offset " + std::to_string(offset)
            + ": the file has " + std::to_string(m_size));
    if (want > m_capacity) {
        m_buffer.reset(new char[want]);
        m_capacity = want;
    }
    m_filled = 0;
    for (std::size_t got = 0; got < want;) {
        const ssize_t n = ::pread(m_fd, m_buffer.get() + got, want - got, static_cast<off_t>(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw IoError(m_path + ": cannot read at offset " + std::to_string(offset + got) + ": " + std::strerror(errno));
        if (n == 0)
            throw IoError(m_path + ": the file was cut while it was read (it had " + std::to_string(m_size)
                + " bytes when it was opened and ends before offset " + std::to_string(offset + got)
                + " now): give it again once whatever writes it is done");
        got += static_cast<std::size_t>(n);
    }
    m_begin = offset;
    m_filled = want;
}

void copyDescriptor(int from, std::uint64_t bytes, int to, std::string_view fromName, std::string_view toName)
{
    auto fail = [](std::string_view name, const char* what, const std::string& why) {
        throw IoError(std::string(name) + ": cannot " + what + ": " + why);
    };
    off_t offset = 0;
    const auto size = static_cast<off_t>(bytes);
    while (offset < size) {
        const ssize_t n = ::copy_file_range(from, &offset, to, nullptr, static_cast<std::size_t>(size - offset), 0);
        if (n > 0)
            continue; // copy_file_range moved `offset`
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP || errno == EBADF)
            break; // not between these descriptors, or `from` ends early: the loop below says which
        fail(toName, "write", std::strerror(errno));
    }
    if (offset == size)
        return;
    constexpr std::size_t kPiece = 1 << 20;
    auto buffer = std::make_unique_for_overwrite<char[]>(kPiece);
    while (offset < size) {
        const ssize_t n = ::pread(from, buffer.get(), std::min<std::size_t>(kPiece, static_cast<std::size_t>(size - offset)), offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail(fromName, "read", std::strerror(errno));
        if (n == 0)
            fail(fromName, "read", "it ends after " + std::to_string(offset) + " of " + std::to_string(bytes) + " bytes");
        for (ssize_t done = 0; done < n;) {
            const ssize_t w = ::write(to, buffer.get() + done, static_cast<std::size_t>(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                fail(toName, "write", w < 0 ? std::strerror(errno) : "no byte was written");
            done += w;
        }
        offset += n;
    }
}

std::string temporaryFolder()
{
    std::error_code ec;
    const auto tmp = std::filesystem::temp_directory_path(ec);
    return ec ? std::string("/tmp") : tmp.string();
}

} // namespace gpumem
