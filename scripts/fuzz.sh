#!/usr/bin/env bash
# Bounded libFuzzer run: scripts/fuzz.sh <target|all> <seconds>
#   target: a harness in fuzz/ without the fuzz_ prefix (xplane, rmm_csv, …) or "all"
# Builds the harnesses with clang in build/fuzz (-DGPUMEM_FUZZ=ON, ASan + libFuzzer), then runs each for
# <seconds> over a seed corpus: build/fuzz/corpus/<target> (new inputs land there), the seeds under
# fuzz/seeds/ and tests/data/, and for xplane, kineto_json and memory_timeline a public trace from
# ../shared/traces/public when present.
# Exit status: 0 when no harness found a crash, leak or hang; crashes are written to build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh <target|all> <seconds>}
seconds=${2:?usage: scripts/fuzz.sh <target|all> <seconds>}
build=build/fuzz
jobs=${GPUMEM_FUZZ_JOBS:-2}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_FUZZ=ON \
  -DGPUMEM_BUILD_TESTS=OFF -DGPUMEM_BUILD_GUI=OFF -DGPUMEM_BUILD_TRACER=OFF -DGPUMEM_BUILD_BENCHMARKS=OFF >/dev/null
if [[ $target == all ]]; then
  targets=$(sed -n 's/^gpumem_fuzzer(\([a-z_0-9]*\) .*/\1/p' fuzz/CMakeLists.txt)
else
  targets=$target
fi
for t in $targets; do
  cmake --build "$build" -j"$jobs" --target "fuzz_$t"
done

seed_dirs() { # the read-only seed folders of one harness
  local t=$1 dir="$build/seeds/$t"
  rm -rf "$dir" && mkdir -p "$dir"
  case $t in
    xplane)
      for f in fuzz/seeds/*.textproto; do
        protoc -Icore/importers --encode=gpumem.xplane.XSpace core/importers/xplane.proto <"$f" >"$dir/$(basename "$f" .textproto).pb"
      done
      echo "$dir"
      [[ -d ../shared/traces/public/tracelens/jax-xplane ]] && echo ../shared/traces/public/tracelens/jax-xplane ;;
    rmm_csv) cp tests/data/rmm/*.csv "$dir"/ && echo "$dir" ;;
    kineto_json)
      cp fuzz/seeds/kineto_*.json "$dir"/
      # one small real trace, decompressed (the harness takes JSON, not gzip)
      bert=../shared/traces/public/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz
      [[ -f $bert ]] && gzip -dc "$bert" >"$dir/bert_small.json"
      echo "$dir" ;;
    memory_timeline)
      cp fuzz/seeds/memory_timeline_*.json "$dir"/
      # the first records of the public export, closed into a valid list
      raw=../shared/traces/public/hta/memory_timeline.raw.gz
      [[ -f $raw ]] && { gzip -dc "$raw" 2>/dev/null | head -c 20000 | sed 's/, \[[^]]*$/]/' >"$dir/hta_head.json" || true; }
      echo "$dir" ;;
    *) echo "$dir" ;;
  esac
}

status=0
mkdir -p "$build/artifacts"
for t in $targets; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  mapfile -t seeds < <(seed_dirs "$t")
  echo "== fuzz_$t for ${seconds}s (corpus $corpus, seeds ${seeds[*]})"
  start=$(date +%s)
  if ! "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" "$corpus" "${seeds[@]}" 2>"$build/fuzz_$t.log"; then
    status=1
    echo "fuzz_$t FOUND A PROBLEM; see $build/fuzz_$t.log and $build/artifacts/"
    tail -40 "$build/fuzz_$t.log"
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$build/fuzz_$t.log" || true
  echo "fuzz_$t ran $(( $(date +%s) - start ))s"
done
exit $status
