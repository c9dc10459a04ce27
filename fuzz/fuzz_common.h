#pragma once
// Shared by the libFuzzer harnesses: what every harness does with a trace it managed to read, so
// the derived paths (pairing, the .jsonl writer) are fuzzed as well. Not thread-safe (one harness
// per process).
#include "core/jsonl_format.h"
#include "core/trace.h"

#include <ostream>
#include <streambuf>

namespace gpumem::fuzz {

// Pairs the trace and writes it as .jsonl to nowhere. A gpumem::Error from the reader is the
// expected answer to bad input; any other exception escapes and libFuzzer reports it as a crash.
inline void exercise(const Trace& trace)
{
    (void)trace.allocations();
    (void)trace.stats();
    struct NullBuffer : std::streambuf {
        int overflow(int c) override { return c; }
    } buffer;
    std::ostream out(&buffer);
    writeJsonl(trace, out);
}

} // namespace gpumem::fuzz
