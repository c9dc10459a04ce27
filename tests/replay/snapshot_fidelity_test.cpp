// Fidelity on the public PyTorch snapshots that carry a trace (SOURCES.md §3, cs336-*): replaying
// the recorded request events from the reconstructed initial state with the `pytorch` policy and the
// recorded settings must reproduce the recorded segment events in order, put every block at its
// recorded address, and end in the recorded `segments`, block for block.
#include "importers/snapshot_importer.h"
#include "replay/fidelity.h"
#include "replay/snapshot_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

using namespace gpumem;
using namespace gpumem::replay;

namespace {

struct Expected {
    const char* path;
    std::uint64_t segmentEvents; // recorded after the initial state
    std::uint64_t allocs; // alloc events replayed (not counting the initial state)
    std::uint64_t initialSegments, initialBlocks;
    Bytes peakReserved;
};

const Expected kFiles[] = {
    { "cs336-bcrafton/memory_snapshot.pickle", 0, 2162, 96, 447, 4238344192 },
    { "cs336-magma27/memory_snapshot.pickle", 0, 1721, 216, 229, 14180941824 },
    { "cs336-silmont2000/mem_snapshot.pickle", 9, 36, 0, 0, 3781165056 },
    { "cs336-silmont2000/memory_forward_bf16_128.pickle", 0, 937, 43, 137, 861929472 },
};

void PrintTo(const Expected& e, std::ostream* os) { *os << e.path; }

class SnapshotFidelity : public ::testing::TestWithParam<Expected> { };

std::string name(const ::testing::TestParamInfo<Expected>& info)
{
    std::string n = info.param.path;
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c)))
            c = '_';
    return n;
}

} // namespace

TEST_P(SnapshotFidelity, ReproducesSegmentEventsAddressesAndEndState)
{
    const Expected& e = GetParam();
    std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + e.path;
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = importPytorchSnapshot(path);
    FidelityReport rep = checkFidelity(trace, parsePolicySpec("pytorch"));

    EXPECT_EQ(rep.initialSegments, e.initialSegments);
    EXPECT_EQ(rep.initialBlocks, e.initialBlocks);
    EXPECT_EQ(rep.initialNotAdopted, 0u);
    EXPECT_EQ(rep.recordedSegmentEvents, e.segmentEvents);
    EXPECT_EQ(rep.simulatedSegmentEvents, e.segmentEvents);
    EXPECT_EQ(rep.matched, e.segmentEvents);
    EXPECT_FALSE(rep.firstMismatch.has_value()) << "first mismatch at segment event " << rep.firstMismatch->index;
    EXPECT_EQ(rep.allocAddressesCompared, e.allocs);
    EXPECT_EQ(rep.allocAddressesMatched, e.allocs)
        << "first differing alloc: trace event " << rep.firstAddressMismatchEvent.value_or(0);
    EXPECT_EQ(rep.recordedPeakReserved, e.peakReserved);
    EXPECT_EQ(rep.peakReservedError, 0);
    EXPECT_EQ(rep.ooms, 0u);

    auto recorded = fromSnapshotSegments(snapshotSegments(readSnapshotDocument(path)));
    auto differences = compareStates(recorded, rep.finalState.segments);
    EXPECT_TRUE(differences.empty()) << differences.size()
                                     << " differences, first: " << (differences.empty() ? "" : differences.front());
    EXPECT_EQ(recorded.size(), rep.finalState.segments.size());
}

INSTANTIATE_TEST_SUITE_P(PublicSnapshots, SnapshotFidelity, ::testing::ValuesIn(kFiles), name);

TEST(SnapshotFidelity, OtherSettingsDoNotReproduceTheRecording)
{
    // The same comparison detects a policy that is not the recorded one: with power-2 rounding the
    // blocks land elsewhere and the end state differs.
    std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/cs336-silmont2000/mem_snapshot.pickle";
    if (!std::filesystem::exists(path))
        GTEST_SKIP() << "public trace " << path << " is absent (GPUMEM_PUBLIC_TRACES)";
    Trace trace = importPytorchSnapshot(path);
    FidelityReport rep = checkFidelity(trace, parsePolicySpec("pytorch:roundup_power2_divisions:4"));
    auto recorded = fromSnapshotSegments(snapshotSegments(readSnapshotDocument(path)));
    auto differences = compareStates(recorded, rep.finalState.segments);
    EXPECT_FALSE(differences.empty());
    EXPECT_LT(rep.allocAddressesMatched, rep.allocAddressesCompared);
    std::cout << "roundup_power2_divisions:4 on " << path << ": " << rep.allocAddressesMatched << "/"
              << rep.allocAddressesCompared << " alloc addresses, " << rep.matched << "/" << rep.recordedSegmentEvents
              << " segment events, " << differences.size()
              << " end-state differences, first: " << (differences.empty() ? "" : differences.front()) << '\n';
}
