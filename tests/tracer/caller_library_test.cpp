// The library that called a driver API, from return addresses: the first frame outside the
// tracer, CUPTI and the driver (tracer/caller_library.h).
#include "tracer/caller_library.h"

#include <gtest/gtest.h>

#include <array>
#include <climits>
#include <dlfcn.h>
#include <unistd.h>

using namespace gpumem::tracer;

namespace {

int ownFunction() { return 7; } // in test_tracer, the main program

std::string thisProgram()
{
    std::array<char, PATH_MAX> path {};
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
    return n > 0 ? std::string(path.data(), static_cast<std::size_t>(n)) : std::string();
}

} // namespace

TEST(CallerLibrary, TheFirstFrameOutsideTheTracerNamesTheCallersFile)
{
    void* own = reinterpret_cast<void*>(&ownFunction);
    void* libc = ::dlsym(RTLD_DEFAULT, "qsort");
    ASSERT_NE(libc, nullptr);
    Dl_info info {};
    ASSERT_NE(::dladdr(libc, &info), 0);
    const std::string libcFile = info.dli_fname;
    EXPECT_NE(libcFile.find("libc.so"), std::string::npos) << libcFile;

    // The tracer's own frames (the object holding `self`), null and unmapped addresses are skipped.
    const std::array<void*, 4> frames { own, nullptr, reinterpret_cast<void*>(0x10), libc };
    EXPECT_EQ(callerLibrary(frames, own), libcFile);
    // The main program is named by its path, not by argv[0].
    const std::array<void*, 2> fromProgram { own, libc };
    EXPECT_EQ(callerLibrary(fromProgram, libc), thisProgram());
    EXPECT_EQ(callerLibrary(std::array<void*, 1> { libc }, libc), "");
    EXPECT_EQ(callerLibrary({}, own), "");
}

TEST(CallerLibrary, TheDriverCuptiAndTheTracerAreNeverTheCaller)
{
    EXPECT_TRUE(isDriverSide("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
    EXPECT_TRUE(isDriverSide("/usr/local/cuda/lib64/libcupti.so.13"));
    EXPECT_TRUE(isDriverSide("/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1"));
    EXPECT_TRUE(isDriverSide("build/gpu-stage/lib/libgpumem_tracer.so"));
    EXPECT_FALSE(isDriverSide("/usr/lib/x86_64-linux-gnu/libnccl.so.2"));
    EXPECT_FALSE(isDriverSide("/opt/torch/lib/libc10_cuda.so"));
    EXPECT_TRUE(isDriverSide("/usr/local/cuda/lib64/libcudart.so.13")); // the shared runtime passes calls on
    EXPECT_FALSE(isDriverSide("/opt/app/libmycudart_helpers.so"));
}

TEST(CallerLibrary, TheCallingStackOfATestIsOutsideTheTracerCode)
{
    // The tracer's code is linked into test_tracer, so the test's own frames are skipped and the
    // caller is a library below main (gtest's or libc's start-up): an absolute path, never ours.
    const std::string caller = callingLibrary();
    ASSERT_FALSE(caller.empty());
    EXPECT_EQ(caller.front(), '/');
    EXPECT_NE(caller, thisProgram());
}
