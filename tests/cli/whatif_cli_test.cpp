// gpumem sweep, gpumem fit, gpumem replay --colocate and the CI gates (--fail-if-oom, --max-reserved):
// outputs on the sample and micro traces, exit codes 0/2/3, and one clear line for bad input.
#include "tests/cli/cli_runner.h"

#include "core/error.h"
#include "importers/importer_registry.h"
#include "replay/policy_registry.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <unistd.h>

using gpumem::test::runCli;

namespace {
const std::string kPair = "tests/data/colocate_a.jsonl tests/data/colocate_b.jsonl";

std::size_t lines(const std::string& s) { return std::size_t(std::count(s.begin(), s.end(), '\n')); }
} // namespace

TEST(SweepCli, ExpandsGridsAndMarksTheBestRowInEveryFormat)
{
    auto text = runCli("sweep traces/mlp_train.jsonl --policy 'pytorch:max_split_size_mb:{64,128}' --policy "
                       "'{direct,pytorch:expandable_segments:True}' --jobs 2");
    ASSERT_EQ(text.exitCode, 0) << text.err;
    // Issue 16: header, 4 rows, the recorded row, the best line and the two-line note on the recorded row;
    // "vs bound" is the overhead column.
    EXPECT_EQ(lines(text.out), 11u) << text.out;
    // The answer first (review finding M9, 2026-12-04): the best and the worst row, and the run's own figure.
    EXPECT_EQ(text.out.rfind("Best of 4 configurations: direct, peak reserved 640.72 MiB with no OOM; the worst,\n"
                             "  pytorch:expandable_segments:True, 722.00 MiB; the run itself reserved 730.00 MiB.\n",
                  0),
        0u)
        << text.out;
    // Sorted by peak reserved: direct (640.72 MiB) first and best, expandable segments (722 MiB) last.
    EXPECT_NE(text.out.find("\n*  direct                               640.72 MiB   1.000 x      640.72 MiB           192 "
                            "    0\n"),
        std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("   pytorch:expandable_segments:True     722.00 MiB   1.127 x      640.72 MiB            14 "
                            "    0\n   recorded                             730.00 MiB   1.139 x               -         "
                            "    -     -\n* best: direct\n"),
        std::string::npos)
        << text.out;
    auto json = nlohmann::json::parse(
        runCli("sweep traces/mlp_train.jsonl --policy 'pytorch:max_split_size_mb:{64,128}' --format json").out);
    ASSERT_EQ(json.size(), 3u); // and the recorded row
    EXPECT_EQ(json[2]["recorded"], true);
    EXPECT_EQ(json[0]["spec"], "pytorch:max_split_size_mb:64");
    EXPECT_EQ(json[0]["best"], true);
    EXPECT_EQ(json[1]["best"], false);
    EXPECT_EQ(json[0]["peak_reserved"], 698351616u);
    auto csv = runCli("sweep traces/mlp_train.jsonl --policy '{ideal,direct}' --format csv");
    ASSERT_EQ(csv.exitCode, 0);
    EXPECT_EQ(csv.out,
        "best,spec,policy,peak_reserved,peak_allocated,waste_at_peak,device_calls,ooms,first_oom_time_ns,"
        "reserved_is_lower_bound\n"
        "1,ideal,ideal,671843328,671843328,0.000000,0,0,,0\n"
        "0,direct,direct,671843328,671843328,0.000000,192,0,,0\n"
        "0,recorded,recorded,765460480,,,,,,0\n");
}

TEST(SweepCli, BadGridsExitTwoWithOneLine)
{
    for (const auto& [grid, says] :
        std::vector<std::pair<std::string, std::string>> { { "'pytorch:max_split_size_mb:{}'", "empty braces" },
            { "'pytorch:max_split_size_mb:{64,{128}}'", "nested '{'" },
            { "'pytorch:max_split_size_mb:{64,128'", "without a matching '}'" },
            { "'{pytorch,nosuchpolicy}'", "unknown policy 'nosuchpolicy'; valid policies: pytorch" },
            { "'pytorch:max_split_size_mb:{64,x}'", "max_split_size_mb" } }) {
        auto r = runCli("sweep traces/mlp_train.jsonl --policy " + grid);
        EXPECT_EQ(r.exitCode, 2) << grid;
        EXPECT_EQ(lines(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty());
    }
    EXPECT_EQ(runCli("sweep traces/mlp_train.jsonl --policy ideal --jobs 0").exitCode, 2);
    EXPECT_EQ(runCli("sweep traces/mlp_train.jsonl").exitCode, 2); // --policy is required
}

TEST(SweepCli, GatesLookAtTheBestConfiguration)
{
    // One configuration fits in 660 MiB (direct), so --fail-if-oom passes although pytorch fails there.
    auto ok = runCli("sweep traces/mlp_train.jsonl --policy '{pytorch,direct}' --capacity 660MiB --fail-if-oom");
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
    auto oom = runCli("sweep traces/mlp_train.jsonl --policy '{pytorch,direct}' --capacity 600MiB --fail-if-oom");
    EXPECT_EQ(oom.exitCode, 3);
    EXPECT_NE(oom.err.find("gate: the best configuration"), std::string::npos) << oom.err;
    EXPECT_EQ(runCli("sweep traces/mlp_train.jsonl --policy '{pytorch,direct}' --max-reserved 641MiB").exitCode, 0);
    EXPECT_EQ(runCli("sweep traces/mlp_train.jsonl --policy '{pytorch,direct}' --max-reserved 640MiB").exitCode, 3);
}

TEST(ReplayCli, GatesExitThreeWhenAnyPolicyViolatesThem)
{
    auto fits
        = runCli("replay traces/mlp_train.jsonl --policy pytorch --policy direct --fail-if-oom --max-reserved 1GiB");
    EXPECT_EQ(fits.exitCode, 0) << fits.err;
    auto oom = runCli("replay traces/mlp_train.jsonl --policy pytorch --policy direct --capacity 660MiB --fail-if-oom");
    EXPECT_EQ(oom.exitCode, 3);
    EXPECT_NE(oom.out.find("pytorch: first OOM"), std::string::npos) << oom.out; // the table still comes
    EXPECT_EQ(lines(oom.err), 1u) << oom.err;
    EXPECT_NE(oom.err.find("gpumem replay: gate: pytorch had "), std::string::npos) << oom.err;
    auto big = runCli("replay traces/mlp_train.jsonl --policy pytorch --max-reserved 600MiB");
    EXPECT_EQ(big.exitCode, 3);
    EXPECT_NE(big.err.find("reserved 666.00 MiB (698351616 B), more than --max-reserved 600.00 MiB"), std::string::npos)
        << big.err;
    EXPECT_EQ(runCli("replay traces/mlp_train.jsonl --max-reserved 0").exitCode, 2);
    EXPECT_EQ(runCli("replay traces/mlp_train.jsonl --max-reserved lots").exitCode, 2);
    auto pair = runCli("replay " + kPair); // two traces without --colocate: two ranks of a job (job_whatif_cli_test)
    EXPECT_EQ(pair.exitCode, 0) << pair.err;
    EXPECT_EQ(pair.out.rfind("job of 2 ranks; ", 0), 0u) << pair.out;
    auto help = runCli("help replay");
    EXPECT_NE(help.out.find("--fail-if-oom"), std::string::npos);
    EXPECT_NE(help.out.find("exits 3"), std::string::npos);
}

TEST(FitCli, ReportsTheSmallestCapacityWithoutOom)
{
    auto text
        = runCli("fit tests/data/colocate_a.jsonl --policy direct --policy pytorch:per_process_memory_fraction:0.5");
    ASSERT_EQ(text.exitCode, 0) << text.err;
    // Issue 16: shorter headings, the policy shortened in the middle to stay within 100 columns.
    EXPECT_EQ(text.out,
        "Smallest of 2: direct fits in 24.00 MiB, the smallest device it replays on without an OOM; next\n"
        "  pytorch:per_process_memory_fraction:0.5 in 48.00 MiB; the live peak, which no policy holds in\n"
        "  less, is 24.00 MiB.\n"
        "policy                                fits in  reserved there  unlimited reserved  live peak  probes\n"
        "direct                              24.00 MiB       24.00 MiB           24.00 MiB  24.00 MiB       1\n"
        "pytorch:per…ss_memory_fraction:0.5  48.00 MiB       24.00 MiB           24.00 MiB  24.00 MiB      11\n");
    auto json = nlohmann::json::parse(runCli("fit traces/mlp_train.jsonl --format json").out);
    ASSERT_EQ(json.size(), 2u); // and the recorded row (mlp_train records its segments)
    EXPECT_EQ(json[0]["spec"], "pytorch");
    EXPECT_EQ(json[0]["capacity"], 698351616u); // 666 MiB
    EXPECT_EQ(json[0]["monotone"], true);
    auto csv = runCli("fit tests/data/colocate_a.jsonl --policy ideal --format csv");
    EXPECT_EQ(csv.out,
        "spec,policy,fits,capacity,peak_reserved_at_capacity,live_peak,unlimited_peak_reserved,probes,monotone,"
        "reserved_is_lower_bound\n"
        "ideal,ideal,1,25165824,25165824,25165824,25165824,1,1,0\n");
}

TEST(FitCli, GateAndBadInput)
{
    EXPECT_EQ(runCli("fit tests/data/colocate_a.jsonl --policy direct --max-reserved 24MiB").exitCode, 0);
    auto over = runCli("fit tests/data/colocate_a.jsonl --policy direct --max-reserved 20MiB");
    EXPECT_EQ(over.exitCode, 3);
    EXPECT_NE(over.err.find("gate: direct"), std::string::npos) << over.err;
    // Fits nowhere up to 16 MiB: a 1 TiB gate cannot judge that (exit 4, see FitsNowhereIsExitFour), an
    // 8 MiB gate can (it needs more than 16 MiB, so more than 8 MiB: exit 3).
    auto nowhere = runCli("fit tests/data/colocate_a.jsonl --policy direct --max-capacity 16MiB --max-reserved 8MiB");
    EXPECT_EQ(nowhere.exitCode, 3);
    EXPECT_NE(nowhere.out.find("direct: no capacity up to 16.00 MiB runs without OOM"), std::string::npos)
        << nowhere.out;
    EXPECT_NE(nowhere.err.find("gpumem fit: gate: direct needs more than --max-capacity 16.00 MiB, so more than "
                               "--max-reserved 8.00 MiB\n"),
        std::string::npos)
        << nowhere.err;
    EXPECT_EQ(runCli("fit tests/data/colocate_a.jsonl --policy direct --max-capacity 16MiB --max-reserved 1TiB").exitCode, 4);
    for (const char* bad :
        { "--max-capacity 0", "--step 0", "--capacity 80GiB", "--policy nosuchpolicy", "--jobs -1", "--format xml" }) {
        auto r = runCli(std::string("fit tests/data/colocate_a.jsonl ") + bad);
        EXPECT_EQ(r.exitCode, 2) << bad;
        EXPECT_TRUE(r.out.empty()) << bad;
        EXPECT_FALSE(r.err.empty()) << bad;
    }
}

// Review finding: fit exited 0 when a policy fit nowhere below --max-capacity, so a script read the
// table's "no fit" row as a result.
TEST(FitCli, FitsNowhereIsExitFourWithAMessage)
{
    // Below the live peak (24 MiB): nothing can fit, and nothing was probed.
    auto below = runCli("fit tests/data/colocate_a.jsonl --policy direct --max-capacity 16MiB");
    EXPECT_EQ(below.exitCode, 4);
    EXPECT_NE(below.out.find("direct   no fit"), std::string::npos) << below.out; // the table still says it
    EXPECT_EQ(below.err,
        "gpumem fit: direct fits nowhere up to --max-capacity 16.00 MiB: its live peak, 24.00 MiB, is above it; raise "
        "--max-capacity to at least 24.00 MiB\n");
    // Above the live peak, but the policy's fraction cap fails every probe; the other policy fits.
    auto capped = runCli(
        "fit tests/data/colocate_a.jsonl --policy direct --policy pytorch:per_process_memory_fraction:0.5 --max-capacity 40MiB");
    EXPECT_EQ(capped.exitCode, 4);
    EXPECT_EQ(capped.err,
        "gpumem fit: pytorch:per_process_memory_fraction:0.5 fits nowhere up to --max-capacity 40.00 MiB: each of the 2 "
        "capacities tried had a failed request; raise --max-capacity\n");
    // One capacity tried (--max-capacity at the live peak): "the 1 capacity", not "each of the 1 capacities".
    auto one = runCli("fit tests/data/colocate_a.jsonl --policy pytorch:per_process_memory_fraction:0.5 --max-capacity 24MiB");
    EXPECT_EQ(one.exitCode, 4);
    EXPECT_EQ(one.err,
        "gpumem fit: pytorch:per_process_memory_fraction:0.5 fits nowhere up to --max-capacity 24.00 MiB: the 1 capacity "
        "tried had a failed request; raise --max-capacity\n");
    auto json = runCli("fit tests/data/colocate_a.jsonl --policy direct --max-capacity 16MiB --format json");
    EXPECT_EQ(json.exitCode, 4);
    EXPECT_EQ(nlohmann::json::parse(json.out)[0]["fits"], false);
    // It fits at 48 MiB: exit 0, nothing on stderr.
    auto fits = runCli("fit tests/data/colocate_a.jsonl --policy pytorch:per_process_memory_fraction:0.5 --max-capacity 48MiB");
    EXPECT_EQ(fits.exitCode, 0);
    EXPECT_EQ(fits.err, "");
    EXPECT_NE(runCli("help fit").out.find("Exit 4 when some policy fits nowhere"), std::string::npos);
    EXPECT_NE(runCli("--help").out.find("4 fit found no capacity up to --max-capacity"), std::string::npos);
}

TEST(FitCli, ARequestAboveTheLargestSimulatedDeviceIsNamedNotAskedToRaiseTheCapacity)
{
    // One request of 2^64 - 1 bytes fails even on a device of unlimited size (the engine's limit is
    // 4 EiB); fit said "each of the 20 capacities tried had a failed request; raise --max-capacity".
    auto r = runCli("fit tests/data/request_above_device_limit.jsonl --policy pytorch");
    EXPECT_EQ(r.exitCode, 4);
    EXPECT_NE(r.err.find("gpumem fit: pytorch fits nowhere up to --max-capacity "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(": a request of 18446744073709551615 B (trace event 0) is above the largest device gpumem "
                         "simulates, 4 EiB: no capacity serves it\n"),
        std::string::npos)
        << r.err;
}

TEST(ColocateCli, ReportsWhichProcessFailsFirstAndWhen)
{
    auto r = runCli("replay " + kPair + " --colocate --capacity 32MiB");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // Wrapped at 100 columns (issue 16 item 5).
    EXPECT_NE(r.out.find("first failure: colocate_a at +0.000003 s: request 12.00 MiB (12582912 B) on stream 0, trace "
                         "event 1;\n  colocate_a reserved 12.00 MiB, all processes 28.00 MiB; refused by the device "
                         "(32.00 MiB); the run\n  stopped there\n"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("combined peak reserved: 28.00 MiB at +0.000000 s\n"), std::string::npos) << r.out;
    auto later = nlohmann::json::parse(
        runCli("replay " + kPair + " --colocate --capacity 32MiB --offset colocate_b=4us --format json").out);
    EXPECT_EQ(later["first_failure"]["process"], "colocate_b");
    EXPECT_EQ(later["first_failure"]["time_ns"], 4000);
    EXPECT_EQ(later["first_failure"]["size"], 16777216u);
    EXPECT_EQ(later["fits"], false);
    auto fits = runCli("replay " + kPair + " --colocate --capacity 64MiB --fail-if-oom --max-reserved 40MiB");
    EXPECT_EQ(fits.exitCode, 0) << fits.err;
    EXPECT_NE(fits.out.find("fits: no process had a failed request"), std::string::npos);
    auto gate = runCli("replay " + kPair + " --colocate --capacity 32MiB --fail-if-oom");
    EXPECT_EQ(gate.exitCode, 3);
    EXPECT_NE(gate.err.find("gate: process colocate_a had 1 failed request"), std::string::npos) << gate.err;
    EXPECT_EQ(runCli("replay " + kPair + " --colocate --capacity 64MiB --max-reserved 39MiB").exitCode, 3);
    auto limited = runCli("replay " + kPair + " --colocate --capacity 64MiB --limit colocate_a=20MiB --format csv");
    EXPECT_NE(limited.out.find("\ncolocate_a,pytorch,20971520,0,12582912,0,12582912,1,1,3000,0,67108864\n"), std::string::npos)
        << limited.out;
    // The (combined) row leaves `limit` empty and gives the capacity in its own column (review finding:
    // the capacity sat in the limit column).
    EXPECT_NE(limited.out.find("\n(combined),,,0,"), std::string::npos) << limited.out;
    EXPECT_TRUE(limited.out.ends_with(",0,67108864\n")) << limited.out;
}

TEST(ColocateCli, BadInputExitsTwoWithOneLine)
{
    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>> {
             { " --colocate --capacity 64MiB --limit c=1GiB",
                 "names no process; the processes are: colocate_a, colocate_b" },
             { " --colocate", "--colocate needs --capacity" },
             { " --colocate --capacity 0", "--capacity 0 with --colocate" },
             { " --colocate --capacity 64MiB --offset colocate_b=soon", "give a duration" },
             { " --colocate --capacity 64MiB --policy colocate_b=nosuchpolicy", "unknown policy 'nosuchpolicy'" },
             { " --colocate --capacity 64MiB --policy ideal --policy direct", "one --policy SPEC for every process" },
             { " --colocate --capacity 64MiB --limit colocate_a", "write NAME=VALUE" },
             { " --limit colocate_a=1GiB", "--limit is for --colocate" } }) {
        auto r = runCli("replay " + kPair + args);
        EXPECT_EQ(r.exitCode, 2) << args;
        EXPECT_EQ(lines(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
    }
    EXPECT_EQ(runCli("replay tests/data/colocate_a.jsonl --colocate --capacity 64MiB").exitCode, 2);
}

// The table command on every public trace with addresses, with every registered policy that
// runs without options (and expandable segments): no policy reserves less than `ideal` (live bytes).
TEST(ReplayCli, EveryPolicyReservesAtLeastTheIdealPeakOnEveryPublicTrace)
{
    const std::string root = GPUMEM_PUBLIC_TRACES;
    if (!std::filesystem::exists(root))
        GTEST_SKIP() << "public traces are absent (GPUMEM_PUBLIC_TRACES=" << root << ")";
    std::string policies = " --policy ideal --policy pytorch:expandable_segments:True";
    for (const auto& p : gpumem::replay::registeredPolicies()) {
        try {
            gpumem::replay::validatePolicySpec(gpumem::replay::parsePolicySpec(p.name));
        } catch (const gpumem::UsageError&) {
            continue; // needs options
        }
        if (p.name != "ideal")
            policies += " --policy " + p.name;
    }
    int tables = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
        if (!entry.is_regular_file() || entry.path().filename() == "SOURCES.md")
            continue;
        gpumem::Trace trace = gpumem::loadTrace(entry.path().string());
        const auto& m = trace.memory();
        bool addresses = false;
        for (std::size_t i = 0; i < m.count() && !addresses; ++i)
            addresses = m.kind[i] == gpumem::EventKind::Alloc && m.address[i] != 0;
        if (!addresses)
            continue;
        auto r = runCli("replay '" + entry.path().string() + "'" + policies + " --format json");
        ASSERT_EQ(r.exitCode, 0) << entry.path() << ": " << r.err;
        auto rows = nlohmann::json::parse(r.out);
        const std::uint64_t ideal = rows[0]["peak_reserved"];
        EXPECT_GT(ideal, 0u) << entry.path();
        for (const auto& row : rows) {
            if (row["recorded"].get<bool>())
                continue; // the run's own peak reserved (issue 16), not a policy
            // Every row holds the memory from before a profiler trace now (vLLM graph capture: 178 GiB of KV
            // cache): a policy whose own pool is sized from the device may refuse it, said as its own limit.
            if (row["ooms"].get<std::uint64_t>() > 0) {
                ASSERT_FALSE(row["failures"].empty()) << entry.path() << " " << row["policy"];
                EXPECT_TRUE(row["failures"][0]["before_window"].get<bool>()) << entry.path() << " " << row["policy"];
                EXPECT_NE(row["failures"][0]["refused_by"].get<std::string>().find("own limit"), std::string::npos)
                    << entry.path() << " " << row["policy"];
                continue;
            }
            EXPECT_GE(row["peak_reserved"].get<std::uint64_t>(), ideal) << entry.path() << " " << row["policy"];
        }
        ++tables;
    }
    EXPECT_GE(tables, 8);
}

// Review finding: process names were cut at the first '.', so "Qwen_Qwen1.5-0.5B-Chat….json.gz" became
// "Qwen_Qwen1"; only the trace extensions are dropped now.
TEST(ColocateCli, ProcessNamesKeepDotsThatAreNotTraceExtensions)
{
    const auto dir = std::filesystem::temp_directory_path() / ("gpumem-colocate-names-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto copy = dir / "Qwen1.5-0.5B.pt.trace.jsonl";
    std::filesystem::copy_file(std::string(GPUMEM_SOURCE_DIR) + "/tests/data/colocate_a.jsonl", copy,
        std::filesystem::copy_options::overwrite_existing);
    auto r = runCli("replay '" + copy.string() + "' tests/data/colocate_b.jsonl --colocate --capacity 40MiB --limit Qwen1.5-0.5B=20MiB");
    std::filesystem::remove_all(dir);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("first failure: Qwen1.5-0.5B at +0.000003 s"), std::string::npos) << r.out;
}

TEST(FitCli, ATraceThatAllocatesNothingNeedsNoMemory)
{
    // Review finding: "fits in 2.00 MiB" (the smallest step) for a trace whose only request is 0 B.
    auto text = runCli("fit tests/data/zero_byte_alloc.jsonl --policy pytorch --policy direct");
    ASSERT_EQ(text.exitCode, 0) << text.err;
    EXPECT_EQ(text.out,
        "Every policy needs no memory: nothing is reserved on the device.\n"
        "policy   fits in  reserved there  unlimited reserved  live peak  probes\n"
        "pytorch      0 B             0 B                 0 B        0 B       0\n"
        "direct       0 B             0 B                 0 B        0 B       0\n"
        "pytorch: needs no memory (0 B): nothing is reserved on the device\n"
        "direct: needs no memory (0 B): nothing is reserved on the device\n");
    auto json = nlohmann::json::parse(runCli("fit tests/data/zero_byte_alloc.jsonl --format json").out);
    ASSERT_EQ(json.size(), 1u);
    EXPECT_EQ(json[0]["fits"], true);
    EXPECT_EQ(json[0]["capacity"], 0u);
    EXPECT_TRUE(json[0]["probes"].empty());
}

TEST(WhatIfCli, ATraceOfSegmentsOnlyIsSaidToHaveNothingToReplay)
{
    // Review finding (2026-12-04): a traced PyTorch run (the caching allocator's cudaMalloc as segment events,
    // no blocks: tracer_allocation_source.jsonl) was answered "pytorch peaks at 0 B reserved" by replay,
    // "needs no memory" by fit, and "nothing to explain" by explain, while the run had reserved 32 MiB.
    const std::string answer
        = "Nothing to replay: the device has no allocation requests in this trace, only segment events (the run\n"
          "  reserved 32.00 MiB); `gpumem record` and Nsight see a caching allocator's cudaMalloc and cuMemMap\n"
          "  calls, not its blocks, which a PyTorch memory snapshot of the same run holds\n"
          "  (torch.cuda.memory._record_memory_history).\n";
    const std::string trace = " tests/data/outside/tracer_allocation_source.jsonl";
    for (const std::string verb : { "replay", "fit", "sweep --policy pytorch:max_split_size_mb:{64,128}" }) {
        auto r = runCli(verb + trace);
        ASSERT_EQ(r.exitCode, 0) << verb << ": " << r.err;
        EXPECT_EQ(r.out.rfind(answer, 0), 0u) << verb << ":\n" << r.out;
    }
    auto e = runCli("explain" + trace);
    EXPECT_EQ(e.exitCode, 1);
    EXPECT_NE(e.err.find("has segment events (32.00 MiB reserved at the peak) but no allocation requests and no memory "
                         "counters: nothing to replay"),
        std::string::npos)
        << e.err;
}
