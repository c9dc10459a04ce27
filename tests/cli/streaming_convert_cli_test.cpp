// `gpumem convert X.jsonl -o Y.gmt` writes the .gmt while reading (issue 22, core/jsonl_to_gmt.h): the
// same bytes as the whole-trace path (GPUMEM_CONVERT_WHOLE=1) on the .jsonl of tests/data and on every
// public trace written as .jsonl; an input out of order says on stderr that it is read whole; a cut
// gzip is an error that leaves no file.
#include "core/gmt_format.h"
#include "core/jsonl_format.h"
#include "core/jsonl_to_gmt.h"
#include "importers/importer_registry.h"
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace fs = std::filesystem;
using gpumem::test::runCli;
using gpumem::test::scratchDir;
using gpumem::test::slurp;
using namespace gpumem;

namespace {

gpumem::test::ScratchCleanup cleanup;

void spit(const fs::path& p, const std::string& bytes)
{
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// convert IN -o OUT, streamed or (GPUMEM_CONVERT_WHOLE=1) whole as before.
gpumem::test::CliResult convert(const std::string& in, const fs::path& out, bool whole)
{
    if (whole)
        ::setenv("GPUMEM_CONVERT_WHOLE", "1", 1);
    auto r = runCli("convert '" + in + "' -o '" + out.string() + "'");
    ::unsetenv("GPUMEM_CONVERT_WHOLE");
    return r;
}

std::size_t filesIn(const fs::path& dir)
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
        ++n;
    return n;
}

} // namespace

TEST(StreamingConvert, WritesTheWholeTracesBytesForEveryDataTrace)
{
    const fs::path dir = scratchDir("streaming-convert");
    std::size_t compared = 0;
    for (const auto& e : fs::directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / "tests/data")) {
        if (e.path().extension() != ".jsonl")
            continue;
        SCOPED_TRACE(e.path().string());
        const auto streamed = convert(e.path().string(), dir / "streamed.gmt", false);
        const auto whole = convert(e.path().string(), dir / "whole.gmt", true);
        ASSERT_EQ(streamed.exitCode, 0) << streamed.err;
        ASSERT_EQ(whole.exitCode, 0) << whole.err;
        EXPECT_EQ(streamed.out.substr(streamed.out.find(" (")), whole.out.substr(whole.out.find(" ("))); // "(gmt, N memory events)"
        EXPECT_EQ(streamed.err, "");
        EXPECT_EQ(slurp(dir / "streamed.gmt"), slurp(dir / "whole.gmt"));
        ++compared;
    }
    EXPECT_GE(compared, 20u);
    EXPECT_EQ(filesIn(dir), 2u) << "no spool or temporary file is left";
}

TEST(StreamingConvert, EveryPublicTraceAsJsonlIsWrittenAlike)
{
    const fs::path root(GPUMEM_PUBLIC_TRACES);
    if (!fs::exists(root))
        GTEST_SKIP() << "the public traces (" << root << ") are absent";
    const fs::path dir = scratchDir("streaming-convert-public");
    std::size_t compared = 0;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file() || e.path().filename() == "SOURCES.md" || !detectFormat(e.path().string()))
            continue;
        SCOPED_TRACE(e.path().string());
        const Trace trace = loadTrace(e.path().string());
        const fs::path jsonl = dir / "public.jsonl";
        writeJsonl(trace, jsonl.string());
        // In process: the whole path, and the streamed one in its default chunks and in chunks of 7.
        for (std::size_t perChunk : { std::size_t(65536), std::size_t(7) }) {
            writeGmt(readJsonl(jsonl.string()), (dir / "whole.gmt").string(), perChunk);
            JsonlToGmtOptions options;
            options.eventsPerChunk = perChunk;
            const JsonlToGmtResult r = writeGmtFromJsonl(jsonl.string(), (dir / "streamed.gmt").string(), options);
            EXPECT_TRUE(r.streamed) << r.fallback;
            EXPECT_EQ(r.memoryEvents, trace.memory().count());
            EXPECT_EQ(slurp(dir / "streamed.gmt"), slurp(dir / "whole.gmt")) << perChunk << " events per chunk";
        }
        ++compared;
    }
    EXPECT_GE(compared, 10u);
    std::cout << compared << " public traces written alike through .jsonl\n";
}

TEST(StreamingConvert, AnInputOutOfOrderSaysItIsReadWholeAndWritesTheSameFile)
{
    const fs::path dir = scratchDir("streaming-convert-unsorted");
    std::ifstream in(fs::path(GPUMEM_SOURCE_DIR) / "tests/data/tiny_alloc_free.jsonl");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::swap(lines[3], lines[4]); // the first two memory events (lines 4 and 5)
    std::string text;
    for (const auto& l : lines)
        text += l + "\n";
    const fs::path file = dir / "unsorted.jsonl";
    spit(file, text);
    const auto streamed = convert(file.string(), dir / "streamed.gmt", false);
    const auto whole = convert(file.string(), dir / "whole.gmt", true);
    ASSERT_EQ(streamed.exitCode, 0) << streamed.err;
    // (The note is wrapped within 100 columns, continuations indented by two: joined again here.)
    EXPECT_EQ(gpumem::test::replaceAll(streamed.err, "\n  ", " "), "gpumem convert: note: " + file.string()
            + ":5: a memory event earlier than the one before it (by time, then seq): the trace is read again whole, to be sorted; "
              "its memory grows with the event count\n");
    EXPECT_EQ(whole.err, "");
    EXPECT_EQ(slurp(dir / "streamed.gmt"), slurp(dir / "whole.gmt"));
}

TEST(StreamingConvert, ACutGzipFailsNamingTheFileAndLeavesNoFile)
{
    const fs::path dir = scratchDir("streaming-convert-cut");
    const fs::path gz = dir / "cut.jsonl.gz";
    ASSERT_EQ(std::system(("gzip -c '" GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl' > '" + (dir / "full.gz").string() + "'").c_str()), 0);
    const std::string full = slurp(dir / "full.gz");
    spit(gz, full.substr(0, full.size() / 2));
    fs::remove(dir / "full.gz");
    const fs::path out = dir / "out.gmt";
    spit(out, "an older file");
    const auto r = runCli("convert '" + gz.string() + "' -o '" + out.string() + "'");
    EXPECT_EQ(r.exitCode, 1) << r.err;
    EXPECT_EQ(r.err.rfind("gpumem convert: error: " + gz.string() + ": ", 0), 0u) << r.err;
    EXPECT_EQ(slurp(out), "an older file") << "the file it would have replaced is kept";
    EXPECT_EQ(filesIn(dir), 2u) << "no temporary or spool file is left";
}

TEST(StreamingConvert, ToStandardOutputTheSpoolGoesToTheTemporaryFolder)
{
    // OUT under /dev/ is written directly (cli/output_file.h); the spool is not made in /dev. Standard
    // output a pipe: the spool's chunks cannot be copied in the kernel (copy_file_range), so they are
    // read and written. The "wrote" line goes to stderr, not after the .gmt (it used to: trailing bytes).
    const fs::path dir = scratchDir("streaming-convert-stdout");
    const std::string in = GPUMEM_SOURCE_DIR "/traces/mlp_train.jsonl";
    ASSERT_EQ(convert(in, dir / "whole.gmt", true).exitCode, 0);
    const fs::path piped = dir / "piped";
    const fs::path said = dir / "said";
    ASSERT_EQ(std::system(("'" GPUMEM_CLI "' convert --to gmt '" + in + "' -o /dev/stdout 2>'" + said.string() + "' | cat > '"
                              + piped.string() + "'")
                              .c_str()),
        0);
    EXPECT_EQ(slurp(piped), slurp(dir / "whole.gmt"));
    EXPECT_EQ(slurp(said), "wrote /dev/stdout (gmt, 208 memory events)\n");
    fs::remove(said);
    EXPECT_EQ(filesIn(dir), 2u);
}
