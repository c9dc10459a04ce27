#!/usr/bin/env bash
# gpumem against heaptrack, the host-heap analyzer, on the same stream of malloc/free pairs (issue 22).
#
# bench/malloc_free_stream.c makes PAIRS malloc/free pairs through a window of live blocks; it runs
# once under `heaptrack`, and writes the same stream (the addresses malloc returned) as a gpumem
# .jsonl, which `gpumem convert` turns into a .gmt. Then `heaptrack_print` on heaptrack's file and
# `gpumem analyze`, `gpumem analyze --format json` (the analysis without the text output's verdict,
# which is `gpumem explain`'s diagnosis: replays that prove remedies) and `gpumem info` on the .gmt
# run RUNS times each, alternating, every output to /dev/null; the figure is the best CPU time
# (user + system, to the microsecond: the rusage of the child, read by python3's os.wait4; GNU time
# counts in hundredths, a tenth of gpumem's time at 10^6 events) of each and its peak RSS. Printed:
# events per second, bytes of peak RSS per event, and the ratios of gpumem to heaptrack_print (speed:
# higher is better for gpumem; memory: lower is better).
#
# usage: bench/heaptrack_vs_gpumem.sh [--events N] [--runs R] [--live L] [BUILD_DIR]
#   N events (default 10000000: N/2 pairs; about 2 minutes, most of it heaptrack recording; at 10^6 the
#   fixed costs of both tools weigh more), R runs (3), L live blocks in the window (64), BUILD_DIR with
#   the gpumem binary (build/ci).
# Needs heaptrack and heaptrack_print (Debian: heaptrack), a C compiler and python3.
set -euo pipefail
events=10000000 runs=3 live=64 build=build/ci
while [ $# -gt 0 ]; do
  case "$1" in
    --events) events=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --live) live=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "heaptrack_vs_gpumem.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
gpumem="$build/cli/gpumem"
for tool in heaptrack heaptrack_print cc python3 "$gpumem"; do
  command -v "$tool" >/dev/null || { echo "heaptrack_vs_gpumem.sh: $tool not found" >&2; exit 1; }
done
pairs=$((events / 2))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/stream" "$here/malloc_free_stream.c"
heaptrack -o "$tmp/heaptrack" "$tmp/stream" "$pairs" "$live" "$tmp/stream.jsonl" >"$tmp/record.log" 2>&1 \
  || { cat "$tmp/record.log" >&2; exit 1; }
ht=$(ls "$tmp"/heaptrack.* | head -n 1)
"$gpumem" convert "$tmp/stream.jsonl" -o "$tmp/stream.gmt" >/dev/null
rm -f "$tmp/stream.jsonl"

# best CPU seconds and peak RSS (KiB) per tool, over the alternating runs
declare -A cpu rss
measure() { # name command...
  local name=$1; shift
  python3 - "$tmp/time" "$@" >/dev/null 2>"$tmp/stderr" <<'PY' \
    || { echo "heaptrack_vs_gpumem.sh: ${*} failed:" >&2; cat "$tmp/stderr" >&2; exit 1; }
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
open(sys.argv[1], "w").write("%.6f %d\n" % (ru.ru_utime + ru.ru_stime, ru.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
PY
  local s kib
  read -r s kib <"$tmp/time"
  if [ -z "${cpu[$name]:-}" ] || awk -v a="$s" -v b="${cpu[$name]}" 'BEGIN { exit !(a < b) }'; then cpu[$name]=$s; fi
  if [ -z "${rss[$name]:-}" ] || [ "$kib" -gt "${rss[$name]}" ]; then rss[$name]=$kib; fi
}
for _ in $(seq "$runs"); do
  measure heaptrack_print heaptrack_print "$ht"
  measure "gpumem analyze" "$gpumem" analyze "$tmp/stream.gmt"
  measure "analyze --format json" "$gpumem" analyze --format json "$tmp/stream.gmt"
  measure "gpumem info" "$gpumem" info "$tmp/stream.gmt"
done

echo "heaptrack_vs_gpumem: $events events ($pairs malloc/free pairs, $live live), best CPU of $runs alternating runs"
echo "  $(ls -l "$ht" | awk '{print $5}') bytes heaptrack file, $(ls -l "$tmp/stream.gmt" | awk '{print $5}') bytes .gmt"
for name in heaptrack_print "gpumem analyze" "analyze --format json" "gpumem info"; do
  awk -v n="$name" -v e="$events" -v c="${cpu[$name]}" -v k="${rss[$name]}" 'BEGIN {
    printf "  %-21s %7.3f s CPU %8.2f M events/s %8.1f MiB peak RSS %7.1f B/event\n",
      n, c, e / (c > 0 ? c : 1e-3) / 1e6, k / 1024, k * 1024 / e }'
done
for name in "gpumem analyze" "analyze --format json" "gpumem info"; do
  awk -v n="$name" -v c="${cpu[$name]}" -v h="${cpu[heaptrack_print]}" -v k="${rss[$name]}" -v hk="${rss[heaptrack_print]}" 'BEGIN {
    printf "ratio %s / heaptrack_print: %.2fx the events per second, %.2fx the peak RSS\n",
      n, h / (c > 0 ? c : 1e-3), k / hk }'
done
