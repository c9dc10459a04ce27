// `gpumem record` end to end through the real binary, on this machine without a GPU.
#include "core/gmt_format.h"
#include "tracer_test_util.h"

#include <gtest/gtest.h>

using namespace gpumem;
using namespace gpumem::tracer::test;

TEST(RecordVerb, PassesOnTheExitCodeOfTheCommand)
{
    TempDir out, scratch;
    const std::string gpumem = std::string(GPUMEM_CLI) + " record -o " + out.path() + " -- ";
    auto ok = runShell(gpumem + "/bin/true", scratch);
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
    EXPECT_EQ(ok.out, "");
    EXPECT_NE(ok.err.find("no trace file was written"), std::string::npos) << ok.err;
    auto seven = runShell(gpumem + "sh -c 'exit 7'", scratch);
    EXPECT_EQ(seven.exitCode, 7) << seven.err;
    EXPECT_TRUE(out.files().empty());
}

TEST(RecordVerb, ListsTheTraceOfAnNvtxProgramOnStdout)
{
    TempDir out, scratch;
    auto r = runShell(std::string(GPUMEM_CLI) + " record -o " + out.path() + " -- " + GPUMEM_NVTX_APP, scratch);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto files = out.files();
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(r.out.rfind(files[0] + "\t", 0), 0u) << r.out;
    EXPECT_EQ(readGmt(files[0]).annotations().size(), 10u); // nvtx_app.cpp: 7 ranges, 1 start/end range, 1 mark, 1 range popped with nvtxRangePopPayload
}

TEST(RecordVerb, WithoutACommandIsAUsageError)
{
    TempDir scratch;
    auto r = runShell(std::string(GPUMEM_CLI) + " record -o " + scratch.path(), scratch);
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find("no command given"), std::string::npos) << r.err;
}
