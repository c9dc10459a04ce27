#!/usr/bin/env bash
# Stands in for gpu_check where there is no GPU, in the rehearsal of the GPU half of
# scripts/gpu-check.sh (tests/gpu/rehearse_gpu_half.sh): --plan copies the committed plan; a run
# writes the run list check_trace.py synthesizes from it and, under `gpumem record` (which sets
# GPUMEM_TRACE_DIR), the matching trace as a .gmt where the tracer would put its file. Without
# GPUMEM_TRACE_DIR it writes the baseline list. GPU_CHECK_FAKE_MUTATE names a defect to put in
# (check_trace.py's mutations); GPU_CHECK_FAKE_GPUMEM is the gpumem that writes the .gmt;
# GPU_CHECK_FAKE_EXIT is the traced run's exit status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
plan=$here/data/plan-steps4.jsonl
out=/dev/stdout
planning=0
while [ $# -gt 0 ]; do
  case "$1" in
    --plan) planning=1 ;;
    -o) out=$2; shift ;;
    --steps) [ "$2" = 4 ] || { echo "fake gpu_check: only --steps 4 (the committed plan)" >&2; exit 2; }; shift ;;
    *) echo "fake gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$planning" = 1 ]; then
  cp "$plan" "$out"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/check_trace.py" synth --plan "$plan" --expected-out "$tmp/run.jsonl" --trace-out "$tmp/trace.jsonl" \
  --baseline-out "$tmp/baseline.jsonl" ${GPU_CHECK_FAKE_MUTATE:+--mutate "$GPU_CHECK_FAKE_MUTATE"}
if [ -n "${GPUMEM_TRACE_DIR:-}" ]; then
  "${GPU_CHECK_FAKE_GPUMEM:?}" convert "$tmp/trace.jsonl" -o "$GPUMEM_TRACE_DIR/gpumem.fake.$$.gmt" >/dev/null
  cp "$tmp/run.jsonl" "$out"
else
  cp "$tmp/baseline.jsonl" "$out"
fi
# GPU_CHECK_FAKE_EXIT: the exit status of a traced run (a program that failed after its work).
[ -n "${GPUMEM_TRACE_DIR:-}" ] && exit "${GPU_CHECK_FAKE_EXIT:-0}"
exit 0
