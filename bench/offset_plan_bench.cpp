// Offset planning speed (allocators.md §6.2): greedy-by-size with the time tree
// (planOffsetsGreedyBySize) against TFLite's quadratic scan (planOffsetsByScan) on the same blocks, up
// to the sizes where the scan is still bearable, then the tree alone up to 2·10^6 blocks with the
// std::sort of the blocks as the in-run baseline. Blocks are shaped like training steps: 2,000 blocks
// live throughout (parameters, optimizer state), then per step a burst of activations freed in reverse
// order (backward), each with a short temporary, 1 % of them carried into the next step.
//   offset_plan_bench [--max N] [--scan-max N]
#include "replay/offset_planner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace gpumem;
using namespace gpumem::replay;

namespace {

std::vector<PlanBlock> trainingLike(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<PlanBlock> blocks;
    blocks.reserve(n);
    std::uint64_t t = 0;
    // parameters and optimizer state: 2,000 blocks live from the start to the end
    for (int i = 0; i < 2000 && blocks.size() < n; ++i)
        blocks.push_back({ 512 * (1 + rng() % 8192), t++, ~std::uint64_t(0), false });
    std::vector<std::size_t> carried; // blocks that outlive their step (1 %), freed a few steps later
    while (blocks.size() < n) {
        // one step: 100–300 activations, each with a short temporary, freed in reverse (backward)
        const std::size_t acts = 100 + rng() % 200;
        std::vector<std::size_t> open;
        for (std::size_t i = 0; i < acts && blocks.size() < n; ++i) {
            open.push_back(blocks.size());
            Bytes size = 512 * (1 + rng() % (rng() % 10 == 0 ? 65536 : 2048));
            blocks.push_back({ size, t++, ~std::uint64_t(0), false });
            if (blocks.size() < n) {
                blocks.push_back({ 512 * (1 + rng() % 512), t, t + 2, false });
                t += 2;
            }
        }
        for (std::size_t c : carried)
            blocks[c].end = t++;
        carried.clear();
        for (auto it = open.rbegin(); it != open.rend(); ++it) {
            if (rng() % 100 == 0)
                carried.push_back(*it);
            else
                blocks[*it].end = t++;
        }
    }
    return blocks;
}

template <typename F> double seconds(F&& f)
{
    auto a = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

} // namespace

int main(int argc, char** argv)
{
    std::size_t maxN = 2'000'000, scanMax = 100'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--max"))
            maxN = std::strtoull(argv[i + 1], nullptr, 10);
        else if (!std::strcmp(argv[i], "--scan-max"))
            scanMax = std::strtoull(argv[i + 1], nullptr, 10);
    }
    std::printf("%10s %12s %12s %10s %12s %12s %10s\n", "blocks", "tree s", "scan s", "scan/tree", "sort s",
        "tree/sort", "arena/LB");
    for (std::size_t n = 10'000; n <= maxN; n *= 10) {
        for (std::size_t m : { n, 2 * n }) {
            if (m > maxN || (m == 2 * n && n * 20 <= maxN))
                continue;
            auto blocks = trainingLike(m, m);
            OffsetPlan tree, scan;
            double tTree = seconds([&] { tree = planOffsetsGreedyBySize(blocks); });
            double tScan = -1;
            if (m <= scanMax) {
                tScan = seconds([&] { scan = planOffsetsByScan(blocks); });
                if (scan.offsets != tree.offsets) {
                    std::fprintf(stderr, "tree and scan differ at %zu blocks\n", m);
                    return 1;
                }
            }
            std::vector<PlanBlock> copy = blocks;
            double tSort = seconds([&] {
                std::sort(copy.begin(), copy.end(), [](const PlanBlock& a, const PlanBlock& b) {
                    return a.size != b.size ? a.size > b.size : a.start < b.start;
                });
            });
            const double ratio = double(tree.arena) / double(maxLiveBytes(blocks));
            if (tScan >= 0)
                std::printf("%10zu %12.3f %12.3f %10.1f %12.4f %12.1f %10.4f\n", m, tTree, tScan, tScan / tTree, tSort,
                    tTree / tSort, ratio);
            else
                std::printf("%10zu %12.3f %12s %10s %12.4f %12.1f %10.4f\n", m, tTree, "-", "-", tSort, tTree / tSort,
                    ratio);
            std::fflush(stdout);
        }
    }
    return 0;
}
