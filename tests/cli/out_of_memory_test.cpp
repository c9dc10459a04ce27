// What `gpumem VERB` says on std::bad_alloc (cli/out_of_memory.h; review finding 2026-12-02: a bare "out of
// memory"). A tiny RLIMIT_AS makes the process fail elsewhere first (thread creation, shared libraries:
// "Resource temporarily unavailable" at 40 MB on this machine), so the message is checked as a function.
#include "cli/out_of_memory.h"

#include <gtest/gtest.h>

#include <cstdlib>

using gpumem::cli::convertOutOfMemoryMessage;
using gpumem::cli::outOfMemoryMessage;

namespace {
// Whether a path holds a .gmt, told by its name here (main asks the content).
bool namedGmt(const std::string& path) { return path.ends_with(".gmt"); }
} // namespace

TEST(OutOfMemoryMessage, NamesTheTraceAndSaysToConvertItForAVerbThatStreamsAGmt)
{
    EXPECT_EQ(outOfMemoryMessage("replay", { "run.json.gz" }, namedGmt),
        "out of memory while working on run.json.gz: the trace needs more memory than the process may use. replay "
        "streams a .gmt in bounded memory: convert it first (gpumem convert run.json.gz -o run.gmt) and give "
        "the .gmt (docs/streaming.md), or run where it may use more (ulimit -v, the job's or container's memory "
        "limit)");
}

TEST(OutOfMemoryMessage, ForAGmtNamesTheOptionsThatReadItWholeAndTheBudget)
{
    EXPECT_EQ(outOfMemoryMessage("analyze", { "run.gmt" }, namedGmt),
        "out of memory while working on run.gmt: the trace needs more memory than the process may use. analyze streams "
        "a .gmt holding what its answer needs (the blocks live at once), but reads it whole with some options (--strict "
        "among them; docs/streaming.md lists them): if one was given, leave it out; or run where it may use more "
        "(ulimit -v, the job's or container's memory limit)");
    // Where the environment makes the replays read the trace whole, the message says to unset it.
    ::setenv("GPUMEM_REPLAY_IN_MEMORY", "1", 1);
    const std::string set = outOfMemoryMessage("explain", { "run.gmt" }, namedGmt);
    ::unsetenv("GPUMEM_REPLAY_IN_MEMORY");
    EXPECT_NE(set.find("; GPUMEM_REPLAY_IN_MEMORY=1 is set, which reads it whole for the replays: unset it; or run where"),
        std::string::npos) << set;
    EXPECT_EQ(outOfMemoryMessage("fit", { "run.gmt" }, namedGmt).find("GPUMEM_"), std::string::npos);
}

TEST(OutOfMemoryMessage, AVerbThatHoldsTheTraceSaysSoAndListsAtMostThreeTraces)
{
    EXPECT_EQ(outOfMemoryMessage("ranks", { "a.gmt", "b.jsonl" }, namedGmt),
        "out of memory while working on a.gmt, b.jsonl: the traces need more memory than the process may use. ranks "
        "holds the whole trace in memory: run where it may use more (ulimit -v, the job's or container's memory "
        "limit); docs/streaming.md lists the verbs that stream a .gmt");
    // diff analyses each .gmt side in passes (2026-12-03): the side to convert is named.
    EXPECT_NE(outOfMemoryMessage("diff", { "a.gmt", "b.jsonl" }, namedGmt)
                  .find(". diff streams a .gmt in bounded memory: convert it first (gpumem convert b.jsonl -o b.gmt)"),
        std::string::npos);
    const std::string many = outOfMemoryMessage("ranks", { "r0.gmt", "r1.gmt", "r2.gmt", "r3.gmt", "r4.gmt" }, namedGmt);
    EXPECT_EQ(many.rfind("out of memory while working on r0.gmt, r1.gmt, r2.gmt and 2 more: ", 0), 0u) << many;
    // The .gmt beside a file without an extension, or in a folder with a dot.
    EXPECT_NE(outOfMemoryMessage("sweep", { "v1.2/run" }, namedGmt).find("(gpumem convert v1.2/run -o v1.2/run.gmt)"), std::string::npos);
    EXPECT_NE(outOfMemoryMessage("sweep", { "/tmp/.hidden" }, namedGmt).find("-o /tmp/.hidden.gmt)"), std::string::npos);
    // No trace given (a verb that failed before its arguments were read): no name.
    EXPECT_EQ(outOfMemoryMessage("record", {}, namedGmt).rfind("out of memory: the trace needs more memory", 0), 0u);
}

// The content of an input is looked at only where the message needs it: for a verb that streams a .gmt, up to
// the first input that is not one (review finding: main detected the format of every input, for any verb).
TEST(OutOfMemoryMessage, AsksWhetherAnInputIsAGmtOnlyUpToTheFirstThatIsNot)
{
    std::vector<std::string> asked;
    auto isGmt = [&](const std::string& path) {
        asked.push_back(path);
        return namedGmt(path);
    };
    const std::string m = outOfMemoryMessage("replay", { "a.gmt", "b.jsonl.gz", "c.json", "d.gmt" }, isGmt);
    EXPECT_EQ(asked, (std::vector<std::string> { "a.gmt", "b.jsonl.gz" }));
    EXPECT_NE(m.find("(gpumem convert b.jsonl.gz -o b.gmt)"), std::string::npos) << m;
    asked.clear();
    outOfMemoryMessage("ranks", { "a.json", "b.json" }, isGmt);
    EXPECT_TRUE(asked.empty());
}

// convert of a .jsonl (streamed where it is in trace order) says what holds memory there and what to do (the
// helper's finding: it said only "the trace needs more memory than is available").
TEST(OutOfMemoryMessage, ConvertOfAJsonlSaysWhatItHoldsAndHowToStreamIt)
{
    EXPECT_EQ(convertOutOfMemoryMessage("run.jsonl", false),
        "run.jsonl: out of memory while converting it (the trace needs more memory than the process may use): convert "
        "streams a .jsonl whose records are in trace order (memory events by time, then sequence; kernels by start), "
        "holding only its tables, annotations and counter samples, and reads one out of order whole: write the file in "
        "trace order, or run where it may use more (ulimit -v, the job's or container's memory limit)");
    EXPECT_EQ(convertOutOfMemoryMessage("run.jsonl", true),
        "run.jsonl: out of memory while converting it (the trace needs more memory than the process may use): "
        "GPUMEM_CONVERT_WHOLE is set, so the .jsonl was read whole: unset it to stream it, or run where it may use more "
        "(ulimit -v, the job's or container's memory limit)");
}
