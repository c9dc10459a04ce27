// A JSON trace whose parse runs out of memory is said to run out of memory (loadTrace's message, with what to
// do), not to be damaged JSON. Found while checking that message: `gpumem info` of a 3 MB TraceLens .json.gz
// under `prlimit --as` of 120–360 MB said "invalid JSON (Error allocating memory, we're most likely out of
// memory); the file is damaged or not a Kineto trace". simdjson reports a failed allocation as the error code
// MEMALLOC, not as std::bad_alloc; the Kineto, memory-timeline and snapshot-JSON readers took it for a syntax
// error (the last one only where its parser's allocation, not another, failed first). The smallest inputs: a small trace of each format with 16 MiB of blanks in it (simdjson's parser
// allocates about 5.7 bytes a byte of input, the read about 1), loaded in a child whose address space is held
// to what it uses plus 3 times the blanks.
#include "importers/importer_registry.h"
#include "tests/core/address_space_limit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {
constexpr std::size_t kBlanks = std::size_t(16) << 20;

std::string slurp(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// What loadTrace(path) says in a child held to the address space it uses plus 3 × kBlanks ("no error" when it
// loads).
std::string loadedUnderATightLimit(const std::string& path)
{
    return gpumem::test::whatUnderAddressSpaceLimit(3 * kBlanks, [&] { gpumem::loadTrace(path); });
}

// `content` with kBlanks blanks before its last byte (the closing ']' or '}') at `name` in a fresh folder:
// loaded whole, it is a trace; under the tight limit, its parse runs out of memory and says so.
void expectOutOfMemory(const std::string& name, const std::string& content, const std::string& format)
{
    SCOPED_TRACE(format);
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem_simdjson_oom_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / name).string();
    const std::size_t last = content.find_last_not_of(" \n");
    ASSERT_NE(last, std::string::npos);
    std::ofstream(path, std::ios::binary) << content.substr(0, last) << std::string(kBlanks, ' ') << content.substr(last);
    const gpumem::Importer* used = nullptr;
    EXPECT_NO_THROW(gpumem::loadTrace(path, {}, &used));
    ASSERT_NE(used, nullptr);
    EXPECT_EQ(used->name(), format);
    const std::string said = loadedUnderATightLimit(path);
    EXPECT_EQ(said.rfind(path + ": out of memory while reading it as " + format + " (", 0), 0u) << said;
    EXPECT_EQ(said.find("damaged"), std::string::npos) << said;
    std::filesystem::remove_all(dir);
}
} // namespace

TEST(SimdjsonOutOfMemory, AKinetoParseThatRunsOutOfMemoryIsSaidToRunOutOfMemory)
{
    expectOutOfMemory("padded.json", slurp(GPUMEM_SOURCE_DIR "/tests/data/kineto/prewarm_a.json"), "kineto");
}

TEST(SimdjsonOutOfMemory, AMemoryTimelineParseThatRunsOutOfMemoryIsSaidToRunOutOfMemory)
{
    expectOutOfMemory("padded.raw.json", "[[-1, 1, 4096, 0], [1000, 2, 2048, 4], [1100, 2, 2048, 4]]",
        "pytorch-memory-timeline");
}

TEST(SimdjsonOutOfMemory, ASnapshotJsonParseThatRunsOutOfMemoryIsSaidToRunOutOfMemory)
{
    expectOutOfMemory("padded.json", slurp(GPUMEM_SOURCE_DIR "/tests/data/snapshot/annotated_scopes.json"), "pytorch-snapshot");
}
