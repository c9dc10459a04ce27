#!/usr/bin/env bash
# `gpumem fit` before/after a change, in CPU time (perf stat task-clock; wall time on a shared 2-core VM
# varies too much): each binary runs `fit TRACE --jobs 1` RUNS times, interleaved, and the script prints
# the median CPU milliseconds of each, the per-run cost without the trace import (`info` on the same
# trace, the baseline measured in the same run), and the ratio before/after of that fit-only time.
# The two binaries must give the same fit answer (checked: the JSON output is compared).
#
#   bench/fit_probe_time.sh BEFORE_GPUMEM AFTER_GPUMEM [TRACE] [RUNS=15] [-- SPEC...]
# TRACE defaults to the shared public cs336-bcrafton snapshot; SPEC defaults to pytorch.
set -euo pipefail
before=$1
after=$2
trace=${3:-$(dirname "$0")/../../shared/traces/public/cs336-bcrafton/memory_snapshot.pickle}
runs=${4:-15}
shift $(( $# > 4 ? 4 : $# ))
[[ ${1:-} == -- ]] && shift
specs=("$@")
[[ ${#specs[@]} -eq 0 ]] && specs=(pytorch)
command -v perf >/dev/null || { echo "fit_probe_time.sh: perf not found" >&2; exit 1; }
[[ -f $trace ]] || { echo "fit_probe_time.sh: $trace not found" >&2; exit 1; }
policy_args=()
for s in "${specs[@]}"; do policy_args+=(--policy "$s"); done
if ! cmp -s <("$before" fit "$trace" "${policy_args[@]}" --jobs 1 --format json 2>/dev/null) \
            <("$after" fit "$trace" "${policy_args[@]}" --jobs 1 --format json 2>/dev/null); then
  echo "fit_probe_time.sh: the two binaries give different fit answers" >&2
  exit 1
fi
cpu_ms() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
b=() a=() i=()
for ((r = 0; r < runs; ++r)); do
  b+=("$(cpu_ms "$before" fit "$trace" "${policy_args[@]}" --jobs 1)")
  a+=("$(cpu_ms "$after" fit "$trace" "${policy_args[@]}" --jobs 1)")
  i+=("$(cpu_ms "$after" info "$trace")")
done
mb=$(printf '%s\n' "${b[@]}" | median)
ma=$(printf '%s\n' "${a[@]}" | median)
mi=$(printf '%s\n' "${i[@]}" | median)
echo "trace: $trace; policy: ${specs[*]}; $runs runs each, median CPU ms"
printf '%-28s %10s %16s\n' run "cpu ms" "minus import"
printf '%-28s %10.2f %16s\n' "info (import baseline)" "$mi" "-"
printf '%-28s %10.2f %16.2f\n' "fit before" "$mb" "$(awk -v x="$mb" -v y="$mi" 'BEGIN { print x - y }')"
printf '%-28s %10.2f %16.2f\n' "fit after" "$ma" "$(awk -v x="$ma" -v y="$mi" 'BEGIN { print x - y }')"
awk -v b="$mb" -v a="$ma" -v i="$mi" 'BEGIN { printf "fit without import: before/after = %.2fx; whole command: %.2fx\n", (b - i) / (a - i), b / a }'
