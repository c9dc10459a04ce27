// The --annotate-modules helper (tracer/python) on CPU-only torch: sitecustomize installs global
// module hooks, a stand-in records the NVTX calls, and a small model's forward and backward must
// produce properly nested ranges named by module path.
#include "tracer_test_util.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace gpumem::tracer::test;

namespace {
std::string pythonWithTorch(const TempDir& scratch)
{
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("GPUMEM_TEST_PYTHON"); env && *env)
        candidates.push_back(env);
    if (*GPUMEM_TEST_PYTHON)
        candidates.push_back(GPUMEM_TEST_PYTHON);
    candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
    for (const auto& py : candidates)
        if (runShell(py + " -c 'import torch'", scratch).exitCode == 0)
            return py;
    return {};
}
} // namespace

TEST(AnnotateModules, ForwardAndBackwardRangesNestByModulePath)
{
    TempDir scratch;
    const std::string python = pythonWithTorch(scratch);
    if (python.empty())
        GTEST_SKIP() << "no Python with torch found (apt-get install python3-torch, or set GPUMEM_TEST_PYTHON)";
    const std::string src = GPUMEM_SOURCE_DIR;
    auto r = runShell("PYTHONPATH=" + src + "/tracer/python GPUMEM_ANNOTATE_MODULES=1 " + python + " " + src
            + "/tests/tracer/annotate_modules_check.py",
        scratch);
    ASSERT_EQ(r.exitCode, 0) << r.out << r.err;

    // Rebuild each thread's stack from the recorded calls; every range is written as its full path.
    std::map<std::string, std::vector<std::string>> stacks;
    std::vector<std::string> opened;
    std::string phase = "forward";
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
        std::istringstream f(line);
        std::string op, thread, name;
        f >> op >> thread >> name;
        if (op == "mark") {
            phase = "backward";
            for (auto& [t, s] : stacks)
                ASSERT_TRUE(s.empty()) << "forward left ranges open on thread " << t;
            continue;
        }
        auto& stack = stacks[thread];
        if (op == "push") {
            stack.push_back(name);
            std::string path;
            for (const auto& s : stack)
                path += (path.empty() ? "" : " > ") + s;
            opened.push_back(path);
        } else {
            ASSERT_EQ(op, "pop") << line;
            ASSERT_FALSE(stack.empty()) << "pop without push in " << phase;
            stack.pop_back();
        }
    }
    for (auto& [t, s] : stacks)
        EXPECT_TRUE(s.empty()) << "ranges left open on thread " << t;
    const std::vector<std::string> expected = {
        "fwd:mod:Net",
        "fwd:mod:Net > fwd:mod:Net.encoder",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.0",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.0 > fwd:mod:Net.encoder.0.fc",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.0 > fwd:mod:Net.encoder.0.act",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.1",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.1 > fwd:mod:Net.encoder.1.fc",
        "fwd:mod:Net > fwd:mod:Net.encoder > fwd:mod:Net.encoder.1 > fwd:mod:Net.encoder.1.act",
        "fwd:mod:Net > fwd:mod:Net.head",
        // Backward runs the modules in reverse; the in-place ReLUs have no backward of their own.
        "bwd:mod:Net",
        "bwd:mod:Net > bwd:mod:Net.head",
        "bwd:mod:Net > bwd:mod:Net.encoder",
        "bwd:mod:Net > bwd:mod:Net.encoder > bwd:mod:Net.encoder.1",
        "bwd:mod:Net > bwd:mod:Net.encoder > bwd:mod:Net.encoder.1 > bwd:mod:Net.encoder.1.fc",
        "bwd:mod:Net > bwd:mod:Net.encoder > bwd:mod:Net.encoder.0",
        "bwd:mod:Net > bwd:mod:Net.encoder > bwd:mod:Net.encoder.0 > bwd:mod:Net.encoder.0.fc",
    };
    EXPECT_EQ(opened, expected);
}
