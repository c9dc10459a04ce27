// Loads a library with dlopen and calls its InitializeInjection, as the CUDA driver does with
// CUDA_INJECTION64_PATH. Prints "loaded" and "InitializeInjection returned N" on stdout; exit 2
// when dlopen or dlsym fails (with dlerror on stderr).
#include <cstdio>
#include <dlfcn.h>

int main(int argc, char** argv)
{
    if (argc != 2)
        return 3;
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        std::fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    std::printf("loaded\n");
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"));
    if (init == nullptr) {
        std::fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    std::fflush(stdout);
    std::printf("InitializeInjection returned %d\n", init());
    return 0;
}
