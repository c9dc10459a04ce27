#!/usr/bin/env bash
# `gpumem convert X.jsonl -o Y.gmt` streamed (the .gmt written while reading, core/jsonl_to_gmt.h) against
# the whole-trace path it replaced (GPUMEM_CONVERT_WHOLE=1), in the same run, on one generated .jsonl
# (issue 22): CPU seconds (user + system: the machine is shared), peak RSS, RSS per event, and the
# ratios streamed / whole; the two .gmt files must be byte-identical (the script fails otherwise).
#
# The input: bench/make_big_gmt writes a training-like .gmt of N memory events (bounded memory), which
# `gpumem convert` turns into .jsonl (that direction reads the trace whole). With --gzip the .jsonl is
# also gzip'ed and both paths run on that too.
#
# usage: bench/convert_scale.sh [--events N] [--gzip] [--limit BYTES] [BUILD_DIR]
#   N events (default 10000000: ~1.2 GB of .jsonl, ~20 s of CPU per convert); --limit the address-space
#   cap of each convert (default 16G; the whole path's columns double as they grow: it needed 40G at 10^8
#   events while its input was mapped, 2026-12-02); BUILD_DIR holds cli/gpumem and bench/make_big_gmt (build/ci). Needs prlimit (util-linux),
#   GNU time (/usr/bin/time), cmp, and gzip for --gzip. A path that fails is reported, without ratios.
set -euo pipefail
events=10000000 build=build/ci gz=0 limit=16G
while [ $# -gt 0 ]; do
  case "$1" in
    --events|--limit) [ $# -ge 2 ] || { echo "convert_scale.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --events) events=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --gzip) gz=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "convert_scale.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
case "$events" in ''|*[!0-9]*|0) echo "convert_scale.sh: --events takes a positive whole number, not '$events'" >&2; exit 2 ;; esac
limitBytes=$(numfmt --from=iec "$limit" 2>/dev/null) || { echo "convert_scale.sh: --limit '$limit' is not a size (e.g. 16G)" >&2; exit 2; }
gpumem="$build/cli/gpumem" generator="$build/bench/make_big_gmt"
for tool in prlimit /usr/bin/time cmp "$gpumem" "$generator"; do
  command -v "$tool" >/dev/null || { echo "convert_scale.sh: $tool not found (build the gpumem and make_big_gmt targets)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# measure "$@": sets cpu (s), kib (peak RSS), ok (0/1)
source "$(dirname "$0")/measure.sh"

"$generator" --events "$events" -o "$tmp/big.gmt" >/dev/null
"$gpumem" convert "$tmp/big.gmt" -o "$tmp/big.jsonl" >"$tmp/out"
rm -f "$tmp/big.gmt"
n=$(sed -n 's/.*(jsonl, \([0-9,]*\) memory events).*/\1/p' "$tmp/out" | tr -d ,)
inputs=("$tmp/big.jsonl")
if [ "$gz" = 1 ]; then
  gzip -1 -k "$tmp/big.jsonl"
  inputs+=("$tmp/big.jsonl.gz")
fi
echo "input: $n memory events, $(stat -c %s "$tmp/big.jsonl") bytes of .jsonl$([ "$gz" = 1 ] && echo ", $(stat -c %s "$tmp/big.jsonl.gz") gzip'ed")"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo); each convert under prlimit --as=$limit"
echo
printf '%-14s %-9s %9s %11s %9s  %s\n' input path "cpu s" "peak RSS" "B/event" status
for input in "${inputs[@]}"; do
  name=$(basename "$input")
  for path in whole streamed; do
    rm -f "$tmp/$path.gmt"
    if [ "$path" = whole ]; then
      measure env GPUMEM_CONVERT_WHOLE=1 "$gpumem" convert "$input" -o "$tmp/$path.gmt"
    else
      measure "$gpumem" convert "$input" -o "$tmp/$path.gmt"
    fi
    status=ok
    [ "$ok" = 1 ] || status="failed: $(head -c 120 "$tmp/stderr" | tr '\n' ' ')"
    [ -s "$tmp/stderr" ] && [ "$ok" = 1 ] && status="ok; $(head -c 120 "$tmp/stderr" | tr '\n' ' ')"
    eval "${path}Cpu=$cpu ${path}Kib=$kib ${path}Ok=$ok"
    awk -v i="$name" -v p="$path" -v cpu="$cpu" -v kib="$kib" -v n="$n" -v st="$status" 'BEGIN {
      printf "%-14s %-9s %9.2f %7.0f MiB %9.1f  %s\n", i, p, cpu, kib / 1024, kib * 1024 / n, st }'
  done
  if [ "$wholeOk" != 1 ] || [ "$streamedOk" != 1 ]; then
    echo "$name: no ratio: a path failed (a larger --limit lets the whole path run: it holds the trace's columns)"
    continue
  fi
  cmp -s "$tmp/whole.gmt" "$tmp/streamed.gmt" || { echo "convert_scale.sh: the two .gmt files of $name differ" >&2; exit 1; }
  awk -v i="$name" -v wc="$wholeCpu" -v sc="$streamedCpu" -v wk="$wholeKib" -v sk="$streamedKib" 'BEGIN {
    printf "%-14s streamed / whole: CPU %.2f×, peak RSS %.3f× (%.1f× less); the .gmt files are identical\n", i, sc / wc, sk / wk, wk / sk }'
done
