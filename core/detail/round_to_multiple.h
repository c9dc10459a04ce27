#pragma once
// Rounding a byte count to a multiple of a step (an alignment, a page, a chunk, a capacity step): the
// one spelling every replay policy, the device and the core importers use (replay/ reaches it through
// replay/detail/round_to_multiple.h). Header-only, constexpr, thread-safe (pure).
// Roundings that are not "to a multiple" stay with their policy and are not this: power-of-two rounding
// (buddy's bit_ceil), PyTorch's round_size with roundup_power2_divisions, size-class geometry.
#include "core/types.h"

#include <limits>

namespace gpumem::detail {

// The smallest multiple of `multiple` (> 0; 0 is a precondition violation, and a compile error in a
// constant expression) that is >= `value`; `value` itself when it is a multiple (0 stays 0).
// Top of the range: 0 exactly when no such multiple fits in 64 bits (value > the largest multiple of
// `multiple` below 2^64), never a wrapped value. For a power-of-two `multiple` (every alignment, page
// and chunk in replay/) this is bit for bit the former spelling `(value + multiple - 1) / multiple *
// multiple`; for other multiples that spelling also gave 0 for the few values within `multiple` of 2^64
// that do have a multiple (its sum wrapped), and for values below 2^63 (every size read from an int64)
// both agree for any multiple. Callers whose input can reach the top bound it first
// (kMaxDeviceBytes, replay/simulated_device.h) or read 0 as "cannot be represented".
constexpr Bytes roundUpToMultiple(Bytes value, Bytes multiple)
{
    const Bytes rest = value % multiple;
    if (rest == 0)
        return value;
    const Bytes up = multiple - rest;
    return value > std::numeric_limits<Bytes>::max() - up ? 0 : value + up;
}

// The largest multiple of `multiple` (> 0) that is <= `value` (never overflows).
constexpr Bytes roundDownToMultiple(Bytes value, Bytes multiple) { return value / multiple * multiple; }

static_assert(roundUpToMultiple(0, 512) == 0);
static_assert(roundUpToMultiple(1, 512) == 512);
static_assert(roundUpToMultiple(512, 512) == 512);
static_assert(roundUpToMultiple(513, 512) == 1024);
static_assert(roundUpToMultiple(7, 3) == 9);
static_assert(roundUpToMultiple(5, 1) == 5);
static_assert(roundUpToMultiple(~Bytes(0) - 511, 512) == ~Bytes(0) - 511); // the largest multiple itself
static_assert(roundUpToMultiple(~Bytes(0) - 510, 512) == 0); // no multiple fits: 0
static_assert(roundUpToMultiple(~Bytes(0), 3) == ~Bytes(0)); // 2^64 - 1 is a multiple of 3
static_assert(roundUpToMultiple(~Bytes(0), 7) == 0); // the largest multiple of 7 is 2^64 - 2
static_assert(roundUpToMultiple(~Bytes(0) - 1, 7) == ~Bytes(0) - 1); // a multiple of 7 within 7 of 2^64
static_assert(roundDownToMultiple(1023, 512) == 512);

} // namespace gpumem::detail
