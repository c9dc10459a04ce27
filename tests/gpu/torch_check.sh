#!/usr/bin/env bash
# The PyTorch runs of the GPU check (docs/gpu-check.md "PyTorch runs"): tests/gpu/torch_run.py
# under `gpumem record --annotate-modules`, once with PyTorch's native caching allocator and once
# with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. Each run leaves the tracer's .gmt, PyTorch's
# own snapshot and memory_stats(), and `gpumem info` of both, so what the tracer saw can be held
# against what the allocator says it did.
#
#   tests/gpu/torch_check.sh --build-dir DIR --out DIR --results DIR [--steps N]
#
# --build-dir: a build or staged folder (scripts/gpu-check.sh --stage). PYTHON picks the interpreter
# with torch (default /opt/torch/.venv/bin/python, else python3). --results gets at most 3 files, also
# when a run fails: torch_native.gmt, torch_expandable.gmt and torch.tar.gz (everything else in --out:
# snapshots, stats.json, info, logs). Each run is bounded to 150 s.
# Exit status: 0 both runs recorded a trace, 1 otherwise, 2 usage.
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/../.."
root=$PWD
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$caller/$1" ;; esac; }
die() { echo "torch-check: $*" >&2; exit 1; }
build= out= results= steps=12
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(absolute "${2:?}"); shift ;;
    --out) out=$(absolute "${2:?}"); shift ;;
    --results) results=$(absolute "${2:?}"); shift ;;
    --steps) steps=${2:?}; shift ;;
    -h|--help) usage ;;
    *) echo "torch-check: unknown option $1" >&2; usage ;;
  esac
  shift
done
[ -n "$build" ] && [ -n "$out" ] && [ -n "$results" ] || usage
mkdir -p "$out" "$results"
collect() {
  local mode
  for mode in native expandable; do
    [ -f "$out/$mode/torch_$mode.gmt" ] && cp "$out/$mode/torch_$mode.gmt" "$results/"
  done
  tar -czf "$results/torch.tar.gz" --exclude='*.gmt' -C "$out" . 2>/dev/null || true
}
trap collect EXIT

# What the runs need, checked before either starts (a run that cannot start costs its 150 s).
gpumem=$build/bin/gpumem
[ -x "$gpumem" ] || gpumem=$build/cli/gpumem
[ -x "$gpumem" ] || die "no gpumem in $build (bin/gpumem or cli/gpumem)"
tracer=$build/lib/libgpumem_tracer.so
[ -f "$tracer" ] || tracer=$build/tracer/libgpumem_tracer.so
[ -f "$tracer" ] || die "no libgpumem_tracer.so in $build (lib/ or tracer/)"
export GPUMEM_TRACER_LIBRARY=$tracer
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! "$gpumem" --version >/dev/null 2>&1 && [ -d "$build/lib/fallback" ]; then
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$build/lib/fallback"  # as scripts/gpu-check.sh does
fi
"$gpumem" --version >/dev/null 2>&1 || die "$gpumem does not run here: $("$gpumem" --version 2>&1 | head -3)"
python=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$python" ] || python=python3
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' \
  >"$out/environment.txt" 2>&1 || die "$python cannot import torch: $(tail -n 1 "$out/environment.txt")"
grep -q "available True" "$out/environment.txt" || die "torch sees no CUDA device: $(cat "$out/environment.txt")"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >>"$out/environment.txt"
"$gpumem" --version >>"$out/environment.txt"
cat "$out/environment.txt"
export GPUMEM_PYTHON_HELPER_DIR=$root/tracer/python

status=0
for mode in native expandable; do
  dir=$out/$mode
  rm -rf "$dir" && mkdir -p "$dir"
  conf=
  [ "$mode" = expandable ] && conf=expandable_segments:True
  echo "torch-check: $mode (PYTORCH_CUDA_ALLOC_CONF=$conf)"
  rc=0
  PYTORCH_CUDA_ALLOC_CONF=$conf GPUMEM_TRACER_VERBOSE=1 timeout 150 \
    "$gpumem" record -o "$dir/trace" --annotate-modules -- "$python" tests/gpu/torch_run.py --out "$dir" --steps "$steps" \
    >"$dir/record.log" 2>&1 || rc=$?
  echo "exit $rc" >>"$dir/record.log"
  tail -n 4 "$dir/record.log"
  gmt=$(ls "$dir"/trace/*.gmt 2>/dev/null | head -n 1)
  if [ -z "$gmt" ]; then
    echo "torch-check: $mode wrote no trace" >&2
    status=1
    continue
  fi
  mv "$gmt" "$dir/torch_$mode.gmt"
  "$gpumem" info "$dir/torch_$mode.gmt" >"$dir/info-trace.txt" 2>&1
  [ -f "$dir/snapshot.pickle" ] && "$gpumem" info "$dir/snapshot.pickle" >"$dir/info-snapshot.txt" 2>&1
  [ -f "$dir/snapshot.pickle" ] && "$gpumem" replay --fidelity "$dir/snapshot.pickle" >"$dir/fidelity.txt" 2>&1
  head -n 30 "$dir/info-trace.txt"
  [ -f "$dir/fidelity.txt" ] && head -n 5 "$dir/fidelity.txt"
done
exit $status
