#!/usr/bin/env bash
# Every verb on one big generated trace (issue 22): CPU time and peak resident memory per verb, against
# `gpumem info` in the same run and against the trace's size on disk.
#
# bench/make_big_gmt writes a training-like .gmt of N memory events chunk by chunk (bounded memory);
# then `gpumem info`, `analyze`, `analyze --format json`, `replay` and `report` run on it once each,
# every output to /dev/null, under `prlimit --as` (address space, so that no verb can eat the machine;
# a verb that needs more fails and is reported as such) and GNU time. Printed per verb: CPU seconds
# (user + system: the machine is shared, wall time means little), peak RSS, bytes of RSS per event,
# and the ratios of its CPU and RSS to info's and of its RSS to the file's size.
#
# usage: bench/scale.sh [--events N] [--limit BYTES] [--keep FILE] [--verbs "info analyze …"] [BUILD_DIR]
#   N events (default 100000000: ~1.1 GB of .gmt, minutes of CPU), --limit the address-space cap of
#   each process (default 8G; a size such as 8G, 512M or a byte count), --keep writes the trace there and keeps it (default: a
#   temporary file, deleted at exit), --verbs a subset of: info analyze analyze-json replay replay-whole
#   report diff explain (replay streams the .gmt; replay-whole is the same replay with the trace read whole,
#   GPUMEM_REPLAY_IN_MEMORY=1: the baseline of the streamed one; diff compares the trace with itself);
#   BUILD_DIR holds cli/gpumem and bench/make_big_gmt (build/ci).
# Needs prlimit (util-linux) and GNU time (/usr/bin/time).
set -euo pipefail
events=100000000 limit=8G build=build/ci keep="" verbs="info analyze analyze-json replay report"
while [ $# -gt 0 ]; do
  case "$1" in
    --events|--limit|--keep|--verbs)
      [ $# -ge 2 ] || { echo "scale.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --events) events=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --verbs) verbs=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "scale.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
# Checked before minutes of generating: the count, the verbs and the limit.
case "$events" in ''|*[!0-9]*|0) echo "scale.sh: --events takes a positive whole number, not '$events'" >&2; exit 2 ;; esac
for verb in $verbs; do
  case "$verb" in info|analyze|analyze-json|replay|replay-whole|report|diff|explain) ;; *) echo "scale.sh: unknown verb $verb (info analyze analyze-json replay replay-whole report diff explain)" >&2; exit 2 ;; esac
done
limitBytes=$(numfmt --from=iec "$limit" 2>/dev/null) || { echo "scale.sh: --limit '$limit' is not a size (e.g. 8G, 8589934592)" >&2; exit 2; }
gpumem="$build/cli/gpumem" generator="$build/bench/make_big_gmt"
for tool in prlimit /usr/bin/time "$gpumem" "$generator"; do
  command -v "$tool" >/dev/null || { echo "scale.sh: $tool not found (build the gpumem and make_big_gmt targets)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=${keep:-$tmp/big.gmt}
# measure "$@": sets cpu (s), kib (peak RSS), ok (0/1)
source "$(dirname "$0")/measure.sh"

if [ -n "$keep" ] && [ -s "$keep" ]; then
  echo "trace: $keep (kept from an earlier run)"
else
  measure "$generator" --events "$events" -o "$trace"
  [ "$ok" = 1 ] || { echo "scale.sh: make_big_gmt failed:" >&2; cat "$tmp/stderr" >&2; exit 1; }
  echo "generated $trace: $cpu s CPU, peak RSS $((kib / 1024)) MiB"
fi
bytes=$(stat -c %s "$trace")
# info first, whatever the order given: its output gives the event count, its figures the ratios.
verbs="$(printf '%s\n' $verbs | grep -x info || true) $(printf '%s\n' $verbs | grep -vx info || true)"
case " $verbs " in
  *" info "*) measure "$gpumem" info --format json "$trace" ;;
  *) "$gpumem" info --format json "$trace" >"$tmp/out" ;;
esac
infoCpu=$cpu infoKib=$kib infoOk=$ok
n=$(awk -F': ' '/"memory_events"/ { gsub(/[ ,]/, "", $2); print $2; exit }' "$tmp/out")
echo "trace: $n memory events, $bytes bytes ($(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.2f", b / n }') bytes per event)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); each verb under prlimit --as=$limit"
echo
printf '%-14s %9s %11s %9s %10s %10s %10s  %s\n' verb "cpu s" "peak RSS" "B/event" "cpu/info" "RSS/info" "RSS/file" status
for verb in $verbs; do
  case "$verb" in
    info) args=() ;; # measured above (--format json: the same pass as the text)
    analyze) args=(analyze) ;;
    analyze-json) args=(analyze --format json) ;;
    replay) args=(replay --policy pytorch) ;;
    replay-whole) args=(replay --policy pytorch) ;; # run with GPUMEM_REPLAY_IN_MEMORY=1 below
    report) args=(report -o "$tmp/report.html") ;;
    diff) args=(diff "$trace") ;; # the trace against itself: two analyses in passes, both held
    explain) args=(explain) ;; # in passes over the in-memory budget (14 M events)
    *) echo "scale.sh: unknown verb $verb" >&2; exit 2 ;;
  esac
  if [ "$verb" = info ]; then
    cpu=$infoCpu kib=$infoKib ok=$infoOk
  elif [ "$verb" = replay-whole ]; then
    measure env GPUMEM_REPLAY_IN_MEMORY=1 "$gpumem" "${args[@]}" "$trace"
  else
    measure "$gpumem" "${args[@]}" "$trace"
  fi
  status=ok
  if [ "$ok" != 1 ]; then
    status="failed: $(head -c 120 "$tmp/stderr" | tr '\n' ' ')"
  fi
  awk -v verb="$verb" -v cpu="$cpu" -v kib="$kib" -v n="$n" -v bytes="$bytes" -v ic="${infoCpu:-0}" -v ik="${infoKib:-0}" -v st="$status" 'BEGIN {
    printf "%-14s %9.2f %7.0f MiB %9.1f %10s %10s %10.3f  %s\n", verb, cpu, kib / 1024, kib * 1024 / n,
      (ic > 0 ? sprintf("%.2f", cpu / ic) : "-"), (ik > 0 ? sprintf("%.2f", kib / ik) : "-"), kib * 1024 / bytes, st }'
done
