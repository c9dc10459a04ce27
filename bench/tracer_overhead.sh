#!/bin/sh
# The tracer's costs as ratios against a baseline measured in the same run (bench/tracer_overhead.cpp):
#   NVTX push/pop pair with the tracer as NVTX tool vs NVTX without a tool;
#   MEMORY2 record conversion vs walking the buffer alone.
# usage: bench/tracer_overhead.sh [BUILD_DIR]   (default build/dev; needs GPUMEM_BUILD_TRACER=ON)
set -eu
build=${1:-build/dev}
bench="$build/bench/bench_tracer_overhead"
so="$(cd "$build/tracer" && pwd)/libgpumem_tracer.so"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
base=$("$bench" nvtx)
traced=$(NVTX_INJECTION64_PATH="$so" GPUMEM_TRACE_DIR="$out" "$bench" nvtx)
echo "baseline (no NVTX tool):"; echo "$base" | sed 's/^/  /'
echo "with libgpumem_tracer.so:"; echo "$traced" | sed 's/^/  /'
for key in nvtx_ns_per_pair_1_thread nvtx_ns_per_pair_4_threads; do
  b=$(echo "$base" | awk -v k=$key '$1==k {print $2}')
  t=$(echo "$traced" | awk -v k=$key '$1==k {print $2}')
  awk -v k=$key -v b="$b" -v t="$t" 'BEGIN { printf "%s: tracer %.1f ns vs baseline %.1f ns (%.0fx, +%.1f ns per pair)\n", k, t, b, t/b, t-b }'
done
echo "trace written: $(ls -l "$out"/*.gmt | awk '{print $5}') bytes"
echo "record conversion (ActivityConverter vs cuptiActivityGetNextRecord alone):"
"$bench" convert | sed 's/^/  /'
