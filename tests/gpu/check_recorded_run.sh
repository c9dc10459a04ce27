#!/usr/bin/env bash
# The checker on a run recorded on a real GPU: traces/gpu_check_h200.gmt, the first one (2026-12-04,
# H200, the tracer as it was then) and its program's run list. The checker must fail exactly the
# checks that run failed, and pass the others:
#   nvtx  NCCL popped ncclCommInitAll's range with nvtxRangePopPayload, which the tracer did not
#         handle, so every later range nested under it (fixed since: tracer/nvtx_handlers.h)
#   nccl  NCCL's cuMemMap'd buffers had no library (fixed since: tracer/caller_library.h)
# So the checker is shown to catch both on real data, and the trace stays readable as recorded.
#   check_recorded_run.sh GPUMEM TRACE.gmt RUN.jsonl "EXPECTED FAILS"   exit 0 when they match
set -euo pipefail
gpumem=$1 trace=$2 run=$3 expected=$4
checker=$(dirname "$0")/check_trace.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gpumem" convert --to jsonl "$trace" -o "$tmp/trace.jsonl" >/dev/null
rc=0
python3 "$checker" check --expected "$run" --trace "$tmp/trace.jsonl" >"$tmp/check.txt" || rc=$?
failed=$(grep '^FAIL' "$tmp/check.txt" | cut -d: -f1 | sed 's/^FAIL //' | tr '\n' ' ' | sed 's/ $//' || true)
passed=$(grep -c '^PASS' "$tmp/check.txt" || true)
if [ "$rc" != 1 ] || [ "$failed" != "$expected" ]; then
  cut -c1-300 "$tmp/check.txt"
  echo "check_recorded_run: expected exit 1 failing '$expected'; got exit $rc failing '${failed:-nothing}'" >&2
  exit 1
fi
echo "check_recorded_run: $(basename "$trace"): FAIL $failed as recorded; $passed checks pass"
