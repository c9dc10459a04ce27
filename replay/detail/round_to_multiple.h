#pragma once
// replay/'s name for the one "round to a multiple" helper, which lives in core (core/detail/round_to_multiple.h)
// because the importers round sizes too. Header-only, constexpr, thread-safe (pure).
#include "core/detail/round_to_multiple.h"

namespace gpumem::replay::detail {

using gpumem::detail::roundDownToMultiple;
using gpumem::detail::roundUpToMultiple;

} // namespace gpumem::replay::detail
