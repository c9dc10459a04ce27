#!/usr/bin/env bash
# Replay throughput per policy in CPU time rather than wall time, for machines shared with other work
# (on a loaded 2-core VM the wall-clock rates of replay_throughput vary by ±40 % between runs; these by
# about ±10 %). For each policy: perf stat's task-clock of replay_throughput with --repeat 1 and with
# --repeat 4; the difference is three replays without the trace build. Prints events per CPU second and
# the ratio to `direct` measured in the same run.
#
#   bench/policy_cpu_time.sh [BUILD_DIR=build/dev] [TRACE] [-- SPEC...]
set -euo pipefail
build=${1:-build/dev}
trace=${2:-}
shift $(( $# > 2 ? 2 : $# ))
[[ ${1:-} == -- ]] && shift
specs=("$@")
[[ ${#specs[@]} -eq 0 ]] && specs=(direct pytorch@2.0 first-fit next-fit best-fit worst-fit best-fit:segments:true buddy size-class gmlake)
bench=$build/bench/replay_throughput
command -v perf >/dev/null || { echo "policy_cpu_time.sh: perf not found" >&2; exit 1; }
cpu_ms() { perf stat -x, -e task-clock "$bench" $trace --events 2000000 --repeat "$1" --policy "$2" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
echo "source: ${trace:-synthetic transformer step}"
printf '%-32s %14s %10s\n' policy "Mevents/cpu-s" "vs direct"
base=""
for spec in direct "${specs[@]}"; do
  [[ $spec == direct && -n $base ]] && continue
  events=$("$bench" $trace --events 2000000 --repeat 1 --policy "$spec" 2>/dev/null | tail -1 | awk '{print $2}')
  t1=$(cpu_ms 1 "$spec"); t4=$(cpu_ms 4 "$spec")
  rate=$(awk -v e="$events" -v a="$t1" -v b="$t4" 'BEGIN { printf "%.2f", 3 * e / ((b - a) / 1000) / 1e6 }')
  [[ -z $base ]] && base=$rate
  printf '%-32s %14s %9.2fx\n' "$spec" "$rate" "$(awk -v r="$rate" -v b="$base" 'BEGIN { print r / b }')"
done
