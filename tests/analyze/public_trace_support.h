#pragma once
// The shared public traces for the analyze tests: read in place (never copied into the repository),
// skipped with a message where they are absent (common.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gpumem::test {
inline std::string publicTrace(const std::string& relative) { return std::string(GPUMEM_PUBLIC_TRACES) + "/" + relative; }
} // namespace gpumem::test

#define REQUIRE_PUBLIC_TRACE(path)                                                                                     \
    if (!std::filesystem::exists(path))                                                                                \
    GTEST_SKIP() << "public trace " << (path) << " is absent (set GPUMEM_PUBLIC_TRACES to ../shared/traces/public)"
