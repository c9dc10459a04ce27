#pragma once
// The unit of a recorded counter series, told by its name (docs/trace-format.md §4.7): bytes unless the
// name ends in "(ppm)" (a ratio in parts per million, e.g. the XLA BFC allocator's "Fragmentation
// (ppm)") or "(count)" (a plain number of things, e.g. memory_summary()'s "num_alloc_retries (count)").
// Free functions, no state: thread-safe.
#include <string_view>

namespace gpumem {

enum class CounterUnit { ByteSize, PartsPerMillion, Count };

constexpr CounterUnit counterUnit(std::string_view name)
{
    if (name.ends_with("(ppm)"))
        return CounterUnit::PartsPerMillion;
    if (name.ends_with("(count)"))
        return CounterUnit::Count;
    return CounterUnit::ByteSize;
}

constexpr bool isByteCounter(std::string_view name) { return counterUnit(name) == CounterUnit::ByteSize; }

} // namespace gpumem
