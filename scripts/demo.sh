#!/usr/bin/env bash
# The main job on the bundled sample trace: builds gpumem if needed, then answers first why the run fails
# on a 660 MiB GPU and which setting fixes it (explain, proven by replay), summarizes the trace,
# analyzes its peak (what was live and who put it there, fragmentation, steps, leaks), replays it under
# other allocator policies (the comparison table), finds the GPU size each policy needs, sweeps a grid
# of PyTorch settings and writes the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -f build/dev/build.ninja ]; then
  cmake --preset dev >/dev/null
fi
cmake --build --preset dev --target gpumem -j "$(nproc)" >/dev/null
gpumem=build/dev/cli/gpumem
trace=traces/mlp_train.jsonl
first=1
run() {
  [ "$first" = 1 ] || echo
  first=0
  # The command, quoted as a shell reads it, within 100 columns: wrapped at blanks with a trailing " \\", so
  # it still pastes.
  local typed
  typed=$(printf ' %q' "$@")
  echo "\$ gpumem$typed" | awk '{
    n = split($0, w, " "); line = w[1]
    for (i = 2; i <= n; i++) {
      if (length(line) + 1 + length(w[i]) > 97) { print line " \\"; line = "    " w[i] } else line = line " " w[i]
    }
    print line }'
  "$gpumem" "$@"
}
# The answer first: why the run ran out of memory on a 660 MiB GPU, and the setting that fixes it.
run explain "$trace" --capacity 660MiB
run info "$trace"
run analyze "$trace" --top 8
# What-if: the same run under other allocators, against the lower bound (ideal) and the offline optimum.
policies=(--policy pytorch --policy pytorch:expandable_segments:True --policy pytorch:max_split_size_mb:64
          --policy tf-bfc --policy rmm-pool --policy cuda-async --policy best-fit --policy buddy --policy gmlake
          --policy optimal --policy ideal)
run replay "$trace" "${policies[@]}"
# The smallest GPU (to 2 MiB) each allocator needs for this run.
run fit "$trace" --policy pytorch --policy pytorch:expandable_segments:True --policy tf-bfc --policy rmm-pool \
    --policy best-fit --policy gmlake --policy optimal
# A parameter grid, best first.
run sweep "$trace" --policy 'pytorch:max_split_size_mb:{64,256},roundup_power2_divisions:{1,4}' \
    --policy 'pytorch:expandable_segments:True'
mkdir -p build/demo
run report "$trace" "${policies[@]}" -o build/demo/report.html
