#!/usr/bin/env bash
# The main job on the bundled sample trace: builds gpumem if needed, then summarizes the trace,
# analyzes its peak (what was live and who put it there, fragmentation, steps, leaks) and writes the
# HTML report, and replays it under other allocator policies (what-if) with the comparison table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -f build/dev/build.ninja ]; then
  cmake --preset dev >/dev/null
fi
cmake --build --preset dev --target gpumem -j "$(nproc)" >/dev/null
gpumem=build/dev/cli/gpumem
trace=traces/mlp_train.jsonl
run() {
  echo
  echo "\$ gpumem $*"
  "$gpumem" "$@"
}
run info "$trace"
run analyze "$trace" --top 8
policies=(--policy pytorch --policy pytorch:expandable_segments:True --policy pytorch:max_split_size_mb:64
          --policy direct --policy ideal)
run replay "$trace" "${policies[@]}"
mkdir -p build/demo
run report "$trace" "${policies[@]}" -o build/demo/report.html
