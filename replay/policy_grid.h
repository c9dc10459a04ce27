#pragma once
// Brace grids for `gpumem sweep`: one policy spec text with {a,b,…} alternatives stands for every spec
// the alternatives spell, e.g. "pytorch:max_split_size_mb:{64,128},garbage_collection_threshold:{0.6,0.8}"
// is four specs (the cartesian product, the leftmost brace varying slowest, as a shell's brace expansion
// orders them). Commas inside [...] (PYTORCH_CUDA_ALLOC_CONF list values) do not split alternatives.
// Pure functions; thread-safe.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem::replay {

// The most specs one grid may expand to (a typo like {1..100000} should not start a day of replays).
constexpr std::size_t kMaxGridSize = 4096;

// Expands the braces of `text`; a text without braces is returned as the only element. Blanks around
// an alternative are dropped (`{64, 128}` expands like `{64,128}`). Throws
// UsageError naming the character offset for a nested brace, an unbalanced '{' or '}', an empty
// brace "{}", an empty alternative ("{64,}") or a '}' inside an unclosed '[' of an alternative, and
// for a grid of more than kMaxGridSize specs.
std::vector<std::string> expandBraceGrid(std::string_view text);

} // namespace gpumem::replay
