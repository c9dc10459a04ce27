#pragma once
// Runs a function in a forked child whose address space (RLIMIT_AS) is held to what the child uses plus
// `extra` bytes, and returns the what() of the exception it threw ("no error" when it returned). For the tests
// of what gpumem says when memory or address space runs out (a real failed allocation or mmap, not a mock).
#include <fstream>
#include <functional>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpumem::test {

inline std::string whatUnderAddressSpaceLimit(rlim_t extra, const std::function<void()>& f)
{
    int fds[2];
    if (::pipe(fds) != 0)
        return "pipe failed";
    const pid_t child = ::fork();
    if (child < 0)
        return "fork failed";
    if (child == 0) {
        ::close(fds[0]);
        std::string said = "no error";
        {
            std::ifstream statm("/proc/self/statm");
            std::size_t pages = 0;
            statm >> pages;
            const rlim_t limit = pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + extra;
            const rlimit as { limit, limit };
            ::setrlimit(RLIMIT_AS, &as);
        }
        try {
            f();
        } catch (const std::exception& e) {
            said = e.what();
        }
        (void)!::write(fds[1], said.data(), said.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string said;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
        said.append(buffer, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return said;
}

} // namespace gpumem::test
