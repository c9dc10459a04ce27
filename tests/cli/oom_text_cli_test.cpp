// `gpumem info` on the out-of-memory texts (importers/oom_text_importer.h): a counters-only trace with
// one OOM event reads as such, with the counters the message gives (tests/data/oom/SOURCES.md).
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using gpumem::test::runCli;

TEST(OomTextCli, InfoShowsTheMessagesCounters)
{
    auto r = runCli("info tests/data/oom/current_issue16417.txt");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("  format          pytorch-oom-message\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  device cuda:0 (23.65 GiB)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    events          oom 1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    recorded peak   Total Allocated: 22.90 GiB (24588687770 B) at +0.000000 s\n"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("    recorded peak   Process In Use: 23.60 GiB (25340307046 B)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  anomalies       none\n"), std::string::npos) << r.out;
}

TEST(OomTextCli, InfoPrintsCountsAsNumbers)
{
    // memory_summary's "cudaMalloc retries: 6" is a count, not 6 bytes.
    auto r = runCli("info tests/data/oom/message_and_summary_fairseq2442.txt");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("    recorded peak   num_alloc_retries (count): 6 at +0.000000 s\n"), std::string::npos)
        << r.out;
    auto j = runCli("info --format json tests/data/oom/message_and_summary_fairseq2442.txt");
    ASSERT_EQ(j.exitCode, 0) << j.err;
    const auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc[0]["reader"], "pytorch-oom-message");
    EXPECT_EQ(doc[0]["devices"][0]["recorded_peaks"]["num_ooms (count)"]["bytes"], 1);
}

TEST(OomTextCli, HelpFormatsListsTheTextFormats)
{
    auto r = runCli("help formats");
    for (const char* name : { "pytorch-oom-message", "pytorch-memory-summary", "tf-oom-report" })
        EXPECT_NE(r.out.find(name), std::string::npos) << name;
}

TEST(OomTextCli, TheMemoryAllocatedBeforeAMessageIsNotCalledAProfilerTrace)
{
    // The 22.90 GiB PyTorch held when the message was printed: analyze and replay said it "was already allocated
    // when this profiler trace began", of a trace that is an error message.
    for (const char* verb : { "analyze", "replay" }) {
        const auto r = runCli(std::string(verb) + " tests/data/oom/current_issue16417.txt");
        ASSERT_EQ(r.exitCode, 0) << verb << ": " << r.err;
        const std::string all = r.out + r.err;
        EXPECT_NE(all.find("22.90 GiB was already allocated when the trace began"), std::string::npos) << all;
        EXPECT_EQ(all.find("profiler trace"), std::string::npos) << all;
    }
}
