#pragma once
// The trace files of a test directory (tests/data, the shared public traces): every regular file under
// it but the notes (.md, .txt), sorted; none when the directory is absent. The tests that must hold "on
// every trace" loop over these and skip what loadTrace refuses (forEachLoadableTrace).
#include "core/error.h"
#include "importers/importer_registry.h"

#include <algorithm>
#include <filesystem>
#include <vector>

namespace gpumem::test {
inline std::vector<std::filesystem::path> tracesUnder(const std::filesystem::path& dir)
{
    std::vector<std::filesystem::path> paths;
    if (!std::filesystem::exists(dir))
        return paths;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() != ".md" && e.path().extension() != ".txt")
            paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    return paths;
}

// Calls visit(path, trace) for each file of tracesUnder(dir) that loadTrace reads (the damaged and hostile
// inputs, and the fixtures of other kinds, are left out).
template <typename Visit>
void forEachLoadableTrace(const std::filesystem::path& dir, Visit&& visit)
{
    for (const auto& path : tracesUnder(dir)) {
        Trace trace;
        try {
            trace = loadTrace(path.string());
        } catch (const Error&) {
            continue;
        }
        visit(path, trace);
    }
}
} // namespace gpumem::test
