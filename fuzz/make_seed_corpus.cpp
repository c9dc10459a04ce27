// Writes the fuzz seed corpora: make_seed_corpus <source dir> <output dir> creates <output>/<fuzzer>/
// files from the hand-written micro traces (tests/data) and the samples (traces). One block per
// harness; a new importer's harness adds its own.
#include "core/gmt_format.h"
#include "core/jsonl_format.h"

#include <cstdio>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_seed_corpus <source dir> <output dir>\n");
        return 2;
    }
    const fs::path source = argv[1], out = argv[2];
    std::vector<fs::path> jsonl;
    for (const char* dir : { "tests/data", "traces" })
        if (fs::is_directory(source / dir))
            for (const auto& e : fs::directory_iterator(source / dir))
                if (e.path().extension() == ".jsonl" && fs::file_size(e.path()) < (1 << 20)) // small seeds fuzz faster
                    jsonl.push_back(e.path());
    // The .gmt seeds serve the whole reader and the streamed one alike.
    const char* gmtHarnesses[] = { "gmt_reader_fuzzer", "gmt_source_fuzzer" };
    for (const char* harness : gmtHarnesses)
        fs::create_directories(out / harness);
    fs::create_directories(out / "jsonl_reader_fuzzer");
    for (const auto& path : jsonl) {
        fs::copy_file(path, out / "jsonl_reader_fuzzer" / path.filename(), fs::copy_options::overwrite_existing);
        gpumem::Trace trace = gpumem::readJsonl(path.string());
        // Whole tables and one chunk, and many small chunks (every chunk boundary is a place to mutate).
        for (const char* harness : gmtHarnesses) {
            gpumem::writeGmt(trace, (out / harness / (path.stem().string() + ".gmt")).string());
            gpumem::writeGmt(trace, (out / harness / (path.stem().string() + ".chunks3.gmt")).string(), 3);
        }
    }
    std::printf("fuzz seeds: %zu traces → %s\n", jsonl.size(), out.string().c_str());
    return 0;
}
