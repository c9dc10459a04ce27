#!/usr/bin/env bash
# The PyTorch runs of the GPU check (docs/gpu-check.md "PyTorch runs"): tests/gpu/torch_run.py
# under `gpumem record --annotate-modules`, once with PyTorch's native caching allocator and once
# with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. Each run leaves the tracer's .gmt, PyTorch's
# own snapshot and memory_stats(), and `gpumem info` of both, so what the tracer saw can be held
# against what the allocator says it did.
#
#   tests/gpu/torch_check.sh --build-dir DIR --out DIR --results DIR [--steps N]
#
# DIR of --build-dir is a build or staged folder (scripts/gpu-check.sh --stage). PYTHON picks the
# interpreter with torch (default /opt/torch/.venv/bin/python, else python3). --results gets one
# file, torch.tar.gz (all of --out), also when a run fails. Each run is bounded to 150 s.
# Exit status: 0 both runs recorded a trace, 1 otherwise, 2 usage.
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/../.."
root=$PWD
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }
build= out= results= steps=12
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(absolute "${2:?}"); shift ;;
    --out) out=$(absolute "${2:?}"); shift ;;
    --results) results=$(absolute "${2:?}"); shift ;;
    --steps) steps=${2:?}; shift ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  shift
done
[ -n "$build" ] && [ -n "$out" ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
gpumem=$build/bin/gpumem
[ -x "$gpumem" ] || gpumem=$build/cli/gpumem
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$python" ] || python=python3
export GPUMEM_PYTHON_HELPER_DIR=$root/tracer/python
mkdir -p "$out"
status=0
"$python" -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())' \
  >"$out/environment.txt" 2>&1 || status=1
for mode in native expandable; do
  dir=$out/$mode
  mkdir -p "$dir"
  conf=
  [ "$mode" = expandable ] && conf=expandable_segments:True
  echo "torch-check: $mode (PYTORCH_CUDA_ALLOC_CONF=$conf)"
  PYTORCH_CUDA_ALLOC_CONF=$conf GPUMEM_TRACER_VERBOSE=1 timeout 150 \
    "$gpumem" record -o "$dir/trace" --annotate-modules -- "$python" tests/gpu/torch_run.py --out "$dir" --steps "$steps" \
    >"$dir/record.log" 2>&1
  echo "  exit $?" >>"$dir/record.log"
  tail -n 4 "$dir/record.log"
  gmt=$(ls "$dir"/trace/*.gmt 2>/dev/null | head -n 1)
  if [ -z "$gmt" ]; then
    echo "torch-check: $mode wrote no trace" >&2
    status=1
    continue
  fi
  cp "$gmt" "$dir/torch_$mode.gmt"
  "$gpumem" info "$dir/torch_$mode.gmt" >"$dir/info-trace.txt" 2>&1
  [ -f "$dir/snapshot.pickle" ] && "$gpumem" info "$dir/snapshot.pickle" >"$dir/info-snapshot.txt" 2>&1
  head -n 40 "$dir/info-trace.txt"
done
if [ -n "$results" ]; then
  mkdir -p "$results"
  tar czf "$results/torch.tar.gz" -C "$out" .
fi
exit $status
