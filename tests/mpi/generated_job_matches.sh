#!/usr/bin/env bash
# usage: generated_job_matches.sh MPIEXEC GPUMEM MAKE_RANK_JOB
# The acceptance check of issue 20: on a generated 12-rank job (bench/make_rank_job from
# traces/mlp_train.jsonl: a leaking rank, an extra-buffer rank), `gpumem ranks` (text and JSON) and a
# multi-rank `fit` and `sweep` print the same bytes under `mpirun -np 3` as in one process.
set -euo pipefail
mpiexec=$1 gpumem=$2 make_job=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$make_job" --ranks 12 --format gmt "$here/../../traces/mlp_train.jsonl" "$tmp/job" >"$tmp/make.log"
tail -n 1 "$tmp/make.log"
match=("$here/mpirun_matches_threads.sh" "$mpiexec" 3 "$gpumem")
"${match[@]}" ranks "$tmp/job"
"${match[@]}" ranks "$tmp/job" --format json --jobs 2
"${match[@]}" fit "$tmp/job" --policy pytorch --policy pytorch:expandable_segments:True
"${match[@]}" sweep "$tmp/job" --policy 'pytorch:max_split_size_mb:{64,128},garbage_collection_threshold:{0.6,0.8}'
