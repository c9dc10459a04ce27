#!/usr/bin/env bash
# Bounded fuzzing: builds the libFuzzer harnesses of fuzz/ in build/fuzz with clang, AddressSanitizer
# and UBSan, then runs each for N seconds over its seed corpus (generated from tests/data and traces/,
# plus fuzz/seeds/<name>/ if present). Findings go to build/fuzz/artifacts/<name>/; the exit status
# is non-zero if any harness crashed, leaked, hit a sanitizer report or timed out on an input.
#
#   scripts/fuzz.sh <name_fuzzer|all> [seconds=60]
#
# Reproduce a finding: build/fuzz/fuzz/<name> build/fuzz/artifacts/<name>/crash-…
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh <name_fuzzer|all> [seconds=60]" >&2
  exit 2
fi
target=$1
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/fuzz

cc=${CC:-$(command -v clang || command -v clang-14 || true)}
cxx=${CXX:-$(command -v clang++ || command -v clang++-14 || true)}
if [[ -z $cc || -z $cxx ]]; then
  echo "scripts/fuzz.sh: clang not found (apt-get install clang libclang-rt-dev)" >&2
  exit 1
fi
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=$cc CXX=$cxx cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$flags" -DGPUMEM_FUZZ=ON -DGPUMEM_BUILD_TESTS=OFF -DGPUMEM_BUILD_GUI=OFF \
    -DGPUMEM_BUILD_TRACER=OFF -DGPUMEM_BUILD_BENCHMARKS=OFF >/dev/null
fi
jobs=${FUZZ_BUILD_JOBS:-2}
if [[ $target == all ]]; then
  cmake --build "$build" -j "$jobs" --target gpumem_fuzzers
  mapfile -t names < <(find "$build/fuzz" -maxdepth 1 -type f -name '*_fuzzer' -perm -u+x -printf '%f\n' | sort)
else
  cmake --build "$build" -j "$jobs" --target gpumem_fuzz_seeds "$target"
  names=("$target")
fi
if [[ ${#names[@]} -eq 0 ]]; then
  echo "scripts/fuzz.sh: no *_fuzzer built in $build/fuzz" >&2
  exit 1
fi

status=0
for name in "${names[@]}"; do
  corpus=$build/corpus/$name
  artifacts=$build/artifacts/$name
  mkdir -p "$corpus" "$artifacts" "$build/logs"
  seeds=()
  for dir in "$build/fuzz-seeds/$name" "$root/fuzz/seeds/$name"; do
    [[ -d $dir ]] && seeds+=("$dir")
  done
  echo "== $name: ${seconds}s, corpus $corpus, seeds ${seeds[*]:-none}"
  start=$(date +%s)
  # rss limit: a legal MEMV chunk of kGmtMaxEventsPerChunk constant events decodes to 64 MiB from a
  # few dozen bytes, so a mutated input of many such chunks is legitimately large.
  if "$build/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" >"$build/logs/$name.log" 2>&1; then
    result=ok
  else
    result="FAILED (see $build/logs/$name.log and $artifacts/)"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/logs/$name.log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$build/logs/$name.log" | tail -1 || true)
  echo "   $result after $(( $(date +%s) - start ))s: $runs inputs, $cov, corpus $(ls "$corpus" | wc -l) files"
done
exit $status
