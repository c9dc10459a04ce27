#!/usr/bin/env bash
# Rehearses the GPU half of scripts/gpu-check.sh without a GPU: a stand-in nvidia-smi and a
# stand-in gpu_check (fake_gpu_check.sh) drive the script's real path (environment, plan,
# baseline run, `gpumem record`, one .gmt, convert, check, outputs). A clean synthetic run must
# pass; one whose trace misses an allocation must fail with the allocations check named; one whose
# program exits 3 must still be checked, and fail.
#   tests/gpu/rehearse_gpu_half.sh BUILD_DIR GPUMEM
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: rehearse_gpu_half.sh BUILD_DIR GPUMEM}
gpumem=${2:?usage: rehearse_gpu_half.sh BUILD_DIR GPUMEM}
work=$build/gpu-check-rehearsal
rm -rf "$work"
mkdir -p "$work/bin"
cat >"$work/bin/nvidia-smi" <<'SMI'
#!/bin/sh
case "$1" in
  -L) echo "GPU 0: Stand-in GPU for the rehearsal (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "name, driver_version, memory.total [MiB]"; echo "Stand-in GPU, 580.00, 143771 MiB" ;;
esac
SMI
chmod +x "$work/bin/nvidia-smi"
run() {
  PATH="$work/bin:$PATH" GPU_CHECK_PROGRAM="$root/tests/gpu/fake_gpu_check.sh" GPU_CHECK_FAKE_GPUMEM="$gpumem" \
    "$root/scripts/gpu-check.sh" --build-dir "$build" --gpumem "$gpumem" --steps 4 --out "$work/$1" \
    --results "$work/$1-results"
}
run clean >"$work/clean.txt" 2>&1 || { cat "$work/clean.txt"; echo "rehearsal: the clean run failed" >&2; exit 1; }
grep -q '^gpu-check: PASSED (GPU half)' "$work/clean.txt" || { cat "$work/clean.txt"; exit 1; }
for f in gpu_check.gmt trace.jsonl.gz check.txt summary.json environment.txt plan.jsonl baseline.jsonl run.jsonl; do
  [ -s "$work/clean/$f" ] || { echo "rehearsal: the clean run left no $f" >&2; exit 1; }
done
# What a GPU machine sends back: four files, the whole --out folder in the archive.
[ "$(ls "$work/clean-results" | tr '\n' ' ')" = "check.txt gpu-check.tar.gz gpu_check.gmt summary.json " ] \
  || { ls -l "$work/clean-results"; echo "rehearsal: --results does not hold the four files" >&2; exit 1; }
tar -tzf "$work/clean-results/gpu-check.tar.gz" >"$work/archive.txt"
grep -q '^clean/run.jsonl$' "$work/archive.txt" \
  || { echo "rehearsal: gpu-check.tar.gz lacks clean/run.jsonl" >&2; exit 1; }
rc=0
GPU_CHECK_FAKE_MUTATE=drop_alloc run broken >"$work/broken.txt" 2>&1 || rc=$?
if [ "$rc" != 1 ] || ! grep -q '^FAIL allocations:' "$work/broken.txt"; then
  cat "$work/broken.txt"
  echo "rehearsal: a trace missing an allocation gave exit $rc, not 1 with 'FAIL allocations'" >&2
  exit 1
fi
[ -s "$work/broken-results/check.txt" ] || { echo "rehearsal: the failed run sent back no check.txt" >&2; exit 1; }
# A traced program that fails still gets its trace checked, and the run fails naming it.
rc=0
GPU_CHECK_FAKE_EXIT=3 run exit3 >"$work/exit3.txt" 2>&1 || rc=$?
if [ "$rc" != 1 ] || ! grep -q '^PASS allocations:' "$work/exit3.txt" \
   || ! grep -q 'gpumem record -- gpu_check failed (exit 3' "$work/exit3.txt"; then
  cat "$work/exit3.txt"
  echo "rehearsal: a traced run that exits 3 gave exit $rc, or was not checked, or was not named" >&2
  exit 1
fi
echo "rehearsal: the GPU half passes a clean stand-in run, fails one missing an allocation (allocations)," \
  "and checks, then fails, a run whose program exits 3"
