#!/usr/bin/env bash
# usage: mpirun_matches_threads.sh MPIEXEC NP GPUMEM ARGS...
# Runs `GPUMEM ARGS...` in one process (threads) and under `MPIEXEC --allow-run-as-root --oversubscribe
# -np NP`, from the source folder, and fails unless both exit alike and print the same bytes on stdout.
set -euo pipefail
mpiexec=$1 np=$2 gpumem=$3
shift 3
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc1=0 rc2=0
"$gpumem" "$@" >"$tmp/threads.out" 2>"$tmp/threads.err" || rc1=$?
"$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$gpumem" "$@" >"$tmp/mpi.out" 2>"$tmp/mpi.err" || rc2=$?
if [ "$rc1" != "$rc2" ]; then
  echo "exit codes differ: $rc1 with threads, $rc2 under mpirun -np $np" >&2
  cat "$tmp/threads.err" "$tmp/mpi.err" >&2
  exit 1
fi
if ! cmp "$tmp/threads.out" "$tmp/mpi.out"; then
  diff "$tmp/threads.out" "$tmp/mpi.out" | head -40 >&2
  exit 1
fi
[ -s "$tmp/threads.out" ] || { echo "no output: $gpumem $*" >&2; cat "$tmp/threads.err" >&2; exit 1; }
echo "same $(wc -c <"$tmp/threads.out") bytes (exit $rc1) with threads and under mpirun -np $np: gpumem $*"
