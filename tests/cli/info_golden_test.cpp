// Golden tests: `gpumem info` text output for every trace in tests/data/ and traces/ must equal the
// committed tests/cli/golden/<dir>_<name>.info.txt, with nothing on stderr. Regenerate after an
// intended change with GPUMEM_UPDATE_GOLDEN=1 and review the diff.
#include "tests/cli/cli_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace fs = std::filesystem;
using gpumem::test::runCli;
using gpumem::test::slurp;

namespace {
std::vector<std::string> goldenInputs()
{
    std::vector<std::string> v;
    for (const char* dir : { "tests/data", "traces" }) {
        fs::path d = fs::path(GPUMEM_SOURCE_DIR) / dir;
        if (!fs::exists(d))
            continue;
        for (const auto& e : fs::directory_iterator(d)) {
            auto ext = e.path().extension().string();
            if (e.is_regular_file() && (ext == ".jsonl" || ext == ".gmt"))
                v.push_back(std::string(dir) + "/" + e.path().filename().string());
        }
    }
    std::sort(v.begin(), v.end());
    return v;
}

fs::path goldenFor(const std::string& input)
{
    std::string name = input;
    std::replace(name.begin(), name.end(), '/', '_');
    return fs::path(GPUMEM_SOURCE_DIR) / "tests/cli/golden" / (name + ".info.txt");
}
} // namespace

TEST(InfoGolden, EveryBundledTraceMatchesItsGoldenOutput)
{
    auto inputs = goldenInputs();
    ASSERT_FALSE(inputs.empty()) << "no traces in tests/data or traces";
    const bool update = std::getenv("GPUMEM_UPDATE_GOLDEN") != nullptr;
    for (const auto& input : inputs) {
        SCOPED_TRACE(input);
        auto r = runCli("info " + input);
        EXPECT_EQ(r.exitCode, 0);
        EXPECT_EQ(r.err, "") << "stderr must stay empty";
        auto golden = goldenFor(input);
        if (update) {
            std::ofstream(golden, std::ios::binary) << r.out;
            continue;
        }
        ASSERT_TRUE(fs::exists(golden)) << "missing " << golden << "; run with GPUMEM_UPDATE_GOLDEN=1 and review it";
        EXPECT_EQ(r.out, slurp(golden));
    }
}

TEST(InfoGolden, EveryGoldenFileHasItsTrace)
{
    auto inputs = goldenInputs();
    for (const auto& e : fs::directory_iterator(fs::path(GPUMEM_SOURCE_DIR) / "tests/cli/golden")) {
        bool used = std::any_of(inputs.begin(), inputs.end(), [&](const std::string& i) { return goldenFor(i) == e.path(); });
        EXPECT_TRUE(used) << e.path() << " has no trace any more; delete it";
    }
}
