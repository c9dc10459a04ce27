#!/usr/bin/env bash
# The main job on the bundled sample trace: builds gpumem if needed, then summarizes the trace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -f build/dev/build.ninja ]; then
  cmake --preset dev >/dev/null
fi
cmake --build --preset dev --target gpumem -j "$(nproc)" >/dev/null
gpumem=build/dev/cli/gpumem
trace=traces/mlp_train.jsonl
echo "\$ gpumem info $trace"
"$gpumem" info "$trace"
