#!/usr/bin/env bash
# Bounded fuzzing: builds the libFuzzer harnesses of fuzz/ in build/fuzz with clang, AddressSanitizer
# and UBSan, then runs each for N seconds over its seed corpus (generated from tests/data and traces/,
# fuzz/seeds/<name>/ if present, and for some formats a public trace from ../shared/traces/public). Findings go to build/fuzz/artifacts/<name>/; the exit status
# is non-zero if any harness crashed, leaked, hit a sanitizer report or timed out on an input.
#
#   scripts/fuzz.sh <name_fuzzer|all> [seconds=60]
#   scripts/fuzz.sh merge <name_fuzzer|all>     # fold build/fuzz/corpus/<name> into fuzz/corpus/<name>
#   scripts/fuzz.sh check                       # build every harness, run each once over its kept corpus
#                                               # and seeds, no new inputs (scripts/test.sh, so CI keeps
#                                               # the harnesses building and the kept regressions fixed)
#
# Corpora kept in the repository: fuzz/corpus/<name>/ holds the inputs worth keeping (regressions of
# issues, e.g. issue21_*, and what `merge` keeps: libFuzzer's -merge=1 adds only inputs that reach new
# coverage, at most 64 KiB each, so the folder stays small). fuzz/seeds/<name>/ holds hand-made seeds.
# Every run reads both; new inputs go to build/fuzz/corpus/<name> and never dirty the checkout.
#
# Schedule (the CI mutation test, tests/cli/mutation_test.cpp, runs on every scripts/test.sh instead):
#   - nightly: scripts/fuzz.sh all 600        (10 minutes per harness, ~2 h on a 2-core machine)
#   - weekly:  scripts/fuzz.sh merge all, then commit fuzz/corpus/ if it changed
#   - before a release or after changing an importer: scripts/fuzz.sh <that importer's harness> 1800
#
# Reproduce a finding: build/fuzz/fuzz/<name> build/fuzz/artifacts/<name>/crash-…
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh <name_fuzzer|all> [seconds=60]" >&2
  exit 2
fi
target=$1
seconds=${2:-60}
merge=0 check=0
if [[ $target == check ]]; then
  check=1
  target=all
fi
if [[ $target == merge ]]; then
  merge=1
  target=${2:?usage: scripts/fuzz.sh merge <name_fuzzer|all>}
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/fuzz

cc=${CC:-$(command -v clang || command -v clang-14 || true)}
cxx=${CXX:-$(command -v clang++ || command -v clang++-14 || true)}
if [[ -z $cc || -z $cxx ]]; then
  echo "scripts/fuzz.sh: clang not found (apt-get install clang libclang-rt-dev)" >&2
  exit 1
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=$cc CXX=$cxx cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUMEM_FUZZ=ON -DGPUMEM_BUILD_TESTS=OFF -DGPUMEM_BUILD_GUI=OFF \
    -DGPUMEM_BUILD_TRACER=OFF -DGPUMEM_BUILD_BENCHMARKS=OFF >/dev/null
fi
jobs=${FUZZ_BUILD_JOBS:-2}
if [[ $target == all ]]; then
  cmake --build "$build" -j "$jobs" --target gpumem_fuzzers gpumem_fuzz_seeds
  mapfile -t names < <(find "$build/fuzz" -maxdepth 1 -type f -name '*_fuzzer' -perm -u+x -printf '%f\n' | sort)
else
  cmake --build "$build" -j "$jobs" --target gpumem_fuzz_seeds "$target"
  names=("$target")
fi
if [[ ${#names[@]} -eq 0 ]]; then
  echo "scripts/fuzz.sh: no *_fuzzer built in $build/fuzz" >&2
  exit 1
fi

# Seeds that must be made (encoded protobuf) or come from the public traces when they are present.
extra_seeds() { # prints one folder
  local name=$1 dir=$build/extra-seeds/$1 pub=$root/../shared/traces/public
  rm -rf "$dir" && mkdir -p "$dir"
  case $name in
    xplane_fuzzer)
      for f in "$root"/fuzz/seeds/xplane_fuzzer/*.textproto; do
        protoc -I"$root/importers" --encode=gpumem.xplane.XSpace "$root/importers/xplane.proto" \
          <"$f" >"$dir/$(basename "$f" .textproto).pb"
      done
      [[ -d $pub/tracelens/jax-xplane ]] && cp "$pub"/tracelens/jax-xplane/*.pb "$dir"/ ;;
    rmm_csv_fuzzer) cp "$root"/tests/data/rmm/*.csv "$dir"/ ;;
    oom_text_fuzzer) cp "$root"/tests/data/oom/*.txt "$dir"/ ;; # the verbatim public messages
    kineto_json_fuzzer) # one small real trace, decompressed (the harness takes JSON, not gzip)
      bert=$pub/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz
      [[ -f $bert ]] && gzip -dc "$bert" >"$dir/bert_small.json" ;;
    memory_timeline_fuzzer) # the first records of the public export, closed into a valid list
      raw=$pub/hta/memory_timeline.raw.gz
      [[ -f $raw ]] && { gzip -dc "$raw" 2>/dev/null | head -c 20000 | sed 's/, \[[^]]*$/]/' >"$dir/hta_head.json" || true; } ;;
  esac
  echo "$dir"
}

status=0
if [[ $merge == 1 ]]; then
  for name in "${names[@]}"; do
    mkdir -p "$root/fuzz/corpus/$name" "$build/corpus/$name" "$build/logs"
    "$build/fuzz/$name" -merge=1 -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
      "$root/fuzz/corpus/$name" "$build/corpus/$name" >"$build/logs/$name.merge.log" 2>&1 || status=1
    echo "== $name: fuzz/corpus/$name has $(ls "$root/fuzz/corpus/$name" | wc -l) files"
  done
  exit $status
fi
if [[ $check == 1 ]]; then
  # Each harness over the inputs kept in the repository and the generated seeds, once: -runs=0 executes
  # them and stops (libFuzzer), so the result does not depend on chance or on the machine's speed.
  total=0
  mkdir -p "$build/logs"
  for name in "${names[@]}"; do
    seeds=()
    for dir in "$root/fuzz/corpus/$name" "$build/fuzz-seeds/$name" "$root/fuzz/seeds/$name" "$(extra_seeds "$name")"; do
      [[ -d $dir ]] && [[ -n $(ls -A "$dir") ]] && seeds+=("$dir")
    done
    if [[ ${#seeds[@]} -eq 0 ]]; then
      echo "scripts/fuzz.sh check: $name has no seeds or kept corpus" >&2
      status=1
      continue
    fi
    if "$build/fuzz/$name" -runs=0 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 "${seeds[@]}" \
        >"$build/logs/$name.check.log" 2>&1; then
      runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/logs/$name.check.log" | grep -o '[0-9]*$' || echo 0)
      total=$((total + runs))
      echo "== $name: ok, $runs inputs"
    else
      echo "== $name: FAILED on a kept input (see $build/logs/$name.check.log)"
      tail -n 30 "$build/logs/$name.check.log"
      status=1
    fi
  done
  echo "fuzz check: ${#names[@]} harnesses built, $total kept and seed inputs run once"
  exit $status
fi
for name in "${names[@]}"; do
  corpus=$build/corpus/$name
  artifacts=$build/artifacts/$name
  mkdir -p "$corpus" "$artifacts" "$build/logs"
  seeds=()
  for dir in "$root/fuzz/corpus/$name" "$build/fuzz-seeds/$name" "$root/fuzz/seeds/$name" "$(extra_seeds "$name")"; do
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
