#!/usr/bin/env bash
# Rehearses tests/gpu/torch_check.sh without a GPU or torch: a stand-in interpreter answers the torch
# probe and, for torch_run.py, writes stats.json and runs the NVTX test program (so the tracer writes
# a trace, as it would for a CUDA process). The script's real path must run both modes under
# `gpumem record` and send back exactly its three files; a build folder without the tracer must be
# refused before any run.
#   tests/gpu/rehearse_torch_check.sh BUILD_DIR NVTX_APP
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: rehearse_torch_check.sh BUILD_DIR NVTX_APP}
app=${2:?usage: rehearse_torch_check.sh BUILD_DIR NVTX_APP}
work=$build/torch-check-rehearsal
rm -rf "$work"
mkdir -p "$work/bin"
cat >"$work/bin/python" <<PY
#!/bin/sh
if [ "\$1" = -c ]; then echo "torch 0.0+standin cuda 13.0 available True"; exit 0; fi
out=
while [ \$# -gt 0 ]; do [ "\$1" = --out ] && out=\$2; shift; done
mkdir -p "\$out" && echo '{"standin": true}' >"\$out/stats.json"
exec "$app"
PY
chmod +x "$work/bin/python"
rc=0
PYTHON=$work/bin/python "$root/tests/gpu/torch_check.sh" --build-dir "$build" --out "$work/out" --results "$work/results" \
  >"$work/run.txt" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$work/run.txt"; echo "rehearsal: torch_check.sh exited $rc" >&2; exit 1; }
[ "$(ls "$work/results" | tr '\n' ' ')" = "torch.tar.gz torch_expandable.gmt torch_native.gmt " ] \
  || { ls -l "$work/results"; echo "rehearsal: --results does not hold the three files" >&2; exit 1; }
tar -tzf "$work/results/torch.tar.gz" >"$work/archive.txt"
for f in ./environment.txt ./native/stats.json ./native/info-trace.txt ./expandable/record.log; do
  grep -qx "$f" "$work/archive.txt" || { cat "$work/archive.txt"; echo "rehearsal: torch.tar.gz lacks $f" >&2; exit 1; }
done
! grep -q '\.gmt$' "$work/archive.txt" || { echo "rehearsal: torch.tar.gz holds a .gmt again" >&2; exit 1; }
grep -q "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" "$work/run.txt" \
  || { cat "$work/run.txt"; echo "rehearsal: the expandable run did not set its allocator setting" >&2; exit 1; }
mkdir -p "$work/empty"
rc=0
PYTHON=$work/bin/python "$root/tests/gpu/torch_check.sh" --build-dir "$work/empty" --out "$work/out2" --results "$work/results2" \
  >"$work/refused.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "no gpumem in" "$work/refused.txt" \
  || { cat "$work/refused.txt"; echo "rehearsal: a build folder without gpumem was not refused (exit $rc)" >&2; exit 1; }
echo "rehearsal: torch_check.sh records both modes and sends back its three files; a folder without gpumem is refused"
