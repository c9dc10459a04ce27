#pragma once
// The PyTorch snapshots among the shared public traces (../shared/traces/public/SOURCES.md), relative to
// GPUMEM_PUBLIC_TRACES: the tests that must hold "on every public snapshot" loop over these and skip
// those absent.
#include <array>
#include <filesystem>
#include <string>
#include <vector>

namespace gpumem::test {
inline constexpr std::array<const char*, 5> kPublicSnapshots = { "cs336-magma27/memory_snapshot.pickle",
    "cs336-bcrafton/memory_snapshot.pickle", "cs336-silmont2000/mem_snapshot.pickle",
    "cs336-silmont2000/memory_forward_bf16_128.pickle", "flexgen-llm-inference/1.3b_snapshot.pickle" };

// The public snapshots present under GPUMEM_PUBLIC_TRACES (defined by the including test target), each as
// its name in kPublicSnapshots and its full path.
struct PublicSnapshot {
    const char* rel;
    std::string path;
};
inline std::vector<PublicSnapshot> presentPublicSnapshots()
{
    std::vector<PublicSnapshot> present;
    for (const char* rel : kPublicSnapshots) {
        std::string path = std::string(GPUMEM_PUBLIC_TRACES) + "/" + rel;
        if (std::filesystem::exists(path))
            present.push_back({ rel, std::move(path) });
    }
    return present;
}
} // namespace gpumem::test
