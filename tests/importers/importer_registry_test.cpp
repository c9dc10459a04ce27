// What loadTrace says when memory runs out while an importer reads a trace (importers/importer_registry.h;
// review finding 2026-12-02: it said what happened, not what to do). Checked as a function, as
// tests/cli/out_of_memory_test.cpp checks main's message: a small RLIMIT_AS fails elsewhere first.
#include "importers/importer_registry.h"

#include <gtest/gtest.h>

using gpumem::gmtPathBeside;
using gpumem::outOfMemoryWhileReading;

TEST(OutOfMemoryWhileReading, AJsonlTraceIsToldToConvertToGmtWhichStreamsIt)
{
    EXPECT_EQ(outOfMemoryWhileReading("runs/step.jsonl.gz", "jsonl"),
        "runs/step.jsonl.gz: out of memory while reading it as jsonl (the trace needs more memory than the process may "
        "use): convert it to .gmt, which reads a .jsonl in trace order (as gpumem writes one) in memory that grows with "
        "its tables, not its events (gpumem convert runs/step.jsonl.gz -o runs/step.gmt), and give the .gmt: info, "
        "analyze, report, replay, sweep, fit, diff and explain stream a .gmt (docs/streaming.md); or run where it may use more "
        "(ulimit -v, the job's or container's memory limit)");
}

// The message does not know the verb: it says which verbs hold the trace and what helps with the others (review
// finding: explain, diff and convert were told to leave out options they were not given; diff and explain stream
// since 2026-12-03).
TEST(OutOfMemoryWhileReading, AGmtIsToldWhichVerbsAndOptionsReadItWhole)
{
    EXPECT_EQ(outOfMemoryWhileReading("run.gmt", "gmt"),
        "run.gmt: out of memory while reading it as gmt (the trace needs more memory than the process may use): "
        "ranks and convert hold the whole trace; info, analyze, report, replay, sweep, fit, diff and explain stream a "
        ".gmt (docs/streaming.md) but for the options it lists (--strict among them): leave such options out, and "
        "GPUMEM_REPLAY_IN_MEMORY unset (at 1 it reads the trace whole for replay, sweep, fit, explain and the verdicts of "
        "analyze and report); or run where it may use more (ulimit -v, the job's or container's memory limit)");
}

// Convert reads such a format with the same importer, whole: converting where the verb ran out would run out too.
TEST(OutOfMemoryWhileReading, AnotherFormatIsToldToConvertOnceWhereMoreMemoryIsAvailable)
{
    EXPECT_EQ(outOfMemoryWhileReading("w0.pt.trace.json.gz", "kineto"),
        "w0.pt.trace.json.gz: out of memory while reading it as kineto (the trace needs more memory than the process "
        "may use): gpumem reads a kineto trace whole, and so does convert: convert it to .gmt once where more memory "
        "is available (gpumem convert w0.pt.trace.json.gz -o w0.pt.trace.gmt), then info, analyze, report, replay, "
        "sweep, fit, diff and explain stream a .gmt (docs/streaming.md); or run where it may use more (ulimit -v, the job's or "
        "container's memory limit)");
}

TEST(GmtPathBeside, ReplacesATrailingGzThenTheExtension)
{
    EXPECT_EQ(gmtPathBeside("run.json.gz"), "run.gmt");
    EXPECT_EQ(gmtPathBeside("snap.pickle"), "snap.gmt");
    EXPECT_EQ(gmtPathBeside("v1.2/run"), "v1.2/run.gmt");
    EXPECT_EQ(gmtPathBeside("/tmp/.hidden"), "/tmp/.hidden.gmt");
}
