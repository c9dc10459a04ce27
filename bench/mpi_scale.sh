#!/usr/bin/env bash
# Scale of the job view and the job what-if (docs/mpi.md): a synthetic job from bench/make_rank_job (per-rank
# perturbations of a base trace, one leaking rank, one extra-buffer rank), then
#   1. `gpumem ranks` over R ranks: one process on one thread, one process on every hardware thread, and
#      `mpirun -np NP` processes of one thread each (speed-up = one process, one thread / the others);
#   2. `gpumem sweep` of C configurations over S ranks, the same three ways;
# with the peak RSS of every process (GNU time's %M), the outputs compared byte for byte.
#
# usage: bench/mpi_scale.sh [--build DIR] [--base TRACE] [--np N] [--ranks "16"] [--sweep-ranks 8]
#                           [--configs 16|64|1000] [--big]
#   --big: ranks "64 1000", a sweep of 1000 configurations over 64 ranks (minutes on a busy machine).
# Defaults are small (under a minute): 16 ranks, a 16-configuration sweep over 8 ranks, NP 2.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/ci
# The base trace: HTA's Kineto trace from the shared public traces (rank 1 of a 2-GPU DDP run) where
# present, else the bundled traces/mlp_train.jsonl (tiny: mpirun's start-up then dominates).
public=${GPUMEM_PUBLIC_TRACES:-../shared/traces/public}
base=traces/mlp_train.jsonl
[ -f "$public/hta/df_index_resolver.json.gz" ] && base=$public/hta/df_index_resolver.json.gz
np=2
ranks_list="16"
sweep_ranks=8
configs=16
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --sweep-ranks) sweep_ranks=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --big) ranks_list="64 1000"; sweep_ranks=64; configs=1000; shift ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "mpi_scale.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
gpumem=$build/cli/gpumem
make_job=$build/bench/make_rank_job
for f in "$gpumem" "$make_job"; do
  [ -x "$f" ] || { echo "mpi_scale.sh: $f is not built (cmake --build --preset ci --target gpumem make_rank_job)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "mpi_scale.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "mpi_scale.sh: GNU time (/usr/bin/time) is needed for the peak RSS" >&2; exit 1; }
mpirun=(mpirun --oversubscribe -np "$np")
[ "$(id -u)" -eq 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$np")
threads=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Sweep grids of 16, 64 or 1000 configurations of PyTorch's allocator.
case "$configs" in
  16) grid='pytorch:max_split_size_mb:{32,64,128,256},garbage_collection_threshold:{0.6,0.7,0.8,0.9}' ;;
  64) grid='pytorch:max_split_size_mb:{32,64,128,256},garbage_collection_threshold:{0.6,0.7,0.8,0.9},roundup_power2_divisions:{1,2,4,8}' ;;
  1000) grid='pytorch:max_split_size_mb:{24,32,48,64,96,128,192,256,384,512},garbage_collection_threshold:{0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95},roundup_power2_divisions:{1,2,4,8,16},expandable_segments:{True,False}' ;;
  *) echo "mpi_scale.sh: --configs is 16, 64 or 1000" >&2; exit 2 ;;
esac

# run LABEL OUT CMD...: wall seconds of CMD (stdout to OUT), then the largest and the sum of the peak RSS of
# its processes (GNU time around each gpumem process, so mpirun's own memory is not counted).
run() {
  local label=$1 out=$2
  shift 2
  rm -f "$tmp"/rss.*
  local start end
  start=$(date +%s.%N)
  "$@" >"$out" 2>"$tmp/err" || { echo "mpi_scale.sh: $label failed:" >&2; cat "$tmp/err" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 - "$label" "$start" "$end" "$tmp" <<'EOF'
import glob, sys
label, start, end, tmp = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rss = [int(open(f).read().split()[-1]) for f in sorted(glob.glob(tmp + "/rss.*"))]
print(f"{label:<44} {end - start:8.2f} s   peak RSS per process: "
      + ", ".join(f"{k / 1024:.0f} MiB" for k in rss))
open(tmp + "/last", "w").write(f"{end - start}")
EOF
}
seconds() { cat "$tmp/last"; }
ratio() { python3 -c "print(f'{float($1) / float($2):.2f}')"; }

compare_three() { # LABEL ARGS...: one thread, all threads, mpirun -np NP; prints the speed-ups
  local label=$1
  shift
  run "$label, 1 process x 1 thread" "$tmp/one.out" \
    bash -c '/usr/bin/time -f %M -o "$0/rss.$$" "$@"' "$tmp" "$gpumem" "$@" --jobs 1
  local t1
  t1=$(seconds)
  run "$label, 1 process x $threads threads" "$tmp/threads.out" \
    bash -c '/usr/bin/time -f %M -o "$0/rss.$$" "$@"' "$tmp" "$gpumem" "$@" --jobs "$threads"
  local tt
  tt=$(seconds)
  run "$label, mpirun -np $np x 1 thread" "$tmp/mpi.out" \
    "${mpirun[@]}" bash -c '/usr/bin/time -f %M -o "$0/rss.$$" "$@"' "$tmp" "$gpumem" "$@" --jobs 1
  local tm
  tm=$(seconds)
  cmp -s "$tmp/one.out" "$tmp/threads.out" && cmp -s "$tmp/one.out" "$tmp/mpi.out" \
    || { echo "mpi_scale.sh: $label: the outputs differ" >&2; exit 1; }
  echo "  speed-up over 1 process x 1 thread: $threads threads $(ratio "$t1" "$tt")x, mpirun -np $np $(ratio "$t1" "$tm")x (outputs identical, $(wc -c <"$tmp/one.out") bytes)"
}

echo "mpi_scale.sh: base $base, $threads hardware threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
# A job of N ranks (generated once per size; deterministic: the same seed gives the same traces).
job() {
  local n=$1 dir=$tmp/job$1
  if [ ! -d "$dir" ]; then
    "$make_job" --ranks "$n" --format gmt "$base" "$dir" >"$tmp/make.log"
    echo "job: $n ranks, $(du -sh "$dir" | cut -f1) ($(tail -n 1 "$tmp/make.log"))" >&2
  fi
  echo "$dir"
}
for r in $ranks_list; do
  compare_three "ranks over $r ranks" ranks "$(job "$r")"
done
compare_three "sweep of $configs configurations x $sweep_ranks ranks" sweep "$(job "$sweep_ranks")" --policy "$grid"
