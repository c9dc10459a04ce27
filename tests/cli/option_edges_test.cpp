// Edges of the command-line options (brief tx items 2–5): size units and their limit, --at before the
// analyzed device's first event in diff, --device as a position or a label, singular wording.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

using gpumem::test::runCli;

namespace {
const std::string kTwoDevices = "tests/data/two_devices_streams.jsonl";
}

// Item 3: PiB and EiB were refused; above 2^64 − 1 B the option is named.
TEST(SizeOptions, AcceptPetaAndExaUnitsAndRefuseMoreThan64Bits)
{
    const auto pib = runCli("replay --capacity 1PiB --format csv tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(pib.exitCode, 0) << pib.err;
    const auto over = runCli("replay --capacity 16EiB tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(over.exitCode, 2);
    EXPECT_EQ(over.err, "gpumem replay: --capacity: '16EiB' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), "
                        "the largest size gpumem handles\n");
    const auto fit = runCli("fit --max-capacity 20EB tests/data/tiny_alloc_free.jsonl");
    EXPECT_EQ(fit.exitCode, 2);
    EXPECT_EQ(fit.err, "gpumem fit: --max-capacity: '20EB' is more than 2^64 - 1 B (18446744073709551615 B, about 16 EiB), "
                       "the largest size gpumem handles\n");
}

// Item 4: diff compared an empty breakdown at a --at before the device's first memory event, silently.
// tests/data/two_devices_streams.jsonl: cuda:1 starts 200 ns after the trace start.
TEST(DiffAt, ATimeBeforeTheDevicesFirstEventIsRefusedAsAnalyzeRefusesIt)
{
    const std::string words = "--at '100ns' is before the first memory event of cuda:1, at +0.000000 s from the trace "
                              "start (@1732000000000000200); give a later time or --device\n";
    const auto analyze = runCli("analyze --at 100ns --device 1 " + kTwoDevices);
    EXPECT_EQ(analyze.exitCode, 2);
    EXPECT_EQ(analyze.err, "gpumem analyze: " + words);
    const auto diff = runCli("diff --at 100ns --device 1 " + kTwoDevices + " " + kTwoDevices);
    EXPECT_EQ(diff.exitCode, 2) << diff.out;
    EXPECT_EQ(diff.out, "");
    EXPECT_EQ(diff.err, "gpumem diff: A (" + kTwoDevices + "): " + words); // which trace (review finding)
    EXPECT_EQ(runCli("diff --at 200ns --device 1 " + kTwoDevices + " " + kTwoDevices).exitCode, 0);
}

// Item 5: --device 3 was a position in `gpumem info`'s list while hip:3 is an ordinal; a label now selects
// by label, a bare number keeps meaning the position. tests/data/two_hip_devices.jsonl lists hip:3 first
// (4 KiB) and hip:1 second (8 KiB).
TEST(DeviceOption, ABareNumberIsThePositionAndALabelSelectsByLabel)
{
    const std::string trace = " --by size tests/data/two_hip_devices.jsonl";
    const std::string hip3 = "|                    gpumem memory summary, device hip:3                    |\n";
    const std::string hip1 = "|                    gpumem memory summary, device hip:1                    |\n";
    for (const char* d : { "0", "hip:3" }) {
        const auto r = runCli(std::string("analyze --device ") + d + trace);
        ASSERT_EQ(r.exitCode, 0) << d << ": " << r.err;
        EXPECT_NE(r.out.find(hip3), std::string::npos) << d << ": " << r.out;
        EXPECT_NE(r.out.find("| [4.00 KiB, 8.00 KiB)                  |            |   4096 B   | 100.0 % |\n"), std::string::npos) << r.out;
    }
    for (const char* d : { "1", "hip:1" }) {
        const auto r = runCli(std::string("analyze --device ") + d + trace);
        ASSERT_EQ(r.exitCode, 0) << d << ": " << r.err;
        EXPECT_NE(r.out.find(hip1), std::string::npos) << d << ": " << r.out;
    }
    const auto position3 = runCli("analyze --device 3" + trace);
    EXPECT_EQ(position3.exitCode, 2);
    // Brief esc item 5: an out-of-range position gets the one message every command gives, with labels.
    EXPECT_EQ(position3.err, "gpumem analyze: --device '3' is not a device of tests/data/two_hip_devices.jsonl; its devices "
                             "are hip:3, hip:1 (a label, or a position 0, 1, … in 'gpumem info')\n");
    const auto replay3 = runCli("replay --device 3 tests/data/two_hip_devices.jsonl");
    EXPECT_EQ(replay3.exitCode, 2);
    EXPECT_EQ(replay3.err, "gpumem replay" + position3.err.substr(std::string("gpumem analyze").size()));
    // replay, sweep and fit take the same forms: hip:1 peaks at 8 KiB allocated.
    const auto replay = runCli("replay --format csv --policy ideal --device hip:1 tests/data/two_hip_devices.jsonl");
    ASSERT_EQ(replay.exitCode, 0) << replay.err;
    EXPECT_EQ(replay.out.substr(replay.out.find('\n') + 1).substr(0, 23), "ideal,8192,8192,0.00000") << replay.out;
    EXPECT_EQ(runCli("replay --format csv --policy ideal --device 1 tests/data/two_hip_devices.jsonl").out, replay.out);
}

TEST(DeviceOption, AnUnknownLabelListsTheTracesDeviceLabels)
{
    const std::string tail = " is not a device of tests/data/two_hip_devices.jsonl; its devices are hip:3, hip:1 (a label, "
                             "or a position 0, 1, … in 'gpumem info')\n";
    for (const char* verb : { "replay", "sweep", "fit" }) {
        const auto r = runCli(std::string(verb) + " --policy ideal --device cuda:3 tests/data/two_hip_devices.jsonl");
        EXPECT_EQ(r.exitCode, 2) << verb;
        EXPECT_EQ(r.err, std::string("gpumem ") + verb + ": --device 'cuda:3'" + tail);
    }
    const auto analyze = runCli("analyze --device cuda:3 tests/data/two_hip_devices.jsonl");
    EXPECT_EQ(analyze.err, "gpumem analyze: --device 'cuda:3'" + tail);
    const auto diff = runCli("diff --device hip:0 tests/data/two_hip_devices.jsonl tests/data/two_hip_devices.jsonl");
    EXPECT_EQ(diff.exitCode, 2);
    EXPECT_EQ(diff.err, "gpumem diff: --device 'hip:0'" + tail);
    EXPECT_NE(runCli("help analyze").out.find("or its label there (cuda:1, hip:3, cpu)"), std::string::npos);
}
